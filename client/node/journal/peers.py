"""What a node knows of its peers, kept in its journal's SQLite file: the `Submitted` events it
discovered (and the block its event scan goes on from, so a restart does not rescan from the
deployment), the peer batches it fetched with their verdicts and the items that passed its own
verifier, and which of those items it trained on (never twice, across restarts)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from client.chain.models import Claim
from client.node.journal.db import JournalDB
from client.node.journal.states import Verdict
from client.store.batch import Sampled
from client.units import logprob_value, to_logprob_units

# a peer's submission as discovered on the ledger: its `Submitted` event's claim
PeerSubmission = Claim


# how one root lane list adds to a node's totals (PeerBook.count_in_book)
_BOOK_UPDATES = {
    "submissions": "UPDATE book_peers SET submissions = submissions + ?, "
    "last_round = MAX(COALESCE(last_round, ?), ?) WHERE node = ?",
    "verdicts": "UPDATE book_peers SET credited = credited + ? WHERE node = ?",
}


@dataclass(frozen=True)
class VoteBasis:
    """What a checker's vote on a peer batch rests on: its verdict, our recomputed score and
    signal, the findings bits, and how many fetches in a row found it unavailable."""

    verdict: Verdict
    score: int
    signal: int
    findings: int
    failures: int


@dataclass(frozen=True)
class PeerItem:
    """A verified peer item: the question, completions, and OUR verifier's rewards in [0, 1]."""

    round: int
    node: str
    index: int  # over the whole batch (local rounds in order)
    question: str
    completions: list[str]
    rewards: list[float]
    sampled: Sampled | None = None  # how its producer drew it (a v5 batch's): weighed by it

    @property
    def key(self) -> tuple[int, str, int]:
        return (self.round, self.node, self.index)

    @property
    def external(self) -> bool:
        return True


def item_record(question: str, completions: list[str], rewards: list[float], sampled) -> dict:
    """A verified peer item as the journal keeps it (JSON; log-probs in batch units)."""
    record: dict[str, Any] = {"question": question, "completions": completions, "rewards": rewards}
    if sampled is not None:
        record["sampled"] = {
            "token_ids": sampled.token_ids,
            "logprobs": [[to_logprob_units(x) for x in row] for row in sampled.logprobs],
            "sampling": [sampled.temperature, sampled.top_p],
            "tokenizer": sampled.tokenizer,
        }
    return record


def _sampled(record: dict | None) -> Sampled | None:
    if record is None:
        return None
    return Sampled(
        record["token_ids"],
        [[logprob_value(x) for x in row] for row in record["logprobs"]],
        *record["sampling"],
        record["tokenizer"],
    )


# the peer rows of old rounds, deleted by PeerBook.prune once their counts are folded
PRUNE = tuple(
    f"DELETE FROM {table} WHERE round < ?"  # noqa: S608 - the fixed table names below
    for table in (
        "peer_submissions",
        "peer_appeals",
        "peer_batches",
        "used_items",
    )
)


