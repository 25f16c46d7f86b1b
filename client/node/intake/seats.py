"""Seats: whether this node is drawn to check a peer's batch, on the committee voting on it now
(the appeal's, once appealed), asked of the ledger once that committee's beacon is known and
remembered: the draw comes from the stakes as of the submission's block, so it never changes
afterwards."""

from __future__ import annotations

from client.chain import Ledger
from client.chain.events import EventReader
from client.node.journal import Journal
from client.node.journal.outbox import Draw
from client.node.journal.peers import PeerSubmission


class Seats:
    """This node's seats on peers' committees, asked once each (one intake's cache)."""

    def __init__(self, ledger: Ledger, reader: EventReader, journal: Journal, me: str):
        self.ledger, self.reader, self.journal, self.me = ledger, reader, journal, me
        self.appeals: set[tuple[int, str]] = set()  # peers' appealed batches, still voted on
        # (round, node, appealed) -> drawn on the committee voting now
        self._draws: dict[tuple[int, str, bool], bool] = {}
        self._beacons: dict[tuple[int, str], int] = {}  # (round, node) -> its first beacon
        self._unready: set[tuple[int, str, bool]] = set()  # beacons not known yet, this poll

    def appealed(self, sub: PeerSubmission) -> bool:
        return (sub.round, sub.node) in self.appeals

    def new_poll(self, appeals: set[tuple[int, str]]) -> None:
        """A new pass of the intake: the journaled appeals now, and unknown beacons asked again."""
        self.appeals, self._unready = appeals, set()

    def forget_before(self, first: int) -> None:
        """Drops what concerns rounds no committee votes on any more."""
        self._draws = {k: v for k, v in self._draws.items() if k[0] >= first}
        self._beacons = {k: v for k, v in self._beacons.items() if k[0] >= first}

    def known(self, sub: PeerSubmission) -> bool | None:
        """`drawn` as far as asked already (None: not yet), without asking the ledger."""
        return self._draws.get((sub.round, sub.node, self.appealed(sub)))

    def beacon(self, sub: PeerSubmission) -> int | None:
        """The batch's first beacon, which draws the openings of both its committees (None: not
        known yet)."""
        return self._beacons.get((sub.round, sub.node))

    def drawn(self, sub: PeerSubmission) -> bool:
        """Whether the beacon of the committee voting now on the submission gave this node a
        seat on it (`seatsOf`, `appealSeatsOf`). False while the beacon is not known yet, and
        for good once it lapsed (nobody stored it while the EVM knew its block's hash: the
        ledger never draws it again). Drawn, and the beacon not stored yet, its storing is
        queued (`Draw`, sent only if nobody has stored it half a window on), so that our vote
        cannot lapse."""
        appealed = self.appealed(sub)
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
                Draw(round=sub.round, node=sub.node, block=beacon.block, appeal=appealed)
            )
        return self._draws[key]
