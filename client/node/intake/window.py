"""The window: the peers' submissions that a committee may still vote on, with what this node
concluded of each (its vote basis), kept in memory and read from the journal incrementally.

A poll reads the submissions discovered since the last one (their blocks' cursor), and a verdict is
read back once when the intake journals it: at 10,000 peers and ten rounds open to a vote, the
window is 100,000 submissions, which the intake used to read whole, with a query per
submission for its verdict, every POLL_S.
"""

from __future__ import annotations

from client.node.journal.peers import PeerBook, PeerSubmission, VoteBasis

Key = tuple[int, str]


class Window:
    """One intake's window (read by its own thread only)."""

    def __init__(self, peers: PeerBook):
        self.peers = peers
        self._cursor: int | None = None  # the block of the last peer submissions read
        self._subs: dict[Key, PeerSubmission] = {}
        self._bases: dict[Key, VoteBasis] = {}
        # the block of each submission's stake snapshot (where it is known): its own, or an
        # escalated root lane batch's root's
        self.blocks: dict[Key, int] = {}
        self._ordered: list[PeerSubmission] | None = None  # by (round, node), until one is added
        self._first = -1

    def refresh(self, first_round: int) -> None:
        """Reads the submissions discovered since the last refresh (and, the first time, the
        verdicts journaled before this start), and forgets the rounds before `first_round`."""
        if self._first < 0:
            self._bases = self.peers.vote_bases(first_round)
        rows, self._cursor = self.peers.submissions_since(self._cursor, first_round)
        for sub, block in rows:
            self._subs[(sub.round, sub.node)] = sub
            if block is not None:
                self.blocks[(sub.round, sub.node)] = block
        if rows:
            self._ordered = None
        if first_round > self._first:
            self._first = first_round
            old = [k for k in self._subs if k[0] < first_round]
            for key in old:
                del self._subs[key]
                self._bases.pop(key, None)
                self.blocks.pop(key, None)
            if old:
                self._ordered = None

    def add(self, subs: list[PeerSubmission], block: int) -> None:
        """Adds submissions read elsewhere than the journal's newest rows (a root lane's list,
        posted at `block`, journaled too, but below the cursor the refresh reads from)."""
        for sub in subs:
            key = (sub.round, sub.node)
            if key not in self._subs and sub.round >= self._first:
                self._subs[key] = sub
                self.blocks[key] = block
                self._ordered = None

    def submissions(self) -> list[PeerSubmission]:
        """The window's submissions, oldest round first (then by producer)."""
        if self._ordered is None:
            self._ordered = [self._subs[k] for k in sorted(self._subs)]
        return self._ordered

    def basis(self, sub: PeerSubmission) -> VoteBasis | None:
        """What a vote on `sub` rests on (None: not fetched or tried yet)."""
        return self._bases.get((sub.round, sub.node))

    def recorded(self, sub: PeerSubmission) -> VoteBasis | None:
        """Reads back the verdict the intake just journaled on `sub` (with its failures in a
        row, which the journal counts)."""
        basis = self.peers.vote_basis(sub.round, sub.node)
        if basis is not None:
            self._bases[(sub.round, sub.node)] = basis
        return basis
