"""A swarm of N light nodes through the root lane (docs/scaling.md), on a real anvil with the
committed SwarmLedger and RoundBook: what the chain carries per node per round once submissions
and seat votes are signed off chain and one aggregator posts a round's two roots.

Each light node is a staked identity with its own key. Every round, through the real code:
- each node signs its Submission (EIP-712, client.chain.messages) and sends it, as bytes, to the
  aggregator's Collector, which validates it where it enters;
- the aggregator posts the submission root (postSubmissions, bonded), its list's bytes are what
  every node fetches (client.chain.roots: `submission_list`, `open_submission_list`), and the
  beacon is drawn (drawBeacon);
- each node checks the list against the posted root, draws its own seats on its family's batches
  (the ledger's rule 4, `Beacon.seats`, with the round's beacon and stakes as of the root's
  block), and signs an agreeing Vote for each batch it holds a seat on; the Collector takes each
  vote only from a seated voter (it draws the seat again);
- the aggregator posts the verdict root, and takes its bond back once the challenge window has
  passed (release).

Gas comes from the receipts of every transaction the rounds send. The aggregator's CPU is
process time in its own calls (admitting messages, building roots, checking seats); a node's CPU
is measured on --sample nodes (opening the list, drawing, signing) and averaged. Registration is
not counted (once per node's life).

Nodes are split into families of --family-size (the ledger draws committees within a family):
a node draws over its family's members, so simulating every node's draw is N x family-size seat
draws a round. The single-family case at N is shown by one node's draw over N members.

Once the rounds stand, every node that earned claims once, from its last credit (RoundBook.claim:
its settled earnings and that credit's share, one proof; the credits of the rounds just before
it are counted by its next claim); a node claims once per --claim-every rounds, so its claim's
gas counts once per that many rounds.

--transport http sends every message over the network as nodes would: the aggregator serves its
HTTP endpoint (client.node.aggregation.endpoint) and lists its address in its on-chain metadata,
where each node reads it; each node POSTs its submission, then its votes of the round (one
request each); the aggregator publishes both lists on its own js-ipfs daemon
(client.node.aggregation.lists) and posts their CIDs; the nodes read the submission list, and the
auditor both lists, through a second daemon dialled to the first (bitswap), checked against the
posted roots. The aggregator's CPU is then its endpoint threads' CPU; a node's includes its
requests. --transport direct (the default) hands the same bytes over in memory.

--forgers F plays one more round at the first N in which F producers forge: no seated checker
signs their batches; one of each batch's seated checkers escalates it to the v4 lane with its
dispute (RoundBook.escalate), every other seated checker disputes it there (attest), the honest
aggregator's verdict root leaves it out, a light node audits the round's lists, and once the
round is final it settles each forged batch, slashing its producer. The table gives the gas of
each step per forged batch, what was slashed and what each side was credited.

--equivocators E plays one more round at the first N in which E checkers each sign a second,
different vote on a batch they voted on: the aggregator's collector refuses it and keeps both, and
the aggregator proves each pair (RoundJudge.proveEquivocation), which slashes the checker on the
ledger and pays the aggregator the settler's cut; the first votes stand, so the verdict root
credits what it would have. In the same round E producers each sign a second, different
submission of it, proven the same way (RoundJudge.proveDoubleSubmission).

Shares are paid over both lanes' credited signal of a round (the ledger's `roundInfo` folded into
each: docs/scaling.md, "One reward over both lanes"). Not in these figures (not built yet): the
aggregator's pay.

--aggregator service (with --transport http) has the honest rounds aggregated by the service a
node runs (client.node.aggregation.service, what `sapo aggregate run` runs): its endpoint, its
store on disk (every message written before it is answered), its lists on IPFS, its own reads of
the ledger (registrations, stakes as of the root's block, the v4 lane's submissions) and its own
transactions (their gas read back from their receipts), driven pass by pass on the chain's
clock; its CPU a round is its passes' and its endpoint threads'.

Usage: python -m scripts.bench_root_lane [--nodes 100,1000] [--rounds 3] [--family-size 100]
                                         [--checkers 10] [--quorum 3] [--sample 20]
                                         [--claim-every 100] [--lies all] [--forgers F]
                                         [--equivocators E]
                                         [--transport direct|http] [--aggregator inline|service]
"""

from __future__ import annotations

import json
import random
import resource
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_keys import keys
from eth_utils import function_abi_to_4byte_selector, keccak, to_checksum_address

from client.chain.artifacts import load_artifact
from client.chain.book import JUDGED, WINDOWS, BookRound, EscalationVote, RoundBook, Windows
from client.chain.deploy import POST_PAY_BPS
from client.chain.events import EventReader
from client.chain.messages import Domain, ReceiptSigner, Signed, Submission, Vote
from client.chain.models import Beacon
from client.chain.roots import (
    Credit,
    SubmissionRoot,
    VerdictRoot,
    cast_vote_struct,
    decode_submission,
    open_submission_list,
    open_verdict_list,
    submission_list,
    submission_struct,
    verdict_list,
    votes_hash,
)
from client.devnet import Anvil, IpfsDaemon, start_daemons
from client.node.aggregation.auditor import Auditor
from client.node.aggregation.collector import Collector, Refused
from client.node.aggregation.earnings import EarningsBook
from client.node.aggregation.endpoint import (
    MAX_BATCH,
    AggregatorClient,
    AggregatorServer,
    Answer,
    Desk,
    aggregator_origin,
)
from client.node.aggregation.held import Held
from client.node.aggregation.lists import ListIndex, ListUnavailable, fetch_list, publish_list
from client.node.aggregation.service import Aggregator
from client.store import IpfsStore, cid_to_digest, digest_to_cid
from client.store.peers import ipfs_addresses
from client.store.weights import CHUNK
from client.units import SCORE_SCALE
from scripts import arguments
from scripts.bench_swarm_chain import BENCH_LEDGER, GasBook, Rpc
from scripts.table import Table
from tests.harness.ledger_swarm import ETH, Swarm, deploy_artifact

ROLLOUTS = 64
SCORE, SIGNAL = 32 * SCORE_SCALE, 16 * SCORE_SCALE
STAKE = 2 * ETH
BLOCK_TXS = 2_000  # transactions mined in one block
BOND, CHALLENGE_BOND = ETH, ETH // 10
TRANSPORTS = ("direct", "http")
# what a lying aggregator does (--lies), and the lie the book's LieProven names for it
LIES = {
    "a forged submission": "a submission of no registered node",
    "an invented signer": "a vote its voter did not sign",
    "too few votes": "a credit with fewer votes than quorum",
    "an inflated amount": "a credit's amount is not its signal",
    "a withheld verdict list": "data withheld",
    "a batch credited in both lanes": "a credit the v4 lane holds",
    "a censored submission": "a receipted submission left out",
    "a dropped quorum": "a receipted quorum left uncredited",
}
VERDICT_LIES = {
    "a batch credited in both lanes",
    "an invented signer",
    "too few votes",
    "an inflated amount",
    "a withheld verdict list",
    "a dropped quorum",
}


def list_digest(cid: str) -> bytes:
    """What a post names for a list: its index's sha256 (zero for no list: in memory)."""
    return cid_to_digest(cid) if cid else bytes(32)


def family_id(index: int) -> str:
    return "0x" + keccak(f"sapo light family {index}".encode()).hex()


@dataclass
class Light:
    key: bytes
    address: str
    family: int


@dataclass
class RoundCost:
    """One round's figures."""

    aggregator_cpu: float = 0.0
    node_cpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # sampled
    list_bytes: int = 0
    requests: int = 0  # HTTP requests the nodes sent the aggregator (--transport http)
    sent_bytes: int = 0  # their bodies' bytes
    fetch_s: float = 0.0  # wall seconds to fetch the submission list through IPFS
    list_cid: str = ""  # the CID postSubmissions named ("" in memory)
    submissions: int = 0
    votes: int = 0
    credits: int = 0
    refused: int = 0


