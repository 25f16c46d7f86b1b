"""A devnet's adversarial aggregator ([devnet].aggregator_lie): the real service
(client.node.aggregation.service.Aggregator, run by `sapo devnet liar` as `sapo aggregate run`
runs it) with one lie in what it posts, so that the real nodes' defences run against it end to
end, on the devnet's chain and IPFS daemons.

- `drop-quorum`: once, in the first verdict root that credits a real node's batch (a producer of
  the aggregator's own model family: the light nodes have families of their own), the credit of
  the first such batch is left out although the aggregator receipted a quorum of its checkers'
  agreeing votes. The lists hold (the credit is simply not there); only the receipts show the
  lie, and only the checkers hold them: they relay them to the producer ([root_lane].relay_votes,
  client.node.publishing.relay), which proves it (RoundJudge.proveUncredited) and takes half of
  the round's bond.

The lie is told once a process: a restarted liar may tell it again.
"""

from __future__ import annotations

import logging

from client.chain.roots import VerdictRoot
from client.node.aggregation.service import Aggregator

log = logging.getLogger("sapo.aggregator")

LIES = ("drop-quorum",)


class DroppingAggregator(Aggregator):
    """`drop-quorum`: leaves one real node's credit out of one verdict root."""

    dropped: tuple[int, str] | None = None  # (round, producer) once it lied

    def posting(self, round_: int, verdicts: VerdictRoot) -> VerdictRoot | None:
        if self.dropped is not None:
            return verdicts
        ours = self.ledger.node_info(self.me).family
        target = next(
            (c for c in verdicts.credits if self.ledger.node_info(c.producer).family == ours),
            None,
        )
        if target is None:
            return verdicts
        self.dropped = (round_, target.producer)
        log.warning(
            "round %s: lying (drop-quorum): %s's credit left out of the verdict root although "
            "its checkers' agreeing votes were receipted",
            round_,
            target.producer,
        )
        rows = [
            (c, a, v)
            for c, a, v in zip(verdicts.credits, verdicts.amounts, verdicts.votes, strict=True)
            if c is not target
        ]
        if not rows:
            return None  # the no-credit root
        return VerdictRoot(
            [c for c, _, _ in rows],
            [a for _, a, _ in rows],
            votes=[v for _, _, v in rows],
            presorted=True,
        )


def liar(lie: str) -> type[Aggregator]:
    """The service class that tells `lie` (one of LIES)."""
    if lie == "drop-quorum":
        return DroppingAggregator
    raise ValueError(f"no such lie {lie!r} (the devnet's aggregator tells {', '.join(LIES)})")


__all__ = ["LIES", "DroppingAggregator", "liar"]
