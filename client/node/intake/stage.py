"""The intake stage's thread: each poll it discovers, picks which peer batches to fetch, journals
the verdicts of finished fetches, and queues the votes the publisher sends.

It fetches from every round still open to a vote: first the batches whose beacons drew this
node to check them (its duty: the ledger credits a batch only once `quorum` drawn checkers
agree), oldest round first (the nearest deadline), at most `[sapo].attest_budget` new ones a
chain round; then, for training, `[sapo].max_fetch_per_round` others, newest round first (the
freshest items). Up to FETCH_WORKERS fetches run at once (client.node.intake.fetching), each on a
store client of its own, so a batch nobody can give (a free claim: a digest of nothing) costs its
time-out beside the others, not before them; no producer holds more than
`[store].fetches_per_producer` of them. A fetched, verified batch is pinned for
`[store].retain_rounds`, so it outlives its producer.
"""

from __future__ import annotations

import logging
import random
import shutil
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from client.chain import ChainError
from client.chain.book import RoundBook
from client.chain.events import EventReader
from client.config.models import SapoSection, StoreSection
from client.credit import MALFORMED
from client.node.eventlog import Span, timed
from client.node.intake.discovery import discover, window_start
from client.node.intake.fetching import OURS, Fetcher
from client.node.intake.recording import Recorder
from client.node.intake.rootlane import RootIntake
from client.node.intake.seats import Seats
from client.node.intake.verdict import (
    Fetched,
    Rejected,
    judge,
)
from client.node.intake.voting import ballot, disputes, key_of
from client.node.intake.window import Window
from client.node.journal.outbox import Message, RootVote, Settle
from client.node.journal.peers import PeerSubmission
from client.node.journal.states import Verdict
from client.node.proving import Prover
from client.node.services import Services, Stage
from client.store import BlockStore
from client.tasks import Catalog

log = logging.getLogger("sapo.node.intake")

POLL_S = 2.0
FETCH_WORKERS = 16  # fetches in flight at once (I/O: most of their time is waiting on time-outs)