class Http:
    """The network of --transport http: the aggregator's endpoint, and two js-ipfs daemons, the
    aggregator's and the one the nodes and the auditor fetch through, dialled to it."""

    def __init__(self, domain: Domain, data_dir: Path, receipts: ReceiptSigner):
        self.desk = Desk(domain, receipts)
        self.server = AggregatorServer("127.0.0.1:0", self.desk)
        self.daemons = [
            IpfsDaemon(data_dir / name, host=f"127.0.0.{i + 2}", swarm=True)
            for i, name in enumerate(("aggregator", "reader"))
        ]
        try:
            start_daemons(self.daemons)
            self.aggregator, self.reader = (
                IpfsStore(d.api, index_dir=data_dir / f"index-{i}", timeout_s=4, max_bytes=CHUNK)
                for i, d in enumerate(self.daemons)
            )
            found = ipfs_addresses(self.aggregator.peer(), allow_private=True)
            dialled, failures = self.reader.connect(list(found.dialable))
            if dialled is None:
                raise RuntimeError(f"the reader's daemon cannot dial the aggregator's: {failures}")
        except BaseException:
            self.close()
            raise
        self.origin = ""  # what the nodes read from the aggregator's metadata

    def send(
        self, domain: Domain, messages: list[Signed], cost: RoundCost, aggregator: str
    ) -> list[Answer]:
        """One node's messages, one POST per MAX_BATCH, on a connection of its own; what the
        aggregator (whose metadata listed the endpoint) answered each."""
        client = AggregatorClient(self.origin, domain, aggregator=aggregator)
        answers: list[Answer] = []
        try:
            for first in range(0, len(messages), MAX_BATCH):
                answers += client.send(messages[first : first + MAX_BATCH])
        finally:
            client.close()
        cost.requests += client.requests
        cost.sent_bytes += client.sent_bytes
        return answers

    def fetch(self, kind: str, round_: int, cid: str, entries: int) -> bytes | None:
        """A list as a node gets it through its own daemon (None: it cannot be had)."""
        try:
            return fetch_list(self.reader, cid, kind, round_, entries, keep_round=round_ + 10)
        except ListUnavailable:
            return None

    def serve(self, desk: Desk) -> None:
        """Serves `desk` instead (the aggregator service's) on a fresh port."""
        self.server.close()
        self.desk = desk
        self.server = AggregatorServer("127.0.0.1:0", desk)

    def close(self) -> None:
        self.server.close()
        for daemon in self.daemons:
            daemon.stop()


