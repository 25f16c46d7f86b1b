"""What a node's journal says, for whatever shows it: the TUI's watcher, `sapo devnet status`,
the experiments and the benchmarks read a node through `NodeView`, never through SQL of their
own. It opens the journal read-only (another process writes it) and answers with plain values.

Shares of time are measured over a window of wall time (by default the last 10 chain rounds, or
since the node's first recorded span if that is later): `busy_share` is the share in which the
compute stage was generating or training, `blocked_share` the share in which it had work but
waited on chain or IPFS I/O, and each stage's seconds (the I/O stages run beside compute on
their own threads, so theirs overlap it).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from client.node.datadir import DataDir
from client.node.eventlog import BUSY, Span
from client.node.journal import Journal, RoundRecord
from client.node.journal.states import RoundPhase, Verdict
from client.store import decode_batch
from client.units import SCORE_SCALE, round_at

WINDOW_ROUNDS = 10
# rounds in a row in which every peer batch a node judged was unavailable before status says so
OUTAGE_ROUNDS = 3


@dataclass(frozen=True)
class Shares:
    """Where a node's wall time went over `window_s` seconds."""

    window_s: float
    busy_share: float
    blocked_share: float
    stage_s: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PeerOutage:
    """Chain rounds in a row in which a node got none of its peers' batches, and why (the
    reason its last failed fetch gave)."""

    rounds: tuple[int, ...]
    reason: str

    def describe(self) -> str:
        return (
            f"no peer batch could be fetched in rounds {self.rounds[0]}-{self.rounds[-1]}: "
            f"{self.reason}"
        )


@dataclass(frozen=True)
class NodeSummary:
    """One line of `sapo devnet status`."""

    round: int | None  # the chain round of its last local round
    last_submission: int | None
    missed: int
    skipped: int
    local_rounds: int  # finished local rounds in all
    local_rounds_per_round: float | None  # started per chain round, over the window
    external_items_used: int
    peers_used: int
    busy_share: float | None
    blocked_share: float | None
    window_s: float
    peer_outage: PeerOutage | None = None


@dataclass(frozen=True)
class Window:
    """A node's last WINDOW_ROUNDS chain rounds (NodeView.window)."""

    shares: Shares | None
    local_rounds_per_round: float | None  # started per chain round


@dataclass(frozen=True)
class NodeTotals:
    """Counts over a node's whole journal, for monitoring (client.node.metrics)."""

    local_rounds: int = 0
    grpo_steps: int = 0  # the last local round's step count
    generated_tokens: int = 0
    trained_tokens: int = 0
    last_sealed_round: int | None = None  # the last chain round whose batch was sealed
    last_submitted_round: int | None = None  # ... whose submission is mined
    missed: int = 0  # chain rounds whose submission could not be made in the window
    skipped: int = 0  # chain rounds in which no local round started
    outbox: dict[str, int] = field(default_factory=dict)  # pending entries per kind
    outbox_oldest: float | None = None  # the oldest pending entry's creation (unix time)
    peer_batches: dict[str, int] = field(default_factory=dict)  # peer batches per verdict
    # in the root lane: our batches its verdict roots judged, credited or not
    book: dict[str, int] = field(default_factory=dict)
    # in the root lane: receipted votes our checkers relayed on our batches, kept ([root_lane].
    # relay_votes; rounds still open to proofs)
    relayed_votes: int = 0


