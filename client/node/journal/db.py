"""The journal's SQLite database: its schema and version, opening it (WAL, or read-only for
another process), and the one transaction API that client.node.journal.journal and .peers write
through: `tx()` commits on success and rolls back on an exception, so a SIGKILL leaves the file
as it was before or after each write.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

VERSION = 5  # PRAGMA user_version; a journal of another version is refused, never reinterpreted
# (4: the outbox kinds `draw` and `settle` replace `rearm`, for a ledger without rearmBeacon)

TABLES = """
CREATE TABLE IF NOT EXISTS rounds (
    round INTEGER PRIMARY KEY,
    phase TEXT NOT NULL,
    reason TEXT,
    batch BLOB,
    digest TEXT,
    cid TEXT,
    claimed INTEGER,
    signal INTEGER,  -- the batch's learning signal (client.credit): what the ledger pays by
    rollouts INTEGER,
    local_rounds INTEGER,
    tx_hash TEXT,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS local_rounds (
    round INTEGER NOT NULL,
    k INTEGER NOT NULL,
    part BLOB NOT NULL,
    rollouts INTEGER NOT NULL,
    score INTEGER NOT NULL,
    started REAL NOT NULL,
    finished REAL NOT NULL,
    PRIMARY KEY (round, k)
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
CREATE TABLE IF NOT EXISTS peer_submissions (
    round INTEGER NOT NULL,
    node TEXT NOT NULL,
    digest TEXT NOT NULL,
    rollouts INTEGER NOT NULL,
    score INTEGER NOT NULL,
    signal INTEGER NOT NULL,
    block INTEGER,  -- its Submitted event's: the draw's stake snapshot, the next block its beacon
    -- the draw's stake snapshot where it is not `block`: an escalated root lane batch's, its
    -- root's block (the ledger keeps the root's committee; its Submitted event is later)
    snapshot INTEGER,
    PRIMARY KEY (round, node)
);
CREATE TABLE IF NOT EXISTS peer_batches (
    round INTEGER NOT NULL,
    node TEXT NOT NULL,
    digest TEXT NOT NULL,
    verdict TEXT NOT NULL,
    reason TEXT,
    claimed INTEGER,
    recomputed INTEGER,
    claimed_signal INTEGER,
    recomputed_signal INTEGER,
    findings INTEGER,  -- what we found wrong (client.node.rollouts FINDINGS bits)
    failures INTEGER NOT NULL DEFAULT 0,  -- fetches that found it unavailable, in a row
    items TEXT,
    fetched REAL NOT NULL,
    source TEXT,  -- whose IPFS node gave the batch (the producer, or a peer who agreed with it)
    PRIMARY KEY (round, node)
);
CREATE TABLE IF NOT EXISTS peer_appeals (  -- peers' batches their producers appealed
    round INTEGER NOT NULL,
    node TEXT NOT NULL,
    appeal_block INTEGER NOT NULL,
    PRIMARY KEY (round, node)
);
CREATE TABLE IF NOT EXISTS used_items (
    round INTEGER NOT NULL,
    node TEXT NOT NULL,
    idx INTEGER NOT NULL,
    PRIMARY KEY (round, node, idx)
);
CREATE TABLE IF NOT EXISTS metrics (
    round INTEGER NOT NULL,
    k INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (round, k)
);
CREATE TABLE IF NOT EXISTS spans (
    started REAL NOT NULL,
    ended REAL NOT NULL,
    stage TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS spans_by_end ON spans (ended);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""
# Rounds per phase, kept by triggers in the transaction that moves a round (a count of the
# rounds table would grow with the journal); filled once from the rows when it is new.
PHASE_COUNTS = """
CREATE TABLE phase_counts (phase TEXT PRIMARY KEY, n INTEGER NOT NULL);
INSERT INTO phase_counts SELECT phase, COUNT(*) FROM rounds GROUP BY phase;
"""
# The indexes keep what readers ask each second (the TUI, /metrics: rounds per phase, the pending
# outbox, verdict counts, per-peer counts) from scanning a journal that grows for weeks, and
# peer_totals keeps the per-peer counts of the rows pruned (PeerBook.prune). They change no row,
# so a journal of this version written before them gets them when its node next opens it.
INDEXES = """
CREATE INDEX IF NOT EXISTS rounds_by_phase ON rounds (phase, round);
CREATE TRIGGER IF NOT EXISTS phase_counts_insert AFTER INSERT ON rounds BEGIN
    INSERT INTO phase_counts VALUES (new.phase, 1)
        ON CONFLICT(phase) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS phase_counts_update AFTER UPDATE OF phase ON rounds BEGIN
    UPDATE phase_counts SET n = n - 1 WHERE phase = old.phase;
    INSERT INTO phase_counts VALUES (new.phase, 1)
        ON CONFLICT(phase) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS phase_counts_delete AFTER DELETE ON rounds BEGIN
    UPDATE phase_counts SET n = n - 1 WHERE phase = old.phase;
END;
CREATE INDEX IF NOT EXISTS outbox_by_status ON outbox (status, kind, round);
CREATE INDEX IF NOT EXISTS peer_batches_by_verdict ON peer_batches (verdict);
CREATE INDEX IF NOT EXISTS peer_batches_by_node ON peer_batches (node, verdict);
CREATE INDEX IF NOT EXISTS used_items_by_node ON used_items (node);
CREATE INDEX IF NOT EXISTS peer_submissions_by_block ON peer_submissions (block);
CREATE TABLE IF NOT EXISTS peer_families (  -- each peer's model family (nodeInfo; fixed for life)
    node TEXT PRIMARY KEY,
    family TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS receipts (  -- what a root lane's aggregator receipted of ours
    key TEXT PRIMARY KEY,  -- submission:ROUND
    round INTEGER NOT NULL,
    aggregator TEXT NOT NULL,  -- whose key signed the receipt (the root's poster it binds)
    message BLOB NOT NULL,  -- the signed message as sent (client.chain.messages.Signed)
    receipt TEXT NOT NULL,  -- the aggregator's EIP-712 signature of the message's signing hash
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS relayed_votes (  -- our checkers' receipted votes on our batches
    round INTEGER NOT NULL,
    voter TEXT NOT NULL,  -- lowercase; one vote each (the first that held is kept)
    message BLOB NOT NULL,  -- its signed vote (client.chain.messages.Signed)
    receipt TEXT NOT NULL,  -- the round's aggregator's receipt of it
    updated REAL NOT NULL,
    PRIMARY KEY (round, voter)
);
CREATE TABLE IF NOT EXISTS book_credits (  -- the root lane's verdict root on each batch of ours
    round INTEGER PRIMARY KEY,
    signal INTEGER NOT NULL,  -- the learning signal our submission claimed
    credited INTEGER NOT NULL,  -- 1: the verdict root credits it (as our audit of it found)
    updated REAL NOT NULL,
    votes INTEGER NOT NULL DEFAULT 0  -- the signed agreeing votes its credit carries
);
CREATE TABLE IF NOT EXISTS book_entries (  -- our credits in the root lane's verdict roots, proofs
    round INTEGER PRIMARY KEY,  -- and all (earnings.Entry.to_json): what our earnings are checked
    entry TEXT NOT NULL  -- against in each later root; the newest few only
);
CREATE TABLE IF NOT EXISTS book_peers (  -- per node, what the root lane's lists we read say of it
    node TEXT PRIMARY KEY,
    submissions INTEGER NOT NULL DEFAULT 0,  -- its entries in the submission lists read
    last_round INTEGER,  -- the last round a submission list held its batch
    credited INTEGER NOT NULL DEFAULT 0  -- the learning signal the verdict lists read credit it
);
CREATE TABLE IF NOT EXISTS book_counted (  -- the lists book_peers counted (each once, restarts too)
    round INTEGER NOT NULL,
    kind TEXT NOT NULL,  -- submissions or verdicts
    PRIMARY KEY (round, kind)
);
CREATE TABLE IF NOT EXISTS peer_totals (  -- per peer, what the rows pruned counted (PeerBook.prune)
    node TEXT PRIMARY KEY,
    verified INTEGER NOT NULL DEFAULT 0,
    bad INTEGER NOT NULL DEFAULT 0,
    unavailable INTEGER NOT NULL DEFAULT 0,
    used INTEGER NOT NULL DEFAULT 0
);
"""
SCHEMA = TABLES + PHASE_COUNTS + INDEXES


class JournalVersionError(Exception):
    """The journal was written by another version of the client."""


class JournalDB:
    """One node's journal file; safe to share between the node's threads."""

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
        self._check_version(read_only)
        self._lock = threading.Lock()

    def _check_version(self, read_only: bool) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        tables = self._db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type='table'")
        if version == VERSION:
            if not read_only:
                self._add_indexes()
            return
        if version == 0 and tables.fetchone()[0] == 0 and not read_only:
            self._db.executescript(SCHEMA)
            self._db.execute(f"PRAGMA user_version = {VERSION}")
            return
        raise JournalVersionError(
            f"{self.path} was written by another version of sapo-swarm (journal version "
            f"{version}, this client writes {VERSION}); move it aside to start a fresh journal "
            "(the checkpoint beside it is kept)"
        )

    def _add_indexes(self) -> None:
        """Gives a journal of this version written before them the phase counts, the indexes,
        the tables added since and peer_submissions' block and snapshot, and drops the tables
        no longer written (one transaction: a reader sees all of it or none)."""
        [(has_counts,)] = self._db.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'phase_counts'"
        ).fetchall()
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(peer_submissions)")}
        add_columns = "".join(
            f"ALTER TABLE peer_submissions ADD {name} INTEGER;"
            for name in ("block", "snapshot")
            if name not in columns
        )
        booked = {row[1] for row in self._db.execute("PRAGMA table_info(book_credits)")}
        add_votes = (
            "ALTER TABLE book_credits ADD votes INTEGER NOT NULL DEFAULT 0;"
            if booked and "votes" not in booked
            else ""
        )
        self._db.executescript(
            "BEGIN IMMEDIATE;"
            + ("" if has_counts else PHASE_COUNTS)
            + add_columns
            + add_votes
            # who agreed with which peer batch is read from the ledger per batch fetched now
            + "DROP TABLE IF EXISTS peer_attesters;"
            + INDEXES
            + "COMMIT;"
        )

    def columns(self, table: str) -> set[str]:
        return {row[1] for row in self.all(f"PRAGMA table_info({table})")}

    def has_table(self, name: str) -> bool:
        return bool(self.all("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", name))

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One transaction: commits when the block ends, rolls back if it raises."""
        with self._lock, self._db:
            yield self._db

    def all(self, sql: str, *args: Any) -> list[tuple]:
        """Returns every row of one read."""
        with self._lock:
            return self._db.execute(sql, args).fetchall()
