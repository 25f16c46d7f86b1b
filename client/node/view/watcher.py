"""The node's read model: what an operator sees of a node, as plain frozen values.

State flows one way: the node's journal (client.node.view.journal), its event log
(client.node.view.events) and the ledger (client.node.view.ledger) are read by a `Watcher` into a
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
from dataclasses import replace

from client.chain import ChainError, Ledger, connect
from client.chain.book import RoundBook
from client.config import NodeConfig
from client.node.datadir import DataDir
from client.node.eventlog import Event
from client.node.view.events import EventTail, activity_of
from client.node.view.journal import NodeView
from client.node.view.ledger import LedgerView
from client.node.view.snapshot import (
    Activity,
    Health,
    RoundPoint,
    Snapshot,
    training_of,
)
from client.store import StoreError, open_store

ACTIVITY_ROWS = 500
HISTORY_ROUNDS = 60
TIMEOUT_S = 3.0  # the watcher's own RPC and store calls: a red badge soon, not a frozen one


class Watcher:
    """Builds snapshots of the node whose config is `cfg` and whose address is `address`."""

    def __init__(self, cfg: NodeConfig, address: str, *, mode: str = "attached"):
        self.cfg = cfg
        self.address = address
        self.mode = mode
        self.node = NodeView(cfg.node.data_dir)
        self.tail = EventTail(DataDir(self.node.data_dir).events)
        self.activity: deque[Activity] = deque(maxlen=ACTIVITY_ROWS)
        self.activity_total = 0  # lines ever added: a widget appends the ones it has not seen
        self._lock = threading.Lock()  # `note` comes from action workers
        self.phase = "starting"
        self.ledger = Ledger(
            connect(str(cfg.chain.rpc_url), min(cfg.chain.request_timeout_s, TIMEOUT_S)),
            str(cfg.chain.ledger_address),
            attempts=1,
        )
        book = cfg.chain.round_book_address
        self.view = LedgerView(
            self.ledger,
            address,
            start_block=cfg.chain.ledger_deploy_block,
            chunk_blocks=cfg.chain.log_chunk_blocks,
            keep_rounds=HISTORY_ROUNDS,
            lookback_rounds=HISTORY_ROUNDS,
            # in the root lane our claims from the book are payouts too
            book=RoundBook(self.ledger.w3, str(book)) if book is not None else None,
            book_start_block=cfg.chain.round_book_deploy_block or 0,
        )
        store_cfg = cfg.store.model_copy(update={"timeout_s": min(cfg.store.timeout_s, TIMEOUT_S)})
        self.store = open_store(store_cfg)
        self.store_name = "IPFS" if cfg.store.backend == "ipfs" else "store"
        self.chain = Health()
        self._ledger_read_at: float | None = None  # when the ledger's state was last read whole
        self.store_health = Health()
        self.last = Snapshot(time.time(), mode, address, str(self.node.data_dir))

    def note(self, activity: Activity) -> None:
        """Adds a line of our own to the activity log (an action's outcome, an error)."""
        self._add(activity)

    def _add(self, line: Activity) -> None:
        with self._lock:
            self.activity.append(line)
            self.activity_total += 1

    def snapshot(
        self,
        *,
        phase: str | None = None,
        paused: bool = False,
        running: bool = False,
        history: bool = True,
        ledger_every_s: float = 0.0,
    ):
        """Returns a fresh snapshot; parts that do not answer keep their last values.

        A monitor that asks often and draws no charts (client.node.metrics) passes
        `history=False`: the per-round points, the training history and the peer rows are left
        out (the last local round's numbers stay). With `ledger_every_s`, the ledger's state is
        read again only once the last reading is that old; meanwhile the chain is asked only
        whether it answers (its head), so `chain` stays live."""
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
        snap = self._chain(snap, now, ledger_every_s)
        snap = self._store(snap, now)
        snap = self._journal(snap, now, history)
        with self._lock:
            snap = replace(snap, activity=tuple(self.activity), activity_total=self.activity_total)
        self.last = snap
        return snap

    def _chain(self, snap: Snapshot, now: float, ledger_every_s: float = 0.0) -> Snapshot:
        if self._ledger_read_at is not None and now - self._ledger_read_at < ledger_every_s:
            try:
                self.ledger.head()
            except (ChainError, OSError, ValueError) as exc:
                self.chain = Health(False, self.chain.as_of, str(exc))
            else:
                self.chain = Health(True, now)
            return replace(snap, chain=self.chain)
        try:
            params = self.ledger.params()
            for line in self.view.refresh():
                self._add(line)
        except (ChainError, OSError, ValueError) as exc:
            self.chain = Health(False, self.chain.as_of, str(exc))
            return replace(snap, chain=self.chain)
        self.chain = Health(True, now)
        self._ledger_read_at = now
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
            peers_since=self.view.since_round,
        )

    def _store(self, snap: Snapshot, now: float) -> Snapshot:
        try:
            self.store.ping()
        except StoreError as exc:
            self.store_health = Health(False, self.store_health.as_of, str(exc))
        else:
            self.store_health = Health(True, now)
        return replace(snap, store=self.store_health)

    def _journal(self, snap: Snapshot, now: float, history: bool = True) -> Snapshot:
        try:
            return self._read_journal(snap, now) if history else self._read_window(snap, now)
        except sqlite3.Error as exc:  # e.g. locked for longer than the time-out: keep the last
            self._add(Activity(time.time(), "error", f"journal not readable: {exc}", None, "error"))
            return snap

    def _read_journal(self, snap: Snapshot, now: float) -> Snapshot:
        if self.node.journal is None:
            return snap  # the node has not started here yet
        history = tuple(training_of(r, k, m) for r, k, m in self.node.local_metrics(HISTORY_ROUNDS))
        current = snap.round if snap.round is not None else 0
        first = max(0, current - HISTORY_ROUNDS)
        ours = {r: s for r, s in self.view.our_submissions().items() if r >= first}
        # in the root lane: what the book's verdict roots gave our batches (not on the ledger)
        in_book = {r: j for r, j in self.node.book_credits(first).items() if r not in ours}
        ours |= in_book
        recorded = self.node.round_rewards(first, current)
        points = [
            RoundPoint(
                round=r,
                local_rounds=(recorded.get(r) or {}).get("local_rounds"),
                reward_local=(recorded.get(r) or {}).get("reward_local"),
                reward_external=(recorded.get(r) or {}).get("reward_external"),
                claimed=ours[r][0] if r in ours else None,
                credited=(ours[r][0] if ours[r][1] else 0) if r in ours else None,
                # in the root lane our checkers' votes were signed off chain: the verdict
                # root's credit carries the agreeing ones
                votes=(in_book[r][2], 0, 0) if r in in_book else self.view.our_votes(r),
                lane="root" if r in in_book else "ledger",
            )
            for r in sorted(set(recorded) | set(ours))
        ]
        peers = (
            self.view.peers(self.node.peer_counts(), self.node.book_peers())
            if self.view.nodes
            else list(snap.peers)
        )
        return replace(
            snap,
            peers=tuple(peers),
            rounds=tuple(points),
            payouts=tuple(self.view.payouts),
            training=history[-1] if history else None,
            history=history,
            **self._window(snap, now),
        )

    def _read_window(self, snap: Snapshot, now: float) -> Snapshot:
        """The journal's part of a snapshot without history: the last local round's numbers
        and the window's shares (what the journal's age does not make dearer)."""
        last = self.node.local_metrics(1)
        return replace(
            snap,
            peers=tuple(self.view.peers({})) if self.view.nodes else snap.peers,
            training=training_of(*last[-1]) if last else None,
            **self._window(snap, now),
        )

    def _window(self, snap: Snapshot, now: float) -> dict[str, float | None]:
        """The busy and blocked shares and local rounds per chain round over the last rounds
        (None before the ledger's clock is known)."""
        if snap.genesis is None or not snap.round_length:
            return {"busy_share": None, "blocked_share": None, "local_rounds_per_round": None}
        window = self.node.window(snap.genesis, snap.round_length, now)
        shares = window.shares
        return {
            "busy_share": shares.busy_share if shares else None,
            "blocked_share": shares.blocked_share if shares else None,
            "local_rounds_per_round": window.local_rounds_per_round,
        }

    def close(self) -> None:
        self.node.close()
