"""Peer intake, beside the compute stage: discover peers' submissions on the ledger, fetch their
batches, re-verify them completely, journal what passed (the sampler's pool) and queue the votes
the publisher sends.

Every poll it reads the `Submitted` and `Attested` events since its saved cursor (a restart goes
on from there, not from the deployment block). It fetches from every round still open to
attestation (r + W + C): first the batches whose beacons drew this node to check them (its duty:
the ledger credits a batch only once `quorum` drawn checkers agree), oldest round first (the
nearest deadline), at most `[sapo].attest_budget` new ones a chain round; then, for training,
`[sapo].max_fetch_per_round` others, newest round first (the freshest items). Up to FETCH_WORKERS
fetches run at once, each on a store client of its own, so a batch nobody can give (a free claim:
a digest of nothing) costs its time-out beside the others, not before them. The worker also
re-verifies what it fetched (a batch whose answers are slow to score holds its producer's worker,
not the stage); the verdict and the journal stay on the intake thread. A drawn checker also
checks the batch's generation
(client.node.proving): on the same worker it fetches the checkpoints the beacon opened (from the
producer, or from attesters who fetched them) and re-draws the opened groups on its own
copy of the model; a batch whose completions are not the seeded draws of the checkpoints it
names is attested 0 (findings: generation), which disputes it. Only a drawn checker votes, at
most `[sapo].attest_budget` times a chain round: an attestation of our recomputed score and
learning signal (0 for a batch whose tasks are not the seed's, with the findings bits saying
what was wrong), or, once `[sapo].unavailable_after` fetches in a row found the batch nowhere
(retried at intervals spread over what is left of its window, `retry_delay`: unavailability
may be ours), an "unavailable" vote, which cancels credit but never slashes; when the last of
those fetches had the batch but not the checkpoints its beacon opened, a dispute (findings:
withheld), since a producer that withholds its openings would otherwise forge unopened-looking
rounds at no risk. A drawn checker
queues the storing of the submission's beacon (sent only if nobody stored it half a window on):
a beacon nobody stored while the EVM knew its block hash lapses, and its batch can no longer be
checked. A batch its producer appealed (its `Appealed` event, journaled) is voted on again by
the appeal's committee, drawn afresh until the appeal rounds end: drawn on it, this node votes
a second time (what it found already, or a fetch and a proof of the same openings if it had not
checked the batch), under the outbox key `appeal-vote:ROUND:NODE`.

Nothing assumes that the producer and this node share an IPFS daemon: before fetching a batch it
dials the producer's IPFS node at the addresses of its on-chain metadata (checked by
client.store.peers), and the fetch goes over bitswap with a time-out. When the producer does not
give it, up to MAX_SOURCES - 1 peers who agreed with the batch are dialled and asked at once
(they fetched it and pin it); the journal records whose node gave it. A fetched, verified batch
is pinned for `[store].retain_rounds`, so it outlives its producer. The time a batch nobody has
costs a worker is bounded: exchange.MAX_DIALS addresses of [store].connect_timeout_s per source
it cannot dial, and two fetches of [store].timeout_s (the producer's, the attesters').

(Over 400 lines, on purpose: discovery, fetching, verification and the vote of one batch share
its retry state and its deadlines, kept in one stage that owns them.)
"""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from client.chain import ChainError
from client.chain.events import EventReader
from client.chain.models import LedgerParams
from client.config.models import SapoSection, StoreSection
from client.credit import GENERATION, MALFORMED, WITHHELD
from client.node.eventlog import Event, Span, timed
from client.node.peerbook import PeerSubmission, item_record
from client.node.proving import OPEN_ROUNDS, GenerationCheck, Prover, opened
from client.node.rollouts import Verification, generation_seed, task_seed, verify_batch
from client.node.services import Services, Stage
from client.node.states import OutboxKind, Verdict
from client.store import BlockStore, StoreError, fetch_from_peers, open_store
from client.store.batch import Sampled
from client.store.cid import digest_to_cid
from client.store.errors import MalformedBatch, SpoolError
from client.store.exchange import NOT_THE_PRODUCERS_FAULT, from_sources
from client.store.peers import PeerAddresses, peer_addresses
from client.store.weights import WeightsError, get_weights, pin_weights
from client.tasks import Catalog

log = logging.getLogger("sapo.node.intake")

