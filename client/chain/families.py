"""A model family's standing on a ledger: who can check its batches, and who could capture them.

A batch's committee is drawn from its producer's family alone (SwarmLedger), so the stake rules
hold within each family, at the family's size: a family with fewer staked nodes besides the
producer than the quorum can never credit a batch (nor an appeal), and one address holding a
large share of a family's stake holds that share of its committees' seats (docs/credit.md gives
the odds by share and committee size; more than a third is where a lone whale's lucky committees
start to matter, and the warning's threshold).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from client.chain.models import NodeInfo


def short_family(family: str | None) -> str:
    """A family id as people read it: '0x' and its first 10 hex digits."""
    return family[:12] + "…" if family else "none"


# one address above this share of a family's stake is warned about (sapo doctor, the TUI)
WHALE_SHARE = Fraction(1, 3)


@dataclass(frozen=True)
class FamilyStanding:
    """A family's staked nodes (registered, at least minStake active) and its largest holder."""

    family: str
    members: tuple[str, ...]  # addresses, in registration order
    stake: int  # their active stake, wei
    largest: str | None  # the address holding the most of it
    largest_stake: int

    def checkers_for(self, producer: str) -> int:
        """How many distinct nodes could sit on a committee for `producer`'s batches."""
        return sum(1 for m in self.members if m.lower() != producer.lower())

    def can_credit(self, producer: str, quorum: int) -> bool:
        """Whether a batch of `producer` can reach the quorum at all (and so its appeal)."""
        return self.checkers_for(producer) >= quorum

    @property
    def largest_share(self) -> Fraction:
        return Fraction(self.largest_stake, self.stake) if self.stake else Fraction(0)

    def problems(self, producer: str, quorum: int) -> list[str]:
        """What an operator of `producer` must know, in a line each (empty when nothing)."""
        out = []
        others = self.checkers_for(producer)
        if others < quorum:
            out.append(
                f"model family {short_family(self.family)} has {others} staked node(s) besides "
                "this one "
                f"and the quorum is {quorum}: no batch of this node can be credited, nor appealed"
            )
        if self.largest is not None and self.largest_share > WHALE_SHARE:
            who = "this node" if self.largest.lower() == producer.lower() else self.largest
            out.append(
                f"{who} holds {float(self.largest_share):.0%} of model family "
                f"{short_family(self.family)}'s stake (more than a third): that share of its "
                "committees' "
                "seats"
            )
        return out


def standing(family: str, infos: list[NodeInfo], min_stake: int) -> FamilyStanding:
    """The standing of `family` among `infos` (every registered node's record)."""
    members = [
        i for i in infos if i.registered and i.family == family and i.active_stake >= min_stake
    ]
    largest = max(members, key=lambda i: i.active_stake, default=None)
    return FamilyStanding(
        family=family,
        members=tuple(i.address for i in members),
        stake=sum(i.active_stake for i in members),
        largest=largest.address if largest else None,
        largest_stake=largest.active_stake if largest else 0,
    )


def family_standing(ledger, family: str) -> FamilyStanding:
    """Reads every registered node (batched) and returns `family`'s standing on `ledger`."""
    infos = ledger.node_infos(ledger.nodes())
    return standing(family, infos, ledger.params().min_stake)
