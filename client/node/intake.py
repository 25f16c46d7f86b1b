"""Peer intake, beside the compute stage: discover peers' submissions on the ledger, fetch their
batches, re-verify them completely, journal what passed (the sampler's pool) and queue the
attestations the publisher sends.

Every poll it reads the `Submitted` and `Attested` events since its saved cursor (a restart goes
on from there, not from the deployment block). Each chain round it fetches at most
`[sapo].max_fetch_per_round` batches, newest round first (the freshest items for training), from
every round still open to attestation (r + W + C), and attests at most `[sapo].attest_budget` of
them: 0 for a batch whose tasks are not the seed's, our own recomputed score otherwise, none for a
batch it could not fetch (retried after a while: unavailability may be ours).

Nothing assumes that the producer and this node share an IPFS daemon: before fetching a batch it
dials the producer's IPFS node at the addresses of its on-chain metadata (checked by
client.store.peers), and the fetch goes over bitswap with a time-out. When the producer does not
give it, the peers who attested the batch are tried in turn (they fetched it and pin it); the
journal records whose node gave it. A fetched, verified batch is pinned for
`[store].retain_rounds`, so it outlives its producer. The time one unreachable peer costs in a
poll is bounded: exchange.MAX_DIALS addresses of [store].connect_timeout_s each, then one fetch of
[store].timeout_s, for the producer and for each of at most MAX_SOURCES - 1 attesters.
"""

from __future__ import annotations

import logging
import random
import threading
import time

from client.chain import ChainError
from client.chain.events import EventReader
from client.node.eventlog import Event, Span, timed
from client.node.peerbook import BAD, UNAVAILABLE, VERIFIED, PeerSubmission
from client.node.rollouts import task_seed, verify_batch
from client.node.services import Services, Stage
from client.store import BlockStore, RolloutBatch, StoreError, fetch_from_peers
from client.store.cid import digest_to_cid
from client.store.exchange import NOT_THE_PRODUCERS_FAULT
from client.store.peers import PeerAddresses, peer_addresses
from client.tasks import Catalog

log = logging.getLogger("sapo.node.intake")

POLL_S = 2.0
MAX_SOURCES = 4  # the producer, then up to three of the peers who attested its batch


