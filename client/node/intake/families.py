"""Peers' model families, as a checker needs them to know which committees can be its own: the
journal's (a family is fixed for an address's life), the rest read from the ledger in JSON-RPC
batches (`nodeInfo`) and journaled, so that each producer's is read once for the node's life."""

from __future__ import annotations

from collections.abc import Collection

from client.chain import Ledger
from client.node.journal import Journal


class Families:
    """One intake's cache of its peers' families (lower-case addresses)."""

    def __init__(self, ledger: Ledger, journal: Journal):
        self.ledger, self.journal = ledger, journal
        self._known: dict[str, str] | None = None

    def of(self, nodes: Collection[str]) -> dict[str, str]:
        """Every known family, `nodes`' included when they are registered (at 10,000 new
        producers, 50 batched requests; then only newcomers')."""
        if self._known is None:
            self._known = self.journal.peers.families()
        unknown = sorted(set(nodes) - self._known.keys())
        if unknown:
            found = {
                n: info.family
                for n, info in zip(unknown, self.ledger.node_infos(unknown), strict=True)
                if info.family is not None
            }
            self.journal.peers.add_families(found)
            self._known.update(found)
        return self._known


__all__ = ["Families"]
