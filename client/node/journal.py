"""The node's journal: one SQLite file (WAL) that makes a crash lose nothing.

It records, per round, how far the node got (phase) and why a round was missed; the round's own
batch bytes (so a restart re-pins and re-submits exactly what it generated, never a second
batch); an outbox of pins and transactions keyed for idempotency (`submit:12`,
`attest:12:0xabc…`); the peer batches fetched and their verdicts, with the items that passed
our verifier (the SAPO sampler draws from them); and a metrics row per trained round.

Every write is one transaction, so a SIGKILL leaves the file as it was before or after it.
Other processes (the TUI, `sapo devnet status`) read it concurrently through `Journal.read_only`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A round moves forward through these; `missed` ends it with a reason.
PHASES = (
    "generated",
    "pinned",
    "submitted",
    "confirmed",
    "attested",
    "trained",
    "checkpointed",
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS rounds (
    round INTEGER PRIMARY KEY,
    phase TEXT NOT NULL,
    reason TEXT,
    batch BLOB,
    digest TEXT,
    cid TEXT,
    claimed INTEGER,
    tx_hash TEXT,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    round INTEGER NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    tx_hash TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS peer_batches (
    round INTEGER NOT NULL,
    node TEXT NOT NULL,
    digest TEXT NOT NULL,
    verdict TEXT NOT NULL,
    reason TEXT,
    claimed INTEGER,
    recomputed INTEGER,
    items TEXT,
    used INTEGER NOT NULL DEFAULT 0,
    fetched REAL NOT NULL,
    PRIMARY KEY (round, node)
);
CREATE TABLE IF NOT EXISTS metrics (
    round INTEGER PRIMARY KEY,
    data TEXT NOT NULL
);
"""

# Verdicts of a fetched peer batch.
VERIFIED, BAD, UNAVAILABLE = "verified", "bad", "unavailable"


@dataclass(frozen=True)
class RoundRecord:
    round: int
    phase: str
    reason: str | None
    batch: bytes | None
    digest: str | None
    cid: str | None
    claimed: int | None
    tx_hash: str | None
    updated: float

    def reached(self, phase: str) -> bool:
        """True once the round got to `phase` (a missed round reached nothing more)."""
        return self.phase != "missed" and PHASES.index(self.phase) >= PHASES.index(phase)


@dataclass(frozen=True)
class OutboxEntry:
    key: str
    kind: str  # "pin" | "submit" | "attest"
    round: int
    payload: dict[str, Any]
    status: str  # "pending" | "done" | "dropped"
    tx_hash: str | None
    attempts: int
    error: str | None


@dataclass(frozen=True)
class PeerItem:
    """A verified peer item: the question, completions, and OUR verifier's rewards in [0, 1]."""

    round: int
    node: str
    index: int
    question: str
    completions: list[str]
    rewards: list[float]