class Intake(Stage):
    """Discovers, fetches, verifies and queues votes; its own thread."""

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
        book: RoundBook | None = None,
    ):
        """`reader`: the ledger's events from the deployment block, in the config's chunks;
        `spool`: the folder peers' opened checkpoints are fetched into (DataDir.spool);
        `wake`: set when a vote is queued (the publisher's); `book`: the root lane's round book
        (`[chain].round_book_address`), whose posted rounds' batches are checked too
        (client.node.intake.rootlane; None: the ledger's only)."""
        super().__init__(services)
        self.sapo, self.store_cfg = sapo, store_cfg
        self.spool = Path(spool)
        self.store = store
        self.prover = prover
        self.wake_publisher = wake
        self.me = services.address.lower()
        self.reader = reader
        self.fetcher = Fetcher(
            services, catalog, prover, store_cfg=store_cfg, spool=self.spool, reader=reader
        )
        self.seats = Seats(services.ledger, reader, services.journal, self.me, self.params.checkers)
        self.window = Window(services.journal.peers)
        self.root = (
            RootIntake(
                services,
                book,
                store,
                self.window,
                allow_private_peers=store_cfg.allow_private_peers,
            )
            if book is not None
            else None
        )
        self.seats.root = self.root
        self._budget_round = -1
        self._fetched = self._duties = self._attested = 0
        self._pool: ThreadPoolExecutor | None = None  # while run() runs
        self._inflight: dict[tuple[int, str], tuple[PeerSubmission, Future]] = {}
        self.recorder = Recorder(services, store, sapo, self.window, self.seats, str(self.spool))

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

    def _first_block(self) -> int:
        return window_start(
            self.ledger,
            self.params,
            self.current_round(),
            self.store_cfg.retain_rounds,
            self.reader.start_block,
        )

    def poll(self, stop: threading.Event | None = None) -> None:
        """One pass: discover, then check what the round's budget allows."""
        try:
            with timed(self.journal, Span.DISCOVER):
                found = discover(self.reader, self.journal, self.me, self._first_block)
                if self.root is not None:
                    self.root.on_ledger(found)
            self.health.chain(True)
        except ChainError as exc:
            self.health.chain(False, str(exc))
            return
        current = self.current_round()
        first = self.params.first_voted(current)
        self.window.refresh(first)
        if self.root is not None:
            with timed(self.journal, Span.DISCOVER):
                self.root.poll(current)
        self.seats.new_poll(self.journal.peers.appealed(first))
        if current != self._budget_round:
            self._budget_round, self._fetched, self._duties, self._attested = current, 0, 0, 0
            self.seats.forget_before(first)
            self.recorder.forget_before(first)
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
            if self.seats.drawn(sub):
                # taken up already: not again
                retry = (sub.round, sub.node) in self.recorder.retry_at
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

    # ---------------------------------------------------------------------------- voting

    def _open(self, sub: PeerSubmission, current: int) -> bool:
        """Whether the committee voting now on `sub` still votes in `current`."""
        return self.params.vote_open(sub.round, current, self.seats.appealed(sub))

    def vote(self, current: int) -> bool:
        """Queues this node's votes as a drawn checker on the batches it has a verdict for
        (client.node.intake.voting.ballot); returns whether anything was queued."""
        queued = False
        for sub in self.window.submissions():
            if self._attested >= self.sapo.attest_budget:
                break
            basis = self.window.basis(sub)
            if basis is None or self._voted(sub):
                continue
            if self._unproven(sub, basis.verdict):
                continue  # fetched for learning before we were drawn: its proof comes first
            if not self._open(sub, self.current_round()):
                continue
            vote = ballot(
                sub,
                basis,
                appealed=self.seats.appealed(sub),
                unavailable_after=self.sapo.unavailable_after,
            )
            if vote is None or not self.seats.drawn(sub):
                continue
            message: Message = vote
            if self._in_root(sub):
                message = self.root.vote(sub, vote)  # type: ignore[union-attr]
            self._attested += 1
            queued |= self.journal.enqueue(message)
            if disputes(vote, sub) and not isinstance(message, RootVote):
                self.journal.enqueue(Settle(round=sub.round, node=sub.node))
        return queued

    def _verdict_of(self, sub: PeerSubmission) -> str | None:
        basis = self.window.basis(sub)
        return None if basis is None else basis.verdict

    def _voted(self, sub: PeerSubmission) -> bool:
        """Whether our vote on `sub` is queued or sent: a batch voted unavailable is not fetched
        again (a vote is final on chain, and a retry's time-outs would hold up the fetches of
        batches still owed a vote). A root lane batch we agreed with off chain is owed our vote
        on the ledger too once a checker escalates it (saying what we signed)."""
        if self.journal.outbox(key_of(sub, self.seats.appealed(sub))) is not None:
            return True
        if self.root is None or self.root.entry(sub) is None:
            return False
        signed = RootVote.key_of(sub.round, sub.node)
        return self.journal.outbox(signed) is not None and not self.root.escalated(sub)

    def _in_root(self, sub: PeerSubmission) -> bool:
        """Whether `sub` is a root lane batch voted on off chain (not escalated to the
        ledger)."""
        return (
            self.root is not None
            and not self.seats.appealed(sub)
            and self.root.entry(sub) is not None
            and not self.root.escalated(sub)
        )

    def _unproven(self, sub: PeerSubmission, verdict: str | None) -> bool:
        """Whether we are drawn to check `sub` and verified it (`verdict`, journaled), but have
        not checked its generation yet (it was fetched for learning before its beacon was
        known)."""
        return (
            verdict == Verdict.VERIFIED
            and self.prover is not None
            and (sub.round, sub.node) not in self.recorder.proven
            and self.seats.drawn(sub)
        )

    # -------------------------------------------------------------------------- fetching

    def _candidates(self, current: int) -> list[PeerSubmission]:
        """Peers' batches still open to a vote and not settled here: those we are drawn to
        check first, oldest round first (their votes close first), then the others newest round
        first; within a round in an order peers cannot predict (seeded by us and the round)."""
        now = time.monotonic()
        subs = self.window.submissions()
        self.seats.prepare(subs, self.window.blocks)
        fresh = [
            s
            for s in subs
            if self._open(s, current)
            and (
                (verdict := self._verdict_of(s)) in (None, Verdict.UNAVAILABLE)
                or self._unproven(s, verdict)
            )
            and self.recorder.retry_at.get((s.round, s.node), 0.0) <= now
            and (s.round, s.node) not in self._inflight
            and not (verdict == Verdict.UNAVAILABLE and self._voted(s))
        ]
        rng = random.Random(f"{self.me}:{current}")  # noqa: S311 - sampling, not secrets
        rng.shuffle(fresh)
        drawn = self.seats.drawn
        return sorted(fresh, key=lambda s: (False, s.round) if drawn(s) else (True, -s.round))

    def start_fetch(self, sub: PeerSubmission) -> None:
        """Starts fetching a batch on a worker (who may give it, and where they are, is read
        there); `harvest` journals its verdict once it has arrived. Polled outside run(), it
        fetches and verifies right here."""
        block = self.window.blocks.get((sub.round, sub.node))
        beacon = self.seats.beacon(sub) if self.prover and self.seats.known(sub) else None
        if self._pool is None:
            done: Future = Future()
            try:
                done.set_result(self.fetcher.fetch(sub, block, self.store, beacon))
            except Exception as exc:
                done.set_exception(exc)
            self._checked_safely(sub, done)
        else:
            future = self._pool.submit(self.fetcher.fetch, sub, block, None, beacon)
            self._inflight[(sub.round, sub.node)] = (sub, future)

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

    def _checked_safely(self, sub: PeerSubmission, future: Future) -> None:
        """Journals a finished fetch's spans and verdict; what that raises on a peer's batch
        ends as that batch's verdict (malformed), journaled, so neither this stage nor a restart
        stops on it."""
        try:
            fetched: Fetched = future.result()
            self.journal.span(str(Span.FETCH), fetched.started, fetched.ended)
            if fetched.verified is not None:
                self.journal.span(str(Span.VERIFY), fetched.verified[1], fetched.verified[2])
            if fetched.proof is not None:
                self.journal.span(str(Span.PROVE), fetched.proof.started, fetched.proof.ended)
            self.recorder.record(sub, judge(sub, fetched))
        except OURS:
            raise  # our journal, disk or memory: never a verdict on the producer
        except Exception as exc:
            log.exception("round %s: checking %s's batch raised", sub.round, sub.node[:10])
            what = f"checking it raised {type(exc).__name__}: {str(exc)[:200]}"
            self.recorder.record(sub, Rejected(what, sub.score, MALFORMED))
