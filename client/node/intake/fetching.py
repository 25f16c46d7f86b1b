"""Fetching a peer's batch, on a fetch worker: its bytes from whoever has them, their
re-verification, and, for a drawn checker, the proof of generation.

Nothing assumes that the producer and this node share an IPFS daemon: before fetching a batch
the worker dials the producer's IPFS node at the addresses of its on-chain metadata (checked by
client.store.peers), and the fetch goes over bitswap with a time-out. When the producer does not
give it, up to MAX_SOURCES - 1 peers who agreed with the batch are dialled and asked at once (they
fetched it and pin it). The time a batch nobody has costs a worker is bounded: exchange.MAX_DIALS
addresses of [store].connect_timeout_s per source it cannot dial, and two fetches of
[store].timeout_s (the producer's, the attesters'). The worker re-verifies what it fetched, so a
batch whose answers are slow to score holds one of its producer's workers, not the intake. A
drawn checker's worker then fetches the checkpoints the beacon opened into the spool (from the
producer, or from attesters who fetched them) and re-draws the opened groups on its own copy of
the model (client.node.proving).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from client.chain import ChainError
from client.chain.events import EventReader
from client.chain.ledger_events import Attested
from client.config.models import StoreSection
from client.node.intake.verdict import Fetched, Proof
from client.node.journal.peers import PeerSubmission
from client.node.proving import OPEN_ROUNDS, GenerationCheck, Prover, opened
from client.node.rollouts import generation_seed, task_seed, verify_batch
from client.node.services import Services, Stage
from client.store import BlockStore, StoreError, fetch_from_peers, open_store
from client.store.errors import MalformedBatch
from client.store.exchange import Source, Sources, from_sources
from client.store.peers import PeerAddresses, peer_addresses
from client.store.weights import get_weights
from client.tasks import Catalog

log = logging.getLogger("sapo.node.intake")

MAX_SOURCES = 4  # the producer, then up to three of the peers who agreed with its batch
# failures of this node's own parts, which no peer's bytes cause: they stop the stage as before,
# never turning into a verdict on the producer (a full disk is not a malformed batch)
OURS = (OSError, MemoryError, sqlite3.Error, ChainError)


class Fetcher(Stage):
    """Fetches, re-verifies and proves peers' batches; its methods run on fetch workers."""

    def __init__(
        self,
        services: Services,
        catalog: Catalog,
        prover: Prover | None,
        *,
        store_cfg: StoreSection,
        spool: Path,
        reader: EventReader,
    ):
        super().__init__(services)
        self.catalog, self.prover, self.store_cfg, self.spool = catalog, prover, store_cfg, spool
        self.reader = reader
        self.me = services.address.lower()
        # proofs whose checkpoints fit [store].spool_mib at once (one always may run)
        need = OPEN_ROUNDS * 4 * (prover.parameters if prover else 1)
        self._room = threading.BoundedSemaphore(max(1, (store_cfg.spool_mib << 20) // need))
        self._local = threading.local()  # each fetch worker's own store client
        self._directory: dict[str, tuple[int, PeerAddresses]] = {}  # node -> (round read, addrs)

    def sources(self, sub: PeerSubmission, block: int | None) -> Sources:
        """Who may give a peer's batch: its producer, then (read only if the producer did not
        give it) up to MAX_SOURCES - 1 peers who agreed with it on the ledger since its block
        (they fetched it and pin it). Disputers are not asked: a griefer who disputes unfetched
        batches would add its time-out to every attempt. The agreements are read per batch
        (one topic-filtered log query), not the swarm's every vote each round."""

        def agreed() -> list[Source]:
            try:
                votes = self.reader.events(
                    Attested,
                    from_block=self.reader.start_block if block is None else block,
                    round=sub.round,
                    node=sub.node,
                )
                voters = [v.attester for v in votes if v.agrees and v.attester != self.me]
            except ChainError as exc:
                log.info("round %s: %s's agreements not read: %s", sub.round, sub.node[:10], exc)
                return []
            return [(n, self.addresses(n)) for n in dict.fromkeys(voters)][: MAX_SOURCES - 1]

        return Sources([(sub.node, self.addresses(sub.node))], agreed)

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

    def fetch(
        self,
        sub: PeerSubmission,
        block: int | None,
        store: BlockStore | None,
        beacon: int | None = None,
    ) -> Fetched:
        """Fetches on `store` (None: this worker thread's own client of [store]) from its
        `sources` (the submission was made at `block`, where known), whose dialable addresses
        it reads here, off the intake thread (a peer's metadata may name DNS names, each
        resolved within the peer's budget); re-verifies what it got, and with a `beacon` (we
        are drawn to check it) proves its generation."""
        started = time.time()
        sources = self.sources(sub, block)
        if store is None:
            store = getattr(self._local, "store", None)
            if store is None:
                store = self._local.store = open_store(self.store_cfg)
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
        if isinstance(result, StoreError):
            return Fetched(started, ended, result)
        seed = task_seed(self.services.chain_id, self.ledger.address, sub.round, sub.node)
        check = verify_batch(result[0], self.catalog, seed, claims=(sub.score, sub.signal))
        verified = (check, ended, time.time())
        proof = None
        if beacon is not None and check.valid:  # an invalid batch is rejected unproven
            proof = self._prove(sub, result[0], sources, store, beacon)
        return Fetched(started, ended, result, proof, verified)

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
