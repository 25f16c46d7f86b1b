"""Our own batch on its way out: pinned, then submitted (a digest nobody can fetch earns
nothing), then, once its beacon is known, the checkpoints that beacon opened pinned too, so that
the drawn checkers can re-draw its completions (client.node.proving.opened: the weights of the
local rounds of its OPENED_GROUPS groups, kept as snapshots until then). A batch that can be
fetched but whose openings cannot is disputed (withheld) and slashed.
"""

from __future__ import annotations

import logging

from client.chain.events import EventReader
from client.node.eventlog import Event, Span, timed
from client.node.journal import OutboxEntry
from client.node.journal.outbox import Appeal, Draw, Open, Settle, Submit
from client.node.journal.states import RoundPhase
from client.node.proving import Snapshots, opened
from client.node.publishing.handler import Handler
from client.node.services import Services
from client.store import BlockStore
from client.store.batch import BatchLimits, decode_batch
from client.store.weights import put_weights


class OwnBatch(Handler):
    """Sends `Pin`, `Submit` and `Open` for our batches."""

    def __init__(
        self,
        services: Services,
        reader: EventReader,
        store: BlockStore,
        snapshots: Snapshots,
        limits: BatchLimits,
    ):
        super().__init__(services, reader)
        self.store, self.snapshots, self.limits = store, snapshots, limits

    def pin(self, entry: OutboxEntry) -> None:
        """Pins the sealed batch (a StoreError leaves it pending: the store is down)."""
        record = self.journal.round(entry.round)
        if record is None or record.batch is None:
            self.journal.dropped(entry.key, "no batch recorded for the round")
            return
        with timed(self.journal, Span.PIN):
            cid = self.store.put(record.batch, entry.round)
        self.health.store(True)
        self.journal.done(entry.key)
        self.journal.advance(entry.round, RoundPhase.PINNED, cid=cid)
        self.events.emit(
            Event.ROUND_PINNED, f"round {entry.round}: pinned {cid}", round=entry.round, cid=cid
        )

    def submit(self, entry: OutboxEntry) -> None:
        """Submits the batch's digest and claim, unless it is on chain already (sent before a
        crash, or by an attempt that timed out) or its window closed."""
        message = entry.message
        assert isinstance(message, Submit)
        round_ = message.round
        on_chain = self.ledger.submission(round_, self.address)
        self.health.chain(True)
        if on_chain.rollouts:
            if on_chain.digest.lower() == message.digest.lower():
                self._submitted(entry, None)
            else:
                self.give_up(entry, f"another batch ({on_chain.digest}) is on chain")
            return
        if not self.params.submit_open(round_, self.current_round()):
            self.give_up(entry, "the round's submission window closed before it could go")
            return
        result = self.ledger.submit(
            round_, message.digest, message.rollouts, message.score, message.signal
        )
        self._submitted(entry, result.tx_hash)

    def _submitted(self, entry: OutboxEntry, tx_hash: str | None) -> None:
        """A submission on chain: its openings, settlement and a possible appeal are queued
        before it is marked done (a crash between the two queues them once more, as no-ops)."""
        round_ = entry.round
        for message in (Open(round=round_), Settle(round=round_), Appeal(round=round_)):
            self.journal.enqueue(message)
        self.journal.done(entry.key, tx_hash)
        self.journal.advance(round_, RoundPhase.CONFIRMED, tx_hash=tx_hash)
        record = self.journal.round(round_)
        self.events.emit(
            Event.ROUND_SUBMITTED,
            f"round {round_}: submission confirmed"
            + (f" in {tx_hash}" if tx_hash else " (found on chain)"),
            round=round_,
            digest=record.digest if record else None,
            cid=record.cid if record else None,
            local_rounds=record.local_rounds if record else None,
            tx_hash=tx_hash,
        )

    def open(self, entry: OutboxEntry) -> None:
        """Pins the checkpoints our submission's beacon opened, once the beacon is known; then
        the round's other snapshots go. (Waits silently for the beacon: one block.) The beacon
        is queued for storing (`Draw`) in case no vote stores it."""
        round_ = entry.round
        if not self.params.attest_open(round_, self.current_round()):
            self.journal.dropped(entry.key, "the challenge window closed before the beacon")
            self.snapshots.drop(round_)
            return
        beacon = self.ledger.beacon(round_, self.address)
        self.health.chain(True)
        if not beacon.ready:
            return
        if not beacon.drawn:  # stored by its first vote, else by us before it can lapse
            self.journal.enqueue(Draw(round=round_, node=self.address, block=beacon.block))
        record = self.journal.round(round_)
        if record is None or record.batch is None:
            self.journal.dropped(entry.key, "no batch recorded for the round")
            return
        batch = decode_batch(record.batch, self.limits)
        ks = opened(beacon.beacon, batch)
        # local rounds with no GRPO step between them share a checkpoint: pinned once, named by
        # its first opened local round
        checkpoints = {batch.local_rounds[k].weights: k for k in reversed(ks)}
        with timed(self.journal, Span.PIN):
            for ident, k in checkpoints.items():
                data = self.snapshots.read(round_, ident)
                if data is None:
                    reason = f"the snapshot of local round {k} ({ident[:12]}…) is gone"
                    self.journal.dropped(entry.key, reason)
                    self.events.emit(
                        Event.SUBMIT_DROPPED,
                        f"round {round_}: cannot open local round {k}: {reason}; checkers will "
                        "find it unavailable",
                        logging.WARNING,
                        round=round_,
                        reason=reason,
                    )
                    return
                put_weights(self.store, data, round_)
        self.health.store(True)
        self.journal.done(entry.key)
        self.snapshots.drop(round_)
        self.events.emit(
            Event.WEIGHTS_OPENED,
            f"round {round_}: opened local round(s) {ks} (their checkpoints pinned for the "
            "checkers)",
            round=round_,
            opened=ks,
            weights=[batch.local_rounds[k].weights for k in ks],
        )