class LightSwarm:
    """N light nodes, a SwarmLedger and a RoundBook on one anvil."""

    def __init__(
        self,
        anvil: Anvil,
        nodes: int,
        family_size: int,
        checkers: int,
        quorum: int,
        transport: str = "direct",
        aggregator: str = "inline",
    ):
        if transport not in TRANSPORTS:
            raise ValueError(f"transport is one of {TRANSPORTS}, not {transport!r}")
        if aggregator == "service" and transport != "http":
            raise ValueError("the aggregator service is reached over HTTP: --transport http")
        families = max(1, -(-nodes // family_size))
        if families > 255:
            raise SystemExit(f"{families} families: the ledger takes at most 255 (--family-size)")
        self.swarm = Swarm(
            anvil,
            **BENCH_LEDGER,
            quorum=quorum,
            checkers=checkers,
            families=[family_id(f) for f in range(families)],
        )
        self.rpc = Rpc(anvil.url)
        self.ledger = self.swarm.ledger
        self.checkers, self.quorum = checkers, quorum
        self.tolerance = self.swarm.params.agree_tolerance_bps
        self.rpc.call("anvil_autoImpersonateAccount", [True])
        self.rpc.call("anvil_setBlockTimestampInterval", [1])
        self.rpc.call("evm_setBlockGasLimit", [hex(2**40)])
        self.nodes = []
        for i in range(nodes):
            key = keccak(f"sapo light node {i}".encode())
            address = keys.PrivateKey(key).public_key.to_checksum_address()
            self.nodes.append(Light(key, address, i // family_size))
        self.rpc.batch([("anvil_setBalance", [n.address, hex(10 * ETH)]) for n in self.nodes])
        self.rpc.call("anvil_setBalance", [self.nodes[0].address, hex(10**6 * ETH)])  # funds
        self.members: dict[int, list[Light]] = {}
        for n in self.nodes:
            self.members.setdefault(n.family, []).append(n)
        self.nonces = {n.address: 0 for n in self.nodes}
        self.gas = GasBook()
        address = deploy_artifact(
            self.swarm, "RoundBook", self.ledger.address, BOND, CHALLENGE_BOND, POST_PAY_BPS
        )
        self.book = self.swarm.w3.eth.contract(
            address=address, abi=load_artifact("RoundBook")["abi"]
        )
        self.draw = self.swarm.w3.eth.contract(
            address=self.book.functions.aggregators().call(),
            abi=load_artifact("AggregatorDraw")["abi"],
        )
        self.domain = Domain(chain_id=self.swarm.w3.eth.chain_id, contract=address)
        self.aggregator = self.nodes[0]
        self.receipts = ReceiptSigner(self.domain, self.aggregator.key)
        self.http = (
            Http(self.domain, Path(tempfile.mkdtemp(prefix="bench-root-lane-net-")), self.receipts)
            if transport == "http"
            else None
        )
        # each node's signed submission of a round and the aggregator's receipt of it
        self.sent: dict[tuple[int, str], tuple[Signed, str]] = {}
        # each producer's batch's agreeing votes with the aggregator's receipts, as its checkers
        # hand them on to it (round, producer lower case)
        self.receipted: dict[tuple[int, str], list[tuple[Signed, str]]] = defaultdict(list)
        self.dropped: Light | None = None  # the producer of the credit a dropped quorum left out
        # (round, producer) -> the seated checkers that dispute its batch (vote(disputing=))
        self.disputers: dict[tuple[int, str], list[Light]] = defaultdict(list)
        self.service: Aggregator | None = None
        if aggregator == "service":
            assert self.http is not None
            folder = Path(tempfile.mkdtemp(prefix="bench-root-lane-aggregator-"))
            self.service = Aggregator(
                self.ledger,
                RoundBook(self.swarm.w3, address, account=Account.from_key(self.aggregator.key)),
                Held(folder / "aggregator.db", self.domain),
                self.receipts,
                store=IpfsStore(
                    self.http.daemons[0].api, index_dir=folder / "index", max_bytes=CHUNK
                ),
            )
            self.http.serve(self.service.desk)
        self.round_blocks: dict[int, int] = {}  # the block each round's submissions began at

    def close(self) -> None:
        if self.service is not None:
            self.service.held.close()
        if self.http is not None:
            self.http.close()

    def count_gas_of(self, sender: str, first: int, last: int) -> None:
        """Counts, by function, the gas of `sender`'s transactions to the book in blocks
        first..last (what the aggregator service sent through its own TxSender), from their
        receipts."""
        selectors = {
            (contract.address.lower(), function_abi_to_4byte_selector(f)): name(f["name"])
            for contract, name in (
                (self.book, str),
                (self.draw, lambda f: "drawAggregator" if f == "draw" else f),
            )
            for f in contract.abi
            if f.get("type") == "function"
        }
        w3 = self.swarm.w3
        ours = {self.book.address.lower(), self.draw.address.lower()}
        for number in range(first, last + 1):
            for tx in w3.eth.get_block(number, full_transactions=True)["transactions"]:
                to = (tx["to"] or "").lower()
                if tx["from"].lower() != sender.lower() or to not in ours:
                    continue
                receipt = w3.eth.get_transaction_receipt(tx["hash"])
                kind = selectors.get((to, bytes(tx["input"][:4])), "other")
                used = {"gasUsed": hex(receipt["gasUsed"]), "status": hex(receipt["status"])}
                self.gas.add(kind, [used])

    def sync_nonce(self, address: str) -> None:
        """Reads `address`'s nonce from the chain (after another sender used its key)."""
        self.nonces[address] = self.swarm.w3.eth.get_transaction_count(address)

    def v4_submit(self, round_: int, node: Light) -> None:
        """`node` also submits its batch of `round_` in the v4 lane (SwarmLedger.submit)."""
        data = self.ledger.contract.encode_abi(
            "submit", args=[round_, keccak(f"v4 {round_}/{node.address}".encode()), 1, 0, 0]
        )
        self.send("v4 submit", self.ledger.address, [(node.address, data, 0)], count=False)

    def v4_producers(self, round_: int) -> set[str]:
        """The producers the ledger holds a submission of for `round_` (its Submitted events of
        the round, one topic-filtered query from the round's first block): the v4 lane pays
        those, so the book must not."""
        reader = EventReader(self.ledger, start_block=self.round_blocks.get(round_, 0))
        return {e.args["node"].lower() for e in reader.read(["Submitted"], round=round_)}

    def open(self, collector: Collector) -> None:
        """The aggregator starts collecting a round (on its endpoint, with --transport http)."""
        if self.http is not None:
            self.http.desk.open(collector)

    def deliver(self, messages: list[Signed], collector: Collector, cost: RoundCost) -> None:
        """One node's messages reach the aggregator, which holds each (an honest node's message
        is never refused) and gives a receipt of a submission, which the node keeps."""
        if self.http is not None:
            answers = self.http.send(self.domain, messages, cost, self.aggregator.address)
        else:
            t0 = time.thread_time()
            answers = []
            for signed in messages:
                held = collector.accept(signed.to_bytes())
                answers.append(Answer(receipt=self.receipts.sign(held)))
            cost.aggregator_cpu += time.thread_time() - t0
        for signed, answer in zip(messages, answers, strict=True):
            if answer.refused is not None:
                raise RuntimeError(f"the aggregator refused an honest message: {answer.refused}")
            if isinstance(signed.message, Submission):
                if answer.receipt is None:
                    raise RuntimeError("the aggregator gave no receipt of a held submission")
                self.sent[(signed.message.round, signed.signer)] = (signed, answer.receipt)
            elif answer.receipt is not None:
                key = (signed.message.round, signed.message.producer.lower())
                self.receipted[key].append((signed, answer.receipt))

    def aggregator_cpu(self) -> float:
        """The endpoint's CPU so far (--transport http; 0 otherwise)."""
        return 0.0 if self.http is None else self.http.desk.cpu_s

    def publish(self, kind: str, round_: int, data: bytes | None, withheld: bool = False) -> str:
        """The CID the aggregator posts for a list: published on its daemon with --transport
        http; "" in memory. `withheld`: only the index is published, its chunks never."""
        if self.http is None or data is None:
            return ""
        if withheld:
            index, _ = ListIndex.of(kind, round_, data)
            return self.http.aggregator.put(index.encode(), round_ + 10)
        return publish_list(self.http.aggregator, kind, round_, data, keep_round=round_ + 10)

    def fetch(self, kind: str, round_: int, cid: str, data: bytes | None, entries: int):
        """A list as a node reads it: through IPFS with --transport http, else the bytes."""
        return data if self.http is None else self.http.fetch(kind, round_, cid, entries)

    def send(self, kind: str, to: str, txs: list[tuple[str, str, int]], count: bool = True):
        """Sends (from, data, value) transactions to `to`, mines them in one block, returns the
        receipts (gas counted under `kind`)."""
        receipts = self.rpc.send_in_one_block(self.nonces, to, txs, 5_000_000)
        bad = [r for r in receipts if r is None or r["status"] != "0x1"]
        if bad:
            raise RuntimeError(f"{kind}: {len(bad)} of {len(txs)} transactions failed")
        if count:
            self.gas.add(kind, receipts)
        return receipts

    def register(self) -> None:
        """Stakes every node; the aggregator's metadata lists its endpoint (--transport http),
        which the nodes then read from the chain."""

        def metadata(n: Light) -> str:
            data = {"model": "light"}
            if n is self.aggregator and self.http is not None:
                data["aggregator"] = self.http.server.url
            return json.dumps(data, separators=(",", ":"))

        for first in range(0, len(self.nodes), BLOCK_TXS):
            txs = [
                (
                    n.address,
                    self.ledger.contract.encode_abi(
                        "register",
                        args=[metadata(n), bytes.fromhex(family_id(n.family)[2:])],
                    ),
                    STAKE,
                )
                for n in self.nodes[first : first + BLOCK_TXS]
            ]
            self.send("register", self.ledger.address, txs, count=False)
        if self.service is None:  # (a service enlists itself as it starts)
            enlist = self.draw.encode_abi("enlist", args=[])
            enlisting = [(self.aggregator.address, enlist, BOND)]  # the roster's bond
            self.send("enlist", self.draw.address, enlisting, False)
        if self.http is not None:
            listed = json.loads(self.ledger.node_info(self.aggregator.address).metadata)
            self.http.origin = aggregator_origin(listed.get("aggregator"))

    def claim(self, earned: EarningsBook, played: list[int]) -> None:
        """Every node that earned claims, once, from its last credit, as a node claims once an
        epoch: its settled earnings and that credit's share, one proof. The credits in the
        rounds just before it (its tail) are left to its next claim, which counts them in its
        settled earnings; only a node leaving the swarm shows them (a proof each)."""
        txs = []
        for n in self.nodes:
            last = next((r for r in reversed(played) if earned.entry(n.address, r)), None)
            if last is None:
                continue
            entry = earned.entry(n.address, last)
            args = [
                last,
                entry.index,
                entry.credit.struct(),
                entry.amount,
                list(entry.proof),
                [],
            ]
            txs.append((n.address, self.book.encode_abi("claim", args=args), 0))
        pool = self.book.functions.rewardPool().call()
        for first in range(0, len(txs), BLOCK_TXS):  # anvil stalled on 10,000 in one block
            self.send("claim", self.book.address, txs[first : first + BLOCK_TXS])
        self.claimants = len(txs)
        self.claimed = pool - self.book.functions.rewardPool().call()  # wei the claims paid

    def book_call(self, kind: str, fn: str, *args: Any, value: int = 0) -> dict:
        """The aggregator (node 0) calls the book."""
        data = self.book.encode_abi(fn, args=list(args))
        return self.send(kind, self.book.address, [(self.aggregator.address, data, value)])[0]

    def auditor(self) -> Auditor:
        """An auditor of the book's rounds, reading the ledger as anyone can."""
        params = self.swarm.params
        return Auditor(
            self.domain,
            self.ledger,
            quorum=self.quorum,
            checkers=self.checkers,
            tolerance_bps=params.agree_tolerance_bps,
            min_stake=params.min_stake,
        )

    def window(self, name: str, round_: int) -> int:
        return self.book.functions.windows(round_).call()[WINDOWS.index(name)]

    # ---------------------------------------------------------------------------- a round

    def submissions(self, round_: int, collector: Collector, cost: RoundCost, sample: set[str]):
        """Every node signs its submission and sends it to the aggregator."""
        self.round_blocks.setdefault(round_, self.swarm.w3.eth.block_number)
        served = self.aggregator_cpu()
        for n in self.nodes:
            t0 = time.thread_time()
            message = Submission(
                round=round_,
                digest="0x" + keccak(f"{round_}/{n.address}".encode()).hex(),
                rollouts=ROLLOUTS,
                score=SCORE,
                signal=SIGNAL,
            )
            signed = Signed.sign(message, self.domain, n.key)
            t1 = time.thread_time()
            self.deliver([signed], collector, cost)
            if n.address in sample:
                # in memory the delivery is the aggregator's work; over HTTP the request is the
                # node's (the endpoint's threads count the aggregator's)
                cost.node_cpu[n.address] += (
                    (t1 - t0) if self.http is None else time.thread_time() - t0
                )
        cost.aggregator_cpu += self.aggregator_cpu() - served
        cost.submissions = len(collector.submissions)

    def post_submissions(
        self, round_: int, collector: Collector, cost: RoundCost, lie: str | None = None
    ):
        t0 = time.thread_time()
        if self.http is not None:
            with self.http.desk.hold(round_):  # no message changes it while the root is built
                root = collector.submission_root()
        else:
            root = collector.submission_root()
        if lie == "a censored submission":  # one it gave a receipt for: the auditor's own
            censored = self.nodes[1].address
            root = SubmissionRoot([x for x in root.signed if x.signer != censored])
        if lie == "a forged submission":  # one its collector would refuse: no registered node's
            stranger = keccak(b"sapo light stranger")
            message = Submission(
                round=round_, digest="0x" + bytes(32).hex(), rollouts=1, score=0, signal=0
            )
            root = SubmissionRoot([*root.signed, Signed.sign(message, self.domain, stranger)])
        listed = submission_list(root.signed)
        cost.aggregator_cpu += time.thread_time() - t0
        cost.list_bytes = len(listed)
        cid = cost.list_cid = self.publish("submissions", round_, listed)
        drawing = self.draw.encode_abi("draw", args=[round_])
        for _ in range(2):  # the request, then the draw in the next block: the aggregator's
            self.send("drawAggregator", self.draw.address, [(self.aggregator.address, drawing, 0)])
        self.book_call(
            "postSubmissions",
            "postSubmissions",
            round_,
            root.root,
            len(root.signed),
            list_digest(cid),
            value=BOND,
        )
        self.swarm.mine()
        self.book_call("drawBeacon", "drawBeacon", round_)
        return root, listed, cid

    def vote(
        self,
        round_: int,
        collector: Collector,
        cid: str,
        listed: bytes,
        cost,
        sample,
        disputing: frozenset[str] = frozenset(),
    ):
        """Every node opens the list, draws its seats on its family's batches and signs an
        agreeing vote on each; the aggregator takes each one (and checks the seat). With
        --transport http the list is the one fetched through IPFS by its posted CID. The
        batches of the producers in `disputing` (forged) get no agreeing vote: their seated
        checkers are kept in `disputers` instead."""
        view = self.book.functions.roundOf(round_).call()
        posted, count, root, beacon = view[1], view[2], view[3], view[7]
        t0 = time.monotonic()
        fetched = self.fetch("submissions", round_, cid, listed, count)
        cost.fetch_s = time.monotonic() - t0 if self.http is not None else 0.0
        if fetched is None:
            raise RuntimeError(f"round {round_}: the submission list {cid} cannot be fetched")
        listed = fetched
        family_total = {f: STAKE * len(m) for f, m in self.members.items()}
        by_address = {n.address: n for n in self.nodes}
        # the list, opened once for the untimed nodes and split by family (each timed node opens
        # it and scans it itself below, as a node does)
        entries, _ = open_submission_list(listed, root, count)
        by_family: dict[int, list[tuple[int, Light]]] = {}
        for i, entry in enumerate(entries):
            producer = by_address[to_checksum_address(entry[44:64])]
            by_family.setdefault(producer.family, []).append((i, producer))
        votes: list[tuple[Light, list[Signed]]] = []
        for checker in self.nodes:
            timed = checker.address in sample
            t0 = time.thread_time()
            mine: list[Signed] = []
            if timed:
                own, _ = open_submission_list(listed, root, count)
                ours = [
                    (i, by_address[a])
                    for i, a in enumerate(to_checksum_address(e[44:64]) for e in own)
                    if by_address[a].family == checker.family
                ]
            else:
                own, ours = entries, by_family[checker.family]
            for i, producer in ours:
                if producer is checker:
                    continue
                draw = Beacon(
                    round=round_, node=producer.address, beacon=beacon, block=posted + 1, ready=True
                )
                if not draw.seats(
                    checker.address, STAKE, family_total[checker.family], self.checkers
                ):
                    continue
                address, s, _ = decode_submission(own[i])
                if address in disputing:
                    self.disputers[(round_, address)].append(checker)
                    continue
                message = Vote(
                    round=round_,
                    producer=address,
                    digest=s.digest,
                    unavailable=False,
                    score=s.score,
                    signal=s.signal,
                    findings=0,
                )
                mine.append(Signed.sign(message, self.domain, checker.key))
            if timed:
                cost.node_cpu[checker.address] += time.thread_time() - t0
            if mine:
                votes.append((checker, mine))
        served = self.aggregator_cpu()
        for checker, mine in votes:  # each node sends its votes of the round at once
            t0 = time.thread_time()
            self.deliver(mine, collector, cost)
            if checker.address in sample and self.http is not None:
                cost.node_cpu[checker.address] += time.thread_time() - t0
        cost.aggregator_cpu += self.aggregator_cpu() - served
        cost.votes = len(collector.votes)

    def post_verdicts(
        self,
        round_: int,
        collector: Collector,
        root,
        cost: RoundCost,
        lie: str | None = None,
        earned: EarningsBook | None = None,
    ) -> tuple[VerdictRoot, bytes | None, str]:
        """Posts the verdict root (each credit with its producer's earnings in `earned`);
        returns it, the list it publishes (None: withheld) and the list's CID."""
        if self.http is not None:
            self.http.desk.close(round_)  # no vote enters after the close
        view = self.book.functions.roundOf(round_).call()
        posted, beacon = view[1], view[7]
        family_of = {n.address.lower(): n.family for n in self.nodes}
        totals = {f: STAKE * len(m) for f, m in self.members.items()}

        def seated(producer: str, voter: str) -> bool:
            family = family_of[producer]
            if family_of.get(voter) != family:
                return False
            draw = Beacon(round=round_, node=producer, beacon=beacon, block=posted + 1, ready=True)
            return draw.seats(voter, STAKE, totals[family], self.checkers) > 0

        # the batches v4 holds are paid there (a liar credits them anyway)
        v4 = set() if lie == "a batch credited in both lanes" else self.v4_producers(round_)
        t0 = time.thread_time()
        earnings = None if earned is None else (lambda p: earned.earnings(p, round_))
        verdicts = collector.verdict_root(
            root, seated=seated, quorum=self.quorum, escalated=v4, earnings=earnings
        )
        cost.aggregator_cpu += time.thread_time() - t0
        if verdicts is None:
            raise RuntimeError(f"round {round_}: no batch reached the quorum")
        cost.credits = len(verdicts.credits)
        if lie in VERDICT_LIES:
            verdicts = self.lie_in(verdicts, root, round_, lie)
        withheld = lie == "a withheld verdict list"
        listed = verdict_list(verdicts)
        cid = self.publish("verdicts", round_, listed, withheld=withheld)
        self.book_call(
            "postVerdicts",
            "postVerdicts",
            round_,
            verdicts.root,
            len(verdicts.credits),
            verdicts.total,
            list_digest(cid),
        )
        return verdicts, None if withheld else listed, cid

    def lie_in(self, verdicts: VerdictRoot, root, round_: int, lie: str) -> VerdictRoot:
        """The verdict root a lying aggregator posts: its first credit falsified, or (a dropped
        quorum) the credit of one batch left out: node 1's, or when node 1's reached no quorum
        (about 1% of draws at 12 nodes, K = 10, Q = 3), the first credited batch of a node
        other than the aggregator; its producer is kept in `self.dropped`."""
        credits, amounts = list(verdicts.credits), list(verdicts.amounts)
        votes = [list(v) for v in verdicts.votes]
        if lie == "a dropped quorum":
            producers = [c.producer.lower() for c in credits]
            candidates = [self.nodes[1].address.lower()] + [
                p for p in producers if p != self.aggregator.address.lower()
            ]
            dropped = next((p for p in candidates if p in producers), None)
            if dropped is None:
                raise RuntimeError(f"round {round_}: no batch but the aggregator's to drop")
            self.dropped = next(n for n in self.nodes if n.address.lower() == dropped)
            rows = [
                row
                for row in zip(credits, amounts, votes, strict=True)
                if row[0].producer.lower() != dropped
            ]
            return VerdictRoot(
                [c for c, _, _ in rows],
                [a for _, a, _ in rows],
                votes=[v for _, _, v in rows],
                presorted=True,
            )
        first = credits[0]
        if lie == "an invented signer":  # a seated voter's name on a vote another key signed
            voter, score, findings, _ = votes[0][0]
            sub = root.signed[first.index].message
            forged = Vote(
                round=round_,
                producer=first.producer,
                digest=sub.digest,
                unavailable=False,
                score=score,
                signal=first.signal,
                findings=findings,
            )
            signature = Signed.sign(forged, self.domain, keccak(b"sapo light forger")).signature
            votes[0][0] = (voter, score, findings, bytes.fromhex(signature[2:]))
        elif lie == "too few votes":
            votes[0] = votes[0][: self.quorum - 1]
        elif lie == "an inflated amount":
            amounts[0] = first.signal * 100
        credits[0] = Credit(
            first.index,
            first.producer,
            first.digest,
            first.score,
            first.signal,
            votes_hash(votes[0]),
        )
        return VerdictRoot(credits, amounts, votes=votes, presorted=True)


def play(
    n: int,
    rounds: int,
    family_size: int,
    checkers: int,
    quorum: int,
    sample_size: int,
    transport: str = "direct",
    aggregator: str = "inline",
):
    with light_swarm("", n, family_size, checkers, quorum, transport, aggregator) as light:
        if light.service is not None:
            return _play_service(light, n, rounds, checkers, sample_size)
        return _play(light, n, rounds, checkers, sample_size)


@contextmanager
def light_swarm(kind: str, n: int, *args: Any) -> Iterator[LightSwarm]:
    """A LightSwarm of `n` nodes (LightSwarm's other arguments: `args`) on an anvil of its own
    (in a temporary folder named after `kind`), closed and stopped on the way out."""
    with Anvil(Path(tempfile.mkdtemp(prefix=f"bench-root-lane-{kind}"))) as anvil:
        light = LightSwarm(anvil, n, *args)
        try:
            yield light
        finally:
            light.close()


def _play_service(light: LightSwarm, n: int, rounds: int, checkers: int, sample_size: int):
    """The rounds of `_play`, aggregated by the aggregator service a node runs
    (client.node.aggregation.service: its endpoint, its store on disk, its IPFS publishing, its
    own reads of the ledger and its own transactions), driven pass by pass on the chain's clock.
    Its CPU per round: its passes' thread time and its endpoint threads'."""
    started = time.monotonic()
    light.register()
    service = light.service
    assert service is not None and light.http is not None
    sample = {x.address for x in random.Random(0).sample(light.nodes, min(sample_size, n))}
    first = light.ledger.current_round() + 1
    played = list(range(first, first + rounds))
    w = Windows.of(light.ledger.params())
    # each round's reward, and up to 1% more: the aggregator's pay (RoundBook.postPayBps)
    light.book_call("fund", "fund", value=light.swarm.params.reward_per_round * rounds * 101 // 100)
    start_block = light.swarm.w3.eth.block_number
    service.start()
    costs = {r: RoundCost() for r in played}

    def tick() -> tuple[Any, float]:
        t0 = time.thread_time()
        done = service.tick()
        return done, time.thread_time() - t0

    stands = w.challenge_end(0) + 2
    for t in range(first, first + rounds + stands):
        light.swarm.goto(t, 0.1)
        done, cpu = tick()  # opens round t; posts the roots whose time it is
        for r in {*done.posted_submissions, *done.posted_verdicts} & costs.keys():
            costs[r].aggregator_cpu += cpu
        if t in costs:
            light.submissions(t, service.collectors[t], costs[t], sample)
        r = t - w.post_round(0)
        if r in costs:
            if r not in done.posted_submissions:
                raise RuntimeError(f"round {r}: the service did not post its submissions: {done}")
            light.swarm.mine()  # the beacon's block
            drawn, cpu = tick()
            costs[r].aggregator_cpu += cpu
            if r not in drawn.drawn:
                raise RuntimeError(f"round {r}: the service did not draw the beacon: {drawn}")
            events = light.book.events.SubmissionsPosted().get_logs(
                from_block=start_block, argument_filters={"round": r}
            )
            cid = digest_to_cid(bytes(events[-1].args["list"]))
            costs[r].list_cid = cid
            costs[r].list_bytes = 384 * events[-1].args["count"]
            light.vote(r, service.collectors[r], cid, None, costs[r], sample)
        r = t - w.verdict_round(0)
        if r in costs:
            if r not in done.posted_verdicts:
                raise RuntimeError(f"round {r}: the service did not post its verdicts: {done}")
            costs[r].credits = len(service.verdict_roots[r].credits)
    light.count_gas_of(light.aggregator.address, start_block, light.swarm.w3.eth.block_number)
    light.sync_nonce(light.aggregator.address)
    light.claim(service.earned, played)
    return light, costs, whole_draw(light, first, n, checkers), time.monotonic() - started


def whole_draw(light: LightSwarm, round_: int, n: int, checkers: int) -> float:
    """CPU seconds of the draw a node of one family as large as the swarm would make: its seat
    on every other node's batch of `round_`."""
    view = light.book.functions.roundOf(round_).call()
    t0 = time.thread_time()
    for producer in light.nodes[1:]:
        Beacon(
            round=round_, node=producer.address, beacon=view[7], block=view[1] + 1, ready=True
        ).seats(light.nodes[0].address, STAKE, STAKE * n, checkers)
    return time.thread_time() - t0


def _play(light: LightSwarm, n: int, rounds: int, checkers: int, sample_size: int):
    started = time.monotonic()
    light.register()
    sample = {x.address for x in random.Random(0).sample(light.nodes, min(sample_size, n))}
    first = light.ledger.current_round() + 1
    played = list(range(first, first + rounds))
    post = light.window("postRound", first) - first
    verdict = light.window("verdictRound", first) - first
    release = light.window("challengeEnd", first) + 1 - first
    stands = release + 1  # a round stands two rounds after its challenge window
    lag = light.book.functions.lag().call()
    earned = EarningsBook(light.swarm.params.reward_per_round, lag, folded=first - 1)
    # each round's reward, and up to 1% more: the aggregator's pay (RoundBook.postPayBps)
    light.book_call("fund", "fund", value=light.swarm.params.reward_per_round * rounds * 101 // 100)
    verdicts: dict[int, VerdictRoot] = {}
    # the aggregator knows the registered nodes from the ledger's Registered events (its
    # own book of them, as a node keeps its peers' families)
    registered = {n.address for n in light.nodes}.__contains__
    collectors = {
        r: Collector(light.domain, r, tolerance_bps=light.tolerance, registered=registered)
        for r in played
    }
    costs = {r: RoundCost() for r in played}
    roots: dict[int, Any] = {}
    for t in range(first, first + rounds + stands):
        light.swarm.goto(t, 0.1)
        if t - stands >= first:  # the round that stands now: its credits earn
            q = t - stands
            earned.fold(q, verdicts.get(q), light.ledger.round_info(q).total_credited)
        if t in collectors:
            light.open(collectors[t])
            light.submissions(t, collectors[t], costs[t], sample)
        if t - post in collectors:
            r = t - post
            roots[r], listed, cid = light.post_submissions(r, collectors[r], costs[r])
            light.vote(r, collectors[r], cid, listed, costs[r], sample)
        if t - verdict in collectors:
            r = t - verdict
            verdicts[r], _, _ = light.post_verdicts(
                r, collectors[r], roots[r], costs[r], earned=earned
            )
        if t - release in collectors:
            light.book_call("release", "release", t - release)
    light.claim(earned, played)
    return light, costs, whole_draw(light, first, n, checkers), time.monotonic() - started


@dataclass
class Caught:
    lie: str
    finding: str  # what the auditor found in the lists
    proven: list[str]  # what the book's LieProven events say
    proof_gas: int  # the auditor's transactions: the proof, or the challenge and its claim
    prover_net: int  # wei the auditor gained, net of its gas
    pool_gain: int  # wei the ledger's reward pool gained
    wall: float


@dataclass
class Forged:
    """One round in which some producers forge (--forgers): what escalating and judging their
    batches in the v4 lane cost, and what each side got."""

    forgers: int
    escalate_gas: int  # the escalations' gas, all of them (each with its checker's dispute)
    disputes: int  # the other seated checkers' disputes sent to the ledger
    dispute_gas: int
    settle_gas: int  # settling the forged batches (slashing their producers)
    slashed: int  # wei slashed from the forgers, all of them
    forger_credit: int  # signal credited to the forgers, in the book or the ledger
    honest: int  # honest producers
    honest_credited: int  # of them, the ones the verdict root credits
    finding: str  # what an auditor found in the round's lists ("" when nothing)
    wall: float


def voted_round(light: LightSwarm, disputing: frozenset[str] | set[str] = frozenset()):
    """The next round, played to its votes: every node submits, the aggregator posts the
    submission root, and the seated checkers vote (those of `disputing`'s batches keep their
    disputes for the ledger). Returns (round, collector, cost, root, list, CID)."""
    r = light.ledger.current_round() + 1
    registered = {x.address for x in light.nodes}.__contains__
    collector = Collector(light.domain, r, tolerance_bps=light.tolerance, registered=registered)
    cost = RoundCost()
    light.swarm.goto(r, 0.1)
    light.open(collector)
    light.submissions(r, collector, cost, set())
    light.swarm.goto(light.window("postRound", r), 0.1)
    root, listed, cid = light.post_submissions(r, collector, cost)
    light.vote(r, collector, cid, listed, cost, set(), disputing=frozenset(disputing))
    return r, collector, cost, root, listed, cid


def audited_verdicts(light: LightSwarm, r: int, collector: Collector, root, listed, cost):
    """The honest aggregator posts round r's verdict root in its window, and a light node audits
    both lists: (the verdict root, the auditor's finding or None)."""
    light.swarm.goto(light.window("verdictRound", r), 0.1)
    verdicts, published, _ = light.post_verdicts(r, collector, root, cost)
    auditor = light.auditor()
    posted = BookRound.from_view(r, light.book.functions.roundOf(r).call())
    entries, finding = auditor.submissions(posted, listed)
    if finding is None:
        finding = auditor.verdicts(posted, entries, published, v4=light.v4_producers(r))
    return verdicts, finding


def play_forgers(n: int, forgers: int, family_size: int, checkers: int, quorum: int) -> Forged:
    """One round at N nodes in which `forgers` producers send batches their committees dispute:
    one seated checker of each escalates it to the ledger (RoundBook.escalate), every seated
    checker disputes it there, the honest aggregator's verdict root leaves it out, and once the
    round is final a light node settles it, which slashes its producer."""
    with light_swarm("forgers-", n, family_size, checkers, quorum, "direct") as light:
        return _play_forgers(light, forgers)


def _play_forgers(light: LightSwarm, forgers: int) -> Forged:
    started = time.monotonic()
    light.register()
    settler = light.nodes[1]
    forging = light.nodes[2 : 2 + forgers]
    if len(forging) != forgers:
        raise SystemExit(f"--forgers {forgers}: the swarm has {len(light.nodes)} nodes")
    params = light.swarm.params
    r, collector, cost, root, listed, _cid = voted_round(light, {f.address for f in forging})
    index = {s.signer: i for i, s in enumerate(root.signed)}
    escalations, disputes = [], []
    for f in forging:
        seated = light.disputers[(r, f.address)]
        if not seated:
            raise RuntimeError(f"round {r}: nobody holds a seat on {f.address}'s batch")
        i = index[f.address]
        vote = EscalationVote(unavailable=False, score=0, signal=SIGNAL, findings=2).struct()
        args = [r, i, submission_struct(root.signed[i]), root.proof(i), vote]
        escalations.append((seated[0].address, light.book.encode_abi("escalate", args=args), 0))
        attest = light.ledger.contract.encode_abi("attest", args=[r, f.address, 0, SIGNAL, 2])
        disputes += [(c.address, attest, 0) for c in seated[1:]]  # the first's came with it
    stakes = {f.address: light.ledger.node_info(f.address).active_stake for f in forging}
    escalated = light.send("escalate", light.book.address, escalations, count=False)
    voted = light.send("v4 dispute", light.ledger.address, disputes, count=False)
    verdicts, finding = audited_verdicts(light, r, collector, root, listed, cost)
    final = r + params.submit_rounds + params.challenge_rounds + params.appeal_rounds + 1
    light.swarm.goto(final, 0.1)
    settle = light.ledger.contract.encode_abi
    settled = light.send(
        "settle",
        light.ledger.address,
        [(settler.address, settle("settle", args=[r, f.address]), 0) for f in forging],
        count=False,
    )
    credited = {c.producer.lower() for c in verdicts.credits}
    forger_credit = sum(
        light.ledger.submission(r, f.address).credited
        + (SIGNAL if f.address.lower() in credited else 0)
        for f in forging
    )
    honest = [n for n in light.nodes if n not in forging]
    slashed = sum(
        stakes[f.address] - light.ledger.node_info(f.address).active_stake for f in forging
    )

    def gas(receipts: list[dict]) -> int:
        return sum(int(x["gasUsed"], 16) for x in receipts)

    return Forged(
        forgers,
        gas(escalated),
        len(disputes),
        gas(voted),
        gas(settled),
        slashed,
        forger_credit,
        len(honest),
        sum(1 for n in honest if n.address.lower() in credited),
        "" if finding is None else finding.what,
        time.monotonic() - started,
    )


@dataclass
class Equivocated:
    """One round in which some checkers sign two different votes on a batch (--equivocators)."""

    equivocators: int
    proof_gas: int  # the aggregator's proofs, all of them
    slashed: int  # wei slashed from the equivocators, all of them
    prover_paid: int  # wei the ledger paid the aggregator (its settler's cut of each)
    # the same of the producers that signed two submissions of the round (as many)
    double_gas: int
    double_slashed: int
    double_paid: int
    honest: int  # producers
    credited: int  # of them, the ones the verdict root credits
    finding: str  # what an auditor found in the round's lists ("" when nothing)
    wall: float


def play_equivocators(
    n: int, equivocators: int, family_size: int, checkers: int, quorum: int
) -> Equivocated:
    """One round at N nodes in which `equivocators` checkers each sign a second vote (another
    score) on a batch they voted on: the aggregator keeps both and proves each pair."""
    with light_swarm("equivocators-", n, family_size, checkers, quorum, "direct") as light:
        return _play_equivocators(light, equivocators)


def _play_equivocators(light: LightSwarm, count: int) -> Equivocated:
    started = time.monotonic()
    light.register()
    r, collector, cost, root, listed, _cid = voted_round(light)
    firsts: dict[str, Signed] = {}  # voter -> one vote it sent
    for (_, voter), signed in collector.votes.items():
        firsts.setdefault(voter, signed)
        if len(firsts) == count:
            break
    if len(firsts) < count:
        raise SystemExit(f"--equivocators {count}: only {len(firsts)} checkers voted")
    keys_of = {x.address.lower(): x.key for x in light.nodes}
    for voter, first in firsts.items():
        m = first.message
        other = m.model_copy(update={"score": m.score - 1 if m.score else 1})
        try:
            collector.accept(Signed.sign(other, light.domain, keys_of[voter]).to_bytes())
        except Refused:
            pass
        else:
            raise RuntimeError("the collector took a second vote of one checker on one batch")
    stakes = {v: light.ledger.node_info(v).active_stake for v in firsts}
    ledger = light.ledger.contract.functions
    paid_before = ledger.totalSettlerPaid().call()
    judge = light.swarm.w3.eth.contract(
        address=light.book.functions.judge().call(), abi=load_artifact("RoundJudge")["abi"]
    )
    proofs = [
        (
            light.aggregator.address,
            judge.encode_abi(
                "proveEquivocation",
                args=[
                    r,
                    e.first.message.producer,
                    cast_vote_struct(e.first),
                    cast_vote_struct(e.second),
                ],
            ),
            0,
        )
        for e in collector.equivocations
    ]
    proved = light.send("proveEquivocation", judge.address, proofs, count=False)
    slashed = sum(stakes[v] - light.ledger.node_info(v).active_stake for v in firsts)
    # producers that signed a second submission of the round: proven from the pair
    paid_votes = ledger.totalSettlerPaid().call()
    doubles = [s for s in root.signed if s.signer.lower() not in firsts][:count]
    before = {s.signer: light.ledger.node_info(s.signer).active_stake for s in doubles}
    proofs = []
    for first in doubles:
        s = first.message
        other = s.model_copy(update={"digest": "0x" + keccak(hexstr=s.digest).hex()})
        second = Signed.sign(other, light.domain, keys_of[first.signer.lower()])
        args = [r, submission_struct(first), submission_struct(second)]
        proofs.append(
            (light.aggregator.address, judge.encode_abi("proveDoubleSubmission", args=args), 0)
        )
    doubled = light.send("proveDoubleSubmission", judge.address, proofs, count=False)
    double_slashed = sum(v - light.ledger.node_info(a).active_stake for a, v in before.items())
    verdicts, finding = audited_verdicts(light, r, collector, root, listed, cost)
    credited = {c.producer.lower() for c in verdicts.credits}
    return Equivocated(
        count,
        sum(int(x["gasUsed"], 16) for x in proved),
        slashed,
        paid_votes - paid_before,
        sum(int(x["gasUsed"], 16) for x in doubled),
        double_slashed,
        ledger.totalSettlerPaid().call() - paid_votes,
        len(root.signed),
        sum(1 for x in root.signed if x.signer.lower() in credited),
        "" if finding is None else finding.what,
        time.monotonic() - started,
    )


def play_lie(
    n: int, lie: str, family_size: int, checkers: int, quorum: int, transport: str = "direct"
) -> Caught:
    """One round at N nodes with a lying aggregator; a light node audits the published lists
    (client.node.aggregation.auditor; through IPFS by their posted CIDs with --transport http)
    and sends the call its finding names."""
    with light_swarm("lie-", n, family_size, checkers, quorum, transport) as light:
        return _play_lie(light, lie)


def _play_lie(light: LightSwarm, lie: str) -> Caught:
    started = time.monotonic()
    light.register()
    auditor_node = light.nodes[1]  # of a dropped quorum: the producer whose credit was dropped
    auditor = light.auditor()
    r = light.ledger.current_round() + 1
    registered = {x.address for x in light.nodes}.__contains__
    collector = Collector(light.domain, r, tolerance_bps=light.tolerance, registered=registered)
    cost = RoundCost()
    w3 = light.swarm.w3
    balances0 = {x.address: w3.eth.get_balance(x.address) for x in light.nodes}
    pool0 = light.ledger.reward_pool()
    gas_used = gas_paid = 0

    judge = w3.eth.contract(
        address=light.book.functions.judge().call(), abi=load_artifact("RoundJudge")["abi"]
    )

    def act(function: str, *args: Any, value: int = 0) -> None:
        nonlocal gas_used, gas_paid
        to = judge if function in JUDGED else light.book
        data = to.encode_abi(function, args=list(args))
        receipt = light.send("audit", to.address, [(auditor_node.address, data, value)])[0]
        gas_used += int(receipt["gasUsed"], 16)
        gas_paid += int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)

    light.swarm.goto(r, 0.1)
    light.open(collector)
    light.submissions(r, collector, cost, set())
    if lie == "a batch credited in both lanes":  # its producer submits in v4 too
        light.v4_submit(r, light.nodes[2])
    light.swarm.goto(light.window("postRound", r), 0.1)
    root, listed, cid = light.post_submissions(r, collector, cost, lie)
    posted = BookRound.from_view(r, light.book.functions.roundOf(r).call())
    listed = light.fetch("submissions", r, cid, listed, posted.count)
    entries, finding = auditor.submissions(posted, listed)
    if finding is None:  # the auditor's own submission: in the root, as its receipt binds
        signed, receipt = light.sent[(r, auditor_node.address)]
        finding = auditor.left_out(posted, entries, signed, receipt)
    if finding is None:
        light.vote(r, collector, cid, listed, cost, set())
        light.swarm.goto(light.window("verdictRound", r), 0.1)
        _, published, cid = light.post_verdicts(r, collector, root, cost, lie)
        posted = BookRound.from_view(r, light.book.functions.roundOf(r).call())
        published = light.fetch("verdicts", r, cid, published, posted.credits)
        finding = auditor.verdicts(posted, entries, published, v4=light.v4_producers(r))
        if finding is None and published is not None:
            # the auditor's own batch: its checkers handed it their votes and receipts
            auditor_node = light.dropped or auditor_node
            opened = open_verdict_list(published, posted.verdicts, posted.credits, posted.total)
            receipted = light.receipted[(r, auditor_node.address.lower())]
            finding = auditor.uncredited(posted, entries, opened, receipted, light.v4_producers(r))
    if finding is None:
        raise RuntimeError(f"{lie}: the auditor found nothing")
    act(finding.function, *finding.args, value=CHALLENGE_BOND if finding.challenge else 0)
    if finding.challenge:  # the aggregator does not answer: after the answer window, claim
        light.swarm.goto(light.ledger.current_round() + 2, 0.1)
        act("claimUnanswered", *finding.args)
    proven = [
        e.args["what"]
        for e in light.book.events.LieProven().get_logs(from_block=0, argument_filters=None)
    ]
    gained = w3.eth.get_balance(auditor_node.address) - balances0[auditor_node.address]
    return Caught(
        lie,
        finding.what,
        proven,
        gas_used,
        gained,
        light.ledger.reward_pool() - pool0,
        time.monotonic() - started,
    )


def print_equivocators(n: int, e: Equivocated) -> None:
    """The --equivocators table."""
    twice = Table(
        "N",
        "signed twice",
        "equivocators",
        "proof gas / equivocator",
        "slashed / equivocator (ETH)",
        "prover paid / equivocator (ETH)",
        "batches credited",
        "auditor's finding",
        "wall s",
        formats={
            "slashed / equivocator (ETH)": ".3f",
            "prover paid / equivocator (ETH)": ".4f",
            "wall s": ".0f",
        },
        left=["batches credited", "auditor's finding"],
    )
    for what, gas, slashed, paid in (
        ("a vote on a batch", e.proof_gas, e.slashed, e.prover_paid),
        ("a submission", e.double_gas, e.double_slashed, e.double_paid),
    ):
        twice.row(
            n,
            what,
            e.equivocators,
            gas // e.equivocators,
            slashed / e.equivocators / ETH,
            paid / e.equivocators / ETH,
            f"{e.credited} of {e.honest}",
            e.finding or "none: the root stands",
            e.wall,
        )
    twice.print(
        f"Root lane: checkers that sign two votes on one batch and producers that sign two "
        f"submissions of the round at N = {n}, one round (each pair proven by the aggregator, "
        "its signer slashed on the ledger)"
    )


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--nodes", default="100,1000", help="swarm sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--family-size", type=int, default=100)
    parser.add_argument("--checkers", type=int, default=10)
    parser.add_argument("--quorum", type=int, default=3)
    parser.add_argument("--sample", type=int, default=20, help="nodes whose CPU is timed")
    parser.add_argument(
        "--claim-every", type=int, default=100, help="rounds between a node's claims"
    )
    parser.add_argument(
        "--lies",
        default="",
        help="play one round per lie at the first N, a light node auditing ('all', or names: "
        + "; ".join(LIES)
        + ", comma-separated)",
    )
    parser.add_argument(
        "--forgers",
        type=int,
        default=0,
        help="play one round at the first N in which this many producers forge: their seated "
        "checkers escalate and dispute them in the v4 lane, and settling slashes them",
    )
    parser.add_argument(
        "--equivocators",
        type=int,
        default=0,
        help="play one round at the first N in which this many checkers sign a second, different "
        "vote on a batch: the aggregator proves each, and the ledger slashes them",
    )
    parser.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="direct",
        help="how messages and lists travel: in memory, or over HTTP and IPFS as nodes send them",
    )
    parser.add_argument(
        "--aggregator",
        choices=("inline", "service"),
        default="inline",
        help="who aggregates the honest rounds: this script's own steps, or the aggregator "
        "service a node runs (`sapo aggregate run`'s: its store on disk, its own ledger reads "
        "and transactions; needs --transport http)",
    )
    args = parser.parse_args()
    if args.aggregator == "service" and args.transport != "http":
        parser.error("--aggregator service is reached over HTTP: add --transport http")
    lies = list(LIES) if args.lies == "all" else [x for x in args.lies.split(",") if x]
    unknown = [x for x in lies if x not in LIES]
    if unknown:
        parser.error(f"unknown lie {unknown[0]!r}; the lies: {', '.join(LIES)}")
    every = args.claim_every
    total_column = f"gas / node / round, a claim every {every}"
    gas_table = Table(
        "N",
        "families",
        "posts / node / round",
        "claim (mean)",
        total_column,
        "Mgas/s at 60-s rounds",
        "drawAggregator",
        "postSubmissions",
        "drawBeacon",
        "postVerdicts",
        "release",
        "wall s",
        formats={"Mgas/s at 60-s rounds": ".4f", "wall s": ".0f"},
    )
    wire = {"requests / node": ".2f", "bytes sent / node": ".0f", "list fetch s": ".2f"}
    wire = wire if args.transport == "http" else {}
    work_table = Table(
        "N",
        "submissions",
        "votes",
        "credited",
        "aggregator CPU s",
        "node CPU s (family draw)",
        "node draw s if one family",
        "list bytes",
        *wire,
        formats={
            "aggregator CPU s": ".2f",
            "node CPU s (family draw)": ".3f",
            "node draw s if one family": ".3f",
            **wire,
        },
    )
    for n in [int(s) for s in args.nodes.split(",")]:
        light, costs, whole_draw, wall = play(
            n,
            args.rounds,
            args.family_size,
            args.checkers,
            args.quorum,
            args.sample,
            args.transport,
            args.aggregator,
        )
        gas = light.gas
        per_round = {k: v // args.rounds for k, v in gas.gas.items()}
        posts = sum(v for k, v in per_round.items() if k not in ("claim", "fund"))
        claim_mean = gas.gas["claim"] // gas.txs["claim"]
        per_node = posts / n + gas.txs["claim"] / n * claim_mean / every
        gas_table.row(
            n,
            len(light.members),
            posts // n,
            claim_mean,
            round(per_node),
            per_node * n / 60 / 1e6,
            per_round.get("drawAggregator", 0),
            per_round.get("postSubmissions", 0),
            per_round.get("drawBeacon", 0),
            per_round.get("postVerdicts", 0),
            per_round.get("release", 0),
            wall,
        )
        rounds = list(costs.values())
        node_cpu = [c for r in rounds for c in r.node_cpu.values()]
        work_table.row(
            n,
            sum(r.submissions for r in rounds) // len(rounds),
            sum(r.votes for r in rounds) // len(rounds),
            sum(r.credits for r in rounds) // len(rounds),
            sum(r.aggregator_cpu for r in rounds) / len(rounds),
            sum(node_cpu) / max(1, len(node_cpu)),
            whole_draw,
            rounds[0].list_bytes,
            *(
                (
                    sum(r.requests for r in rounds) / len(rounds) / n,
                    sum(r.sent_bytes for r in rounds) / len(rounds) / n,
                    sum(r.fetch_s for r in rounds) / len(rounds),
                )
                if args.transport == "http"
                else ()
            ),
        )
    gas_table.print(
        f"Root lane: chain cost per node per round (K = {args.checkers}, Q = {args.quorum}, "
        f"{args.rounds} rounds; gas from receipts: each node that earned claimed once, at the "
        f"end, and its claim is counted once per {every} rounds)"
    )
    work_table.print(
        f"Root lane: work per round (means over the rounds; transport {args.transport}, "
        f"aggregator {args.aggregator})"
    )
    if lies:
        n = int(args.nodes.split(",")[0])
        caught = Table(
            "the aggregator's lie",
            "the auditor found",
            "proven on chain",
            "auditor's gas",
            "auditor's net (ETH)",
            "pool gained (ETH)",
            "wall s",
            formats={"auditor's net (ETH)": "+.4f", "pool gained (ETH)": ".4f", "wall s": ".0f"},
            left=["the aggregator's lie", "the auditor found", "proven on chain"],
        )
        for lie in lies:
            c = play_lie(n, lie, args.family_size, args.checkers, args.quorum, args.transport)
            caught.row(
                c.lie,
                c.finding[:60],
                "; ".join(c.proven) or "nothing",
                c.proof_gas,
                c.prover_net / ETH,
                c.pool_gain / ETH,
                c.wall,
            )
        caught.print(
            f"Root lane: a lying aggregator at N = {n}, one round each, a light node auditing "
            f"(bond {BOND / ETH:g} ETH, challenge bond {CHALLENGE_BOND / ETH:g} ETH)"
        )
    first = int(args.nodes.split(",")[0])  # the adversaries' rounds are played at the first N
    draw = (args.family_size, args.checkers, args.quorum)
    if args.forgers:
        n = first
        f = play_forgers(n, args.forgers, *draw)
        forged = Table(
            "N",
            "forgers",
            "escalate gas / batch",
            "other v4 disputes / batch",
            "dispute gas (mean)",
            "settle gas / batch",
            "gas / forged batch",
            "slashed / forger (ETH)",
            "forgers credited",
            "honest credited",
            "auditor's finding",
            "wall s",
            formats={"slashed / forger (ETH)": ".3f", "wall s": ".0f"},
            left=["honest credited", "auditor's finding"],
        )
        whole = f.escalate_gas + f.dispute_gas + f.settle_gas
        forged.row(
            n,
            f.forgers,
            f.escalate_gas // f.forgers,
            f.disputes / f.forgers,
            f.dispute_gas // max(1, f.disputes),
            f.settle_gas // f.forgers,
            whole // f.forgers,
            f.slashed / f.forgers / ETH,
            f.forger_credit,
            f"{f.honest_credited} of {f.honest}",
            f.finding or "none: the root stands",
            f.wall,
        )
        forged.print(
            f"Root lane: forging producers at N = {n}, one round (each forged batch escalated by "
            f"a seated checker, disputed by all of them in the v4 lane, settled once final)"
        )
    if args.equivocators:
        print_equivocators(first, play_equivocators(first, args.equivocators, *draw))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak memory of this process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
