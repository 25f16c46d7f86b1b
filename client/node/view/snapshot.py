"""The node's read model as plain frozen values: what a `Snapshot` holds (health of each part,
account, peers, rounds, payouts, training, activity lines). The `Watcher`
(client.node.view.watcher) builds them from the journal, the event log and the ledger; the TUI's
widgets, `sapo devnet status` and the experiments only read them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from client.units import round_at


def short(address: str) -> str:
    """0x70997970…79C8: enough to tell nodes apart on a screen."""
    return f"{address[:10]}…{address[-4:]}" if len(address) > 16 else address


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
    family: str | None = None  # the model family it registered in (its checkers are its members)
    family_nodes: int = 0  # staked nodes of its family besides it: who can check its batches
    family_problems: tuple[str, ...] = ()  # client.chain.families: no quorum, a third of stake


@dataclass(frozen=True)
class PeerRow:
    """One registered node as the peers table shows it."""

    address: str
    model: str
    stake: int  # active stake, wei
    last_round: int | None  # last round it submitted
    submissions: int
    credited: int  # learning signal credited over all its submissions (SCORE_SCALE units)
    used: int  # its items we trained on
    agreed: int  # our attestations of it that agreed with its claim
    disputed: int  # ... that disagreed (our verifier gave another score or signal)
    bad: int  # its batches that failed verification (we attested 0)
    unavailable: int  # its batches we could not fetch
    me: bool = False


@dataclass(frozen=True)
class RoundPoint:
    """One chain round of ours: verifier rewards (0-1), the learning signal we claimed and what
    the ledger credited (SCORE_SCALE units), and our checkers' votes."""

    round: int
    reward_local: float | None = None
    reward_external: float | None = None
    claimed: int | None = None  # learning signal claimed on chain
    credited: int | None = None
    local_rounds: int | None = None
    votes: tuple[int, int, int] = (0, 0, 0)  # checkers: agreeing, disputing, unavailable
    lane: str = "ledger"  # or "root": judged by the root lane's verdict root (votes off chain)


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
    """A local round's training numbers (the node's journal metrics row)."""

    round: int
    k: int
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
    # peers' completions as off-policy samples ([sapo].external_correction): weighed by the
    # correction or not (another tokenizer, a batch without log-probs); their tokens' mean
    # importance ratio, the share truncated at the cap, the share the filter dropped
    external_weighed: int = 0
    external_unweighed: int = 0
    offpolicy_ratio: float | None = None
    offpolicy_truncated: float | None = None
    offpolicy_filtered: float | None = None

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
    submit_rounds: int | None = None
    unbonding_period: int | None = None
    min_stake: int | None = None
    quorum: int | None = None  # agreeing drawn checkers a batch needs before it earns
    phase: str = "starting"
    paused: bool = False
    node_running: bool = False
    chain: Health = Health()
    store: Health = Health()
    account: Account | None = None
    reward_pool: int | None = None
    peers: tuple[PeerRow, ...] = ()
    # the round since which the peers' submissions and credit are counted (None: the deploy)
    peers_since: int | None = None
    rounds: tuple[RoundPoint, ...] = ()
    payouts: tuple[Payout, ...] = ()
    activity: tuple[Activity, ...] = ()  # the last lines, oldest first
    activity_total: int = 0  # lines ever logged (the widget appends the ones it has not seen)
    training: Training | None = None
    history: tuple[Training, ...] = field(default=())  # the last local rounds, oldest first
    busy_share: float | None = None  # over the last 10 chain rounds: generating or training
    blocked_share: float | None = None  # ... waiting on chain or IPFS with work to do
    local_rounds_per_round: float | None = None

    @property
    def round(self) -> int | None:
        """The current round on the local clock (the ledger's formula), once params are known."""
        if self.genesis is None or not self.round_length:
            return None
        return round_at(self.taken_at, self.genesis, self.round_length)

    @property
    def round_progress(self) -> float:
        """How far the current round is, 0-1."""
        if self.genesis is None or not self.round_length:
            return 0.0
        return ((self.taken_at - self.genesis) % self.round_length) / self.round_length


def training_of(round_: int, k: int, m: dict[str, Any]) -> Training:
    return Training(
        round=round_,
        k=k,
        step=int(m.get("step") or 0),
        loss=m.get("loss"),
        clip_fraction=m.get("clip_fraction"),
        grad_norm=m.get("grad_norm"),
        reward_local=m.get("reward_local"),
        reward_external=m.get("reward_external"),
        local_items=int(m.get("local_items") or 0),
        external_items=int(m.get("external_items") or 0),
        external_eligible=int(m.get("external_eligible") or 0),
        external_shortfall=int(m.get("external_shortfall") or 0),
        tokens=int(m.get("tokens") or 0),
        train_seconds=m.get("seconds"),
        external_weighed=int(m.get("external_weighed") or 0),
        external_unweighed=int(m.get("external_unweighed") or 0),
        offpolicy_ratio=m.get("offpolicy_ratio"),
        offpolicy_truncated=m.get("offpolicy_truncated"),
        offpolicy_filtered=m.get("offpolicy_filtered"),
    )
