"""Our votes as a drawn checker, and the beacons they rest on.

A vote is what the intake concluded (client.node.intake.voting queues it): an attestation of the
score and learning signal we recomputed, or an unavailable report when nobody gave us the batch.
It is checked once more before it goes: not cast already (a crash after sending), and its
committee's window still open. An attestation queues, before it is marked done, the appeal of
the first committee's verdict should that verdict judge our vote lost (client.node.publishing.
appeals). A beacon nobody stored DRAW_AFTER_BLOCKS after its block is stored by the producer or a
drawn checker (`drawBeacon`): a beacon nobody stores within the EVM's 256-block window lapses,
and its batch can no longer be checked.
"""

from __future__ import annotations

from client.chain.errors import BeaconAlreadyDrawn
from client.credit import describe_findings
from client.node.eventlog import Event
from client.node.journal import OutboxEntry
from client.node.journal.outbox import Attest, Draw, Unavailable, VoteAppeal
from client.node.publishing.handler import Handler
from client.units import SCORE_SCALE

# Half of the EVM's 256-block window: time enough for the transaction, and most batches have had
# their first vote, which stores the beacon, long before.
DRAW_AFTER_BLOCKS = 128


class Votes(Handler):
    """Sends `Attest`, `Unavailable` and `Draw`."""

    def vote(self, entry: OutboxEntry) -> None:
        """Casts a drawn checker's vote: an attestation of what we recomputed, or that we could
        not fetch the batch from anyone."""
        message = entry.message
        assert isinstance(message, Attest | Unavailable)
        round_, peer = message.round, message.node
        if self.ledger.has_attested(self.address, round_, peer):
            self.journal.done(entry.key)
            return
        if not self.params.vote_open(round_, self.current_round(), message.appeal):
            self.give_up(entry, "the challenge window closed")
            return
        on_appeal = " on its appeal" if message.appeal else ""
        if isinstance(message, Unavailable):
            result = self.ledger.report_unavailable(round_, peer)
            what = "reported unavailable (fetched from nobody)" + on_appeal
            event, fields = Event.PEER_REPORTED_UNAVAILABLE, {}
        else:
            result = self.ledger.attest(
                round_, peer, message.score, message.signal, message.findings
            )
            found = describe_findings(message.findings)
            what = (
                f"attested score {message.score / SCORE_SCALE:.4f}, "
                f"signal {message.signal / SCORE_SCALE:.2f}" + (f" ({found})" if found else "")
            ) + on_appeal
            event = Event.PEER_ATTESTED
            fields = {
                "score": message.score,
                "signal": message.signal,
                "findings": message.findings,
            }
            if not message.appeal:
                # queued before the vote is marked done: if the first committee's verdict goes
                # against this vote (a bait batch's allies outseat us, or a forgery is
                # credited), it is appealed once that committee's window closes
                self.journal.enqueue(VoteAppeal(round=round_, node=peer))
        self.health.chain(True)
        self.journal.done(entry.key, result.tx_hash)
        self.events.emit(
            event,
            f"round {round_}: {peer[:10]}… {what}",
            round=round_,
            node=peer,
            score=fields.get("score"),
            signal=fields.get("signal"),
            findings=fields.get("findings"),
            tx_hash=result.tx_hash,
        )

    def draw(self, entry: OutboxEntry) -> None:
        """Stores a submission's beacon (ours, or one we are drawn to check) if nobody has
        half a window after its block: the first vote usually stores it, and a beacon nobody
        stores within 256 blocks lapses (the batch can no longer be checked: for our own, no
        credit; for one we check, no vote). Waits while it is early; done once it is stored."""
        message = entry.message
        assert isinstance(message, Draw)
        node = message.node
        beacon = (
            self.ledger.appeal_of(message.round, node) if message.appeal else None
        ) or self.ledger.beacon(message.round, node)
        head = self.ledger.head()
        self.health.chain(True)
        if beacon.drawn:  # the checkers' votes usually stored it first
            self.journal.done(entry.key)
            return
        if beacon.lapsed(head):
            self.give_up(entry, "nobody drew the beacon in 256 blocks: it lapsed")
            return
        try:
            result = self.ledger.draw_beacon(message.round, node)
        except BeaconAlreadyDrawn:  # another node's transaction came first
            self.journal.done(entry.key)
            return
        self.journal.done(entry.key, result.tx_hash)
        self.events.emit(
            Event.BEACON_DRAWN,
            f"round {message.round}: stored the beacon of {node[:10]}…'s batch (nobody had, "
            f"{head - beacon.block} blocks on)",
            round=message.round,
            node=node,
            tx_hash=result.tx_hash,
        )
