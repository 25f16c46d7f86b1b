"""What the ledger says about every node and about us, kept current by reading only new events.

Each refresh reads the events since the last one (one `eth_getLogs` walk: the swarm's
registrations, stakes, submissions and credit, and only the votes, settlements, appeals and
claims that concern us, by topic), folds them into per-node records, and re-reads `nodeInfo` only
for the nodes whose stake or metadata an event touched (all of them, batched, the first time): a
swarm of 1,000 nodes costs a handful of requests a refresh, not a thousand.

What it keeps stays bounded as the swarm ages: a node's record holds running totals and only its
rounds whose credit can still change; our own rounds are kept for the last `keep_rounds` and,
before that, while credited and unclaimed. What it reads first is bounded too when it is given a
`lookback_rounds`: it starts at the first block of the round that many rounds before the current
one (found by bisecting block timestamps), not at the deploy block, and counts every total since
that round (`since_round`); a round of that window has all its events read, so our own rounds in
it (their credit, votes and claims) are whole.

In the root lane (given the round `book`), our claims from the book are payouts too: its
`Claimed` events of our address, one topic-filtered walk of the book's blocks from the same first
block.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from client.chain import Ledger
from client.chain.events import EventCursor, EventReader, Query
from client.chain.families import standing
from client.chain.ledger_events import (
    Appealed,
    Attested,
    ChainEvent,
    Claimed,
    CreditChanged,
    Escalated,
    MetadataSet,
    Registered,
    Settled,
    Slashed,
    StakeAdded,
    Submitted,
    Unavailable,
    UnstakeRequested,
    Withdrawn,
)
from client.chain.models import NodeInfo
from client.node.view.snapshot import Account, Activity, Payout, PeerRow, short
from client.units import SCORE_SCALE

_STAKE_EVENTS = (Registered, StakeAdded, UnstakeRequested, Withdrawn, Slashed)
_MODEL_CHARS = 40
# every node's, for the peers table and the stakes
# (Escalated: a root lane batch a checker took to the ledger, which the book's list holds too)
_SWARM = (*_STAKE_EVENTS, MetadataSet, Submitted, CreditChanged, Escalated)
_ABOUT_US = (Attested, Unavailable, Settled, Appealed, Claimed)  # where we are the producer
_BY_US = (Attested, Unavailable)  # where we are the voter
# the rounds a refresh still treats as open past the ledger's finality, against a clock that
# runs ahead of the chain's
_FINAL_MARGIN = 1
_OUTCOMES = ("pending", "credited", "disputed", "unavailable", "uncredited")


def model_of(metadata: str) -> str:
    """Returns the model a node's metadata names ('?' when it names none or is not JSON).

    Metadata is whatever a peer registered: only printable characters of the `model` field are
    kept, and at most 40 of them."""
    try:
        value = json.loads(metadata).get("model", "?")
    except (ValueError, AttributeError):
        return "?"
    text = "".join(ch for ch in str(value) if ch.isprintable())
    return text[:_MODEL_CHARS] or "?"


@dataclass
class Tally:
    """Counts of our own part in the ledger's events since the view's first block (the deploy
    block, or its lookback's): the votes we cast, the settlements, slashes and appeals of our
    submissions (what client.node.metrics exports as counters; each only grows while the view
    lives, and starts again with it, as a Prometheus counter does with its process)."""

    votes_cast: dict[str, int] = field(
        default_factory=lambda: {"agree": 0, "dispute": 0, "unavailable": 0}
    )
    settled: dict[str, int] = field(default_factory=lambda: {"clean": 0, "disputed": 0})
    slashes: int = 0
    slashed_wei: int = 0
    appeals: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)  # our submissions (LedgerView)

    def fold(self, e: ChainEvent, me: str) -> None:
        match e:
            case Attested() if e.attester == me:
                self.votes_cast["agree" if e.agrees else "dispute"] += 1
            case Unavailable() if e.attester == me:
                self.votes_cast["unavailable"] += 1
            case Settled() if e.node == me:
                self.settled["disputed" if e.disputed else "clean"] += 1
            case Slashed() if e.node == me:
                self.slashes += 1
                self.slashed_wei += e.amount
            case Appealed() if e.node == me:
                self.appeals += 1


@dataclass
class _NodeRecord:
    address: str
    metadata: str = ""
    info: NodeInfo | None = None
    open: dict[int, list] = field(default_factory=dict)  # round -> [signal, credited?], not final
    submitted: int = 0  # its submissions since the view's first block
    escalated: int = 0  # of them, root lane batches a checker took to the ledger
    last_round: int | None = None
    credited: int = 0  # learning signal credited on its rounds that are final
    agreed: int = 0  # our attestations of it that agreed
    disputed: int = 0

    def close_before(self, first_open: int) -> None:
        """Folds the rounds before `first_open` (final: their credit cannot change) into the
        totals."""
        for round_ in [r for r in self.open if r < first_open]:
            signal, credited = self.open.pop(round_)
            self.credited += signal if credited else 0

    def credited_now(self) -> int:
        return self.credited + sum(c for c, ok in self.open.values() if ok)


class LedgerView:
    """The ledger's nodes and our own record, refreshed from new events."""

    def __init__(
        self,
        ledger: Ledger,
        me: str,
        *,
        start_block: int = 0,
        chunk_blocks: int = 2000,
        keep_rounds: int = 60,
        lookback_rounds: int | None = None,
        clock: Callable[[], float] = time.time,
        book=None,
        book_start_block: int = 0,
    ):
        self.ledger = ledger
        self.clock = clock
        self.me = me.lower()
        self.keep_rounds = keep_rounds
        self.reader = EventReader(ledger, chunk_blocks=chunk_blocks, start_block=start_block)
        self.cursor = EventCursor(next_block=start_block)
        # the root lane's book: our claims from it (None: a node of the ledger's lane only)
        self.book_reader = (
            EventReader(book, chunk_blocks=chunk_blocks, start_block=book_start_block)
            if book is not None
            else None
        )
        self.book_cursor = EventCursor(next_block=book_start_block)
        # the round book the ledger names ("" none), and whether it is deployed: the ledger pays
        # a round once that book decided it too (a named book not deployed has no round)
        self._book: str | None = None
        self._book_deployed = False
        self._book_queries = [Query(["Claimed"], {"producer": self.me})]
        self.lookback_rounds = lookback_rounds
        # the round since which every total is counted; None: since the deploy block
        self.since_round: int | None = None
        self._started = lookback_rounds is None
        self._queries = [
            Query([e.NAME for e in _SWARM]),
            Query([e.NAME for e in _ABOUT_US], {"node": self.me}),
            Query([e.NAME for e in _BY_US], {"attester": self.me}),
        ]
        self.nodes: dict[str, _NodeRecord] = {}
        self._stale: set[str] = set()  # nodes whose nodeInfo must be read again
        self.payouts: deque[Payout] = deque(maxlen=keep_rounds)  # our last claims
        self.paid_rounds: set[int] = set()  # of the rounds in `ours`
        self._mined: dict[int, int] = {}  # block -> timestamp, for this refresh's claims
        self.account: Account | None = None
        self.reward_pool: int | None = None
        self.ours: dict[int, list] = {}  # our round -> [signal, credited?] (kept: see _forget)
        self.votes: dict[int, list[int]] = {}  # our round -> [agree, dispute, unavailable] votes
        self._outcomes_final: dict[str, int] = dict.fromkeys(_OUTCOMES[1:], 0)
        self._counted: set[int] = set()  # our final rounds already in _outcomes_final
        self.tally = Tally()  # what we did and what happened to us, since the first block

    def refresh(self) -> list[Activity]:
        """Reads what changed; returns the new activity about us. Raises ChainError when the
        chain does not answer (nothing is half-applied: events are folded only once all were
        read)."""
        cursor = self.cursor.model_copy()
        book_cursor = self.book_cursor.model_copy()
        since = self.since_round
        if not self._started:
            since = self._start(cursor)
            book_cursor.next_block = max(book_cursor.next_block, cursor.next_block)
        events = [e.typed() for e in self.reader.poll_any(cursor, self._queries)]
        from_book = (
            self.book_reader.poll_any(book_cursor, self._book_queries)
            if self.book_reader is not None
            else []
        )
        # claims are dated by their block: read those first, so a failure folds nothing
        self._mined = {
            e.block_number: self._block_time(e.block_number)
            for e in events
            if isinstance(e, Claimed) and e.node == self.me
        }
        self._mined |= {e.block_number: self._block_time(e.block_number) for e in from_book}
        self.cursor, self.book_cursor = cursor, book_cursor
        self.since_round, self._started = since, True
        activity = [a for e in events if (a := self._fold(e)) is not None]
        activity += [self._fold_book_claim(e) for e in from_book]
        self._stale.add(self.me)
        stale = sorted(self._stale)
        for info in self.ledger.node_infos(stale):
            record = self._record(info.address)
            record.info, record.metadata = info, info.metadata
        self._stale.clear()
        params = self.ledger.params()
        current = params.round_at(self.clock())
        self._close(params, current)
        unpaid = sorted(
            r
            for r in self.ours
            if r not in self.paid_rounds and params.is_paid(r, current, self._book_runs())
        )
        mine = self.nodes[self.me].info
        assert mine is not None
        family = (
            standing(
                mine.family,
                [r.info for r in self.nodes.values() if r.info is not None],
                params.min_stake,
            )
            if mine.family
            else None
        )
        self.account = Account(
            address=mine.address,
            registered=mine.registered,
            balance=self.ledger.balance(mine.address),
            active_stake=mine.active_stake,
            unbonding=mine.unbonding,
            unbonding_end=mine.unbonding_end,
            total_paid=mine.total_paid,
            claimable=self.ledger.claimable(mine.address, unpaid) if unpaid else 0,
            claimable_rounds=tuple(unpaid),
            family=mine.family,
            family_nodes=family.checkers_for(mine.address) if family else 0,
            family_problems=tuple(family.problems(mine.address, params.quorum)) if family else (),
        )
        self.reward_pool = self.ledger.reward_pool()
        self.tally.outcomes = self._outcomes(lambda r: params.is_final(r, current))
        self._forget(current)
        return activity

    def _book_runs(self) -> bool:
        if self._book is None:  # fixed at the ledger's deployment: read once
            self._book = self.ledger.book() or ""
        if self._book and not self._book_deployed:  # deployed after the ledger, once
            code = self.ledger.tx.rpc(
                lambda: self.ledger.w3.eth.get_code(self._book), "eth_getCode"
            )
            self._book_deployed = len(code) > 0
        return self._book_deployed

    def _start(self, cursor: EventCursor) -> int | None:
        """Moves a first refresh's cursor to the first block of round current - lookback_rounds
        (when that round is after the deploy); returns that round, or None to read from the
        deploy block."""
        assert self.lookback_rounds is not None
        params = self.ledger.params()
        first = params.round_at(self.clock()) - self.lookback_rounds
        if first <= 0:
            return None
        block = self.ledger.block_at(params.round_start(first), cursor.next_block)
        if block <= cursor.next_block:
            return None  # the deploy block is in the window (a ledger younger than it)
        cursor.next_block = block
        # the registrations are before the window: every node's record is read whole once
        self._stale.update(node.lower() for node in self.ledger.nodes())
        return first

    def _close(self, params, current: int) -> None:
        """Folds every node's rounds that are final (a margin early) into its totals."""
        # the oldest round not final in `current - margin`: final_after(r) = r + a constant
        first_open = current - _FINAL_MARGIN - params.final_after(0)
        for record in self.nodes.values():
            if record.open and min(record.open) < first_open:
                record.close_before(first_open)

    def _forget(self, current: int) -> None:
        """Drops our rounds older than `keep_rounds` that are counted, and paid or uncredited."""
        for round_ in [r for r in self.ours if r < current - self.keep_rounds]:
            _, credited = self.ours[round_]
            if round_ in self._counted and (round_ in self.paid_rounds or not credited):
                del self.ours[round_]
                self.votes.pop(round_, None)
                self.paid_rounds.discard(round_)
                self._counted.discard(round_)

    def _outcomes(self, is_final) -> dict[str, int]:
        """Our submissions by outcome: `pending` until the round is final (its credit can still
        change), then `credited`, or why not: `disputed` (a drawn checker disputed it),
        `unavailable` (checkers could not fetch it), `uncredited` (too few checkers agreed).
        A round is counted once it is final; the counts outlive the rounds forgotten."""
        pending = 0
        for round_, (_, credited) in self.ours.items():
            if round_ in self._counted:
                continue
            if not is_final(round_):
                pending += 1
                continue
            _, dispute, unavailable = self.our_votes(round_)
            outcome = (
                "credited"
                if credited
                else "disputed"
                if dispute
                else "unavailable"
                if unavailable
                else "uncredited"
            )
            self._outcomes_final[outcome] += 1
            self._counted.add(round_)
        return {"pending": pending, **self._outcomes_final}

    def peers(
        self,
        journal_counts: dict[str, dict[str, int]],
        in_book: dict[str, tuple[int, int | None, int]] | None = None,
    ) -> list[PeerRow]:
        """Returns a row per registered node; `journal_counts` adds what our journal knows
        (node -> {used, bad, unavailable}), and `in_book` what the root lane's lists our node
        read say of it (node -> (submissions, last round, credited signal): PeerBook.in_book)."""
        rows = []
        in_book = in_book or {}
        for key, rec in self.nodes.items():
            if rec.info is not None and not rec.info.registered:
                continue
            counts = journal_counts.get(key, {})
            subs, book_last, credited = in_book.get(key, (0, None, 0))
            last = [r for r in (rec.last_round, book_last) if r is not None]
            rows.append(
                PeerRow(
                    address=rec.info.address if rec.info else rec.address,
                    model=model_of(rec.metadata),
                    stake=rec.info.active_stake if rec.info else 0,
                    last_round=max(last) if last else None,
                    # an escalated batch is in the book's list our node read too: counted once
                    submissions=rec.submitted + subs - (rec.escalated if key in in_book else 0),
                    credited=rec.credited_now() + credited,
                    used=counts.get("used", 0),
                    agreed=rec.agreed,
                    disputed=rec.disputed,
                    bad=counts.get("bad", 0),
                    unavailable=counts.get("unavailable", 0),
                    me=key == self.me,
                )
            )
        return rows

    def our_submissions(self) -> dict[int, tuple[int, bool]]:
        """Returns round -> (claimed learning signal, credited now?) for our submissions of the
        last `keep_rounds` rounds (and older ones credited and not claimed yet)."""
        return {r: (c, ok) for r, (c, ok) in self.ours.items()}

    def our_votes(self, round_: int) -> tuple[int, int, int]:
        """Returns the checkers' votes on our batch of a round: (agree, dispute, unavailable)."""
        agree, dispute, unavailable = self.votes.get(round_, (0, 0, 0))
        return agree, dispute, unavailable

    # --------------------------------------------------------------------------------- folding

    def _fold_book_claim(self, e) -> Activity:
        """Our claim from the round book (RoundBook.claim: what our credits up to `round` earned,
        less what was paid before)."""
        mined_round = self.ledger.params().round_at(self._mined[e.block_number])
        amount = int(e.args["amount"])
        self.payouts.append(Payout(mined_round, amount))
        return Activity(
            self.clock(),
            "claim",
            f"claimed {amount / 10**18:g} ETH from the round book, for credits through round "
            f"{e.args['round']} (tx {e.tx_hash[:12]}…)",
            mined_round,
        )

    def _block_time(self, number: int) -> int:
        return self.ledger.block_time(number)

    def _record(self, address: str) -> _NodeRecord:
        key = address.lower()
        if key not in self.nodes:
            self.nodes[key] = _NodeRecord(address)
        return self.nodes[key]

    def _fold(self, e: ChainEvent) -> Activity | None:
        now, me = time.time(), self.me
        self.tally.fold(e, me)
        if isinstance(e, _STAKE_EVENTS):
            self._stale.add(e.node)
        match e:
            case Registered() | MetadataSet():
                self._record(e.node).metadata = e.metadata
            case Submitted():
                # no evidence, no credit: it earns once its quorum of drawn checkers agreed
                record = self._record(e.node)
                record.open[e.round] = [e.signal, False]
                record.submitted += 1
                record.last_round = max(e.round, record.last_round or e.round)
                if e.node == me:
                    self.ours[e.round] = [e.signal, False]
            case Escalated():
                self._record(e.node).escalated += 1
            case CreditChanged():
                sub = self._record(e.node).open.get(e.round)
                if sub is not None:
                    sub[1] = e.credited
                if e.node == me and e.round in self.ours:
                    self.ours[e.round][1] = e.credited
                if e.node == me:
                    state = (
                        "credited: its checkers agreed"
                        if e.credited
                        else "no longer credited (disputed, or its checkers could not fetch it)"
                    )
                    return Activity(
                        now,
                        "credit",
                        f"round {e.round}: our submission is {state}",
                        e.round,
                        "info" if e.credited else "warning",
                    )
            case Unavailable() if e.node == me:
                self.votes.setdefault(e.round, [0, 0, 0])[2] += 1
                return Activity(
                    now,
                    "received",
                    f"round {e.round}: {short(e.attester)} could not fetch our batch "
                    "(an unavailable vote: it cancels credit, never slashes)",
                    e.round,
                    "warning",
                )
            case Attested():
                return self._fold_attested(e, now)
            case Settled() if e.node == me:
                text = f"round {e.round}: settled" + (
                    f", disputed: slashed {e.slashed / 10**18:g} ETH" if e.disputed else ""
                )
                return Activity(now, "settled", text, e.round, "warning" if e.disputed else "info")
            case Slashed() if e.node == me:
                return Activity(
                    now,
                    "slash",
                    f"round {e.round}: slashed {e.amount / 10**18:g} ETH",
                    e.round,
                    "error",
                )
            case Claimed() if e.node == me:
                self.paid_rounds.update(r for r in e.rounds if r in self.ours)
                params = self.ledger.params()
                mined_round = params.round_at(self._mined[e.block_number])
                self.payouts.append(Payout(mined_round, e.amount))
                return Activity(
                    now,
                    "claim",
                    f"claimed {e.amount / 10**18:g} ETH for rounds "
                    f"{', '.join(map(str, e.rounds))} (tx {e.tx_hash[:12]}…)",
                    mined_round,
                )
        return None

    def _fold_attested(self, e: Attested, now: float) -> Activity | None:
        if e.node == self.me:
            self.votes.setdefault(e.round, [0, 0, 0])[0 if e.agrees else 1] += 1
        if e.attester == self.me:
            rec = self._record(e.node)
            if e.agrees:
                rec.agreed += 1
                return None
            rec.disputed += 1
            return Activity(
                now,
                "dispute",
                f"round {e.round}: we dispute {short(e.node)}'s claim "
                f"(our score {e.score / SCORE_SCALE:.4f}, signal "
                f"{e.signal / SCORE_SCALE:.2f})",
                e.round,
                "warning",
            )
        if e.node == self.me:
            verdict = "agrees" if e.agrees else "DISPUTES our claim"
            return Activity(
                now,
                "received",
                f"round {e.round}: {short(e.attester)} attested our batch "
                f"{e.score / SCORE_SCALE:.4f}, signal {e.signal / SCORE_SCALE:.2f} "
                f"— {verdict}",
                e.round,
                "info" if e.agrees else "warning",
            )
        return None
