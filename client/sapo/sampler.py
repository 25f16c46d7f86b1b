"""The SAPO sampler: which of the swarm's shared items a node trains on this round.

A round's training set is I local items plus J external items. External items are drawn
uniformly, without replacement, from the *eligible* candidates: items this node re-verified
(regenerated the question, re-scored every completion with its own verifier) whose group has a
non-zero advantage under those rewards. If fewer than J are eligible the node takes what there
is and records the shortfall. Strategies are pluggable; uniform is the paper's.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

from client.sapo.advantages import has_signal


@dataclass(frozen=True)
class Candidate:
    """An item available for training: `rewards` are always this node's own verifier's."""

    key: Hashable
    rewards: tuple[float, ...]
    verified: bool = True
    external: bool = True


@dataclass(frozen=True)
class Selection:
    items: list[Candidate]
    eligible: int  # candidates that passed the filter
    shortfall: int  # how many fewer than asked for


class Strategy(Protocol):
    def select(
        self, candidates: Sequence[Candidate], count: int, rng: random.Random
    ) -> Selection: ...


def eligible(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Returns the verified candidates whose group has a learning signal."""
    return [c for c in candidates if c.verified and has_signal(c.rewards)]


class UniformSampler:
    """The paper's strategy: uniform over the eligible items."""

    def select(self, candidates: Sequence[Candidate], count: int, rng: random.Random) -> Selection:
        if count < 0:
            raise ValueError("count cannot be negative")
        pool = eligible(candidates)
        chosen = rng.sample(pool, min(count, len(pool)))
        return Selection(items=chosen, eligible=len(pool), shortfall=count - len(chosen))


def training_set(
    local: Sequence[Candidate],
    external: Sequence[Candidate],
    j: int,
    rng: random.Random,
    strategy: Strategy | None = None,
) -> tuple[list[Candidate], Selection, int]:
    """Returns (items to train on, the external selection, local groups dropped).

    Local groups without spread are dropped too: their advantages are all zero, so they would
    only dilute a token-mean loss.
    """
    kept_local = [c for c in local if has_signal(c.rewards)]
    selection = (strategy or UniformSampler()).select(external, j, rng)
    return kept_local + selection.items, selection, len(local) - len(kept_local)
