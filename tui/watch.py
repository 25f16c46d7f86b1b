"""The watcher: reads one node's journal, event log, the ledger and the store into a `Snapshot`.

It runs off the UI thread (a Textual thread worker calls `snapshot()` every second or so) and
never raises for a part that is down: the part's badge turns red, its data keeps the last
reading with its age, and the next call tries again. It is the same whether the node runs in
this process (`sapo tui --config`) or elsewhere (`sapo tui --attach`): both write the journal
and `events.jsonl` in the data dir; a live node adds its in-memory phase and pause state.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import defaultdict, deque
from dataclasses import replace
from pathlib import Path
from typing import Any

from client.chain import ChainError, Ledger, connect
from client.config import NodeConfig
from client.node.journal import BAD, UNAVAILABLE, Journal
from client.store import StoreError, open_store
from tui.format import short
from tui.ledgerview import LedgerView
from tui.state import Activity, Health, RoundPoint, Snapshot, Training

ACTIVITY_ROWS = 500
HISTORY_ROUNDS = 60
TIMEOUT_S = 3.0  # the watcher's own RPC and store calls: a red badge soon, not a frozen one


class EventTail:
    """Reads the lines appended to a JSONL file since the last call (a torn last line waits)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        events = []
        for line in complete.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("kind"), str):
                events.append(event)
        return events


def _short_hash(value: Any) -> str:
    text = str(value or "")
    return f"{text[:12]}…{text[-4:]}" if len(text) > 20 else text


def activity_of(event: dict[str, Any]) -> Activity | None:
    """Returns the activity line a node event makes (None for the ones a log need not show)."""
    kind, t, r = event["kind"], float(event.get("time") or time.time()), event.get("round")
    message = str(event.get("message", ""))
    if kind == "round.submitted":
        tx = _short_hash(event.get("tx_hash")) or "already on chain"
        return Activity(
            t,
            "submission",
            f"round {r}: submitted {event.get('cid') or event.get('digest')} · tx {tx} · confirmed",
            r,
        )
    if kind == "round.pinned":
        return Activity(t, "submission", f"round {r}: pinned {event.get('cid')} · pending", r)
    if kind == "peer.attested":
        return Activity(
            t,
            "attestation",
            f"round {r}: we attested {short(str(event.get('node')))}'s batch "
            f"{int(event.get('score') or 0) / 10_000:.4f} · tx {_short_hash(event.get('tx_hash'))}",
            r,
        )
    if kind in ("submit.dropped", "attest.dropped"):
        return Activity(t, "missed", message, r, "error")
    if kind in ("peer.bad", "peer.unavailable", "node.pending"):
        return Activity(t, kind.split(".")[1], message, r, "warning")
    if kind in ("chain.status", "store.status"):
        return Activity(t, kind.split(".")[0], message, r, "info" if event.get("ok") else "error")
    if kind in ("node.started", "node.stopped", "node.error"):
        return Activity(t, "node", message, r, "error" if kind == "node.error" else "info")
    return None


def training_of(round_: int, m: dict[str, Any]) -> Training:
    timing = (m.get("timings") or {}).get("train")
    return Training(
        round=round_,
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
        train_seconds=float(timing[0]) if timing else None,
    )


class Watcher:
    """Builds snapshots of the node whose config is `cfg` and whose address is `address`."""

    def __init__(self, cfg: NodeConfig, address: str, *, mode: str = "attached"):
        self.cfg = cfg
        self.address = address
        self.mode = mode
        self.data_dir = Path(cfg.node.data_dir)
        self.tail = EventTail(self.data_dir / "events.jsonl")
        self.activity: deque[Activity] = deque(maxlen=ACTIVITY_ROWS)
        self.activity_total = 0  # lines ever added: a widget appends the ones it has not seen
        self._lock = threading.Lock()  # `note` comes from action workers
        self.phase = "starting"
        self.journal: Journal | None = None
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
        self.last = Snapshot(time.time(), mode, address, str(self.data_dir))

    def note(self, activity: Activity) -> None:
        """Adds a line of our own to the activity log (an action's outcome, an error)."""
        self._add(activity)

    def _add(self, line: Activity) -> None:
        with self._lock:
            self.activity.append(line)
            self.activity_total += 1

    def snapshot(self, *, phase: str | None = None, paused: bool = False, running: bool = False):
        """Returns a fresh snapshot; parts that do not answer keep their last values."""
        now = time.time()
        for event in self.tail.read():
            if event["kind"] == "node.phase":
                self.phase = str(event.get("phase", self.phase))
            elif event["kind"] == "node.stopped":
                self.phase = "stopped"
            if (line := activity_of(event)) is not None:
                self._add(line)
        snap = replace(self.last, taken_at=now, phase=phase or self.phase, paused=paused)
        snap = replace(snap, node_running=running)
        snap = self._chain(snap, now)
        snap = self._store(snap, now)
        snap = self._journal(snap)
        with self._lock:
            snap = replace(snap, activity=tuple(self.activity), activity_total=self.activity_total)
        self.last = snap
        return snap

    def _chain(self, snap: Snapshot, now: float) -> Snapshot:
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
            unbonding_period=params.unbonding_period,
            min_stake=params.min_stake,
            account=self.view.account,
            reward_pool=self.view.reward_pool,
        )

    def _store(self, snap: Snapshot, now: float) -> Snapshot:
        try:
            self.store.ping()
        except StoreError as exc:
            self.store_health = Health(False, self.store_health.as_of, str(exc))
        else:
            self.store_health = Health(True, now)
        return replace(snap, store=self.store_health)

    def _journal(self, snap: Snapshot) -> Snapshot:
        try:
            return self._read_journal(snap)
        except sqlite3.Error as exc:  # e.g. locked for longer than the time-out: keep the last
            self._add(Activity(time.time(), "error", f"journal not readable: {exc}", None, "error"))
            return snap

    def _read_journal(self, snap: Snapshot) -> Snapshot:
        if self.journal is None:
            try:
                self.journal = Journal.read_only(self.data_dir / "journal.sqlite")
            except FileNotFoundError:
                return snap  # the node has not started here yet
        counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for row in self.journal.peer_verdicts():
            c = counts[row["node"].lower()]
            c["used"] += int(row["used"] or 0)
            if row["verdict"] == BAD:
                c["bad"] += 1
            elif row["verdict"] == UNAVAILABLE:
                c["unavailable"] += 1
        metrics = self.journal.all_metrics()
        history = tuple(training_of(r, metrics[r]) for r in sorted(metrics)[-HISTORY_ROUNDS:])
        ours = self.view.our_submissions()
        points = [
            RoundPoint(
                round=r,
                reward_local=(metrics.get(r) or {}).get("reward_local"),
                reward_external=(metrics.get(r) or {}).get("reward_external"),
                claimed=ours[r][0] if r in ours else None,
                credited=(ours[r][0] if ours[r][1] else 0) if r in ours else None,
            )
            for r in sorted(set(metrics) | set(ours))
        ]
        peers = self.view.peers(counts) if self.view.nodes else list(snap.peers)
        return replace(
            snap,
            peers=tuple(peers),
            rounds=tuple(points),
            payouts=tuple(self.view.payouts),
            training=history[-1] if history else None,
            history=history,
        )

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
