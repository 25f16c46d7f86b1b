"""Appeals: a verdict a small committee got wrong goes to a larger one, drawn afresh.

Our batch: once the first committee's window has closed, a batch it did not credit is appealed
if our own re-check (the checkers' verification run on the bytes we pinned) agrees with what we
claimed: a verdict a large holder won by the luck of a small draw, or that checkers who never
voted left uncredited. A batch whose re-check disagrees is not appealed (a lost appeal slashes
twice). A peer's batch: when the first verdict judges our vote lost (we disputed a batch it
credited, or agreed with one more seats disputed), we appeal it ourselves, since our vote is what
our own check found (a bait batch whose producer's allies dispute it in the last block, or a
forgery its allies credited).
"""

from __future__ import annotations

import logging

from client.chain.errors import AlreadyAppealed
from client.chain.events import EventReader
from client.chain.models import VoteSide
from client.node.eventlog import Event
from client.node.journal import OutboxEntry
from client.node.journal.outbox import Draw, Settle, VoteAppeal
from client.node.publishing.handler import Handler
from client.node.rollouts import task_seed, verify_batch
from client.node.services import Services
from client.store.batch import BatchLimits, decode_batch
from client.tasks import Catalog


class Appeals(Handler):
    """Sends `Appeal` (ours) and `VoteAppeal` (a verdict against our vote)."""

    def __init__(
        self, services: Services, reader: EventReader, catalog: Catalog, limits: BatchLimits
    ):
        super().__init__(services, reader)
        self.catalog, self.limits = catalog, limits

    def appeal(self, entry: OutboxEntry) -> None:
        """Appeals our batch's verdict once the first committee's window has closed, if it did
        not credit the batch and our re-check agrees with our claim; then its beacon is stored if
        no appellate vote has half a window on. Done without an appeal when the batch is credited
        (the usual case) or our re-check disagrees."""
        round_ = entry.round
        sub = self.ledger.submission(round_, self.address)
        self.health.chain(True)
        if not sub.exists or sub.credited:
            self.journal.done(entry.key)
            return
        appealed, result = sub.appealed, None
        if not appealed:
            if not self.params.appeal_open(round_, self.current_round()):
                self.give_up(entry, "the appeal window closed before the appeal could go")
                return
            agrees, why = self.recheck(round_)
            if not agrees:
                self.journal.dropped(entry.key, f"not appealed: {why}")
                self.events.emit(
                    Event.ROUND_APPEALED,
                    f"round {round_}: our batch was not credited, and our re-check {why}: "
                    "not appealed",
                    logging.WARNING,
                    round=round_,
                    appealed=False,
                    reason=why,
                )
                return
            try:
                result = self.ledger.appeal(round_)
            except AlreadyAppealed:  # our earlier attempt went through
                result = None
            sub = self.ledger.submission(round_, self.address)
            self.events.emit(
                Event.ROUND_APPEALED,
                f"round {round_}: our batch was not credited ({sub.agree_seats} agreeing seats, "
                f"{sub.dispute_seats} disputing, {sub.unavailable_seats} unavailable; "
                f"{sub.agrees} agreeing checkers); our re-check agrees with our claim: appealed "
                "to a larger committee",
                logging.WARNING,
                round=round_,
                appealed=True,
                agree_seats=sub.agree_seats,
                dispute_seats=sub.dispute_seats,
                unavailable_seats=sub.unavailable_seats,
                tx_hash=result.tx_hash if result else None,
            )
        # queued before the appeal is marked done: a crash between the two appeals nothing
        # twice (the ledger says it is appealed) and still queues the draw
        self.journal.enqueue(
            Draw(round=round_, node=self.address, block=sub.appeal_block + 1, appeal=True)
        )
        self.journal.done(entry.key, result.tx_hash if not appealed and result else None)

    def vote_appeal(self, entry: OutboxEntry) -> None:
        """Appeals the first committee's verdict on a peer's batch we voted on, once that
        committee's window has closed, when the verdict judges our vote lost. Done without an
        appeal when our vote stands, or when the batch was appealed already (its appeal's
        committee then judges every vote)."""
        message = entry.message
        assert isinstance(message, VoteAppeal)
        round_, node = message.round, message.node
        sub = self.ledger.submission(round_, node)
        self.health.chain(True)
        if not sub.exists or sub.appealed:
            self.journal.done(entry.key)
            return
        first, _, _ = self.ledger.vote_of(self.address, round_, node)
        won = sub.wins(self.params.quorum)  # the first committee's tally: `sub`'s own fields
        loses = (
            first == VoteSide.DISPUTED
            if won
            else first == VoteSide.AGREED and sub.dispute_seats > sub.agree_seats
        )
        if not loses:
            self.journal.done(entry.key)
            return
        if not self.params.appeal_open(round_, self.current_round()):
            self.give_up(entry, "the appeal window closed before our appeal could go")
            return
        try:
            result = self.ledger.appeal_vote(round_, node)
        except AlreadyAppealed:  # the producer, another voter or our earlier attempt
            result = None
        appealed = self.ledger.submission(round_, node)
        if appealed.appealed:  # its committee's beacon stored if no appellate vote does
            self.journal.enqueue(
                Draw(round=round_, node=node, block=appealed.appeal_block + 1, appeal=True)
            )
            # settled by us once final, and the votes that lost against the appeal's verdict
            # judged (the bait set's disputes): its producer would not do it
            self.journal.enqueue(Settle(round=round_, node=node))
        side = "disputed it, and it was credited" if won else "agreed, and it was disputed"
        self.events.emit(
            Event.ROUND_APPEALED,
            f"round {round_}: we {side} ({sub.agree_seats} agreeing seats, {sub.dispute_seats} "
            f"disputing): {node[:10]}…'s verdict appealed to a larger committee",
            logging.WARNING,
            round=round_,
            node=node,
            appealed=result is not None,
            tx_hash=result.tx_hash if result else None,
        )
        self.journal.done(entry.key, result.tx_hash if result else None)

    def recheck(self, round_: int) -> tuple[bool, str]:
        """Runs the checkers' verification on our own batch of `round_`, as pinned: whether
        it agrees with our claim (score within the ledger's tolerance, the signal exactly),
        and in words what it found."""
        record = self.journal.round(round_)
        if record is None or record.batch is None:
            return False, "found no batch of ours for the round in the journal"
        batch = decode_batch(record.batch, self.limits)
        seed = task_seed(self.services.chain_id, self.ledger.address, round_, self.address)
        check = verify_batch(batch, self.catalog, seed)
        if not check.valid:
            return False, f"finds the batch invalid ({check.reason})"
        if not check.agrees:
            return False, (
                f"gives score {check.recomputed} and signal {check.recomputed_signal} where we "
                f"claimed {check.claimed} and {check.claimed_signal}"
            )
        return True, "agrees with our claim"