POLL_S = 2.0
FETCH_WORKERS = 16  # fetches in flight at once (I/O: most of their time is waiting on time-outs)
RETRY_MIN_S = 2.0  # the shortest wait between fetches of a batch nobody gave us
MAX_SOURCES = 4  # the producer, then up to three of the peers who agreed with its batch
# failures of this node's own parts, which no peer's bytes cause: they stop the stage as before,
# never turning into a verdict on the producer (a full disk is not a malformed batch)
OURS = (OSError, MemoryError, sqlite3.Error, ChainError)


def retry_delay(
    params: LedgerParams,
    unavailable_after: int,
    round_: int,
    failures: int,
    took: float,
    now: float,
    appealed: bool = False,
) -> float:
    """Seconds to wait before fetching again a batch of `round_` that `failures` attempts in a
    row (the last took `took` s, ending at unix time `now`) found nowhere. The attempts still
    owed before an unavailable vote (`unavailable_after` in all) are spread over what is left of
    its attestation window, less a quarter round for the vote's transaction and one gap of slack
    for the queue: a producer whose node is briefly down gets the most time to come back, and a
    batch nobody has still gets its vote before the window closes (a fixed half-round spacing
    left most free claims unvoted at 20-s rounds: attack table run 4). Between RETRY_MIN_S and
    half a round; once the vote is owed, half a round (a batch we are not drawn to check is
    fetched to learn from; one we voted on is not fetched again). An `appealed` batch's window
    is its appeal's."""
    half = max(RETRY_MIN_S, params.round_length / 2)
    owed = unavailable_after - failures
    if owed <= 0:
        return half
    last = params.final_after(round_) if appealed else params.close(round_)
    closes = params.round_start(last + 1) - params.round_length / 4
    spare = closes - now - owed * took  # the time not spent in the attempts themselves
    return min(half, max(RETRY_MIN_S, spare / (owed + 1)))


@dataclass(frozen=True)
class Proof:
    """What a drawn checker's proof of generation came to, on a fetch worker."""

    started: float
    ended: float
    outcome: GenerationCheck | StoreError  # a StoreError: the checkpoints could not be had
    manifests: list  # the fetched checkpoints' manifests (to pin them)


