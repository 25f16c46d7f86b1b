"""The TUI's read model: what the screens show, as plain frozen values.

State flows one way: the node's journal and event log, and the ledger, are read by a watcher
(`tui.watch`) into a `Snapshot`; widgets only render snapshots. A value read from the chain or
the store keeps its last known reading when the part is down, with the time it was read (`as_of`)
so a screen can say how old it is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

# Node phases a screen names (the node's own strings; `tui.watch` passes others through).
PHASES = (
    "generating",
    "pinning",
    "submitting",
    "verifying peers",
    "training",
    "checkpointing",
    "idle",
    "paused",
    "stopped",
)


@dataclass(frozen=True)
class Health:
    """Whether a part (chain, store) answered at the last try; `as_of` is the last good answer."""

    ok: bool | None = None  # None: not tried yet
    as_of: float | None = None
    detail: str = ""

    def age(self, now: float | None = None) -> float | None:
        return None if self.as_of is None else max(0.0, (now or time.time()) - self.as_of)


@dataclass(frozen=True)
class Account:
    """Our node's money on the ledger (wei) and what it may claim now."""

    address: str
    registered: bool
    balance: int
    active_stake: int
    unbonding: int
    unbonding_end: int
    total_paid: int
    claimable: int
    claimable_rounds: tuple[int, ...]


@dataclass(frozen=True)
class PeerRow:
    """One registered node as the peers table shows it."""

    address: str
    model: str
    stake: int  # active stake, wei
    last_round: int | None  # last round it submitted
    submissions: int
    credited: int  # score units credited over all its submissions (10,000 = reward 1.0)
    used: int  # its items we trained on
    agreed: int  # our attestations of it that agreed with its claim
    disputed: int  # ... that disagreed (our verifier gave another score)
    bad: int  # its batches that failed verification (we attested 0)
    unavailable: int  # its batches we could not fetch
    me: bool = False


@dataclass(frozen=True)
class RoundPoint:
    """One round of ours: verifier rewards (0-1) and what the ledger credited (score units)."""

    round: int
    reward_local: float | None = None
    reward_external: float | None = None
    claimed: int | None = None
    credited: int | None = None


@dataclass(frozen=True)
class Payout:
    round: int  # the round in which the claim was mined
    amount: int  # wei


@dataclass(frozen=True)
class Activity:
    """One line of the activity log."""

    time: float
    kind: str  # submission, attestation, received, dispute, slash, claim, action, error, ...
    text: str
    round: int | None = None
    level: str = "info"  # info, warning, error


@dataclass(frozen=True)
class Training:
    """The last trained round's numbers (the node's journal metrics row)."""

    round: int
    step: int
    loss: float | None
    clip_fraction: float | None
    grad_norm: float | None
    reward_local: float | None
    reward_external: float | None
    local_items: int
    external_items: int
    external_eligible: int
    external_shortfall: int
    tokens: int
    train_seconds: float | None

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens / self.train_seconds if self.train_seconds else None


@dataclass(frozen=True)
class Snapshot:
    """Everything the screens show, at `taken_at`."""

    taken_at: float
    mode: str  # "live" (the node runs in this process) or "attached" (read-only)
    address: str
    data_dir: str
    ledger: str = ""
    round_length: int | None = None
    genesis: int | None = None
    challenge_rounds: int | None = None
    unbonding_period: int | None = None
    min_stake: int | None = None
    phase: str = "starting"
    paused: bool = False
    node_running: bool = False
    chain: Health = Health()
    store: Health = Health()
    account: Account | None = None
    reward_pool: int | None = None
    peers: tuple[PeerRow, ...] = ()
    rounds: tuple[RoundPoint, ...] = ()
    payouts: tuple[Payout, ...] = ()
    activity: tuple[Activity, ...] = ()  # the last lines, oldest first
    activity_total: int = 0  # lines ever logged (the widget appends the ones it has not seen)
    training: Training | None = None
    history: tuple[Training, ...] = field(default=())  # the last trained rounds, oldest first

    @property
    def round(self) -> int | None:
        """The current round on the local clock (the ledger's formula), once params are known."""
        if self.genesis is None or not self.round_length:
            return None
        return int((self.taken_at - self.genesis) // self.round_length)

    @property
    def round_progress(self) -> float:
        """How far the current round is, 0-1."""
        if self.genesis is None or not self.round_length:
            return 0.0
        return ((self.taken_at - self.genesis) % self.round_length) / self.round_length
