"""A watcher of the round book (`sapo audit watch`): what Optimism's op-challenger is to its
dispute games. A training node audits only the rounds its batch is in, and of the other credits
only a sample's votes and amounts, never their earnings (client.node.publishing.rootlane): an
aggregator that writes inflated earnings into a friend's credit is caught only by someone who
folds every round that stands. The watcher does: it audits each verdict root as it is posted,
every credit (votes, seats, amounts, order) and every credit's earnings against the rounds it
folded, and proves the first lie it finds; it folds each round once it is decided, from the list
it read when it audited it (lists are pinned by their readers only through their challenge
window, so a list is read while it can be had, and kept here until it is folded), or, for a
round before it started, fetched then if anyone still serves it.

A list it cannot fetch by the last rounds of its window is named ("data to ask for"), never
bonded here: a data challenge is `sapo audit book ROUND --prove --challenge`'s, or a producer's
([root_lane].challenge_lists), which claim what they bond.

It reads every list of every round: N entries a round, the cost a training node must not pay
(docs/scaling.md), which is why it is a command of its own, for operators who volunteer it.
What it folded lives in memory: a restarted watcher folds again from `--since`.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from client.chain import ChainError
from client.chain.book import BookRound, RoundBook, Windows
from client.chain.events import EventReader
from client.chain.ledger import Ledger
from client.chain.roots import NO_ROUND, BadList, VerdictRoot, open_verdict_list
from client.node.aggregation.auditor import Auditor, Finding, v4_producers
from client.node.aggregation.claims import standing
from client.node.aggregation.earnings import EarningsBook, LedgerNotFinal, ledger_total
from client.node.aggregation.lists import ListUnavailable, fetch_list
from client.node.aggregation.reading import dial, fetch_posted_submissions, verdict_digest
from client.store import BlockStore, StoreError
from client.store.cid import digest_to_cid

log = logging.getLogger("sapo.watch")

FOLD_STEPS = 32  # rounds folded at most a pass: a far --since does not starve the audits


@dataclass(frozen=True)
class Audited:
    """What the watcher made of one round's verdict root."""

    round: int
    finding: Finding | None  # the lie found (None: every rule holds)
    credits: int  # the credits of its verdict root
    judged: int  # of them, those whose earnings were judged (the rounds they name folded)
    tx_hash: str | None = None  # the proof sent

    def describe(self) -> str:
        if self.finding is None:
            earnings = f"earnings of {self.judged} of {self.credits} credits judged"
            return f"round {self.round}: every rule the book proves holds ({earnings})"
        what = "data to ask for" if self.finding.challenge else "LIE"
        sent = f"; sent {self.finding.function} in {self.tx_hash}" if self.tx_hash else ""
        return f"round {self.round}: {what}: {self.finding.what} ({self.finding.function}){sent}"


