"""Light nodes of a devnet in the root lane ([devnet].light, `sapo devnet up --light N`): N staked
identities beside the devnet's real training nodes, each of which signs its submission and its
seat votes every round and sends them to the round's aggregator (drawn by the round book; the
devnet's, the only one enlisted) over its HTTP endpoint, as a real node does (docs/aggregator.md,
"Light nodes"). What they cost the chain, the aggregator and the
real nodes is then measured on a devnet of real nodes (scripts/bench_devnet_gas.py --light N).

What a light node is and is not:
- It is registered on the ledger with minStake, in a model family of light nodes only
  (`light_families`: at most FAMILY_SIZE a family), so its batches are checked by light nodes and
  the real nodes' by real nodes: the ledger draws committees within a family.
- Its submission names a digest with no data behind it: it trains nothing. Its checkers (light
  nodes of its family) sign an agreeing vote on each batch the book's draw seats them on
  (`Auditor.seated`: the round's beacon, stakes as of the root's block) without fetching
  anything. It is the cost of the swarm that is simulated, not its learning.
- Everything else is the real path: EIP-712 messages under the book's domain
  (client.chain.messages), the aggregator's endpoint read from its on-chain metadata
  (`AggregatorClient`, receipts checked to be its key's), the submission list fetched through the
  light nodes' own IPFS daemon from the aggregator's and checked against the posted root, and the
  credit in the aggregator's verdict roots, which `sapo devnet status` counts.

The keys: one secret, the light nodes' seed, in an encrypted keystore (DIR/light/keystore.json,
the devnet's password); light node i's key is keccak(seed || i). Their addresses and families are
public: DIR/light/lights.json. What the process did is in DIR/light/status.json (rewritten after
each pass).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eth_account import Account
from eth_utils import keccak, to_checksum_address

from client.chain import ChainError, Ledger
from client.chain.book import BookRound, RoundBook, Windows
from client.chain.events import EventReader
from client.chain.ledger.connection import bytes32
from client.chain.messages import Domain, Signed, Submission, Vote
from client.chain.roots import BadList, decode_submission
from client.node.aggregation.auditor import Auditor
from client.node.aggregation.collector import SECOND_VOTE
from client.node.aggregation.endpoint import (
    MAX_BATCH,
    AggregatorClient,
    EndpointError,
    aggregator_origin,
)
from client.node.aggregation.lists import ListUnavailable
from client.node.aggregation.reading import open_posted_submissions
from client.store import BlockStore
from client.units import SCORE_SCALE

log = logging.getLogger("sapo.devnet.light")

LIGHT_DIR = "light"
ROSTER, STATUS = "lights.json", "status.json"
FAMILY_SIZE = 100  # light nodes in one family: each checks its family's batches
# what each light node claims for its batch (a batch of ROLLOUTS rollouts, as the simulator's)
ROLLOUTS, SCORE, SIGNAL = 64, 32 * SCORE_SCALE, 16 * SCORE_SCALE
POLL_S = 1.0
_COUNTING = threading.Lock()
REGISTER_GAS = 600_000  # a light node's register (its metadata is short): the ledger's is ~300k
LIST_RETRY_S = 10.0


def light_families(count: int) -> list[str]:
    """The model families of `count` light nodes: ceil(count / FAMILY_SIZE), ids no base has."""
    return [
        "0x" + keccak(f"sapo devnet light family {f}".encode()).hex()
        for f in range(-(-count // FAMILY_SIZE))
    ]


def family_sizes(count: int) -> list[int]:
    """How many light nodes each family holds (node i is in family i mod F)."""
    families = -(-count // FAMILY_SIZE)
    return [len(range(f, count, families)) for f in range(families)]


def light_key(seed: bytes, index: int) -> bytes:
    return keccak(seed + index.to_bytes(4, "big"))


@dataclass(frozen=True)
class Roster:
    """The light nodes of a devnet, as lights.json lists them (public: no key)."""

    addresses: list[str]
    families: list[str]  # each node's family id

    @classmethod
    def of(cls, seed: bytes, count: int) -> Roster:
        ids = light_families(count)
        return cls(
            [Account.from_key(light_key(seed, i)).address for i in range(count)],
            [ids[i % len(ids)] for i in range(count)],
        )

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Roster:
        data = json.loads(path.read_text())
        return cls(list(data["addresses"]), list(data["families"]))


class LightError(RuntimeError):
    """The light nodes could not be registered (the message says which and why)."""


def register_lights(
    ledger: Ledger, seed: bytes, roster: Roster, stake: int, metadata: str, timeout_s: float
) -> int:
    """Registers every light node not registered yet with `stake` and `metadata`: each funded as
    anvil funds its dev accounts (anvil_setBalance: a devnet's chain only), each register signed
    with its own key and sent at once, then every receipt waited for. Returns how many were
    registered now; raises LightError naming one that failed."""
    w3 = ledger.w3
    infos = ledger.node_infos(roster.addresses)
    todo = [i for i, info in enumerate(infos) if not info.registered]
    if not todo:
        return 0
    # a fee cap far above the base fee, which thousands of registers in full blocks raise by
    # 12.5% a block (the balance is anvil's to give)
    fee = 100 * int(w3.eth.get_block("latest")["baseFeePerGas"]) + 10 * 10**9
    balance = hex(stake + REGISTER_GAS * fee)
    chain_id = w3.eth.chain_id
    hashes = []
    for i in todo:
        address = roster.addresses[i]
        try:
            funded = w3.provider.make_request("anvil_setBalance", [address, balance])  # type: ignore[arg-type]
            if funded.get("error"):
                raise LightError(f"anvil_setBalance: {funded['error']}")
            data = ledger.contract.encode_abi(
                "register", args=[metadata, bytes32(roster.families[i])]
            )
            tx = {
                "to": ledger.address,
                "data": data,
                "value": stake,
                "gas": REGISTER_GAS,
                "nonce": w3.eth.get_transaction_count(address),
                "chainId": chain_id,
                "maxFeePerGas": fee,
                "maxPriorityFeePerGas": 10**9,
                "type": 2,
            }
            signed = Account.sign_transaction(tx, light_key(seed, i))
            hashes.append((i, w3.eth.send_raw_transaction(signed.raw_transaction)))
        except LightError as exc:
            raise LightError(f"light node {i} ({address}) could not be funded: {exc}") from None
        except Exception as exc:  # web3's errors: what the chain said, with no key in it
            raise LightError(
                f"light node {i} ({address}): its register was not sent "
                f"({type(exc).__name__}: {exc})"
            ) from None
    # each receipt within timeout_s of the last one mined (thousands take many blocks)
    deadline = time.monotonic() + timeout_s
    for i, tx_hash in hashes:
        while True:
            try:
                receipt = w3.eth.get_transaction_receipt(tx_hash)
                deadline = time.monotonic() + timeout_s
                break
            except Exception:  # not mined yet (web3 raises TransactionNotFound)
                if time.monotonic() > deadline:
                    raise LightError(
                        f"light node {i} ({roster.addresses[i]}): its register was not mined "
                        f"within {timeout_s:.0f} s"
                    ) from None
                time.sleep(0.2)
        if receipt["status"] != 1:
            raise LightError(
                f"light node {i} ({roster.addresses[i]}): its register reverted "
                f"(tx {tx_hash.hex()})"
            )
    return len(todo)


@dataclass
class LightStatus:
    """What the light nodes did, as status.json says it."""

    count: int
    round: int = -1
    submitted: int = 0  # submissions the aggregator receipted
    voted: int = 0  # votes it held
    refused: int = 0  # messages it refused (each logged with its reason)
    equivocated: int = 0  # second votes of equivocators, kept by the aggregator as evidence
    rounds_submitted: list[int] = field(default_factory=list)  # the last few
    rounds_voted: list[int] = field(default_factory=list)
    problem: str | None = None  # why the last pass stopped, if it did
    updated: float = 0.0

    def add(
        self, *, submitted: int = 0, voted: int = 0, refused: int = 0, equivocated: int = 0
    ) -> None:
        """Adds to the counters (the two loops' threads both do)."""
        with _COUNTING:
            self.submitted += submitted
            self.voted += voted
            self.refused += refused
            self.equivocated += equivocated

    def save(self, path: Path) -> None:
        self.updated = time.time()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> LightStatus | None:
        try:
            data = json.loads(path.read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None


class LightSwarm:
    """The light nodes' passes: each round's submissions, then each posted round's votes."""

    def __init__(
        self,
        ledger: Ledger,
        book: RoundBook,
        store: BlockStore,
        seed: bytes,
        roster: Roster,
        *,
        start_block: int = 0,
        equivocators: int = 0,
    ):
        """`equivocators`: how many of the light nodes (the roster's first) sign a second,
        different vote on the first batch they are seated on ([devnet].light_equivocators)."""
        self.ledger, self.book, self.store = ledger, book, store
        self.roster = roster
        self.keys = [light_key(seed, i) for i in range(len(roster.addresses))]
        self.index = {a.lower(): i for i, a in enumerate(roster.addresses)}
        self.params = ledger.params()
        self.windows = Windows.of(self.params)
        self.domain = Domain(chain_id=ledger.chain_id, contract=book.address)
        self.auditor = Auditor.of(self.domain, ledger, self.params)
        self.book_events = EventReader(book, start_block=start_block)  # type: ignore[arg-type]
        self.status = LightStatus(count=len(self.keys))
        # one connection to an aggregator per loop ("submit", "vote": their own threads): a
        # round's submissions go to its drawn aggregator, its votes to the one that posted it
        self._clients: dict[tuple[str, str], AggregatorClient] = {}
        self._sent: dict[int, set[int]] = {}  # round -> the light nodes whose submission is held
        self._voted: set[int] = set()
        self._retry_at: dict[int, float] = {}
        self.equivocators = set(range(min(equivocators, len(roster.addresses))))
        # the equivocators whose second vote the aggregator kept as evidence: done
        self._equivocated: set[int] = set()
        self.stopping = threading.Event()  # set: a pass of votes ends at its next batch

    def close(self) -> None:
        for client in self._clients.values():
            client.close()

    def endpoint(self, loop: str, aggregator: str) -> AggregatorClient:
        """`loop`'s connection to `aggregator`'s endpoint as its on-chain metadata lists it
        (read again after a failure); raises EndpointError while it lists none."""
        client = self._clients.get((loop, aggregator.lower()))
        if client is None:
            info = self.ledger.node_info(aggregator)
            try:
                listed = json.loads(info.metadata or "{}").get("aggregator")
            except (ValueError, AttributeError):
                listed = None
            if not listed:
                raise EndpointError(f"aggregator {aggregator} lists no endpoint yet")
            client = AggregatorClient(aggregator_origin(listed), self.domain, aggregator=aggregator)
            self._clients[(loop, aggregator.lower())] = client
        return client

    def send(self, messages: list[Signed], loop: str, aggregator: str) -> list[bool]:
        """Sends messages on `loop`'s connection, MAX_BATCH a POST; whether each was held (a
        refusal is logged). Raises EndpointError once the process stops."""
        held: list[bool] = []
        for signed, refused in zip(messages, self._post(messages, loop, aggregator), strict=True):
            if refused is not None:
                self.status.add(refused=1)
                log.warning("%s refused by the aggregator: %s", signed.kind, refused)
            held.append(refused is None)
        return held

    def _post(self, messages: list[Signed], loop: str, aggregator: str) -> list[str | None]:
        """Sends messages on `loop`'s connection, MAX_BATCH a POST; why the aggregator refused
        each (None: held). Raises EndpointError (the connection dropped), also once the process
        stops."""
        refused: list[str | None] = []
        try:
            for first in range(0, len(messages), MAX_BATCH):
                if self.stopping.is_set():
                    raise EndpointError("the light nodes stop: not sent")
                answers = self.endpoint(loop, aggregator).send(messages[first : first + MAX_BATCH])
                refused += [a.refused for a in answers]
        except EndpointError:
            client = self._clients.pop((loop, aggregator.lower()), None)
            if client is not None:
                client.close()
            raise
        return refused

    def _equivocate(self, posted: BookRound, seconds: list[tuple[int, Signed]]) -> None:
        """Sends the equivocators' second votes, after their first ones are held: the aggregator
        refuses each and keeps it, with the first, as the evidence it proves on chain. An
        equivocator is done once its second vote was so kept (another refusal: it tries again
        on its next seat)."""
        round_ = posted.round
        refused = self._post([signed for _, signed in seconds], "vote", posted.aggregator)
        kept = 0
        for (v, signed), why in zip(seconds, refused, strict=True):
            if why is not None and why.startswith(SECOND_VOTE):
                self._equivocated.add(v)
                kept += 1
            elif why is not None:
                self.status.add(refused=1)
                log.warning("%s refused by the aggregator: %s", signed.kind, why)
        self.status.add(equivocated=kept)
        log.info("round %s: %d light equivocators signed a second vote", round_, kept)

    def tick(self) -> None:
        """One pass of both loops (`submit_tick`, then `vote_tick`)."""
        self.submit_tick()
        self.vote_tick()

    def submit_tick(self) -> None:
        """This round's submissions (again for those not held yet)."""
        current = self.ledger.current_round()
        self.status.round = current
        for round_ in list(self._sent):
            if round_ < current - self.windows.submit_rounds:
                del self._sent[round_]
        self._submit(current)

    def vote_tick(self) -> None:
        """The votes of every posted round still voted on and not voted on yet."""
        current = self.ledger.current_round()
        first = current - (self.windows.vote_close(current) - current)
        self._voted = {r for r in self._voted if r >= first}
        for round_ in range(max(0, first), current):
            if round_ not in self._voted and self._retry_at.get(round_, 0.0) <= time.monotonic():
                self._vote(round_, current)

    def _submit(self, round_: int) -> None:
        held = self._sent.setdefault(round_, set())
        todo = [i for i in range(len(self.keys)) if i not in held]
        if not todo:
            return
        aggregator = self.book.drawn(round_).aggregator
        if aggregator is None or round_ not in self.endpoint("submit", aggregator).status():
            return  # no aggregator drawn (yet), or not collected yet: it opens it next pass
        messages = []
        for i in todo:
            digest = keccak(f"sapo devnet light batch {round_}/{self.roster.addresses[i]}".encode())
            message = Submission(
                round=round_,
                digest="0x" + digest.hex(),
                rollouts=ROLLOUTS,
                score=SCORE,
                signal=SIGNAL,
            )
            messages.append(Signed.sign(message, self.domain, self.keys[i]))
        for i, ok in zip(todo, self.send(messages, "submit", aggregator), strict=True):
            if ok:
                held.add(i)
        self.status.add(submitted=sum(1 for i in todo if i in held))
        if len(held) == len(self.keys):
            self.status.rounds_submitted = [*self.status.rounds_submitted[-9:], round_]

    def _vote(self, round_: int, current: int) -> None:
        posted = self.book.round_of(round_)
        if not posted.posted or posted.void or not posted.beacon:
            return  # nothing posted, voided, or its committees not drawn yet
        if current < self.windows.post_round(round_) or current > self.windows.vote_close(round_):
            return
        try:
            entries, _ = open_posted_submissions(
                self.store,
                self.book_events,
                self.ledger,
                posted,
                allow_private=True,
                keep_round=self.windows.challenge_end(round_),
            )
        except ListUnavailable as exc:
            log.info("round %s: the submission list not fetched (again later): %s", round_, exc)
            self._retry_at[round_] = time.monotonic() + LIST_RETRY_S
            return
        except BadList as exc:
            log.warning("round %s: the submission list is not its root's data: %s", round_, exc)
            self._voted.add(round_)
            return
        # each MAX_BATCH votes is sent as soon as it is signed, by a thread of its own, so that
        # signing the next ones overlaps the aggregator's checking of the last; the first send
        # that fails, or the process stopping, ends the pass and drops what is still queued
        sent = 0
        seconds: list[tuple[int, Signed]] = []  # the equivocators' second votes of this pass
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="light-votes")
        try:
            pending: list[Future[list[bool]]] = []
            for chunk in self.votes(posted, entries, seconds):
                if any(f.done() and f.exception() is not None for f in pending[-2:]):
                    break
                pending.append(pool.submit(self.send, chunk, "vote", posted.aggregator))
            for future in pending:
                held = future.result()  # raises what the sending raised: the pass stops
                sent += len(held)
                self.status.add(voted=sum(held))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if seconds and not self.stopping.is_set():
            self._equivocate(posted, seconds)
        if self.stopping.is_set():
            return  # the round's votes may not all be sent: not marked voted
        self._voted.add(round_)
        self.status.rounds_voted = [*self.status.rounds_voted[-9:], round_]
        log.info("round %s: %d light votes on %d listed batches", round_, sent, len(entries))

    def votes(
        self,
        posted: BookRound,
        entries: list[bytes],
        seconds: list[tuple[int, Signed]] | None = None,
    ) -> Iterator[list[Signed]]:
        """Each light node's agreeing vote on each light batch of its family it is seated on,
        MAX_BATCH at a time; each equivocator's second, different vote on the first batch of
        the pass it is seated on goes in `seconds` (light node's index, vote), to be sent once
        the first ones are held."""
        second: set[int] = set()  # the equivocators given a second vote in this pass
        batches: list[tuple[int, str, Submission]] = []  # (producer's index, address, claim)
        for raw in entries:
            try:
                producer, submission, _ = decode_submission(raw)
            except BadList:
                continue
            i = self.index.get(producer.lower())
            if i is not None and submission.round == posted.round:
                batches.append((i, producer, submission))
        if not batches:
            return
        self.auditor.prefetch(self.roster.addresses, posted.posted_block)
        members: dict[str, list[int]] = {}
        for i, family in enumerate(self.roster.families):
            members.setdefault(family, []).append(i)
        votes: list[Signed] = []
        for p, producer, claim in batches:
            if self.stopping.is_set():
                return  # the process stops: the round's votes are not all sent
            for v in members[self.roster.families[p]]:
                if v == p:
                    continue
                if not self.auditor.seated(posted, producer, self.roster.addresses[v]):
                    continue
                vote = Vote(
                    round=posted.round,
                    producer=to_checksum_address(producer),
                    digest=claim.digest,
                    unavailable=False,
                    score=claim.score,
                    signal=claim.signal,
                    findings=0,
                )
                votes.append(Signed.sign(vote, self.domain, self.keys[v]))
                equivocates = v in self.equivocators and v not in self._equivocated
                if seconds is not None and equivocates and v not in second:
                    second.add(v)  # another score: two votes on one batch
                    other = vote.model_copy(update={"score": vote.score + 1})
                    seconds.append((v, Signed.sign(other, self.domain, self.keys[v])))
                if len(votes) == MAX_BATCH:
                    yield votes
                    votes = []
        if votes:
            yield votes


def new_seed() -> bytes:
    return secrets.token_bytes(32)


def run(swarm: LightSwarm, status_path: Path, stop) -> None:
    """Runs the two loops until `stop` is set: the submissions in a thread of their own, so that
    a long pass of votes (tens of thousands a round) never delays a round's submissions, and the
    votes here; status.json after each pass. Nothing the chain, the store or the aggregator does
    stops either loop: a pass that fails says why and the next goes on (a problem is logged
    once, until it changes)."""
    swarm.stopping = stop
    saving = threading.Lock()
    problems: dict[str, str | None] = {"submissions": None, "votes": None}  # each loop's last

    def loop(step, name: str) -> None:
        said: str | None = None
        while not stop.is_set():
            try:
                step()
                said = None
            except (ChainError, EndpointError, ListUnavailable, OSError) as exc:
                if str(exc) != said:
                    log.warning(
                        "light nodes' %s: this pass stopped (%s); the next goes on", name, exc
                    )
                said = str(exc)
            except Exception as exc:  # a bug, or an error nothing above names: said, not silent
                text = f"{type(exc).__name__}: {exc}"
                if text != said:
                    log.exception("light nodes' %s: this pass failed; the next goes on", name)
                said = text
            with saving:
                problems[name] = said
                swarm.status.problem = (
                    "; ".join(f"{k}: {v}" for k, v in problems.items() if v) or None
                )
                swarm.status.save(status_path)
            stop.wait(POLL_S)

    swarm.status.save(status_path)
    submitting = threading.Thread(
        target=loop, args=(swarm.submit_tick, "submissions"), name="light-submit", daemon=True
    )
    submitting.start()
    loop(swarm.vote_tick, "votes")
    submitting.join(timeout=30)


__all__ = [
    "FAMILY_SIZE",
    "LIGHT_DIR",
    "ROSTER",
    "STATUS",
    "LightError",
    "LightStatus",
    "LightSwarm",
    "Roster",
    "family_sizes",
    "light_families",
    "new_seed",
    "register_lights",
    "run",
]