class Journal:
    """The journal of one node's data dir; safe to share between threads of one process."""

    def __init__(self, path: Path, *, read_only: bool = False):
        self.path = Path(path)
        if read_only:
            if not self.path.is_file():
                raise FileNotFoundError(f"no journal at {self.path}: has this node run here?")
            uri = f"file:{self.path}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=5)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)
        self._lock = threading.Lock()

    @classmethod
    def read_only(cls, path: Path) -> Journal:
        return cls(path, read_only=True)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._db:  # commits on success, rolls back on an exception
            yield self._db

    def _all(self, sql: str, *args: Any) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # -------------------------------------------------------------------------------- rounds

    def round(self, round_: int) -> RoundRecord | None:
        rows = self._all("SELECT * FROM rounds WHERE round = ?", round_)
        return RoundRecord(*rows[0]) if rows else None

    def rounds(self, last: int | None = None) -> list[RoundRecord]:
        """Returns the recorded rounds, oldest first (only the `last` ones when given)."""
        rows = self._all(
            "SELECT * FROM rounds ORDER BY round DESC LIMIT ?", -1 if last is None else last
        )
        return [RoundRecord(*r) for r in reversed(rows)]

    def generated(self, round_: int, batch: bytes, digest: str, claimed: int) -> None:
        """Records this round's batch; the first one recorded for a round is the one kept."""
        with self._tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO rounds (round, phase, batch, digest, claimed, updated) "
                "VALUES (?, 'generated', ?, ?, ?, ?)",
                (round_, batch, digest, claimed, time.time()),
            )

    def advance(self, round_: int, phase: str, **fields: Any) -> None:
        """Moves a round to `phase` (never backwards) and sets cid / tx_hash when given."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}")
        record = self.round(round_)
        with self._tx() as db:
            if record is None:
                db.execute(
                    "INSERT INTO rounds (round, phase, updated) VALUES (?, ?, ?)",
                    (round_, phase, time.time()),
                )
            elif record.phase != "missed" and PHASES.index(phase) > PHASES.index(record.phase):
                db.execute(
                    "UPDATE rounds SET phase = ?, updated = ? WHERE round = ?",
                    (phase, time.time(), round_),
                )
            for name in ("cid", "tx_hash"):
                if fields.get(name):
                    db.execute(
                        f"UPDATE rounds SET {name} = ? WHERE round = ?",  # noqa: S608 - fixed names
                        (fields[name], round_),
                    )

    def missed(self, round_: int, reason: str) -> None:
        """Marks a round missed with the reason (kept if it was already missed)."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO rounds (round, phase, reason, updated) VALUES (?, 'missed', ?, ?) "
                "ON CONFLICT(round) DO UPDATE SET phase = 'missed', "
                "reason = COALESCE(rounds.reason, excluded.reason), updated = excluded.updated",
                (round_, reason, time.time()),
            )

    # -------------------------------------------------------------------------------- outbox

    def enqueue(self, key: str, kind: str, round_: int, payload: dict[str, Any]) -> bool:
        """Adds an outbox entry unless one with this key exists; returns whether it was new."""
        now = time.time()
        with self._tx() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO outbox (key, kind, round, payload, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (key, kind, round_, json.dumps(payload, sort_keys=True), now, now),
            )
            return cursor.rowcount == 1

    def pending(self, kind: str | None = None) -> list[OutboxEntry]:
        rows = self._all(
            "SELECT key, kind, round, payload, status, tx_hash, attempts, error FROM outbox "
            "WHERE status = 'pending' AND (? IS NULL OR kind = ?) ORDER BY created",
            kind,
            kind,
        )
        return [OutboxEntry(r[0], r[1], r[2], json.loads(r[3]), *r[4:]) for r in rows]

    def outbox(self, key: str) -> OutboxEntry | None:
        rows = self._all(
            "SELECT key, kind, round, payload, status, tx_hash, attempts, error FROM outbox "
            "WHERE key = ?",
            key,
        )
        return (
            OutboxEntry(rows[0][0], rows[0][1], rows[0][2], json.loads(rows[0][3]), *rows[0][4:])
            if rows
            else None
        )

    def attempted(self, key: str, error: str) -> None:
        """Counts a failed attempt of a pending entry and keeps why."""
        with self._tx() as db:
            db.execute(
                "UPDATE outbox SET attempts = attempts + 1, error = ?, updated = ? WHERE key = ?",
                (error[:500], time.time(), key),
            )

    def done(self, key: str, tx_hash: str | None = None) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE outbox SET status = 'done', tx_hash = COALESCE(?, tx_hash), error = NULL, "
                "updated = ? WHERE key = ?",
                (tx_hash, time.time(), key),
            )

    def dropped(self, key: str, reason: str) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE outbox SET status = 'dropped', error = ?, updated = ? WHERE key = ?",
                (reason[:500], time.time(), key),
            )

    def confirmed_rounds(self) -> list[int]:
        """Returns the rounds whose submission is on chain (the round's phase may be further on,
        or past it while a submission waited in the outbox)."""
        rows = self._all(
            "SELECT round FROM outbox WHERE kind = 'submit' AND status = 'done' ORDER BY round"
        )
        return [r for (r,) in rows]

    # ---------------------------------------------------------------------------- peer batches

    def peer_verdict(self, round_: int, node: str) -> str | None:
        """Returns the verdict recorded for a peer's batch of a round, or None."""
        rows = self._all(
            "SELECT verdict FROM peer_batches WHERE round = ? AND node = ?", round_, node
        )
        return rows[0][0] if rows else None

    def peer_batch(
        self,
        round_: int,
        node: str,
        digest: str,
        verdict: str,
        *,
        reason: str | None = None,
        claimed: int | None = None,
        recomputed: int | None = None,
        items: list[dict[str, Any]] | None = None,
    ) -> None:
        """Records a fetched peer batch and its verdict (an unavailable one may be retried)."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO peer_batches (round, node, digest, verdict, reason, "
                "claimed, recomputed, items, fetched) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    round_,
                    node,
                    digest,
                    verdict,
                    reason,
                    claimed,
                    recomputed,
                    json.dumps(items) if items is not None else None,
                    time.time(),
                ),
            )

    def peer_verdicts(self, since_round: int = 0) -> list[dict[str, Any]]:
        rows = self._all(
            "SELECT round, node, digest, verdict, reason, claimed, recomputed, used "
            "FROM peer_batches WHERE round >= ? ORDER BY round, node",
            since_round,
        )
        keys = ("round", "node", "digest", "verdict", "reason", "claimed", "recomputed", "used")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def verified_items(self, first_round: int, last_round: int) -> list[PeerItem]:
        """Returns the items of verified peer batches of rounds first..last."""
        rows = self._all(
            "SELECT round, node, items FROM peer_batches WHERE verdict = ? AND round BETWEEN ? "
            "AND ? ORDER BY round, node",
            VERIFIED,
            first_round,
            last_round,
        )
        return [
            PeerItem(r, node, i, it["question"], it["completions"], it["rewards"])
            for r, node, items in rows
            for i, it in enumerate(json.loads(items or "[]"))
        ]

    def used(self, round_: int, node: str, count: int) -> None:
        """Counts `count` items of a peer batch as trained on."""
        with self._tx() as db:
            db.execute(
                "UPDATE peer_batches SET used = used + ? WHERE round = ? AND node = ?",
                (count, round_, node),
            )

    # -------------------------------------------------------------------------------- metrics

    def metrics(self, round_: int, data: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO metrics (round, data) VALUES (?, ?)",
                (round_, json.dumps(data, sort_keys=True)),
            )

    def all_metrics(self) -> dict[int, dict[str, Any]]:
        return {r: json.loads(d) for r, d in self._all("SELECT round, data FROM metrics")}
