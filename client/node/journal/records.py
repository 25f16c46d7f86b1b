"""What the journal keeps of our own chain rounds: each round's phase and batch, and the local
rounds it collected."""

from __future__ import annotations

from dataclasses import dataclass

from client.node.journal.states import FORWARD, RoundPhase


@dataclass(frozen=True)
class RoundRecord:
    round: int
    phase: RoundPhase
    reason: str | None
    batch: bytes | None
    digest: str | None
    cid: str | None
    claimed: int | None
    signal: int | None
    rollouts: int | None
    local_rounds: int | None
    tx_hash: str | None
    updated: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "phase", RoundPhase(self.phase))  # as SQLite gives it back

    @property
    def ended(self) -> bool:
        """Missed or skipped: nothing more happens to it."""
        return self.phase.ended

    def reached(self, phase: RoundPhase) -> bool:
        """True once the round got to `phase` (a missed or skipped round reached nothing more)."""
        return not self.ended and FORWARD.index(self.phase) >= FORWARD.index(phase)


@dataclass(frozen=True)
class LocalRoundRecord:
    round: int
    k: int
    part: bytes  # canonical JSON of the batch's LocalRound
    rollouts: int
    score: int
    started: float
    finished: float


@dataclass(frozen=True)
class Kept:
    """A message of ours a root lane's aggregator receipted: the signed message as sent
    (client.chain.messages.Signed's bytes) and the aggregator's receipt of it."""

    key: str
    round: int
    aggregator: str
    message: bytes
    receipt: str

    @staticmethod
    def submission_key(round_: int) -> str:
        return f"submission:{round_}"