class Intake(Stage):
    """Discovers, fetches, verifies and queues attestations; its own thread."""

    def __init__(
        self,
        services: Services,
        store: BlockStore,
        catalog: Catalog,
        wake: threading.Event,
        prover: Prover | None = None,
        *,
        reader: EventReader,
        sapo: SapoSection,
        store_cfg: StoreSection,
        spool: Path,
    ):
        """`reader`: the ledger's events from the deployment block, in the config's chunks;
        `spool`: the folder peers' opened checkpoints are fetched into (DataDir.spool)."""
        super().__init__(services)
        self.sapo, self.store_cfg = sapo, store_cfg
        self.spool = Path(spool)
        # proofs whose checkpoints fit [store].spool_mib at once (one always may run)
        need = OPEN_ROUNDS * 4 * (prover.parameters if prover else 1)
        self._room = threading.BoundedSemaphore(max(1, (store_cfg.spool_mib << 20) // need))
        self.store = store
        self.prover = prover
        self.catalog = catalog
        self.wake_publisher = wake
        self.me = services.address.lower()
        self.reader = reader
        self._budget_round = -1
        self._fetched = self._duties = self._attested = 0
        self._local = threading.local()  # each fetch worker's own store client
        self._pool: ThreadPoolExecutor | None = None  # while run() runs
        self._inflight: dict[tuple[int, str], tuple[PeerSubmission, Future]] = {}
        self._retry_at: dict[tuple[int, str], float] = {}  # unavailable batches: when again
        # (round, node, appealed) -> drawn on the committee voting now (the appeal's, once
        # appealed)
        self._draws: dict[tuple[int, str, bool], bool] = {}
        self._beacons: dict[tuple[int, str], int] = {}  # (round, node) -> its beacon, once known
        self._appeals: set[tuple[int, str]] = set()  # peers' appealed batches, still voted on
        self._proven: set[tuple[int, str]] = set()  # drawn batches whose generation we checked
        self._unready: set[tuple[int, str]] = set()  # beacons not known yet, this poll
        self._directory: dict[str, tuple[int, PeerAddresses]] = {}  # node -> (round read, addrs)

    def run(self, stop: threading.Event) -> None:
        """Polls every POLL_S until `stop`; fetches run on FETCH_WORKERS threads meanwhile.
        The spool is emptied first: what a node killed mid-fetch left there is never read."""
        shutil.rmtree(self.spool, ignore_errors=True)
        self.spool.mkdir(parents=True, exist_ok=True)
        self._pool = ThreadPoolExecutor(FETCH_WORKERS, thread_name_prefix="sapo-fetch")
        try:
            while not stop.is_set():
                self.poll(stop)
                stop.wait(POLL_S)
        finally:  # queued fetches are dropped; running ones end within their time-outs
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool, self._inflight = None, {}

    def poll(self, stop: threading.Event | None = None) -> None:
        """One pass: discover, then check what the round's budget allows."""
        try:
            with timed(self.journal, Span.DISCOVER):
                self.discover()
            self.health.chain(True)
        except ChainError as exc:
            self.health.chain(False, str(exc))
            return
        current = self.current_round()
        self._appeals = self.journal.peers.appealed(self._first(current))
        if current != self._budget_round:
            self._budget_round, self._fetched, self._duties, self._attested = current, 0, 0, 0
            first = self._first(current)
            self._draws = {k: v for k, v in self._draws.items() if k[0] >= first}
            self._beacons = {k: v for k, v in self._beacons.items() if k[0] >= first}
            self._proven = {k for k in self._proven if k[0] >= first}
            self._retry_at = {k: v for k, v in self._retry_at.items() if k[0] >= first}
        self._unready = set()
        self.harvest()
        try:
            candidates = self._candidates(current)
        except ChainError as exc:  # the draw is read from the ledger
            self.health.chain(False, str(exc))
            return
        room = 2 * FETCH_WORKERS - len(self._inflight)  # the workers', and as many queued
        held = self.in_flight()
        for sub in candidates:
            if room <= 0 or (stop and stop.is_set()):
                break
            if held.get(sub.node, 0) >= self.store_cfg.fetches_per_producer:
                continue  # its producer's quota: taken up again once one of them ends
            if self.drawn(sub):
                retry = (sub.round, sub.node) in self._retry_at  # taken up already: not again
                if not retry and self._duties >= self.sapo.attest_budget:
                    continue
                self._duties += not retry
            elif self._fetched < self.sapo.max_fetch_per_round:
                self._fetched += 1
            else:
                continue
            self.start_fetch(sub)
            held[sub.node] = held.get(sub.node, 0) + 1
            room -= 1
        try:
            queued = self.vote(current)
        except ChainError as exc:
            self.health.chain(False, str(exc))
            return
        if queued:
            self.wake_publisher.set()

    def _first(self, current: int) -> int:
        """The oldest round whose batches may still be voted on (by an appeal's committee)."""
        return max(
            0,
            current
            - self.params.submit_rounds
            - self.params.challenge_rounds
            - self.params.appeal_rounds,
        )

    def _appealed(self, sub: PeerSubmission) -> bool:
        return (sub.round, sub.node) in self._appeals

    def _vote_key(self, sub: PeerSubmission) -> str:
        """The outbox key of our vote on the committee voting now on `sub`."""
        stage = "appeal-vote" if self._appealed(sub) else "attest"
        return f"{stage}:{sub.round}:{sub.node}"

    def _open(self, sub: PeerSubmission, current: int) -> bool:
        """Whether the committee voting now on `sub` still votes in `current`."""
        return self.params.vote_open(sub.round, current, self._appealed(sub))

    def vote(self, current: int) -> bool:
        """Queues this node's votes as a drawn checker on the batches it has a verdict for:
        an attestation of what it recomputed, or "unavailable" once `[sapo].unavailable_after`
        fetches in a row found the batch nowhere; on an appealed batch, its vote on the
        appeal's committee when drawn there. Returns whether anything was queued."""
        queued = False
        for sub in self.journal.peers.peer_submissions(self._first(current)):
            key = self._vote_key(sub)
            if self._attested >= self.sapo.attest_budget:
                break
            basis = self.journal.peers.vote_basis(sub.round, sub.node)
            if basis is None or self._voted(sub):
                continue
            if self._unproven(sub, basis["verdict"]):
                continue  # fetched for learning before we were drawn: its proof comes first
            if not self._open(sub, self.current_round()):
                continue
            if basis["verdict"] == Verdict.UNAVAILABLE:
                if basis["failures"] < self.sapo.unavailable_after:
                    continue
                kind, payload = OutboxKind.UNAVAILABLE, {"node": sub.node}
                if (basis["findings"] or 0) & WITHHELD:  # the batch, but never its openings
                    kind = OutboxKind.ATTEST
                    payload |= {"score": basis["score"] or 0, "signal": 0, "findings": WITHHELD}
            else:
                kind = OutboxKind.ATTEST
                payload = {
                    "node": sub.node,
                    "score": basis["score"] or 0,
                    "signal": basis["signal"] or 0,
                    "findings": basis["findings"] or 0,
                }
            if not self.drawn(sub):
                continue
            if self._appealed(sub):
                payload["appeal"] = True  # its window: the appeal rounds
            self._attested += 1
            queued |= self.journal.enqueue(key, kind, sub.round, payload)
            if kind == OutboxKind.ATTEST and (
                payload["findings"] or payload["signal"] != sub.signal
            ):
                # a batch we dispute: settled by us once final unless someone did first, so
                # that its slash lands (its producer would rather never settle it)
                self.journal.enqueue(
                    f"settle:{sub.round}:{sub.node}",
                    OutboxKind.SETTLE,
                    sub.round,
                    {"node": sub.node},
                )
        return queued

    def _voted(self, sub: PeerSubmission) -> bool:
        """Whether our vote on `sub` is queued or sent: a batch voted unavailable is not fetched
        again (a vote is final on chain, and a retry's time-outs would hold up the fetches of
        batches still owed a vote: attack-table run 6)."""
        return self.journal.outbox(self._vote_key(sub)) is not None

    def _unproven(self, sub: PeerSubmission, verdict: str | None) -> bool:
        """Whether we are drawn to check `sub` and verified it (`verdict`, journaled), but have
        not checked its generation yet (it was fetched for learning before its beacon was
        known)."""
        return (
            verdict == Verdict.VERIFIED
            and self.prover is not None
            and (sub.round, sub.node) not in self._proven
            and self.drawn(sub)
        )

    def drawn(self, sub: PeerSubmission) -> bool:
        """Whether the beacon of the committee voting now on the submission (the appeal's once
        appealed) gave this node a seat on it, asked once that beacon is known (`seatsOf`,
        `appealSeatsOf`: from the stakes as of the submission's block, so it never changes
        afterwards). False while the beacon is not known yet, and for good once it lapsed
        (nobody stored it while the EVM knew its block's hash: the ledger never draws it again).
        Drawn, and the beacon not stored yet, we queue its storing (`OutboxKind.DRAW`, sent only
        if nobody has stored it half a window on), so that our vote cannot lapse. The first
        beacon, which draws the openings of both committees, is kept for the proof."""
        appealed = self._appealed(sub)
        key = (sub.round, sub.node, appealed)
        if key in self._draws:
            return self._draws[key]
        if key in self._unready:  # asked already in this poll
            return False
        beacon = self.ledger.appeal_of(sub.round, sub.node) if appealed else None
        if beacon is None:
            beacon = self.ledger.beacon(sub.round, sub.node)
        if not beacon.ready:
            self._unready.add(key)
            if beacon.lapsed(self.reader.head()):
                self._draws[key] = False
            return False
        if (sub.round, sub.node) not in self._beacons:
            first = beacon if not appealed else self.ledger.beacon(sub.round, sub.node)
            self._beacons[(sub.round, sub.node)] = first.beacon
        # Fixed once the beacon is known (our stake falling below minStake aside: the ledger
        # then refuses the vote with StakeTooLow and the outbox drops it).
        self._draws[key] = self.ledger.seats_of(sub.round, sub.node, self.me, appealed) > 0
        if self._draws[key] and not beacon.drawn:
            self.journal.enqueue(
                f"draw:{sub.round}:{sub.node}" + (":appeal" if appealed else ""),
                OutboxKind.DRAW,
                sub.round,
                {"node": sub.node, "block": beacon.block} | ({"appeal": True} if appealed else {}),
            )
        return self._draws[key]

    def discover(self) -> None:
        """Journals the peers' `Submitted` events since the saved cursor, and the new cursor."""
        cursor = self.journal.peers.event_cursor()
        start = self.reader.start_block if cursor is None else cursor
        head = self.reader.head()
        if head < start:
            return
        subs, attesters, appeals = [], [], []
        names = ["Submitted", "Attested", "Appealed"]
        for e in self.reader.read(names, from_block=start, to_block=head):
            node = e.args["node"].lower()
            if e.name == "Attested":
                if e.args["agrees"]:  # a source: it fetched the batch and found it valid
                    attesters.append((e.args["round"], node, e.args["attester"].lower()))
            elif e.name == "Appealed":
                if node != self.me:
                    appeals.append((e.args["round"], node, e.args["beaconBlock"] - 1))
            elif node != self.me:
                subs.append(
                    PeerSubmission(
                        e.args["round"],
                        node,
                        str(e.args["digest"]).lower(),
                        e.args["rollouts"],
                        e.args["score"],
                        e.args["signal"],
                    )
                )
        self.journal.peers.discovered(subs, head + 1, attesters, appeals)

    def _candidates(self, current: int) -> list[PeerSubmission]:
        """Peers' batches still open to attestation and not settled here: those we are drawn to
        check first, oldest round first (their votes close first), then the others newest round
        first; within a round in an order peers cannot predict (seeded by us and the round)."""
        now = time.monotonic()
        fresh = [
            s
            for s in self.journal.peers.peer_submissions(self._first(current))
            if self._open(s, current)
            and (
                (verdict := self.journal.peers.peer_verdict(s.round, s.node))
                in (None, Verdict.UNAVAILABLE)
                or self._unproven(s, verdict)
            )
            and self._retry_at.get((s.round, s.node), 0.0) <= now
            and (s.round, s.node) not in self._inflight
            and not (verdict == Verdict.UNAVAILABLE and self._voted(s))
        ]
        rng = random.Random(f"{self.me}:{current}")  # noqa: S311 - sampling, not secrets
        rng.shuffle(fresh)
        return sorted(fresh, key=lambda s: (False, s.round) if self.drawn(s) else (True, -s.round))

    def start_fetch(self, sub: PeerSubmission) -> None:
        """Starts fetching a batch on a worker (who may give it is read here, from the journal;
        their addresses on the worker); `harvest` re-verifies it once it has arrived. Polled
        outside run(), it fetches and verifies right here."""
        nodes = self.source_nodes(sub)
        key = (sub.round, sub.node)
        drawn = self._draws.get((sub.round, sub.node, self._appealed(sub)))
        beacon = self._beacons.get(key) if self.prover and drawn else None
        if self._pool is None:
            done: Future = Future()
            try:
                done.set_result(self._fetch(sub, nodes, self.store, beacon))
            except Exception as exc:
                done.set_exception(exc)
            self._checked_safely(sub, done)
        else:
            future = self._pool.submit(self._fetch, sub, nodes, None, beacon)
            self._inflight[key] = (sub, future)

    def in_flight(self) -> dict[str, int]:
        """Fetches in flight (queued or running) by producer: at most
        `[store].fetches_per_producer` each, so a producer whose batches trickle in every round
        still open holds that many fetch workers, not all of them."""
        held: dict[str, int] = {}
        for sub, _ in list(self._inflight.values()):
            held[sub.node] = held.get(sub.node, 0) + 1
        return held

    def harvest(self) -> None:
        """Journals, on this thread, the verdict on every fetch that has finished."""
        for key, (sub, future) in list(self._inflight.items()):
            if future.done():
                del self._inflight[key]
                self._checked_safely(sub, future)

    def _checked_safely(self, sub: PeerSubmission, future: Future) -> tuple[str, int]:
        """`_checked` of a finished fetch; what it raises on a peer's batch ends as that batch's
        verdict (malformed), journaled, so neither this stage nor a restart stops on it."""
        try:
            return self._checked(sub, *future.result())
        except OURS:
            raise  # our journal, disk or memory: never a verdict on the producer
        except Exception as exc:
            log.exception("round %s: checking %s's batch raised", sub.round, sub.node[:10])
            what = f"checking it raised {type(exc).__name__}: {str(exc)[:200]}"
            return self._reject(sub, what, sub.score, MALFORMED)

    def _fetch(
        self,
        sub: PeerSubmission,
        nodes: list[str],
        store: BlockStore | None,
        beacon: int | None = None,
    ) -> tuple[float, float, object, Proof | None]:
        """Fetches on `store` (None: this worker thread's own client of [store]) from `nodes`,
        whose dialable addresses it reads here, off the intake thread (a peer's metadata may
        name DNS names, each resolved within the peer's budget): (start, end, the batch and its
        source or the StoreError that stopped it, and with a `beacon` (we are drawn to check
        it) the proof of generation's outcome)."""
        started = time.time()
        sources = [(n, self.addresses(n)) for n in nodes]
        if store is None:
            store = getattr(self._local, "store", None)
            if store is None:
                store = self._local.store = open_store(self.store_cfg)
        proof = None
        try:
            result: object = fetch_from_peers(
                store,
                sub.digest,
                sources,
                connect_timeout_s=self.store_cfg.connect_timeout_s,
                chain_id=self.services.chain_id,
                ledger=self.ledger.address,
                round_=sub.round,
                node=sub.node,
            )
        except StoreError as exc:
            result = exc
        except OURS:
            raise
        except Exception as exc:
            log.exception("round %s: fetching %s's batch raised", sub.round, sub.node[:10])
            result = MalformedBatch(f"decoding it raised {type(exc).__name__}: {str(exc)[:200]}")
        ended = time.time()
        verified = None
        if not isinstance(result, StoreError):
            # on this worker, not the intake's thread: a batch whose answers are slow to score
            # holds one of its producer's fetch workers, not every peer's votes
            seed = task_seed(self.services.chain_id, self.ledger.address, sub.round, sub.node)
            check = verify_batch(result[0], self.catalog, seed, claims=(sub.score, sub.signal))
            verified = (check, ended, time.time())
            if beacon is not None and check.valid:  # an invalid batch is rejected unproven
                proof = self._prove(sub, result[0], sources, store, beacon)
        return started, ended, result, proof, verified

    def _prove(self, sub: PeerSubmission, batch, sources, store: BlockStore, beacon: int) -> Proof:
        """Fetches the checkpoints `beacon` opened into the spool (waiting for its room first:
        that wait is ours, not counted in the producer's deadline) and re-draws our share of
        the completions; the files are deleted once checked, whatever the outcome."""

        assert self.prover is not None
        started = time.time()
        wanted = {batch.local_rounds[k].weights for k in opened(beacon, batch)}
        manifests = []

        def check(weights: dict[str, Path] | None):
            return self.prover.check(
                batch,
                beacon=beacon,
                weights=weights,
                generation_seed=lambda k: generation_seed(sub.round, sub.node, k),
            )

        try:
            outcome: object = check(None)  # what needs no weights first: no fetch for a forgery
            if outcome.passed:
                with self._room, self._spooled(wanted) as weights:
                    manifests = self._fetch_openings(store, sources, weights)
                    outcome = check(weights)
        except StoreError as exc:  # WeightsError included: a checkpoint that is not one
            outcome = exc
        except OURS:
            raise  # our disk or memory, not the producer's batch: the stage reports it
        except Exception as exc:
            # ends as that batch's failed proof, never as a stopped stage (every input the
            # checker knows to be wrong is a finding of its own: this is the net under them)
            log.exception("round %s: re-drawing %s's batch raised", sub.round, sub.node[:10])
            outcome = GenerationCheck(
                batch.rollouts,
                0,
                0,
                batch.rollouts,
                f"the re-draw raised {type(exc).__name__}: {str(exc)[:200]}",
                0.0,
            )
        return Proof(started, time.time(), outcome, manifests)

    @contextlib.contextmanager
    def _spooled(self, idents: set[str]) -> Iterator[dict[str, Path]]:
        """A spool file for each checkpoint id, unique to this proof; all deleted afterwards."""
        with contextlib.suppress(OSError):  # a spool that cannot be made fails its first write
            self.spool.mkdir(parents=True, exist_ok=True)
        tag = f"{threading.get_ident():x}"
        files = {ident: self.spool / f"{ident[2:18]}-{tag}.f32" for ident in idents}
        try:
            yield files
        finally:
            for path in files.values():
                path.unlink(missing_ok=True)

    def _fetch_openings(self, store: BlockStore, sources, files: dict[str, Path]) -> list:
        """Fetches each opened checkpoint into its spool file; returns their manifests."""
        assert self.prover is not None
        manifests = []
        for ident, dest in sorted(files.items()):
            manifest, _ = from_sources(
                store,
                sources,
                partial(
                    get_weights,
                    store,
                    ident,
                    dest,
                    parameters=self.prover.parameters,
                    min_rate=self.store_cfg.min_rate_kib_s * 1024,
                    allowance_s=self.store_cfg.timeout_s,
                ),
                connect_timeout_s=self.store_cfg.connect_timeout_s,
                what=f"checkpoint {ident[:12]}…",
            )
            manifests.append(manifest)
        return manifests

    def _checked(
        self,
        sub: PeerSubmission,
        started: float,
        ended: float,
        fetched,
        proof: Proof | None,
        verified: tuple[Verification, float, float] | None,
    ) -> tuple[str, int]:
        """Journals the fetch's spans, then the verdict on the batch it got (the worker
        re-verified it, and re-drew it when we are drawn), or why it could not be fetched."""
        self.journal.span(str(Span.FETCH), started, ended)
        if verified is not None:
            self.journal.span(str(Span.VERIFY), verified[1], verified[2])
        if proof is not None:
            self.journal.span(str(Span.PROVE), proof.started, proof.ended)
        try:
            if isinstance(fetched, StoreError):
                raise fetched
            batch, source = fetched
        except NOT_THE_PRODUCERS_FAULT as exc:
            return self._unavailable(sub, exc, ended - started)
        except StoreError as exc:  # the peer published something that is not a valid batch
            return self._reject(sub, str(exc), sub.score, MALFORMED)
        assert verified is not None  # a fetched batch is verified on its worker
        check = verified[0]
        if not check.valid:
            return self._reject(sub, check.reason or "invalid batch", check.claimed, check.findings)
        if proof is not None:
            outcome = proof.outcome
            if isinstance(outcome, SpoolError):  # our disk, not the producer: again later
                return self._deferred(sub, outcome)
            if isinstance(outcome, WeightsError):
                return self._reject(
                    sub, f"proof of generation: {outcome}", check.claimed, GENERATION
                )
            if isinstance(outcome, StoreError):  # the opened checkpoints could not be had
                if check.agrees:  # the batch could: once in a row too often, a withheld proof
                    took = proof.ended - proof.started
                    return self._unavailable(sub, outcome, took, withheld=check.recomputed)
                proof = None  # its claims are wrong whatever its weights: attest ours
            elif not outcome.passed:
                reason = (
                    f"proof of generation: {outcome.failed} of {outcome.completions} completions "
                    f"failed ({outcome.redrawn} re-drawn): {outcome.reason}"
                )
                return self._reject(sub, reason, check.claimed, GENERATION)
        if proof is not None:
            self._proven.add((sub.round, sub.node))
            for manifest in proof.manifests:  # kept, like the batch, for later checkers
                try:
                    pin_weights(self.store, manifest, sub.round)
                except StoreError as exc:
                    log.warning("round %s: could not pin a checkpoint: %s", sub.round, exc)
        items = [
            item_record(item.question, list(item.completions), c.rewards, Sampled.of(batch, item))
            for item, c in zip(batch.items, check.items, strict=True)
        ]
        reason = (
            None
            if check.agrees
            else f"claimed score {check.claimed} and signal {check.claimed_signal} but our "
            f"verifier gives {check.recomputed} and {check.recomputed_signal}"
            + (
                f"; {check.rewards_differ} item(s) claim rewards that are not their completions'"
                if check.rewards_differ
                else ""
            )
        )
        self._verdict(
            sub,
            Verdict.VERIFIED,
            Event.PEER_VERIFIED,
            f"verified ({len(batch.local_rounds)} local rounds): claimed {check.claimed}, "
            f"recomputed {check.recomputed}; signal {check.claimed_signal} / "
            f"{check.recomputed_signal}",
            reason,
            claimed=check.claimed,
            recomputed=check.recomputed,
            claimed_signal=check.claimed_signal,
            recomputed_signal=check.recomputed_signal,
            findings=check.findings,
            items=items,
            source=source,
            proof=None
            if proof is None
            else {
                "completions": proof.outcome.completions,
                "redrawn": proof.outcome.redrawn,
                "tokens": proof.outcome.tokens,
                "min_margin": proof.outcome.min_margin,
                "logprob_gap": proof.outcome.logprob_gap,
            },
        )
        try:  # so that the batch outlives its producer: peers and auditors find it here
            self.store.pin(digest_to_cid(sub.digest), sub.round)
        except StoreError as exc:
            log.warning("round %s: could not pin %s's batch: %s", sub.round, sub.node[:10], exc)
        return Verdict.VERIFIED, check.recomputed

    def _unavailable(
        self, sub: PeerSubmission, exc: StoreError, took: float, withheld: int | None = None
    ) -> tuple[str, int]:
        """Records a batch that nobody gave us in an attempt that took `took` seconds, or, with
        `withheld` (our recomputed score), a batch we had whose opened checkpoints nobody gave
        us; it is tried again after `retry_delay`. The vote after `unavailable_after` attempts
        in a row is "unavailable" when the last one found no batch, and a dispute (WITHHELD)
        when it found the batch but not its openings."""
        journaled = (
            {}
            if withheld is None
            else {
                "claimed": sub.score,
                "recomputed": withheld,
                "claimed_signal": sub.signal,
                "recomputed_signal": 0,
                "findings": WITHHELD,
            }
        )
        what = "unavailable" if withheld is None else "opened checkpoints unavailable"
        self._verdict(
            sub,
            Verdict.UNAVAILABLE,
            Event.PEER_UNAVAILABLE,
            f"{what}: {exc}",
            str(exc),
            **journaled,
        )
        basis = self.journal.peers.vote_basis(sub.round, sub.node)
        failures = basis["failures"] if basis else 1
        self._retry_at[(sub.round, sub.node)] = time.monotonic() + retry_delay(
            self.params,
            self.sapo.unavailable_after,
            sub.round,
            failures,
            took,
            time.time(),
            appealed=self._appealed(sub),
        )
        return Verdict.UNAVAILABLE, 0

    def _deferred(self, sub: PeerSubmission, exc: SpoolError) -> tuple[str, int]:
        """A check our own disk stopped (the spool full or unwritable): no verdict and no
        failure counted against the producer; tried again in half a round."""
        delay = max(RETRY_MIN_S, self.params.round_length / 2)
        self._retry_at[(sub.round, sub.node)] = time.monotonic() + delay
        self.events.emit(
            Event.STORE_SPOOL,
            f"round {sub.round}: {sub.node[:10]}…'s checkpoints could not be spooled ({exc}); "
            f"checked again in {delay:.0f} s: free disk under {self.spool}",
            logging.WARNING,
            round=sub.round,
            node=sub.node,
        )
        return "deferred", 0

    def source_nodes(self, sub: PeerSubmission) -> list[str]:
        """Who may give a peer's batch: its producer, then the peers who agreed with it (they
        fetched it and pin it). Disputers are not asked: a griefer who disputes unfetched
        batches would add its time-out to every attempt (attack-table run 6)."""
        attesters = [a for a in self.journal.peers.attesters(sub.round, sub.node) if a != self.me]
        return [sub.node, *attesters][:MAX_SOURCES]

    def addresses(self, node: str) -> PeerAddresses:
        """A node's dialable IPFS addresses from its on-chain metadata, read and resolved once a
        round (on a fetch worker; two workers asking at once may both read it)."""
        current = self.current_round()
        cached = self._directory.get(node)
        if cached is None or cached[0] != current:
            try:
                metadata = self.ledger.node_info(node).metadata
            except ChainError as exc:
                return PeerAddresses(None, refused=(("metadata", f"not read: {exc}"),))
            found = peer_addresses(metadata, allow_private=self.store_cfg.allow_private_peers)
            cached = self._directory[node] = (current, found)
            if found.refused:
                log.info("%s's metadata: refused %s", node[:10], found.reason)
        return cached[1]

    def _reject(
        self, sub: PeerSubmission, reason: str, claimed: int, findings: int
    ) -> tuple[str, int]:
        """Journals a peer batch that is available but not valid; we attest 0 for it."""
        self._verdict(
            sub,
            Verdict.BAD,
            Event.PEER_BAD,
            f"bad batch: {reason}",
            reason,
            claimed=claimed,
            recomputed=0,
            claimed_signal=sub.signal,
            recomputed_signal=0,
            findings=findings,
        )
        return Verdict.BAD, 0

    def _verdict(
        self,
        sub: PeerSubmission,
        verdict: str,
        event: Event,
        what: str,
        reason: str | None,
        **journaled,
    ) -> None:
        """Journals a peer batch's verdict and tells the operator."""
        proof = journaled.pop("proof", None)  # in the event only
        self.journal.peers.peer_batch(
            sub.round, sub.node, sub.digest, verdict, reason=reason, **journaled
        )
        if proof is not None:
            journaled["proof"] = proof
        fields = {k: v for k, v in journaled.items() if k != "items"}
        self.events.emit(
            event,
            f"round {sub.round}: {sub.node[:10]}…'s batch {what}",
            logging.INFO if verdict == Verdict.VERIFIED else logging.WARNING,
            round=sub.round,
            node=sub.node,
            reason=reason,
            **fields,
        )
