"""A watcher of the round book (`sapo audit watch`): what Optimism's op-challenger is to its
dispute games. A training node audits only the rounds its batch is in, and of the other credits
only a sample's votes and amounts, never their earnings (client.node.publishing.rootlane): an
aggregator that writes inflated earnings into a friend's credit is caught only by someone who
folds every round that stands. The watcher does: it audits each verdict root as it is posted,
every credit (votes, seats, amounts, order) and every credit's earnings against the rounds it
folded, and proves the first lie it finds; it folds each round once it is decided, from the list
it read when it audited it (lists are pinned by their readers only through their challenge
window, so a list is read while it can be had, and pinned here until it is folded), or, for a
round before it started, fetched then if anyone still serves it.

It reads every list of every round: N entries a round, the cost a training node must not pay
(docs/scaling.md), which is why it is a command of its own, for operators who volunteer it.
What it folded lives in memory: a restarted watcher judges earnings again once it has folded
the `lag` rounds a credit's earnings name (`--since`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from client.chain.book import BookRound, RoundBook, Windows
from client.chain.events import EventReader
from client.chain.ledger import Ledger
from client.chain.roots import BadList, VerdictRoot, open_verdict_list
from client.node.aggregation.auditor import Auditor, Finding, v4_producers
from client.node.aggregation.claims import standing
from client.node.aggregation.earnings import EarningsBook
from client.node.aggregation.lists import ListUnavailable, fetch_list
from client.node.aggregation.reading import dial, fetch_posted_submissions
from client.store import BlockStore
from client.store.cid import digest_to_cid

log = logging.getLogger("sapo.watch")


@dataclass(frozen=True)
class Audited:
    """What the watcher made of one round's verdict root."""

    round: int
    finding: Finding | None  # the lie found (None: every rule holds)
    earnings: bool  # every credit's earnings were judged (the rounds they name were folded)
    tx_hash: str | None = None  # the proof (or data challenge) sent

    def describe(self) -> str:
        if self.finding is None:
            checked = "earnings too" if self.earnings else "earnings not judged yet"
            return f"round {self.round}: every rule the book proves holds ({checked})"
        what = "data to ask for" if self.finding.challenge else "LIE"
        sent = f"; sent {self.finding.function} in {self.tx_hash}" if self.tx_hash else ""
        return f"round {self.round}: {what}: {self.finding.what} ({self.finding.function}){sent}"