class NodeView:
    """A read-only view of one node's journal (in `data_dir`)."""

    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        self._journal: Journal | None = None
        # local rounds and their tokens, summed as they are written (Journal.work_after): the
        # last metrics row read, local rounds, generated tokens, trained tokens, last step
        self._work = (0, 0, 0, 0, 0)

    @property
    def journal(self) -> Journal | None:
        """The journal, once the node has written one (None before)."""
        if self._journal is None:
            with contextlib.suppress(FileNotFoundError):
                self._journal = Journal.read_only(DataDir(self.data_dir).journal)
        return self._journal

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    # -------------------------------------------------------------------------------- rounds

    def rounds(self, last: int | None = None, *, first: int = 0) -> list[RoundRecord]:
        """The chain rounds from `first` (the `last` ones), without their batch bytes."""
        return self.journal.rounds(last, first=first) if self.journal else []

    def confirmed_rounds(self) -> list[int]:
        return self.journal.confirmed_rounds() if self.journal else []

    def local_metrics(self, last: int | None = None) -> list[tuple[int, int, dict[str, Any]]]:
        """Returns (chain round, k, metrics) of the last local rounds, oldest first."""
        return self.journal.all_metrics(last) if self.journal else []

    def round_rewards(self, first: int, last: int) -> dict[int, dict[str, Any]]:
        """Per chain round first..last: the mean reward of its published local rollouts (its
        claim / rollouts, as on chain), its local rounds, and the training numbers."""
        out: dict[int, dict[str, Any]] = {}
        if not self.journal:
            return out
        for record in self.journal.rounds(first=first):
            if record.round <= last and record.rollouts:
                out[record.round] = {
                    "reward_local": record.claimed / SCORE_SCALE / record.rollouts,
                    "local_rounds": record.local_rounds,
                    "rollouts": record.rollouts,
                }
        for round_, _, m in self.journal.all_metrics(first=first):
            if round_ in out:
                row = out[round_]
                for key in ("external_items", "external_shortfall", "local_items", "seconds"):
                    row[key] = row.get(key, 0) + (m.get(key) or 0)
                if m.get("reward_external") is not None:
                    row.setdefault("_ext", []).append(m["reward_external"])
        for row in out.values():
            ext = row.pop("_ext", [])
            row["reward_external"] = sum(ext) / len(ext) if ext else None
        return out

    def book_credits(self, first: int, last: int | None = None) -> dict[int, tuple[int, bool, int]]:
        """Round -> (the signal we claimed, credited?, the agreeing votes its credit carries) of
        our batches that the root lane's verdict roots of rounds first..last (None: on) judged
        (Journal.book_credits)."""
        return self.journal.book_credits(first, last) if self.journal else {}

    def reward_by_entry(self, first: int, last: int) -> dict[int, dict[str, list]]:
        """Per chain round: [mean reward, rollouts] of its published rollouts on each catalog
        entry (from the batch bytes it pinned and hashed on chain)."""
        out = {}
        for listed in self.rounds(first=first):
            record = self.journal.round(listed.round) if listed.round <= last else None
            if record is None or record.batch is None:
                continue
            totals: dict[str, list[float]] = {}
            for item in decode_batch(record.batch).items:
                t = totals.setdefault(item.task.entry, [0.0, 0])
                t[0] += sum(item.rewards) / SCORE_SCALE
                t[1] += len(item.rewards)
            out[record.round] = {entry: [s / n, n] for entry, (s, n) in sorted(totals.items())}
        return out

    # --------------------------------------------------------------------------------- peers

    def book_peers(self) -> dict[str, tuple[int, int | None, int]]:
        """Per node: its submissions, last round and credited signal in the root lane's lists
        our node read (PeerBook.in_book)."""
        return self.journal.peers.in_book() if self.journal else {}

    def peer_counts(self) -> dict[str, dict[str, int]]:
        """Per peer: its items we used, its batches we found bad, and those we could not get."""
        return self.journal.peers.per_peer() if self.journal else {}

    def peer_outage(self, rounds: int = OUTAGE_ROUNDS) -> PeerOutage | None:
        """Returns the outage when every peer batch of the last `rounds` chain rounds that had
        any was unavailable to us (None otherwise, or before `rounds` such rounds)."""
        last = self.journal.peers.last_rounds(rounds) if self.journal else []
        if len(last) < rounds:
            return None
        by_round: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for row in self.journal.peers.peer_verdicts(since_round=last[0]):
            by_round[row["round"]].append(row)
        if any(row["verdict"] != Verdict.UNAVAILABLE for r in last for row in by_round[r]):
            return None
        return PeerOutage(tuple(last), by_round[last[-1]][-1]["reason"] or "no reason given")

    def totals(self) -> NodeTotals:
        """The node's counts over its whole journal (zeros before it has one). What it costs
        does not grow with the journal: local rounds are summed as they are written, the rest
        is read from indexes."""
        if not self.journal:
            return NodeTotals()
        last, n, generated, trained, step = self.journal.work_after(self._work[0])
        _, n0, generated0, trained0, step0 = self._work
        self._work = (last, n0 + n, generated0 + generated, trained0 + trained, max(step0, step))
        _, local_rounds, generated, trained, step = self._work
        phases = self.journal.phases()
        outbox = self.journal.outbox_pending()

        def last_of(*reached: RoundPhase) -> int | None:
            rounds = [phases[p][1] for p in reached if p in phases]
            return max(rounds) if rounds else None

        sealed = (RoundPhase.SEALED, RoundPhase.PINNED, RoundPhase.CONFIRMED)
        oldest = [created for _, created in outbox.values()]
        return NodeTotals(
            local_rounds=local_rounds,
            grpo_steps=step,
            generated_tokens=generated,
            trained_tokens=trained,
            last_sealed_round=last_of(*sealed),
            last_submitted_round=last_of(RoundPhase.CONFIRMED),
            missed=phases.get(RoundPhase.MISSED, (0, None))[0],
            skipped=phases.get(RoundPhase.SKIPPED, (0, None))[0],
            outbox={kind: count for kind, (count, _) in outbox.items()},
            outbox_oldest=min(oldest) if oldest else None,
            peer_batches=self.journal.peers.verdict_counts(),
            book=self.journal.book_outcomes(),
            relayed_votes=self.journal.relayed_vote_count(),
        )

    def new_spans(self, after: int) -> list[tuple[int, float, float, str]]:
        """(rowid, started, ended, stage) of the spans written after row `after`."""
        return self.journal.spans_after(after) if self.journal else []

    # ---------------------------------------------------------------------------------- time

    def shares(self, since: float, until: float) -> Shares:
        """Returns where the node's time went between `since` and `until` (unix times)."""
        spans = self.journal.spans(since) if self.journal else []
        if spans:
            since = max(since, min(start for start, _, _ in spans))
        window = max(until - since, 1e-9)
        stage_s: dict[str, float] = defaultdict(float)
        for start, end, stage in spans:
            stage_s[stage] += max(0.0, min(end, until) - max(start, since))
        busy = sum(stage_s.get(str(s), 0.0) for s in BUSY)
        blocked = stage_s.get(str(Span.BLOCKED), 0.0)
        return Shares(window, busy / window, blocked / window, dict(stage_s))

    def window(self, genesis: float, round_length: float, now: float) -> Window:
        """Over the last WINDOW_ROUNDS chain rounds: where the node's time went and its local
        rounds started per chain round (reading only the window's rows)."""
        since = now - WINDOW_ROUNDS * round_length
        first, current = (
            round_at(since, genesis, round_length),
            round_at(now, genesis, round_length),
        )
        shares = self.shares(since, now) if self.journal else None
        # local rounds started per chain round, over the window's whole rounds since the node's
        # first local round (a slow node's skipped rounds count as none)
        counts = self.journal.local_round_counts(first) if self.journal else {}
        started = sum(n for r, n in counts.items() if r < current)
        began = self.journal.first_metrics_round() if self.journal else None
        whole = current - max(first, current if began is None else began)
        return Window(shares, started / whole if whole > 0 else None)

    def summary(self, genesis: float, round_length: float, now: float) -> NodeSummary:
        """Returns the node's progress and, over the last WINDOW_ROUNDS chain rounds, its
        shares of busy and blocked time and its local rounds started per chain round."""
        window = self.window(genesis, round_length, now)
        phases = self.journal.phases() if self.journal else {}
        shares = window.shares
        peers = self.peer_counts()
        last_metrics = self.local_metrics(1)
        return NodeSummary(
            round=last_metrics[-1][0] if last_metrics else None,
            last_submission=self.journal.last_confirmed_round() if self.journal else None,
            missed=phases.get(RoundPhase.MISSED, (0, None))[0],
            skipped=phases.get(RoundPhase.SKIPPED, (0, None))[0],
            local_rounds=self.journal.local_round_total() if self.journal else 0,
            local_rounds_per_round=window.local_rounds_per_round,
            external_items_used=sum(c["used"] for c in peers.values()),
            peers_used=sum(1 for c in peers.values() if c["used"]),
            busy_share=shares.busy_share if shares else None,
            blocked_share=shares.blocked_share if shares else None,
            window_s=shares.window_s if shares else 0.0,
            peer_outage=self.peer_outage(),
        )
