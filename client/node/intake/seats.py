"""Seats: whether this node is drawn to check a peer's batch, on the committee voting on it now
(the appeal's, once appealed), known once that committee's beacon is and remembered: the draw
comes from the stakes as of the submission's block, so it never changes afterwards.

The first committee's draw is recomputed here first (`prepare`: SeatDraw's rule, from the hashes
of the blocks after the submissions' and this node's and its family's stake as of their blocks,
read in a few JSON-RPC batches for a whole poll), and only the batches it gives a seat on are
asked of the ledger (`seatsOf`, which also holds the eligibility rules): at 10,000 peers that is
a handful of requests and about K seatsOf calls a round instead of two calls per peer's batch.
The local draw only filters: the ledger's answer is the one acted on.
"""

from __future__ import annotations

from client.chain import Ledger
from client.chain.events import EventReader
from client.chain.models import Beacon, beacon_from
from client.node.intake.families import Families
from client.node.intake.rootlane import RootIntake
from client.node.journal import Journal
from client.node.journal.outbox import Draw
from client.node.journal.peers import PeerSubmission


class Seats:
    """This node's seats on peers' committees, asked once each (one intake's cache)."""

    def __init__(
        self, ledger: Ledger, reader: EventReader, journal: Journal, me: str, checkers: int
    ):
        self.ledger, self.reader, self.journal, self.me = ledger, reader, journal, me
        self.checkers = checkers  # K: the seat trials of a first committee
        self._family: str | None = None  # ours, read once
        self._families = Families(ledger, journal)  # peers' (the journal's, read once)
        # (round, node) -> seats the local draw gives us on its first committee
        self._local: dict[tuple[int, str], int] = {}
        self.appeals: set[tuple[int, str]] = set()  # peers' appealed batches, still voted on
        # (round, node, appealed) -> drawn on the committee voting now
        self._draws: dict[tuple[int, str, bool], bool] = {}
        self._beacons: dict[tuple[int, str], int] = {}  # (round, node) -> its first beacon
        self._unready: set[tuple[int, str, bool]] = set()  # beacons not known yet, this poll
        self.root: RootIntake | None = None  # the root lane's batches (the intake's, if any)

    def appealed(self, sub: PeerSubmission) -> bool:
        return (sub.round, sub.node) in self.appeals

    def new_poll(self, appeals: set[tuple[int, str]]) -> None:
        """A new pass of the intake: the journaled appeals now, and unknown beacons asked again."""
        self.appeals, self._unready = appeals, set()

    def forget_before(self, first: int) -> None:
        """Drops what concerns rounds no committee votes on any more."""
        self._draws = {k: v for k, v in self._draws.items() if k[0] >= first}
        self._local = {k: v for k, v in self._local.items() if k[0] >= first}
        self._beacons = {k: v for k, v in self._beacons.items() if k[0] >= first}

    def known(self, sub: PeerSubmission) -> bool | None:
        """`drawn` as far as asked already (None: not yet), without asking the ledger."""
        return self._draws.get((sub.round, sub.node, self.appealed(sub)))

    def beacon(self, sub: PeerSubmission) -> int | None:
        """The batch's first beacon, which draws the openings of both its committees (None: not
        known yet)."""
        return self._beacons.get((sub.round, sub.node))

    def prepare(self, subs: list[PeerSubmission], blocks: dict[tuple[int, str], int]) -> None:
        """Draws this node's seats locally on the first committees of `subs` (their blocks in
        `blocks`) whose beacon block is mined and not drawn here yet: the peers' families
        (nodeInfo, once per peer, kept in the journal), the beacons' block hashes and our stake
        snapshots, each read in one batch for the whole poll. A batch left out (its block not
        known, its producer's family unknown) is asked of the ledger as before."""
        todo = [s for s in subs if (s.round, s.node) not in self._local and not self.appealed(s)]
        if not todo:
            return
        head = self.reader.head()
        todo = [s for s in todo if blocks.get((s.round, s.node), head) < head]
        if not todo:
            return
        families = self._families.of({s.node for s in todo})
        if self._family is None:
            self._family = self.ledger.node_info(self.me).family
        ours = [s for s in todo if families.get(s.node) is not None]
        for s in ours:
            if families[s.node] != self._family:
                self._local[(s.round, s.node)] = 0  # another family's committee: never ours
        ours = [s for s in ours if families[s.node] == self._family]
        if not ours or self._family is None:
            return
        snapshot_blocks = sorted({blocks[(s.round, s.node)] for s in ours})
        hashes = self.ledger.block_hashes([b + 1 for b in snapshot_blocks])
        stakes = self.ledger.snapshots(self.me, self._family, snapshot_blocks)
        for s in ours:
            block = blocks[(s.round, s.node)]
            stake, total = stakes[block]
            beacon = Beacon(
                round=s.round,
                node=s.node,
                beacon=beacon_from(hashes[block + 1]),
                block=block + 1,
                ready=True,
            )
            self._local[(s.round, s.node)] = beacon.seats(self.me, stake, total, self.checkers)

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
        if not appealed and self._local.get((sub.round, sub.node)) == 0:
            self._draws[key] = False  # the local draw gave no seat: nothing to ask
            return False
        entry = self.root.entry(sub) if self.root is not None and not appealed else None
        if entry is not None:  # a root lane batch: the book's rule, its beacon (an escalation
            # keeps both: the ledger's committee is the one the book drew)
            self._beacons[(sub.round, sub.node)] = entry.round.beacon
            self._draws[key] = self.root.seated(entry)  # type: ignore[union-attr]
            return self._draws[key]
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
