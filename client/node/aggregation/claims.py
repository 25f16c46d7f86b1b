"""A producer's claim of what it earned in the root lane (RoundBook.claim): one proof of its
newest credit in a standing round, which carries its earnings settled before it, and its credits
in the lag - 1 rounds before that (the claim's tail), each shown with its proof.

A round stands once its verdict root was posted, is not void, has no challenge open and its
challenge window closed two rounds ago (RoundBook._standing). The credits are read from the
verdict lists the posts name (fetched from IPFS, the posting aggregator's daemon dialled first,
checked against the posted root, count and total before anything in them is read), newest round
first, going back at most `lookback` rounds: the newest credit is all a claim needs, since it
carries everything earned before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from client.chain import Ledger
from client.chain.book import BookRound, RoundBook, Windows
from client.chain.events import EventReader
from client.chain.roots import BadList, Credit, VerdictRoot, open_verdict_list
from client.node.aggregation.earnings import EarningsBook, Entry, LedgerNotFinal, ledger_total
from client.node.aggregation.lists import ListUnavailable, fetch_list
from client.node.aggregation.reading import dial
from client.store import BlockStore
from client.store.cid import digest_to_cid


class NoClaim(Exception):
    """Nothing the book would pay, and why."""


@dataclass(frozen=True)
class BookClaim:
    entry: Entry  # the newest credit, in a standing round
    tail: list[Entry]  # the credits of the rounds before it that its earnings do not hold yet
    due: int  # what the claim brings in all (its settled earnings and the shares)

    def args(self) -> list:
        e = self.entry
        return [
            e.round,
            e.index,
            e.credit.struct(),
            e.amount,
            list(e.proof),
            [t.shown() for t in self.tail],
        ]


def standing(posted: BookRound, current: int, windows: Windows) -> bool:
    """RoundBook._standing, from `roundOf`."""
    return (
        posted.verdicts_posted
        and not posted.void
        and posted.open_challenges == 0
        and current >= windows.challenge_end(posted.round) + 2
    )


@dataclass
class Known:
    """What a reader of the book's credits keeps between calls (Claimant.credited), so that
    each round's list is fetched once, not at every call:
    - `final`: what each round that can no longer change credits (round -> lower-case address
      -> signal): its root stands for good (RoundBook._standing), or it credits nothing for
      good: its root is void (a void root stays void), or no verdict root was posted by two
      rounds after its verdict round (none can be posted after it);
    - `read`: what the verdict list of each round that does not stand yet credits: a posted
      list never changes (its root is in the book), only whether its root comes to stand or is
      voided, which is looked up again (roundOf) without fetching the list;
    - `lists`: the rounds' verdict list digests (each from its one VerdictsPosted event): the
      event walk starts at the oldest round whose digest is not known, and a list that could
      not be read is fetched again by it."""

    final: dict[int, dict[str, int]] = field(default_factory=dict)
    read: dict[int, dict[str, int]] = field(default_factory=dict)
    lists: dict[int, bytes] = field(default_factory=dict)

    def since(self, first: int) -> Known:
        """What is worth keeping once the rounds before `first` are out of every later read:
        their rounds, and the digests of lists already read, dropped."""
        return Known(
            {q: c for q, c in self.final.items() if q >= first},
            {q: c for q, c in self.read.items() if q >= first},
            {
                q: d
                for q, d in self.lists.items()
                if q >= first and q not in self.final and q not in self.read
            },
        )


class Claimant:
    """Reads a producer's credits from the book's verdict lists."""

    def __init__(
        self,
        ledger: Ledger,
        book: RoundBook,
        store: BlockStore,
        *,
        start_block: int = 0,
        allow_private_peers: bool = False,
        chunk_blocks: int = 2_000,
    ):
        """`chunk_blocks`: blocks a log query spans at most ([chain].log_chunk_blocks)."""
        self.ledger, self.book, self.store = ledger, book, store
        self.params = ledger.params()
        self.windows = Windows.of(self.params)
        self.events = EventReader(
            book,  # type: ignore[arg-type]
            start_block=start_block,
            chunk_blocks=chunk_blocks,
        )
        self.allow_private_peers = allow_private_peers

    @classmethod
    def of(cls, cfg, ledger: Ledger, book: RoundBook, store: BlockStore) -> Claimant:
        """A claimant as a node's config reads the book: from its deploy block, the log chunks
        and private peers [chain] and [store] allow (`cfg`: a NodeConfig)."""
        return cls(
            ledger,
            book,
            store,
            start_block=cfg.chain.round_book_deploy_block,
            allow_private_peers=cfg.store.allow_private_peers,
            chunk_blocks=cfg.chain.log_chunk_blocks,
        )

    def find(self, producer: str, lookback: int) -> BookClaim:
        """The claim of `producer`'s newest credit in the last `lookback` rounds that can stand;
        raises NoClaim saying why there is none."""
        current = self.ledger.current_round()
        newest = current - self.windows.challenge_end(0) - 2  # the newest round that can stand
        if newest < 0:
            raise NoClaim(f"no round can stand yet (round {current})")
        first = max(0, newest - lookback + 1)
        rounds = {q: self.book.round_of(q) for q in range(first, newest + 1)}
        stands = {q: p for q, p in rounds.items() if standing(p, current, self.windows)}
        digests = self._digests(sorted(stands))
        found: dict[int, Entry | None] = {}
        for q in sorted(stands, reverse=True):
            found[q] = self._credit(stands[q], digests.get(q), producer)
            if found[q] is not None:
                break
        else:
            raise NoClaim(
                f"no credit of {producer} in the standing rounds {first}..{newest} "
                f"({len(stands)} of them stand); look further back with --lookback"
            )
        entry = found[q]
        assert entry is not None
        tail = []
        for t in range(max(0, q - self.windows.lag + 1), q):
            if t in stands:
                credit = found.get(t) or self._credit(stands[t], digests.get(t), producer)
                if credit is not None:
                    tail.append(credit)
        reward = self.params.reward_per_round
        due = entry.credit.earnings.settled + sum(e.share(reward) for e in [entry, *tail])
        return BookClaim(entry, tail, due)

    def _digests(
        self, rounds: list[int], known: dict[int, bytes] | None = None
    ) -> dict[int, bytes]:
        """The verdict lists' digests of `rounds`: those in `known`, and the others' from their
        VerdictsPosted events (one walk of the blocks from the oldest one's verdict round)."""
        found = {q: known[q] for q in rounds if known and q in known}
        wanted = set(rounds) - set(found)
        if not wanted:
            return found
        start = self.ledger.block_at(
            self.params.round_start(self.windows.verdict_round(min(wanted))),
            self.events.start_block,
        )
        for event in self.events.read(["VerdictsPosted"], from_block=start):
            q = int(event.args["round"])
            if q in wanted:
                found[q] = bytes.fromhex(event.args["list"][2:])
        return found

    def credited(
        self,
        first: int,
        last: int,
        unreadable: list[int] | None = None,
        known: Known | None = None,
    ) -> dict[str, int]:
        """The learning signal the book's verdict roots of rounds first..last credit each
        producer (lower-case address) with: every posted verdict root that is not void, standing
        yet or not, as the ledger's leaderboard counts a credit its appeals may still change.
        Reads the VerdictsPosted events from the verdict round of the first round it reads on,
        and each crediting list; raises NoClaim naming a list that cannot be read, or, given
        `unreadable`, skips it and puts its round there.

        `known`, when given, is what earlier calls kept (see Known), and what this one learns is
        added to it: `sapo devnet status` keeps it between calls, so that a list is fetched
        once, not at every call, and the event walk starts at the newest rounds."""
        keep = known is not None
        kept = known if known is not None else Known()
        found: dict[str, int] = {}

        def count(credited: dict[str, int]) -> None:
            for key, signal in credited.items():
                found[key] = found.get(key, 0) + signal

        rounds = range(first, last + 1)
        for q in rounds:
            count(kept.final.get(q, {}))
        current = self.ledger.current_round() if keep else 0
        # a list read before: only whether its root stands, or was voided, can have changed
        for q in [q for q in rounds if q not in kept.final and q in kept.read]:
            posted = self.book.round_of(q)
            if posted.void:
                kept.final[q] = {}
                del kept.read[q]
                continue
            count(kept.read[q])
            if standing(posted, current, self.windows):
                kept.final[q] = kept.read.pop(q)
        todo = [q for q in rounds if q not in kept.final and q not in kept.read]
        digests = self._digests(todo, kept.lists)
        kept.lists.update(digests)
        for posted, credits in self._read(todo, unreadable, digests):
            credited: dict[str, int] = {}
            for credit in credits:
                key = credit.producer.lower()
                credited[key] = credited.get(key, 0) + credit.signal
            count(credited)
            if posted.void or standing(posted, current, self.windows):
                kept.final[posted.round] = credited  # void: nothing
            else:
                kept.read[posted.round] = credited
        if keep:
            for q in todo:
                if q not in digests and current >= self.windows.verdict_round(q) + 2:
                    # no verdict root, and none can come: confirmed by the book itself, not by
                    # the missing event alone (a node behind on its logs must not make it so)
                    posted = self.book.round_of(q)
                    if posted.void or not posted.verdicts_posted:
                        kept.final[q] = {}
        return found

    def earnings_book(self, first: int, last: int) -> EarningsBook:
        """Every credit of the rounds first..last that stand, folded as the book settles them
        (what an auditor needs to judge every credit's earnings in a round r with r - lag ==
        last; a credit anchored before `first` it cannot judge). Raises NoClaim when a round of
        them is not decided yet (its challenge window, or a challenge of it, still open) or a
        standing round's list cannot be read."""
        book = EarningsBook(
            self.params.reward_per_round, self.windows.lag, folded=first - 1, first=first
        )
        current = self.ledger.current_round()
        rounds = list(range(first, last + 1))
        digests = self._digests(rounds)
        for q in rounds:
            posted = self.book.round_of(q)
            if current < self.windows.challenge_end(q) + 2 or (
                posted.posted and posted.open_challenges
            ):
                raise NoClaim(f"round {q} is not decided yet: its earnings cannot be folded")
            if not standing(posted, current, self.windows):
                book.fold(q, None)
            elif posted.credits == 0:  # the no-credit root stands: a round of no credit
                book.fold_entries(q, 0, 0, [], 0)
            else:
                verdicts = self._verdicts(posted, digests.get(q))
                book.fold(q, verdicts, self._ledger_total(q))
        return book

    def credits(
        self, first: int, last: int, unreadable: list[int] | None = None
    ) -> dict[int, list[Credit]]:
        """The credits of every posted verdict root of rounds first..last that is not void, by
        round (a root that credits no batch: an empty list); see `credited`. A list that
        cannot be read raises NoClaim, or, given `unreadable`, is skipped and its round put
        there."""
        rounds = list(range(first, last + 1))
        return {
            posted.round: credits
            for posted, credits in self._read(rounds, unreadable, self._digests(rounds))
            if not posted.void
        }

    def _read(
        self, rounds: list[int], unreadable: list[int] | None, digests: dict[int, bytes]
    ) -> list[tuple[BookRound, list[Credit]]]:
        """Each of `rounds` with a verdict list's digest in `digests` and its root posted, and
        its credits (see `credits`; a void root: none), oldest first."""
        found: list[tuple[BookRound, list[Credit]]] = []
        for q in sorted(set(rounds) & set(digests)):
            digest = digests[q]
            posted = self.book.round_of(q)
            if posted.void:
                found.append((posted, []))
                continue
            if not posted.verdicts_posted:
                continue
            if not posted.credits:
                found.append((posted, []))
                continue
            try:
                found.append((posted, list(self._verdicts(posted, digest).credits)))
            except NoClaim:
                if unreadable is None:
                    raise
                unreadable.append(q)
        return found

    def _credit(self, posted: BookRound, digest: bytes | None, producer: str) -> Entry | None:
        """`producer`'s credit in a standing round (None: it credits none of its batches)."""
        if posted.credits == 0:
            return None
        verdicts = self._verdicts(posted, digest)
        for index, (credit, amount) in enumerate(
            zip(verdicts.credits, verdicts.amounts, strict=True)
        ):
            if credit.producer.lower() == producer.lower():
                proof = tuple(verdicts.proof(index))
                # a standing round's: the ledger's total of it is final (one reward a round)
                other = self._ledger_total(posted.round)
                return Entry(posted.round, index, credit, amount, verdicts.total, proof, other)
        return None

    def _ledger_total(self, round_: int) -> int:
        try:
            return ledger_total(self.ledger, round_)
        except LedgerNotFinal as exc:
            raise NoClaim(str(exc)) from None

    def _verdicts(self, posted: BookRound, digest: bytes | None) -> VerdictRoot:
        """A posted round's verdict list, fetched (its aggregator's daemon dialled first) and
        checked against its root; raises NoClaim saying why it cannot be read."""
        if digest is None:
            raise NoClaim(f"round {posted.round}'s verdict list is named by no VerdictsPosted")
        dial(
            self.store,
            self.ledger.node_info(posted.aggregator).metadata,
            allow_private=self.allow_private_peers,
        )
        try:
            data = fetch_list(
                self.store,
                digest_to_cid(digest),
                "verdicts",
                posted.round,
                posted.credits,
                keep_round=None,
            )
            verdicts: VerdictRoot = open_verdict_list(
                data, posted.verdicts, posted.credits, posted.total
            )
        except (ListUnavailable, BadList) as exc:
            raise NoClaim(f"round {posted.round}'s verdict list cannot be read: {exc}") from None
        return verdicts


__all__ = ["BookClaim", "Claimant", "Known", "NoClaim", "standing"]
