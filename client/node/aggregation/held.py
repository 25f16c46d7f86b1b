"""What an aggregator must not lose across a restart (client.node.aggregation.service): every
signed message it held, in the order it took them, each list it built a posted root from, and
what it has folded of the rounds that stand (its EarningsBook: the credits a producer's
earnings are still proven from, each round's total, the last round folded), written as each
round is folded, so that a restart goes on from there instead of from the book's first round
(whose lists are no longer pinned by then).

A receipted submission left out of the root is a lie that costs the bond, so a message is
written here before its sender is answered (`Desk.record`); after a crash the round's collector
is rebuilt by taking the same messages in the same order, and a posted root's data (what a
data challenge asks for, and what earnings are folded from) is read back from its list.
SQLite in WAL mode, one connection shared by the endpoint's threads and the aggregator's under
a lock; every write is its own committed transaction.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

from client.chain.messages import BadMessage, Domain, Signed
from client.chain.roots import Credit, Earnings
from client.node.aggregation.earnings import EarningsBook, Entry

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    round INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_round ON messages (round);
CREATE TABLE IF NOT EXISTS earned_entries (
    round INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (round, idx)
);
CREATE TABLE IF NOT EXISTS earned_rounds (
    round INTEGER PRIMARY KEY,
    total TEXT NOT NULL,
    count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lists (
    round INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('submissions', 'verdicts')),
    data BLOB NOT NULL,
    PRIMARY KEY (round, kind)
);
"""


class HeldError(Exception):
    """The aggregator's store cannot be opened or read; the text says what to do."""


class Held:
    """The aggregator's messages and lists, in one SQLite file."""

    def __init__(self, path: Path, domain: Domain):
        self.path, self.domain = Path(path), domain
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # a receipt is answered after this
            self._db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise HeldError(
                f"the aggregator's store {self.path} cannot be opened ({exc}); check the data "
                "directory's permissions and free space"
            ) from None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def record(self, messages: list[Signed]) -> None:
        """Writes the messages of one request as they come to be held, in one transaction
        (raises on a failed write, and then none is written)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO messages (round, data) VALUES (?, ?)",
                    [(m.message.round, m.to_bytes()) for m in messages],
                )
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def messages(self, round_: int) -> list[Signed]:
        """The messages held for `round_`, in the order they were taken. Each is verified again
        (the file is ours, but a message that does not verify is never taken back)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT data FROM messages WHERE round = ? ORDER BY seq", (round_,)
            ).fetchall()
        found = []
        for (data,) in rows:
            try:
                found.append(Signed.from_bytes(bytes(data), self.domain))
            except BadMessage as exc:
                raise HeldError(
                    f"{self.path}: a message of round {round_} no longer verifies ({exc}); the "
                    "file was written by another deployment or damaged"
                ) from None
        return found

    def rounds(self) -> list[int]:
        """The rounds with messages held."""
        with self._lock:
            return [r for (r,) in self._db.execute("SELECT DISTINCT round FROM messages")]

    def keep_list(self, round_: int, kind: str, data: bytes) -> None:
        """Writes the list a root is built from, before the root is posted (again: replaced)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO lists (round, kind, data) VALUES (?, ?, ?)",
                (round_, kind, data),
            )

    def list_of(self, round_: int, kind: str) -> bytes | None:
        with self._lock:
            row = self._db.execute(
                "SELECT data FROM lists WHERE round = ? AND kind = ?", (round_, kind)
            ).fetchone()
        return None if row is None else bytes(row[0])

    # ------------------------------------------------------------------------------ earnings

    def save_fold(
        self, book: EarningsBook, added: list[Entry], dropped: list[tuple[int, int]]
    ) -> None:
        """Writes one fold of `book` (its last round): the entries it added and dropped, the
        round's total, and how far it has folded; one transaction."""
        round_ = book.folded
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO earned_entries (round, idx, entry) VALUES (?, ?, ?)",
                    [(e.round, e.index, _entry_json(e)) for e in added],
                )
                self._db.executemany(
                    "DELETE FROM earned_entries WHERE round = ? AND idx = ?", dropped
                )
                if book.standing(round_):
                    self._db.execute(
                        "INSERT OR REPLACE INTO earned_rounds VALUES (?, ?, ?)",
                        (round_, str(book.totals[round_]), book.counts[round_]),
                    )
                self._db.execute(
                    "DELETE FROM earned_rounds WHERE round < ?", (round_ - book.keep_rounds,)
                )
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('folded', ?)", (str(round_),))
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def load_earned(self, reward_per_round: int, lag: int) -> EarningsBook | None:
        """The EarningsBook as last saved (None: nothing folded yet)."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'folded'").fetchone()
            if row is None:
                return None
            rounds = self._db.execute("SELECT round, total, count FROM earned_rounds").fetchall()
            entries = self._db.execute(
                "SELECT entry FROM earned_entries ORDER BY round, idx"
            ).fetchall()
        book = EarningsBook(reward_per_round, lag, folded=int(row[0]))
        for round_, total, count in rounds:
            book.totals[round_], book.counts[round_] = int(total), count
        for (text,) in entries:
            try:
                entry = _entry_of(text)
            except (ValueError, KeyError, TypeError) as exc:
                raise HeldError(
                    f"{self.path}: a folded credit does not read back ({exc}); the file is damaged"
                ) from None
            book.credits.setdefault(entry.credit.producer.lower(), []).append(entry)
            book.places[(entry.round, entry.index)] = entry
        return book

    def forget_before(self, round_: int) -> None:
        """Drops the messages and lists of rounds before `round_` (no window judges them)."""
        with self._lock:
            self._db.execute("DELETE FROM messages WHERE round < ?", (round_,))
            self._db.execute("DELETE FROM lists WHERE round < ?", (round_,))


def _entry_json(e: Entry) -> str:
    c, earned = e.credit, e.credit.earnings
    return json.dumps(
        {
            "round": e.round,
            "index": e.index,
            "credit": [c.index, c.producer, c.digest, str(c.score), str(c.signal), c.votes.hex()],
            "earnings": [
                str(earned.settled),
                earned.anchor,
                earned.anchor_index,
                list(earned.recent),
            ],
            "amount": str(e.amount),
            "total": str(e.total),
            "ledger_total": str(e.ledger_total),
            "proof": [[h.hex(), str(total)] for h, total in e.proof],
        },
        separators=(",", ":"),
    )


def _entry_of(text: str) -> Entry:
    raw = json.loads(text)
    index, producer, digest, score, signal, votes = raw["credit"]
    settled, anchor, anchor_index, recent = raw["earnings"]
    credit = Credit(
        index,
        producer,
        digest,
        int(score),
        int(signal),
        bytes.fromhex(votes),
        Earnings(int(settled), anchor, anchor_index, tuple(recent)),
    )
    proof = tuple((bytes.fromhex(h), int(total)) for h, total in raw["proof"])
    if "ledger_total" not in raw:
        raise ValueError(
            "it has no ledger_total: written by a client from before both lanes split one reward, "
            "for a round book that pays otherwise"
        )
    return Entry(
        raw["round"],
        raw["index"],
        credit,
        int(raw["amount"]),
        int(raw["total"]),
        proof,
        int(raw["ledger_total"]),
    )


__all__ = ["Held", "HeldError"]