class Watcher:
    """Audits the book's verdict roots from round `since` on and folds the rounds that stand.
    `prove`: send each lie's proof (the account `book` signs with); `challenge`: with it, also
    bond a data challenge of a list that cannot be had in the last two rounds of its window."""

    def __init__(
        self,
        ledger: Ledger,
        book: RoundBook,
        store: BlockStore,
        auditor: Auditor,
        *,
        since: int,
        prove: bool = False,
        challenge: bool = False,
        allow_private_peers: bool = False,
        start_block: int = 0,
        chunk_blocks: int = 2_000,
    ):
        self.ledger, self.book, self.store, self.auditor = ledger, book, store, auditor
        self.params = ledger.params()
        self.windows = Windows.of(self.params)
        self.prove, self.challenge = prove, challenge
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
        """One pass: folds what was decided, then audits each verdict root posted and not
        audited yet while it can still be proven."""
        current = self.ledger.current_round()
        self._fold(current)
        found = []
        oldest = max(self.first, current - self.windows.challenge_end(0))
        self.audited = {q for q in self.audited if q >= oldest}  # the others are past proving
        for round_ in range(oldest, current + 1):
            if round_ in self.audited:
                continue
            audited = self._audit(round_, current)
            if audited is not None:
                found.append(audited)
        return found

    # ------------------------------------------------------------------------------- audit

    def _audit(self, round_: int, current: int) -> Audited | None:
        posted = self.book.round_of(round_)
        if not posted.verdicts_posted:
            return None  # to come (or never: a round without one is void at its release)
        if posted.void or current > self.windows.challenge_end(round_):
            self.audited.add(round_)
            return None  # proven by someone already, or past proving
        last_chance = current >= self.windows.challenge_end(round_) - 1
        try:
            data = fetch_posted_submissions(
                self.store,
                self.book_events,
                posted,
                self.ledger.node_info(posted.aggregator).metadata,
                allow_private=self.allow_private,
                keep_round=self.windows.challenge_end(round_) + 2,
            )
        except ListUnavailable as exc:
            if not last_chance:
                log.info("round %s: %s; tried again next pass", round_, exc)
                return None
            data = None
        entries, finding = self.auditor.submissions(posted, data)
        judged = False
        if finding is None and posted.credits:
            listed = self._verdict_list(posted, last_chance)
            if listed is False:
                return None  # not fetched yet: tried again next pass
            judged = self.earned.folded >= round_ - self.windows.lag
            v4 = v4_producers(self.ledger, self.ledger_events, round_)
            earned = self.earned if judged else None
            finding = self.auditor.verdicts(posted, entries, listed, earned, v4=v4)
            if listed is not None and finding is None:
                try:
                    opened = open_verdict_list(
                        listed, posted.verdicts, posted.credits, posted.total
                    )
                    self.lists[round_] = opened
                except BadList:  # the auditor says so (a challenge), and found none: not kept
                    pass
        sent = self._send(finding)  # raises: audited again next pass (void by then if proven)
        self.audited.add(round_)
        return Audited(round_, finding, judged, sent)

    def _verdict_list(self, posted: BookRound, last_chance: bool) -> bytes | bool | None:
        """The round's verdict list; None once it cannot be had in the window's last rounds
        (the auditor then calls for its data); False while it may still come."""
        start = self.ledger.block_at(
            self.params.round_start(self.windows.verdict_round(posted.round)),
            self.book_events.start_block,
        )
        digest = next(
            (
                bytes.fromhex(e.args["list"][2:])
                for e in self.book_events.read(
                    ["VerdictsPosted"], from_block=start, round=posted.round
                )
            ),
            None,
        )
        if digest is None:
            return None if last_chance else False
        dial(
            self.store,
            self.ledger.node_info(posted.aggregator).metadata,
            allow_private=self.allow_private,
        )
        try:
            return fetch_list(
                self.store,
                digest_to_cid(digest),
                "verdicts",
                posted.round,
                posted.credits,
                keep_round=self.windows.challenge_end(posted.round) + 2,
            )
        except ListUnavailable as exc:
            log.info("round %s: %s", posted.round, exc)
            return None if last_chance else False

    def _opened(self, posted: BookRound) -> VerdictRoot | None:
        """A standing round's verdict list this watcher did not audit (before --since's rounds
        were in its window), fetched now if anyone still serves it."""
        listed = self._verdict_list(posted, last_chance=True)
        if not isinstance(listed, bytes):
            return None
        try:
            return open_verdict_list(listed, posted.verdicts, posted.credits, posted.total)
        except BadList:
            return None

    def _send(self, finding: Finding | None) -> str | None:
        if finding is None or not self.prove or (finding.challenge and not self.challenge):
            return None
        bond = self.book.bonds()[1] if finding.challenge else 0
        return self.book.call(finding.function, finding.args, value=bond).tx_hash

    # -------------------------------------------------------------------------------- fold

    def _fold(self, current: int) -> None:
        """Folds, in order, each round decided (two rounds past its challenge window, no
        challenge open), from the list its audit kept; stops at a standing round whose list it
        did not keep and cannot fetch starts afresh after it (the earnings that count it are
        not judged)."""
        while True:
            q = self.earned.folded + 1
            if current < self.windows.challenge_end(q) + 2:
                return
            posted = self.book.round_of(q)
            if posted.posted and posted.open_challenges:
                return
            if not standing(posted, current, self.windows):
                self.earned.fold(q, None)
            elif posted.credits == 0:
                self.earned.fold_entries(q, 0, 0, [])
            elif (opened := self.lists.get(q) or self._opened(posted)) is not None:
                self.earned.fold(q, opened)
            else:  # folded afresh from the next round: what names this one is not judged
                log.warning(
                    "round %s stands but its verdict list cannot be had: the earnings that count "
                    "it are not judged",
                    q,
                )
                self.earned = EarningsBook(
                    self.params.reward_per_round, self.windows.lag, folded=q, first=q + 1
                )
            self.lists.pop(q, None)


__all__ = ["Audited", "Watcher"]