class PeerBook:
    """The peer tables of a journal (every write one transaction of the journal's)."""

    def __init__(self, db: JournalDB):
        self._db = db

    def discovered(
        self,
        subs: list[PeerSubmission],
        next_block: int,
        appeals: list[tuple[int, str, int]] = (),
        blocks: dict[tuple[int, str], int] | None = None,
        snapshots: dict[tuple[int, str], int] | None = None,
    ) -> None:
        """Records peers' submissions (with the block of each, from `blocks`, and the stake
        snapshot of its committee where that is another block, from `snapshots`: an escalated
        root lane batch's), which batches their producers appealed (round, node, appeal
        block), and where the event scan goes on, in one transaction."""
        blocks = blocks or {}
        snapshots = snapshots or {}
        with self._db.tx() as db:
            db.executemany(
                "INSERT OR IGNORE INTO peer_submissions "
                "(round, node, digest, rollouts, score, signal, block, snapshot) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        s.round,
                        s.node,
                        s.digest,
                        s.rollouts,
                        s.score,
                        s.signal,
                        blocks.get((s.round, s.node)),
                        snapshots.get((s.round, s.node)),
                    )
                    for s in subs
                ],
            )
            db.executemany("INSERT OR IGNORE INTO peer_appeals VALUES (?, ?, ?)", appeals)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('event_cursor', ?)", (str(next_block),))

    def found_in_root(self, subs: list[PeerSubmission], block: int) -> None:
        """Records peers' submissions read from a root lane's submission list posted at `block`
        (the draw's stake snapshot, as for a ledger submission); the ledger's event scan and its
        cursor are not touched."""
        with self._db.tx() as db:
            db.executemany(
                "INSERT OR IGNORE INTO peer_submissions "
                "(round, node, digest, rollouts, score, signal, block) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(s.round, s.node, s.digest, s.rollouts, s.score, s.signal, block) for s in subs],
            )

    def count_in_book(self, round_: int, kind: str, counts: dict[str, int]) -> bool:
        """Adds what one root lane list of `round_` says of each node to its totals (kind
        "submissions": node -> 1 for each entry; "verdicts": node -> the signal credited), once
        a list: False when this round's list of that kind was counted already (a restart reads
        it again). One transaction: a list is counted whole or not at all."""
        update = _BOOK_UPDATES[kind]
        with self._db.tx() as db:
            counted = db.execute(
                "INSERT OR IGNORE INTO book_counted (round, kind) VALUES (?, ?)", (round_, kind)
            )
            if counted.rowcount == 0:
                return False
            db.executemany(
                "INSERT INTO book_peers (node) VALUES (?) ON CONFLICT(node) DO NOTHING",
                [(n,) for n in counts],
            )
            db.executemany(
                update,
                [
                    (value, round_, round_, node) if kind == "submissions" else (value, node)
                    for node, value in counts.items()
                ],
            )
        return True

    def in_book(self) -> dict[str, tuple[int, int | None, int]]:
        """node -> (its submissions, its last round, the signal credited) in the root lane's
        lists read (none before a node of this version opened the journal)."""
        if not self._db.has_table("book_peers"):
            return {}
        rows = self._db.all("SELECT node, submissions, last_round, credited FROM book_peers")
        return {node: (subs, last, credited) for node, subs, last, credited in rows}

    def event_cursor(self) -> int | None:
        """Returns the block the event scan goes on from (None: scan from deployment)."""
        rows = self._db.all("SELECT value FROM meta WHERE key = 'event_cursor'")
        return int(rows[0][0]) if rows else None

    def peer_submissions(self, first_round: int) -> list[PeerSubmission]:
        """The peers' submissions of `first_round` on, by round then producer."""
        subs, _ = self.submissions_since(None, first_round)
        return sorted((s for s, _ in subs), key=lambda s: (s.round, s.node))

    def submissions_since(
        self, block: int | None, first_round: int
    ) -> tuple[list[tuple[PeerSubmission, int | None]], int | None]:
        """The submissions of `first_round` on emitted after `block` (all of them for None),
        each with the block its committee's stake snapshot is (its own, or an escalated
        batch's root's; None for one journaled before blocks were kept), and the block to go on
        from: discovery journals a block's events together, so none of a block already read
        comes later."""
        fields = list(Claim.model_fields)
        columns = ", ".join(fields)
        if block is None:
            rows = self._db.all(
                f"SELECT block, COALESCE(snapshot, block), {columns} "  # noqa: S608 - fixed
                "FROM peer_submissions WHERE round >= ?",
                first_round,
            )
        else:
            rows = self._db.all(
                f"SELECT block, COALESCE(snapshot, block), {columns} "  # noqa: S608 - fixed
                "FROM peer_submissions WHERE block > ? AND round >= ?",
                block,
                first_round,
            )
        subs = [(Claim(**dict(zip(fields, r[2:], strict=True))), r[1]) for r in rows]
        return subs, max((r[0] for r in rows if r[0] is not None), default=block)

    def vote_bases(self, first_round: int) -> dict[tuple[int, str], VoteBasis]:
        """vote_basis of every peer batch of `first_round` on, in one read."""
        rows = self._db.all(
            "SELECT round, node, verdict, recomputed, recomputed_signal, findings, failures "
            "FROM peer_batches WHERE round >= ?",
            first_round,
        )
        return {
            (r, n): VoteBasis(Verdict(v), score or 0, signal or 0, findings or 0, failures)
            for r, n, v, score, signal, findings, failures in rows
        }

    def families(self) -> dict[str, str]:
        """node -> the model family it registered in, for the peers looked up so far."""
        return dict(self._db.all("SELECT node, family FROM peer_families"))

    def add_families(self, families: dict[str, str]) -> None:
        """Records peers' families (fixed for an address's life: never changed after)."""
        with self._db.tx() as db:
            db.executemany("INSERT OR IGNORE INTO peer_families VALUES (?, ?)", families.items())

    def appealed(self, first_round: int) -> set[tuple[int, str]]:
        """The (round, node) of peers' appealed batches from `first_round` on."""
        rows = self._db.all("SELECT round, node FROM peer_appeals WHERE round >= ?", first_round)
        return {(r, n) for r, n in rows}

    def vote_basis(self, round_: int, node: str) -> VoteBasis | None:
        """What our vote on a peer's batch rests on (None: nothing fetched or tried yet)."""
        rows = self._db.all(
            "SELECT verdict, recomputed, recomputed_signal, findings, failures FROM peer_batches "
            "WHERE round = ? AND node = ?",
            round_,
            node,
        )
        if not rows:
            return None
        verdict, score, signal, findings, failures = rows[0]
        return VoteBasis(Verdict(verdict), score or 0, signal or 0, findings or 0, failures)

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
        claimed_signal: int | None = None,
        recomputed_signal: int | None = None,
        findings: int | None = None,
        items: list[dict[str, Any]] | None = None,
        source: str | None = None,
    ) -> None:
        """Records a fetched peer batch, its verdict (an unavailable one may be retried; its
        failures in a row are counted) and whose node gave it."""
        with self._db.tx() as db:
            failures = 0
            if verdict == Verdict.UNAVAILABLE:
                row = db.execute(
                    "SELECT failures FROM peer_batches WHERE round = ? AND node = ? "
                    "AND verdict = ?",
                    (round_, node, Verdict.UNAVAILABLE),
                ).fetchone()
                failures = (row[0] if row else 0) + 1
            db.execute(
                "INSERT OR REPLACE INTO peer_batches (round, node, digest, verdict, reason, "
                "claimed, recomputed, claimed_signal, recomputed_signal, findings, failures, "
                "items, fetched, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    round_,
                    node,
                    digest,
                    verdict,
                    reason,
                    claimed,
                    recomputed,
                    claimed_signal,
                    recomputed_signal,
                    findings,
                    failures,
                    json.dumps(items) if items is not None else None,
                    time.time(),
                    source,
                ),
            )

    def prune(self, before_round: int) -> int:
        """Deletes the peer rows of rounds before `before_round` (no window can judge them any
        more, and no local round trains on them: the caller's horizon), folding what they
        counted into peer_totals, in one transaction: the per-peer and per-verdict counts read
        the same before and after. Returns how many rows went."""
        with self._db.tx() as db:
            db.execute(
                "INSERT INTO peer_totals (node, verified, bad, unavailable) "
                "SELECT node, SUM(verdict = ?), SUM(verdict = ?), SUM(verdict = ?) "
                "FROM peer_batches WHERE round < ? GROUP BY node "
                "ON CONFLICT(node) DO UPDATE SET verified = verified + excluded.verified, "
                "bad = bad + excluded.bad, unavailable = unavailable + excluded.unavailable",
                (Verdict.VERIFIED, Verdict.BAD, Verdict.UNAVAILABLE, before_round),
            )
            db.execute(
                "INSERT INTO peer_totals (node, used) "
                "SELECT node, COUNT(*) FROM used_items WHERE round < ? GROUP BY node "
                "ON CONFLICT(node) DO UPDATE SET used = used + excluded.used",
                (before_round,),
            )
            return sum(db.execute(sql, (before_round,)).rowcount for sql in PRUNE)

    def _totals(self) -> list[tuple[str, int, int, int, int]]:
        """peer_totals' rows (node, verified, bad, unavailable, used); none in a journal a node
        of this version never opened for writing."""
        if not self._db.has_table("peer_totals"):
            return []
        return self._db.all("SELECT node, verified, bad, unavailable, used FROM peer_totals")

    def verdict_counts(self) -> dict[str, int]:
        """Returns how many peer batches we concluded each verdict of (verified, bad,
        unavailable), pruned ones included."""
        # the rare verdicts are counted in the verdict index, the common one by subtraction
        # from the table's row count (which SQLite answers without visiting each row)
        counts = {
            str(v): self._db.all("SELECT COUNT(*) FROM peer_batches WHERE verdict = ?", v)[0][0]
            for v in Verdict
            if v != Verdict.VERIFIED
        }
        [(total,)] = self._db.all("SELECT COUNT(*) FROM peer_batches")
        counts = {Verdict.VERIFIED.value: total - sum(counts.values())} | counts
        for _, verified, bad, unavailable, _ in self._totals():
            counts[Verdict.VERIFIED.value] += verified
            counts[Verdict.BAD.value] += bad
            counts[Verdict.UNAVAILABLE.value] += unavailable
        return counts

    def per_peer(self) -> dict[str, dict[str, int]]:
        """Per peer: its batches we found bad and could not get, and its items we used (two
        aggregates, not a row per batch: the TUI asks each second of a journal that grows),
        pruned ones included."""
        counts: dict[str, dict[str, int]] = {}
        for node, _, bad, unavailable, used in self._totals():
            if bad or unavailable or used:
                counts[node.lower()] = {"used": used, "bad": bad, "unavailable": unavailable}
        for node, bad, unavailable in self._db.all(
            "SELECT node, SUM(verdict = ?), SUM(verdict = ?) FROM peer_batches "
            "WHERE verdict IN (?, ?) GROUP BY node",
            Verdict.BAD,
            Verdict.UNAVAILABLE,
            Verdict.BAD,
            Verdict.UNAVAILABLE,
        ):
            c = counts.setdefault(node.lower(), {"used": 0, "bad": 0, "unavailable": 0})
            c["bad"] += int(bad)
            c["unavailable"] += int(unavailable)
        for node, used in self._db.all("SELECT node, COUNT(*) FROM used_items GROUP BY node"):
            c = counts.setdefault(node.lower(), {"used": 0, "bad": 0, "unavailable": 0})
            c["used"] += int(used)
        return counts

    def last_rounds(self, n: int) -> list[int]:
        """The last `n` chain rounds with a peer batch in the journal, oldest first."""
        rows = self._db.all(
            "SELECT DISTINCT round FROM peer_batches ORDER BY round DESC LIMIT ?", n
        )
        return sorted(r for (r,) in rows)

    def peer_verdicts(self, since_round: int = 0) -> list[dict[str, Any]]:
        """Returns every fetched peer batch's verdict, how many of its items we used, and whose
        node gave it."""
        rows = self._db.all(
            "SELECT b.round, b.node, b.digest, b.verdict, b.reason, b.claimed, b.recomputed, "
            "b.claimed_signal, b.recomputed_signal, b.findings, b.failures, "
            "(SELECT COUNT(*) FROM used_items u WHERE u.round = b.round AND u.node = b.node), "
            "b.source FROM peer_batches b WHERE b.round >= ? ORDER BY b.round, b.node",
            since_round,
        )
        keys = (
            "round",
            "node",
            "digest",
            "verdict",
            "reason",
            "claimed",
            "recomputed",
            "claimed_signal",
            "recomputed_signal",
            "findings",
            "failures",
            "used",
            "source",
        )
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def verified_batches(self, first_round: int, last_round: int) -> list[tuple[int, str]]:
        """Returns (round, node) of the verified peer batches of rounds first..last."""
        return self._db.all(
            "SELECT round, node FROM peer_batches WHERE verdict = ? AND round BETWEEN ? AND ? "
            "ORDER BY round, node",
            Verdict.VERIFIED,
            first_round,
            last_round,
        )

    def batch_items(self, round_: int, node: str) -> list[PeerItem]:
        """Returns every item of one verified peer batch, used or not."""
        rows = self._db.all(
            "SELECT items FROM peer_batches WHERE round = ? AND node = ? AND verdict = ?",
            round_,
            node,
            Verdict.VERIFIED,
        )
        items = json.loads(rows[0][0] or "[]") if rows else []
        return [
            PeerItem(
                round_,
                node,
                i,
                it["question"],
                it["completions"],
                it["rewards"],
                _sampled(it.get("sampled")),
            )
            for i, it in enumerate(items)
        ]

    def used_keys(self, first_round: int) -> set[tuple[int, str, int]]:
        """Returns the peer items of rounds from `first_round` trained on already."""
        rows = self._db.all("SELECT round, node, idx FROM used_items WHERE round >= ?", first_round)
        return {(r, n, i) for r, n, i in rows}

    def used(self, keys: list[tuple[int, str, int]]) -> None:
        """Records peer items as trained on (a restart will not use them again)."""
        with self._db.tx() as db:
            db.executemany("INSERT OR IGNORE INTO used_items VALUES (?, ?, ?)", keys)