class Watcher:
    """Audits the book's verdict roots from round `since` on and folds the rounds that stand.
    `prove`: send each lie's proof (the account `book` signs with)."""

    def __init__(
        self,
        ledger: Ledger,
        book: RoundBook,
        store: BlockStore,
        auditor: Auditor,
        *,
        since: int,
        prove: bool = False,
        allow_private_peers: bool = False,
        start_block: int = 0,
        chunk_blocks: int = 2_000,
    ):
        self.ledger, self.book, self.store, self.auditor = ledger, book, store, auditor
        self.params = ledger.params()
        self.windows = Windows.of(self.params)
        self.prove = prove
        self.allow_private = allow_private_peers
        self.book_events = EventReader(book, start_block=start_block, chunk_blocks=chunk_blocks)  # type: ignore[arg-type]
        self.ledger_events = EventReader(ledger, start_block=start_block, chunk_blocks=chunk_blocks)
        self.first = since
        self.earned = EarningsBook(
            self.params.reward_per_round, self.windows.lag, folded=since - 1, first=since
        )
        self.lists: dict[int, VerdictRoot] = {}  # rounds audited, not folded yet
        self.audited: set[int] = set()

    def tick(self) -> list[Audited]:
        """One pass: folds what was decided (at most FOLD_STEPS rounds), then audits each
        verdict root posted and not audited yet while it can still be proven. A round the chain
        or the store did not answer for is tried again next pass; the others go on."""
        current = self.ledger.current_round()
        try:
            self._fold(current)
        except (ChainError, StoreError) as exc:
            log.warning("folding stopped at round %s: %s", self.earned.folded + 1, exc)
        found = []
        oldest = max(self.first, current - self.windows.challenge_end(0))
        self.audited = {q for q in self.audited if q >= oldest}  # the others are past proving
        for round_ in range(oldest, current + 1):
            if round_ in self.audited:
                continue
            try:
                audited = self._audit(round_, current)
            except (ChainError, StoreError) as exc:
                log.warning("round %s: not audited this pass: %s", round_, exc)
                continue
            if audited is not None:
                found.append(audited)
        return found

    # ------------------------------------------------------------------------------- audit

    def _audit(self, round_: int, current: int) -> Audited | None:
        """The round's audit, or None while it is to come (its verdict root, its lists, or the
        folding its earnings need) or past proving."""
        posted = self.book.round_of(round_)
        if not posted.verdicts_posted:
            return None  # to come (or never: a round without one is void at its release)
        if posted.void or current > self.windows.challenge_end(round_):
            self.audited.add(round_)
            return None  # proven by someone already, or past proving
        last_chance = current >= self.windows.challenge_end(round_) - 1
        if self.earned.folded < round_ - self.windows.lag and not last_chance:
            return None  # the rounds its earnings count are not folded yet
        try:
            data: bytes | None = fetch_posted_submissions(
                self.store,
                self.book_events,
                posted,
                self.ledger.node_info(posted.aggregator).metadata,
                allow_private=self.allow_private,
                keep_round=self.windows.challenge_end(round_) + 2,
            )
        except ListUnavailable as exc:
            if exc.store_down or not last_chance:  # our own daemon, or it may still come
                log.info("round %s: %s; tried again next pass", round_, exc)
                return None
            data = None
        entries, finding = self.auditor.submissions(posted, data)
        judged = 0
        if finding is None and posted.credits:
            try:
                listed: bytes | None = self._verdict_list(posted)
            except ListUnavailable as exc:
                if exc.store_down or not last_chance:
                    log.info("round %s: %s; tried again next pass", round_, exc)
                    return None
                listed = None
            opened = None
            if listed is not None:
                with contextlib.suppress(BadList):  # not the root's data: the auditor names it
                    opened = open_verdict_list(
                        listed, posted.verdicts, posted.credits, posted.total
                    )
            folded = self.earned.folded >= round_ - self.windows.lag
            earned = self.earned if folded else None
            v4 = v4_producers(self.ledger, self.ledger_events, round_)
            finding = self.auditor.verdicts(posted, entries, listed, earned, v4=v4)
            if opened is not None:
                self.lists[round_] = opened  # what its fold reads, lie or not
                if folded:
                    judged = sum(1 for c in opened.credits if self._judgeable(c.earnings.anchor))
        sent = self._send(finding)  # raises: audited again next pass (void by then if proven)
        self.audited.add(round_)
        return Audited(round_, finding, posted.credits, judged, sent)

    def _judgeable(self, anchor: int) -> bool:
        """Whether the earnings of a credit anchored at `anchor` can be judged from what was
        folded (Auditor._earnings judges none whose anchor's lag rounds it does not know)."""
        if anchor == NO_ROUND:
            return True
        lag = self.windows.lag
        return all(self.earned.known(q) for q in range(max(0, anchor - lag + 1), anchor + 1))

    def _verdict_list(self, posted: BookRound) -> bytes:
        """The round's verdict list (its aggregator's daemon dialled first); raises
        ListUnavailable."""
        digest = verdict_digest(self.ledger, self.book_events, self.windows, posted.round)
        if digest is None:
            raise ListUnavailable(f"no VerdictsPosted event of round {posted.round}")
        dial(
            self.store,
            self.ledger.node_info(posted.aggregator).metadata,
            allow_private=self.allow_private,
        )
        return fetch_list(
            self.store,
            digest_to_cid(digest),
            "verdicts",
            posted.round,
            posted.credits,
            keep_round=self.windows.challenge_end(posted.round) + 2,
        )

    def _send(self, finding: Finding | None) -> str | None:
        if finding is None or not self.prove or finding.challenge:
            return None
        return self.book.call(finding.function, finding.args).tx_hash

    # -------------------------------------------------------------------------------- fold

    def _fold(self, current: int) -> None:
        """Folds, in order, each round decided (two rounds past its challenge window, no
        challenge open), from the list its audit kept or fetched now; a standing round whose
        list nobody serves any more starts the book afresh after it (the earnings that count
        it are not judged); a list our own store could not fetch is tried again next pass."""
        for _ in range(FOLD_STEPS):
            q = self.earned.folded + 1
            if current < self.windows.challenge_end(q) + 2:
                return
            posted = self.book.round_of(q)
            if posted.posted and posted.open_challenges:
                return
            stands = standing(posted, current, self.windows)
            try:  # both lanes split one reward: a standing round's shares count the ledger's
                other = ledger_total(self.ledger, q) if stands and posted.credits else 0
            except LedgerNotFinal as exc:
                log.warning("%s", exc)
                return
            if not stands:
                self.earned.fold(q, None)
            elif posted.credits == 0:
                self.earned.fold_entries(q, 0, 0, [], 0)
            elif q in self.lists:
                self.earned.fold(q, self.lists[q], other)
            else:
                try:
                    listed = self._verdict_list(posted)
                    self.earned.fold(
                        q,
                        open_verdict_list(listed, posted.verdicts, posted.credits, posted.total),
                        other,
                    )
                except ListUnavailable as exc:
                    if exc.store_down:
                        raise StoreError(str(exc)) from None
                    log.warning(
                        "round %s stands but its verdict list cannot be had (%s): the earnings "
                        "that count it are not judged",
                        q,
                        exc,
                    )
                    self.earned = EarningsBook(
                        self.params.reward_per_round, self.windows.lag, folded=q, first=q + 1
                    )
                except BadList as exc:  # a standing root's list that is not its data: none
                    log.warning("round %s: its verdict list is not its root's: %s", q, exc)
                    self.earned = EarningsBook(
                        self.params.reward_per_round, self.windows.lag, folded=q, first=q + 1
                    )
            self.lists.pop(q, None)


__all__ = ["FOLD_STEPS", "Audited", "Watcher"]
