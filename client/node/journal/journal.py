"""The node's journal: one SQLite file (WAL) that makes a crash lose nothing.

It records, per chain round, how far the node got and why a round was missed or skipped; the
local rounds it finished in that round (each one's part of the batch, so a restart seals exactly
what was generated); the sealed batch bytes (a restart re-pins and re-submits them, never a
second batch); an outbox of the publisher's messages (client.node.journal.outbox), each under the
idempotency key its type builds; the peers' submissions it discovered (and where the event scan
stopped), the peer batches it fetched with their verdicts and the items that passed its
verifier, and the peer items it trained on; a metrics row per local round; and the spans of time
the compute stage spent generating, training and checkpointing (the read model's busy share).

Every write is one transaction, so a SIGKILL leaves the file as it was before or after it. Other
processes (the TUI, `sapo devnet status`) read it concurrently through `Journal.read_only`.

The schema, its version and the transaction API are client.node.journal.db; the peer tables'
reads and writes are client.node.journal.peers.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from client.node.journal.db import JournalDB
from client.node.journal.outbox import (
    SELECT_ENTRIES,
    Message,
    OutboxEntry,
    OutboxStatus,
    Pin,
    Submit,
    entry_of,
    insert_message,
)
from client.node.journal.peers import PeerBook
from client.node.journal.records import Kept, LocalRoundRecord, RoundRecord
from client.node.journal.states import FORWARD, OutboxKind, RoundPhase


class Journal:
    """The journal of one node's data dir; safe to share between the node's threads."""

    def __init__(self, path: Path, *, read_only: bool = False):
        self.db = JournalDB(path, read_only=read_only)
        self.path = self.db.path
        self.peers = PeerBook(self.db)

    @classmethod
    def read_only(cls, path: Path) -> Journal:
        return cls(path, read_only=True)

    def close(self) -> None:
        self.db.close()

    @staticmethod
    def last_round_in(path: Path) -> int | None:
        """The latest chain round the journal at `path` has a record of (None: none), read
        without leaving a trace: no lock and no -wal or -shm file, which even a read-only
        connection to a WAL journal creates (so it must not run beside a node writing there)."""
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            return db.execute("SELECT MAX(round) FROM rounds").fetchone()[0]
        finally:
            db.close()

    # ------------------------------------------------------------------------- chain rounds

    def round(self, round_: int) -> RoundRecord | None:
        rows = self.db.all("SELECT * FROM rounds WHERE round = ?", round_)
        return RoundRecord(*rows[0]) if rows else None

    def rounds(self, last: int | None = None, *, first: int = 0) -> list[RoundRecord]:
        """Returns the recorded chain rounds from `first`, oldest first (only the `last` ones
        when given), without their batch bytes (`round(r)` has them)."""
        rows = self.db.all(
            "SELECT round, phase, reason, NULL, digest, cid, claimed, signal, rollouts, "
            "local_rounds, tx_hash, updated FROM rounds WHERE round >= ? "
            "ORDER BY round DESC LIMIT ?",
            first,
            -1 if last is None else last,
        )
        return [RoundRecord(*r) for r in reversed(rows)]

    def local_round_counts(self, first: int) -> dict[int, int]:
        """Returns chain round -> local rounds started in it (published or not), from `first`."""
        rows = self.db.all(
            "SELECT round, COUNT(*) FROM metrics WHERE round >= ? GROUP BY round", first
        )
        return dict(rows)

    def collecting(self) -> list[int]:
        """Returns the chain rounds whose batch is still open, oldest first."""
        return [
            r
            for (r,) in self.db.all(
                "SELECT round FROM rounds WHERE phase = ?", RoundPhase.COLLECTING
            )
        ]

    def add_local_round(self, rec: LocalRoundRecord) -> None:
        """Records a finished local round in its chain round's open batch."""
        with self.db.tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO rounds (round, phase, updated) VALUES (?, ?, ?)",
                (rec.round, RoundPhase.COLLECTING, time.time()),
            )
            db.execute(
                "INSERT INTO local_rounds VALUES (?, ?, ?, ?, ?, ?, ?)",
                (rec.round, rec.k, rec.part, rec.rollouts, rec.score, rec.started, rec.finished),
            )

    def local_rounds(self, round_: int) -> list[LocalRoundRecord]:
        rows = self.db.all("SELECT * FROM local_rounds WHERE round = ? ORDER BY k", round_)
        return [LocalRoundRecord(*r) for r in rows]

    def next_k(self, round_: int) -> int:
        """Returns the number of the next local round of a chain round (after every one it
        journaled, published or not)."""
        rows = self.db.all(
            "SELECT MAX(k) FROM (SELECT k FROM local_rounds WHERE round = ? "
            "UNION SELECT k FROM metrics WHERE round = ?)",
            round_,
            round_,
        )
        return 0 if rows[0][0] is None else rows[0][0] + 1

    def open_batch(self, round_: int) -> tuple[int, int]:
        """Returns (local rounds, bytes of their parts) a chain round's open batch holds."""
        rows = self.db.all(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(part)), 0) FROM local_rounds WHERE round = ?",
            round_,
        )
        return rows[0][0], rows[0][1]

    def seal(
        self,
        round_: int,
        batch: bytes,
        digest: str,
        claimed: int,
        rollouts: int,
        local: int,
        signal: int,
    ) -> None:
        """Closes a chain round's batch and queues its pin and submission, in one transaction."""
        now = time.time()
        with self.db.tx() as db:
            db.execute(
                "INSERT INTO rounds (round, phase, batch, digest, claimed, signal, rollouts, "
                "local_rounds, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON "
                "CONFLICT(round) DO UPDATE SET phase = excluded.phase, batch = excluded.batch, "
                "digest = excluded.digest, claimed = excluded.claimed, signal = excluded.signal, "
                "rollouts = excluded.rollouts, local_rounds = excluded.local_rounds, updated = "
                "excluded.updated WHERE rounds.phase = ?",
                (
                    *(round_, RoundPhase.SEALED, batch, digest, claimed, signal, rollouts, local),
                    *(now, RoundPhase.COLLECTING),
                ),
            )
            insert_message(db, Pin(round=round_), now)
            submit = Submit(
                round=round_, digest=digest, rollouts=rollouts, score=claimed, signal=signal
            )
            insert_message(db, submit, now)

    def advance(self, round_: int, phase: RoundPhase, **fields: Any) -> None:
        """Moves a round to `phase` (never backwards) and sets cid / tx_hash when given."""
        phase = RoundPhase(phase)  # ValueError for a name that is no phase
        if phase not in FORWARD:
            raise ValueError(f"{phase!r} is not a phase a round advances to")
        record = self.round(round_)
        with self.db.tx() as db:
            if record is None:
                db.execute(
                    "INSERT INTO rounds (round, phase, updated) VALUES (?, ?, ?)",
                    (round_, phase, time.time()),
                )
            elif not record.ended and FORWARD.index(phase) > FORWARD.index(record.phase):
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

    def end(self, round_: int, phase: RoundPhase, reason: str) -> None:
        """Marks a round missed or skipped with the reason (the first reason is kept)."""
        phase = RoundPhase(phase)
        if not phase.ended:
            raise ValueError(f"{phase!r} does not end a round")
        with self.db.tx() as db:
            db.execute(
                "INSERT INTO rounds (round, phase, reason, updated) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(round) DO UPDATE SET phase = excluded.phase, "
                "reason = COALESCE(rounds.reason, excluded.reason), updated = excluded.updated",
                (round_, phase, reason, time.time()),
            )

    def confirmed_rounds(self) -> list[int]:
        """Returns the rounds whose submission is on chain."""
        rows = self.db.all(
            "SELECT round FROM outbox WHERE kind = ? AND status = ? ORDER BY round",
            OutboxKind.SUBMIT,
            OutboxStatus.DONE,
        )
        return [r for (r,) in rows]

    # -------------------------------------------------------------------------------- outbox

    def enqueue(self, message: Message) -> bool:
        """Queues a message unless one with its key is queued or sent already; returns whether
        it was new."""
        with self.db.tx() as db:
            return insert_message(db, message, time.time())

    def pending(self, kind: str | None = None) -> list[OutboxEntry]:
        rows = self.db.all(
            f"{SELECT_ENTRIES} WHERE status = ? AND (? IS NULL OR kind = ?) ORDER BY created",
            OutboxStatus.PENDING,
            kind,
            kind,
        )
        return [entry_of(r) for r in rows]

    def outbox(self, key: str) -> OutboxEntry | None:
        rows = self.db.all(f"{SELECT_ENTRIES} WHERE key = ?", key)
        return entry_of(rows[0]) if rows else None

    def outbox_entries(self, kind: str | None = None) -> list[OutboxEntry]:
        rows = self.db.all(
            f"{SELECT_ENTRIES} WHERE (? IS NULL OR kind = ?) ORDER BY created", kind, kind
        )
        return [entry_of(r) for r in rows]

    def created_since(self, kind: str, since: float) -> int:
        """How many outbox entries of `kind` were queued at or after `since` (unix time)."""
        rows = self.db.all(
            "SELECT COUNT(*) FROM outbox WHERE kind = ? AND created >= ?", kind, since
        )
        return rows[0][0]

    def attempted(self, key: str, error: str) -> None:
        """Counts a failed attempt of a pending entry and keeps why."""
        with self.db.tx() as db:
            db.execute(
                "UPDATE outbox SET attempts = attempts + 1, error = ?, updated = ? WHERE key = ?",
                (error[:500], time.time(), key),
            )

    def done(self, key: str, tx_hash: str | None = None) -> None:
        with self.db.tx() as db:
            db.execute(
                "UPDATE outbox SET status = ?, tx_hash = COALESCE(?, tx_hash), error = NULL, "
                "updated = ? WHERE key = ?",
                (OutboxStatus.DONE, tx_hash, time.time(), key),
            )

    def dropped(self, key: str, reason: str) -> None:
        with self.db.tx() as db:
            db.execute(
                "UPDATE outbox SET status = ?, error = ?, updated = ? WHERE key = ?",
                (OutboxStatus.DROPPED, reason[:500], time.time(), key),
            )

    # ------------------------------------------------------------------------- receipts

    def keep_receipt(self, kept: Kept) -> None:
        """Keeps what an aggregator receipted of ours (the proof should its root leave it
        out); a second receipt under one key replaces nothing."""
        with self.db.tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO receipts (key, round, aggregator, message, receipt, "
                "updated) VALUES (?, ?, ?, ?, ?, ?)",
                (kept.key, kept.round, kept.aggregator, kept.message, kept.receipt, time.time()),
            )

    def receipt(self, key: str) -> Kept | None:
        rows = self.db.all(
            "SELECT key, round, aggregator, message, receipt FROM receipts WHERE key = ?", key
        )
        return Kept(*rows[0]) if rows else None

    def prune_receipts(self, before_round: int) -> int:
        """Forgets the receipts of rounds before `before_round` (no proof takes them any more),
        ours and those our checkers relayed."""
        with self.db.tx() as db:
            db.execute("DELETE FROM relayed_votes WHERE round < ?", (before_round,))
            return db.execute("DELETE FROM receipts WHERE round < ?", (before_round,)).rowcount

    def keep_relayed_vote(self, round_: int, voter: str, message: bytes, receipt: str) -> bool:
        """Keeps a checker's receipted vote on our batch of `round_` (checked by the caller:
        client.node.publishing.relay); False when that voter's was kept already."""
        with self.db.tx() as db:
            return (
                db.execute(
                    "INSERT OR IGNORE INTO relayed_votes (round, voter, message, receipt, updated) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (round_, voter.lower(), message, receipt, time.time()),
                ).rowcount
                == 1
            )

    def relayed_vote_count(self) -> int:
        """How many relayed votes are kept (all rounds not pruned yet)."""
        if not self.db.has_table("relayed_votes"):  # read-only, before a node of this version
            return 0
        return self.db.all("SELECT COUNT(*) FROM relayed_votes")[0][0]

    def relayed_votes(self, round_: int) -> list[tuple[bytes, str]]:
        """The receipted votes our checkers relayed on our batch of `round_` (message, receipt),
        by voter."""
        rows = self.db.all(
            "SELECT message, receipt FROM relayed_votes WHERE round = ? ORDER BY voter", round_
        )
        return [(bytes(m), r) for m, r in rows]

    def keep_book_credit(self, round_: int, signal: int, votes: int | None) -> None:
        """Keeps what the root lane's verdict root of `round_` gave our batch (our audit of it
        found it credited with `votes` signed agreeing votes, or not: None): what the TUI and
        /metrics show of our rounds in that lane. One row a round of ours, never pruned (as
        `rounds`)."""
        with self.db.tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO book_credits (round, signal, credited, updated, votes) "
                "VALUES (?, ?, ?, ?, ?)",
                (round_, signal, int(votes is not None), time.time(), votes or 0),
            )

    def keep_book_entry(self, round_: int, entry: str, keep: int) -> None:
        """Keeps our credit in round `round_`'s verdict root (earnings.Entry.to_json), as our
        audit of it found it, and forgets all but our newest `keep` (a credit's earnings name
        our credits of the few rounds before it)."""
        with self.db.tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO book_entries (round, entry) VALUES (?, ?)", (round_, entry)
            )
            db.execute(
                "DELETE FROM book_entries WHERE round NOT IN "
                "(SELECT round FROM book_entries ORDER BY round DESC LIMIT ?)",
                (keep,),
            )

    def book_entries(self) -> list[tuple[int, str]]:
        """(round, entry) of our kept credits in the root lane's verdict roots, oldest first."""
        if not self.db.has_table("book_entries"):  # read-only, before a node of this version
            return []
        return [
            (r, e) for r, e in self.db.all("SELECT round, entry FROM book_entries ORDER BY round")
        ]

    def book_credits(
        self, first: int = 0, last: int | None = None
    ) -> dict[int, tuple[int, bool, int]]:
        """Round -> (the signal we claimed, credited?, the agreeing votes its credit carries) of
        our batches the root lane's verdict roots judged, rounds first..last."""
        if not self.db.has_table("book_credits"):  # read-only, before a node of this version
            return {}
        # a journal opened read-only before a node of this version added the column: 0 votes
        query = (
            "SELECT round, signal, credited, votes FROM book_credits "
            if "votes" in self.db.columns("book_credits")
            else "SELECT round, signal, credited, 0 FROM book_credits "
        )
        rows = self.db.all(
            query + "WHERE round >= ? AND round <= ? ORDER BY round",
            first,
            last if last is not None else 2**62,
        )
        return {r: (signal, bool(credited), n) for r, signal, credited, n in rows}

    def book_outcomes(self) -> dict[str, int]:
        """How many of our batches the root lane's verdict roots credited, and did not."""
        if not self.db.has_table("book_credits"):  # read-only, before a node of this version
            return {"credited": 0, "uncredited": 0}
        rows = dict(self.db.all("SELECT credited, COUNT(*) FROM book_credits GROUP BY credited"))
        return {"credited": rows.get(1, 0), "uncredited": rows.get(0, 0)}

    # ------------------------------------------------------------------- metrics and spans

    def metrics(self, round_: int, k: int, data: dict[str, Any]) -> None:
        with self.db.tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO metrics (round, k, data) VALUES (?, ?, ?)",
                (round_, k, json.dumps(data, sort_keys=True)),
            )

    def all_metrics(
        self, last: int | None = None, *, first: int = 0
    ) -> list[tuple[int, int, dict[str, Any]]]:
        """Returns (round, k, metrics) of the local rounds from chain round `first` (the `last`
        ones), oldest first."""
        rows = self.db.all(
            "SELECT round, k, data FROM metrics WHERE round >= ? ORDER BY round DESC, k DESC "
            "LIMIT ?",
            first,
            -1 if last is None else last,
        )
        return [(r, k, json.loads(d)) for r, k, d in reversed(rows)]

    def span(self, stage: str, started: float, ended: float) -> None:
        """Records that the compute stage spent started..ended on `stage`."""
        with self.db.tx() as db:
            db.execute("INSERT INTO spans VALUES (?, ?, ?)", (started, ended, stage))

    def spans(self, since: float) -> list[tuple[float, float, str]]:
        """Returns the spans that end after `since`, oldest first."""
        return self.db.all(
            "SELECT started, ended, stage FROM spans WHERE ended > ? ORDER BY started", since
        )

    def spans_after(self, rowid: int, limit: int = 10_000) -> list[tuple[int, float, float, str]]:
        """Returns (rowid, started, ended, stage) of the spans written after row `rowid`, in the
        order written: a reader that keeps the last rowid sees each span once, whichever thread
        wrote it and however late."""
        return self.db.all(
            "SELECT rowid, started, ended, stage FROM spans WHERE rowid > ? ORDER BY rowid LIMIT ?",
            rowid,
            limit,
        )

    # ------------------------------------------------------------------------------ totals

    def work_after(self, rowid: int) -> tuple[int, int, int, int, int]:
        """(last row id, local rounds, generated tokens, trained tokens, last GRPO step) over
        the metrics rows written after row `rowid`: a reader that keeps the last row id reads
        each local round once, so its totals cost what is new, not the journal's age (a local
        round's (round, k) is never written twice: `next_k` counts its metrics row)."""
        [(last, local_rounds, generated, trained, step)] = self.db.all(
            "SELECT COALESCE(MAX(rowid), ?), COUNT(*), "
            "COALESCE(SUM(json_extract(data, '$.new_tokens')), 0), "
            "COALESCE(SUM(json_extract(data, '$.tokens')), 0), "
            "COALESCE(MAX(json_extract(data, '$.step')), 0) FROM metrics WHERE rowid > ?",
            rowid,
            rowid,
        )
        return int(last), int(local_rounds), int(generated), int(trained), int(step)

    def phases(self) -> dict[str, tuple[int, int]]:
        """Chain rounds per phase: (how many are in it now, the last one); counted by the
        journal's triggers and looked up in the (phase, round) index, so the answer costs the
        same however many rounds the journal holds."""
        if self.db.has_table("phase_counts"):
            counts = dict(self.db.all("SELECT phase, n FROM phase_counts WHERE n > 0"))
        else:  # a journal its node has not opened since this client: count the rows
            counts = dict(self.db.all("SELECT phase, COUNT(*) FROM rounds GROUP BY phase"))
        found = {}
        for phase in counts:
            [(last,)] = self.db.all("SELECT MAX(round) FROM rounds WHERE phase = ?", phase)
            found[phase] = (counts[phase], last)
        return found

    def outbox_pending(self) -> dict[str, tuple[int, float]]:
        """The pending outbox per kind: (entries, the oldest one's creation time)."""
        return {
            kind: (count, oldest)
            for kind, count, oldest in self.db.all(
                "SELECT kind, COUNT(*), MIN(created) FROM outbox WHERE status = ? GROUP BY kind",
                OutboxStatus.PENDING,
            )
        }

    def local_round_total(self) -> int:
        """Local rounds recorded (a row count, which SQLite answers without reading rows)."""
        return self.db.all("SELECT COUNT(*) FROM metrics")[0][0]

    def first_metrics_round(self) -> int | None:
        """The chain round of the node's first recorded local round (None before one)."""
        return self.db.all("SELECT MIN(round) FROM metrics")[0][0]

    def last_confirmed_round(self) -> int | None:
        """The last round whose submission is on chain (`confirmed_rounds()[-1]`, from the
        index)."""
        return self.db.all(
            "SELECT MAX(round) FROM outbox WHERE status = ? AND kind = ?",
            OutboxStatus.DONE,
            OutboxKind.SUBMIT,
        )[0][0]

    def prune_spans(self, before: float) -> None:
        with self.db.tx() as db:
            db.execute("DELETE FROM spans WHERE ended < ?", (before,))