class Intake(Stage):
    """Discovers, fetches, verifies and queues attestations; its own thread."""

    def __init__(
        self, services: Services, store: BlockStore, catalog: Catalog, wake: threading.Event
    ):
        super().__init__(services)
        self.store = store
        self.catalog = catalog
        self.wake_publisher = wake
        self.me = services.address.lower()
        self.reader = EventReader(
            self.ledger,
            chunk_blocks=self.cfg.chain.log_chunk_blocks,
            start_block=self.cfg.chain.ledger_deploy_block,
        )
        self._budget_round = -1
        self._fetched = self._attested = 0
        self._retry_at: dict[tuple[int, str], float] = {}  # unavailable batches: when again
        self._directory: dict[str, tuple[int, PeerAddresses]] = {}  # node -> (round read, addrs)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.poll(stop)
            stop.wait(POLL_S)

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
        if current != self._budget_round:
            self._budget_round, self._fetched, self._attested = current, 0, 0
        queued = False
        for sub in self._candidates(current):
            if self._fetched >= self.cfg.sapo.max_fetch_per_round or (stop and stop.is_set()):
                break
            self._fetched += 1
            verdict, score = self.check(sub)
            if (
                verdict != UNAVAILABLE
                and self.params.attest_open(sub.round, self.current_round())
                and self._attested < self.cfg.sapo.attest_budget
            ):
                self._attested += 1
                queued |= self.journal.enqueue(
                    f"attest:{sub.round}:{sub.node}",
                    "attest",
                    sub.round,
                    {"node": sub.node, "score": score},
                )
        if queued:
            self.wake_publisher.set()

    def discover(self) -> None:
        """Journals the peers' `Submitted` events since the saved cursor, and the new cursor."""
        cursor = self.journal.peers.event_cursor()
        start = self.cfg.chain.ledger_deploy_block if cursor is None else cursor
        head = self.reader.head()
        if head < start:
            return
        subs, attesters = [], []
        for e in self.reader.read(["Submitted", "Attested"], from_block=start, to_block=head):
            node = e.args["node"].lower()
            if e.name == "Attested":
                attesters.append((e.args["round"], node, e.args["attester"].lower()))
            elif node != self.me:
                subs.append(
                    PeerSubmission(
                        e.args["round"],
                        node,
                        str(e.args["digest"]).lower(),
                        e.args["rollouts"],
                        e.args["score"],
                    )
                )
        self.journal.peers.discovered(subs, head + 1, attesters)

    def _candidates(self, current: int) -> list[PeerSubmission]:
        """Peers' batches still open to attestation and not settled here, newest round first,
        in an order peers cannot predict (seeded by us and the round)."""
        first = current - self.params.submit_rounds - self.params.challenge_rounds
        now = time.monotonic()
        fresh = [
            s
            for s in self.journal.peers.peer_submissions(max(0, first))
            if self.journal.peers.peer_verdict(s.round, s.node) in (None, UNAVAILABLE)
            and self._retry_at.get((s.round, s.node), 0.0) <= now
        ]
        rng = random.Random(f"{self.me}:{current}")  # noqa: S311 - sampling, not secrets
        rng.shuffle(fresh)
        return sorted(fresh, key=lambda s: -s.round)

    def check(self, sub: PeerSubmission) -> tuple[str, int]:
        """Fetches and re-verifies a peer's batch; journals and returns (verdict, our score)."""
        try:
            with timed(self.journal, Span.FETCH):
                batch, source = self.fetch(sub)
        except NOT_THE_PRODUCERS_FAULT as exc:
            self._retry_at[(sub.round, sub.node)] = time.monotonic() + max(
                10.0, self.params.round_length / 2
            )
            self._verdict(sub, UNAVAILABLE, Event.PEER_UNAVAILABLE, f"unavailable: {exc}", str(exc))
            return UNAVAILABLE, 0
        except StoreError as exc:  # the peer published something that is not a valid batch
            return self._reject(sub, str(exc), sub.score)
        seed = task_seed(self.services.chain_id, self.ledger.address, sub.round, sub.node)
        with timed(self.journal, Span.VERIFY):
            check = verify_batch(batch, self.catalog, seed)
        if not check.valid:
            return self._reject(sub, check.reason or "invalid batch", check.claimed)
        items = [
            {"question": item.question, "completions": list(item.completions), "rewards": c.rewards}
            for item, c in zip(batch.items, check.items, strict=True)
        ]
        reason = (
            None
            if check.agrees
            else f"claimed {check.claimed} but our verifier gives {check.recomputed}"
        )
        self._verdict(
            sub,
            VERIFIED,
            Event.PEER_VERIFIED,
            f"verified ({len(batch.local_rounds)} local rounds): claimed {check.claimed}, "
            f"recomputed {check.recomputed}",
            reason,
            claimed=check.claimed,
            recomputed=check.recomputed,
            items=items,
            source=source,
        )
        try:  # so that the batch outlives its producer: peers and auditors find it here
            self.store.pin(digest_to_cid(sub.digest), sub.round)
        except StoreError as exc:
            log.warning("round %s: could not pin %s's batch: %s", sub.round, sub.node[:10], exc)
        return VERIFIED, check.recomputed

    def fetch(self, sub: PeerSubmission) -> tuple[RolloutBatch, str]:
        """Fetches a peer's batch from its producer's IPFS node, else from the peers who
        attested it; returns it (fully checked) and whose node gave it."""
        attesters = [a for a in self.journal.peers.attesters(sub.round, sub.node) if a != self.me]
        sources = [(n, self.addresses(n)) for n in [sub.node, *attesters][:MAX_SOURCES]]
        return fetch_from_peers(
            self.store,
            sub.digest,
            sources,
            connect_timeout_s=self.cfg.store.connect_timeout_s,
            chain_id=self.services.chain_id,
            ledger=self.ledger.address,
            round_=sub.round,
            node=sub.node,
        )

    def addresses(self, node: str) -> PeerAddresses:
        """A node's dialable IPFS addresses from its on-chain metadata (read once a round)."""
        current = self.current_round()
        cached = self._directory.get(node)
        if cached is None or cached[0] != current:
            try:
                metadata = self.ledger.node_info(node).metadata
            except ChainError as exc:
                return PeerAddresses(None, refused=(("metadata", f"not read: {exc}"),))
            found = peer_addresses(metadata, allow_private=self.cfg.store.allow_private_peers)
            cached = self._directory[node] = (current, found)
            if found.refused:
                log.info("%s's metadata: refused %s", node[:10], found.reason)
        return cached[1]

    def _reject(self, sub: PeerSubmission, reason: str, claimed: int) -> tuple[str, int]:
        """Journals a peer batch that is available but not valid; we attest 0 for it."""
        self._verdict(
            sub, BAD, Event.PEER_BAD, f"bad batch: {reason}", reason, claimed=claimed, recomputed=0
        )
        return BAD, 0

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
        self.journal.peers.peer_batch(
            sub.round, sub.node, sub.digest, verdict, reason=reason, **journaled
        )
        fields = {k: v for k, v in journaled.items() if k != "items"}
        self.events.emit(
            event,
            f"round {sub.round}: {sub.node[:10]}…'s batch {what}",
            logging.INFO if verdict == VERIFIED else logging.WARNING,
            round=sub.round,
            node=sub.node,
            reason=reason,
            **fields,
        )
