"""The node's read model: what an operator sees of a node, as plain frozen values.

State flows one way: the node's journal (client.node.view_journal), its event log
(client.node.view_events) and the ledger (client.node.view_ledger) are read by a `Watcher` into a
`Snapshot`; the TUI's widgets only render snapshots, and `sapo devnet status`, the experiments and
the benchmarks read the same views. A value read from the chain or the store keeps its last known
reading when the part is down, with the time it was read (`as_of`), so a screen can say how old
it is. The watcher never raises for a part that is down: its health turns red and the next call
tries again. It is the same whether the node runs in this process (`sapo tui --config`: the live
node adds its in-memory phase and pause state) or elsewhere (`sapo tui --attach`).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from client.units import round_at

if TYPE_CHECKING:
    from client.config import NodeConfig

ACTIVITY_ROWS = 500
HISTORY_ROUNDS = 60
TIMEOUT_S = 3.0  # the watcher's own RPC and store calls: a red badge soon, not a frozen one


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
    )


class Watcher:
    """Builds snapshots of the node whose config is `cfg` and whose address is `address`."""

    def __init__(self, cfg: NodeConfig, address: str, *, mode: str = "attached"):
        from client.chain import Ledger, connect
        from client.node.view_events import EventTail
        from client.node.view_journal import NodeView
        from client.node.view_ledger import LedgerView
        from client.store import open_store

        self.cfg = cfg
        self.address = address
        self.mode = mode
        self.node = NodeView(cfg.node.data_dir)
        self.tail = EventTail(self.node.data_dir / "events.jsonl")
        self.activity: deque[Activity] = deque(maxlen=ACTIVITY_ROWS)
        self.activity_total = 0  # lines ever added: a widget appends the ones it has not seen
        self._lock = threading.Lock()  # `note` comes from action workers
        self.phase = "starting"
        self.ledger = Ledger(
            connect(str(cfg.chain.rpc_url), min(cfg.chain.request_timeout_s, TIMEOUT_S)),
            str(cfg.chain.ledger_address),
            attempts=1,
        )
        self.view = LedgerView(
            self.ledger,
            address,
            start_block=cfg.chain.ledger_deploy_block,
            chunk_blocks=cfg.chain.log_chunk_blocks,
        )
        store_cfg = cfg.store.model_copy(update={"timeout_s": min(cfg.store.timeout_s, TIMEOUT_S)})
        self.store = open_store(store_cfg)
        self.store_name = "IPFS" if cfg.store.backend == "ipfs" else "store"
        self.chain = Health()
        self.store_health = Health()
        self.last = Snapshot(time.time(), mode, address, str(self.node.data_dir))

    def note(self, activity: Activity) -> None:
        """Adds a line of our own to the activity log (an action's outcome, an error)."""
        self._add(activity)

    def _add(self, line: Activity) -> None:
        with self._lock:
            self.activity.append(line)
            self.activity_total += 1

    def snapshot(self, *, phase: str | None = None, paused: bool = False, running: bool = False):
        """Returns a fresh snapshot; parts that do not answer keep their last values."""
        from client.node.eventlog import Event
        from client.node.view_events import activity_of

        now = time.time()
        for event in self.tail.read():
            if event["kind"] == Event.NODE_PHASE:
                self.phase = str(event.get("phase", self.phase))
            elif event["kind"] == Event.NODE_STOPPED:
                self.phase = "stopped"
            if (line := activity_of(event)) is not None:
                self._add(line)
        snap = replace(self.last, taken_at=now, phase=phase or self.phase, paused=paused)
        snap = replace(snap, node_running=running)
        snap = self._chain(snap, now)
        snap = self._store(snap, now)
        snap = self._journal(snap, now)
        with self._lock:
            snap = replace(snap, activity=tuple(self.activity), activity_total=self.activity_total)
        self.last = snap
        return snap

    def _chain(self, snap: Snapshot, now: float) -> Snapshot:
        from client.chain import ChainError

        try:
            params = self.ledger.params()
            for line in self.view.refresh():
                self._add(line)
        except (ChainError, OSError, ValueError) as exc:
            self.chain = Health(False, self.chain.as_of, str(exc))
            return replace(snap, chain=self.chain)
        self.chain = Health(True, now)
        return replace(
            snap,
            chain=self.chain,
            ledger=self.ledger.address,
            round_length=params.round_length,
            genesis=params.genesis,
            challenge_rounds=params.challenge_rounds,
            submit_rounds=params.submit_rounds,
            unbonding_period=params.unbonding_period,
            min_stake=params.min_stake,
            quorum=params.quorum,
            account=self.view.account,
            reward_pool=self.view.reward_pool,
        )

    def _store(self, snap: Snapshot, now: float) -> Snapshot:
        from client.store import StoreError

        try:
            self.store.ping()
        except StoreError as exc:
            self.store_health = Health(False, self.store_health.as_of, str(exc))
        else:
            self.store_health = Health(True, now)
        return replace(snap, store=self.store_health)

    def _journal(self, snap: Snapshot, now: float) -> Snapshot:
        try:
            return self._read_journal(snap, now)
        except sqlite3.Error as exc:  # e.g. locked for longer than the time-out: keep the last
            self._add(Activity(time.time(), "error", f"journal not readable: {exc}", None, "error"))
            return snap

    def _read_journal(self, snap: Snapshot, now: float) -> Snapshot:
        if self.node.journal is None:
            return snap  # the node has not started here yet
        history = tuple(training_of(r, k, m) for r, k, m in self.node.local_metrics(HISTORY_ROUNDS))
        ours = self.view.our_submissions()
        current = snap.round if snap.round is not None else 0
        recorded = self.node.round_rewards(max(0, current - HISTORY_ROUNDS), current)
        points = [
            RoundPoint(
                round=r,
                local_rounds=(recorded.get(r) or {}).get("local_rounds"),
                reward_local=(recorded.get(r) or {}).get("reward_local"),
                reward_external=(recorded.get(r) or {}).get("reward_external"),
                claimed=ours[r][0] if r in ours else None,
                credited=(ours[r][0] if ours[r][1] else 0) if r in ours else None,
                votes=self.view.our_votes(r),
            )
            for r in sorted(set(recorded) | set(ours))
        ]
        peers = self.view.peers(self.node.peer_counts()) if self.view.nodes else list(snap.peers)
        summary = (
            self.node.summary(snap.genesis, snap.round_length, now)
            if snap.genesis is not None and snap.round_length
            else None
        )
        return replace(
            snap,
            peers=tuple(peers),
            rounds=tuple(points),
            payouts=tuple(self.view.payouts),
            training=history[-1] if history else None,
            history=history,
            busy_share=summary.busy_share if summary else None,
            blocked_share=summary.blocked_share if summary else None,
            local_rounds_per_round=summary.local_rounds_per_round if summary else None,
        )

    def close(self) -> None:
        self.node.close()
