"""The publisher's upkeep between sends: the node's on-chain metadata kept current (its IPFS peer
id and swarm addresses, which peers dial to fetch its batches: `setMetadata` when they changed,
e.g. after the daemon moved), and what `[store].retain_rounds` no longer keeps unpinned and in the
journal."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from client.chain import ChainError
from client.chain.book import Windows
from client.config.models import StoreSection
from client.node.eventlog import Event
from client.node.proving import Snapshots
from client.node.services import Services, Stage
from client.store import BlockStore, IpfsStore, StoreError

log = logging.getLogger("sapo.node.publishing")


class Upkeep(Stage):
    """Metadata and retention, at most once a chain round each."""

    def __init__(
        self,
        services: Services,
        store: BlockStore,
        snapshots: Snapshots,
        store_cfg: StoreSection,
        metadata: Callable[[dict], str],
    ):
        super().__init__(services)
        self.store, self.snapshots, self.store_cfg, self.metadata = (
            store,
            snapshots,
            store_cfg,
            metadata,
        )
        self._metadata_round = -1
        self._pruned_round = -1

    def keep_metadata(self) -> None:
        """Once a chain round: writes our metadata on chain when what peers need to reach our
        IPFS node changed. A daemon that cannot be asked leaves the metadata as it is (its
        addresses may still be right); a chain error retries next round."""
        current = self.current_round()
        if current == self._metadata_round or not isinstance(self.store, IpfsStore):
            return
        self._metadata_round = current
        try:
            peer = self.store.peer()
        except StoreError:
            return
        wanted = self.metadata(peer)
        try:
            if self.ledger.node_info(self.services.address).metadata == wanted:
                return
            result = self.ledger.set_metadata(wanted)
        except ChainError as exc:
            log.warning("could not update the node's metadata: %s", exc)
            return
        self.events.emit(
            Event.METADATA_SET,
            f"metadata updated on chain (IPFS addresses changed) in {result.tx_hash}",
            metadata=wanted,
            tx_hash=result.tx_hash,
        )

    def prune_journal(self, current: int) -> None:
        """Forgets the journal's rows of peers' batches of rounds that no window can judge any
        more and that `[store].retain_rounds` no longer keeps (their per-peer counts stay, in
        peer_totals): at 10,000 peers those rows are ~20 MiB a round; and the root lane's
        receipts of rounds past their challenge end. `retain` calls it once a chain round."""
        # a root lane's receipt proves a lie until its round's challenge end (RoundBook)
        windows = Windows.of(self.params)
        proven_until = current - windows.challenge_end(0)  # rounds whose end has passed
        if proven_until > 0 and self.journal.prune_receipts(proven_until):
            log.info("journal: forgot the root lane's receipts of rounds before %d", proven_until)
        horizon = self.params.first_kept(current, self.store_cfg.retain_rounds)
        if horizon <= 0:
            return
        pruned = self.journal.peers.prune(horizon)
        if pruned:
            log.info("journal: forgot %d peer rows of rounds before %d", pruned, horizon)

    def retain(self) -> None:
        """Unpins what is older than `[store].retain_rounds` (peers had their windows to fetch
        it: open_node checks retain_rounds against them), the snapshots of rounds whose window
        closed, old time spans and (once a chain round, whatever the store says) the journal's
        old peer rows."""
        current = self.current_round()
        if current != self._pruned_round:
            self._pruned_round = current
            self.prune_journal(current)
        try:
            dropped = self.store.gc(current, self.store_cfg.retain_rounds)
        except StoreError as exc:
            self.health.store(False, str(exc))
            return
        if dropped:
            self.events.emit(
                Event.STORE_UNPINNED,
                f"unpinned {len(dropped)} batch(es) older than round "
                f"{current - self.store_cfg.retain_rounds}",
                round=current,
                cids=dropped,
            )
        # snapshots of rounds whose window closed (an opened or dropped round's went already)
        self.snapshots.drop_before(self.params.first_open(current))
        with contextlib.suppress(Exception):  # bookkeeping only
            keep_s = max(self.store_cfg.retain_rounds, 100) * self.params.round_length
            self.journal.prune_spans(self.services.clock.now() - keep_s)
