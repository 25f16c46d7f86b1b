"""What each producer has earned in the root lane, as the round book proves it (IRoundBook.Earnings,
docs/scaling.md "Payouts"): folded from the verdict lists of the rounds that stand, in order, by
whoever posts roots (the aggregator fills each credit's earnings from it) and whoever checks them
(the auditor compares, and proves a difference), and by a producer that claims (its own credits
and their proofs).

A round q stands once its verdict root was posted, never voided, every data challenge of it was
answered, and its challenge window closed two rounds ago; it is settled for round r when
q <= r - lag (lag = C + 2), which is when r's verdict root is posted. A credit's share is
rewardPerRound * amount / the round's total over both lanes: the book's and the ledger's credited
total of the round (its `roundInfo`, final by the time the round is decided: one reward a round,
whichever lane a batch took; docs/scaling.md, "One reward over both lanes"). A credit of round r
carries `settled`, the sum of its producer's shares in the standing rounds settled for r, proven
from its producer's last such credit (the anchor) and the credits in the lag - 1 rounds before the
anchor (recent), which the anchor's own `settled` does not count yet.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from client.chain import ChainError
from client.chain.roots import NO_EARNINGS, NO_INDEX, Credit, Earnings, VerdictRoot
from client.chain.sumtree import Node, root_of


class LedgerNotFinal(ChainError):
    """The ledger answered that a round's credit is not final where the book folds it: the
    node asked is behind the chain's head. Folding waits; asking again later reads it final."""


def ledger_total(ledger, round_: int) -> int:
    """The ledger lane's credited total of `round_` (`roundInfo`), which every share of the
    round is paid over beside the book's: final whenever the book folds a round (its windows
    make it so); raises LedgerNotFinal when the answer says otherwise, rather than fold a total
    that can still move (earnings built on it would be proven false)."""
    info = ledger.round_info(round_)
    if not info.final:
        raise LedgerNotFinal(
            f"the ledger says round {round_}'s credit is not final yet, while the book settles "
            "it: the RPC node is behind the chain's head; its shares wait for it"
        )
    return info.total_credited


@dataclass(frozen=True)
class Entry:
    """One credit of a standing round, with what shows it on chain."""

    round: int
    index: int  # its place in the round's verdict tree
    credit: Credit
    amount: int
    total: int  # its round's total in the book (what its proof reaches)
    proof: tuple[tuple[bytes, int], ...]
    # the ledger lane's credited total of its round, as the round was folded (0 until then):
    # its share is rewardPerRound * amount / (total + ledger_total)
    ledger_total: int = 0

    def share(self, reward_per_round: int) -> int:
        """Its share of its round's reward, as RoundBook._share computes it."""
        whole = self.total + self.ledger_total
        return 0 if whole == 0 else reward_per_round * self.amount // whole

    def shown(self) -> tuple:
        """IRoundBook.Shown."""
        return (self.round, self.index, self.credit.struct(), self.amount, list(self.proof))

    def proven_in(self, root: bytes, total: int, count: int) -> bool:
        """Whether this entry is a credit of the verdict root `root` (of `total` signal and
        `count` credits, as the book holds it): its leaf and proof reach the root."""
        try:
            node = root_of(
                self.credit.leaf(self.amount), self.index, [Node(h, s) for h, s in self.proof]
            )
        except ValueError:
            return False
        return (
            self.index < count and self.total == total and node.hash == root and node.sum == total
        )

    def to_json(self) -> str:
        """The entry as a producer's journal keeps its own credits (`from_json` reads it)."""
        c, e = self.credit, self.credit.earnings
        return json.dumps(
            {
                "round": self.round,
                "index": self.index,
                "credit": {
                    "index": c.index,
                    "producer": c.producer,
                    "digest": c.digest,
                    "score": c.score,
                    "signal": c.signal,
                    "votes": c.votes.hex(),
                    "earnings": [e.settled, e.anchor, e.anchor_index, list(e.recent)],
                },
                "amount": self.amount,
                "total": self.total,
                "ledger_total": self.ledger_total,
                "proof": [[h.hex(), amount] for h, amount in self.proof],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Entry:
        """Reads `to_json`'s text; raises ValueError naming what does not fit."""
        try:
            d = json.loads(text)
            c = d["credit"]
            settled, anchor, anchor_index, recent = c["earnings"]
            credit = Credit(
                int(c["index"]),
                str(c["producer"]),
                str(c["digest"]),
                int(c["score"]),
                int(c["signal"]),
                bytes.fromhex(c["votes"]),
                Earnings(int(settled), int(anchor), int(anchor_index), tuple(map(int, recent))),
            )
            proof = tuple((bytes.fromhex(h), int(amount)) for h, amount in d["proof"])
            return cls(
                int(d["round"]),
                int(d["index"]),
                credit,
                int(d["amount"]),
                int(d["total"]),
                proof,
                int(d.get("ledger_total", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a kept credit entry: {exc!r}") from None


@dataclass
class EarningsBook:
    reward_per_round: int
    lag: int
    # per producer (lower case), its credits in standing rounds, the latest last; a producer's
    # earnings need its last credit settled for a round and the lag - 1 rounds before it
    credits: dict[str, list[Entry]] = field(default_factory=dict)
    # the standing rounds of the last `keep_rounds` (an older one is still known through the
    # entries a producer's history holds): its total and its credits (the ledger lane's total
    # of a round is on each of its entries)
    totals: dict[int, int] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    folded: int = -1  # the last round folded (standing or not): rounds fold in order
    keep_rounds: int = 10_080  # a week of 60-s rounds
    # the first round folded (a book folded from a later round than 0 knows nothing before it)
    first: int = 0
    # the same entries by place (round, index), while some producer's history holds them: what
    # an auditor shows when a credit names a place that is not its producer's
    places: dict[tuple[int, int], Entry] = field(default_factory=dict)

    def fold(
        self, round_: int, verdicts: VerdictRoot | None, ledger_total: int | None = None
    ) -> None:
        """Folds round `round_` once it is decided: `verdicts` if its root stands, None if it
        does not (never posted, void, or a challenge of it went unanswered). A standing round
        needs `ledger_total`, the ledger's credited total of the round (`roundInfo`)."""
        if round_ <= self.folded:
            raise ValueError(f"round {round_} folded after round {self.folded}: fold in order")
        if verdicts is None:
            self.folded = round_
            for old in [q for q in self.totals if q < round_ - self.keep_rounds]:
                del self.totals[old], self.counts[old]
            return
        if ledger_total is None:
            raise ValueError(f"round {round_} stands: fold it with the ledger's total of it")
        entries = [
            Entry(round_, index, credit, amount, verdicts.total, tuple(verdicts.proof(index)))
            for index, (credit, amount) in enumerate(
                zip(verdicts.credits, verdicts.amounts, strict=True)
            )
        ]
        self.fold_entries(round_, verdicts.total, len(verdicts.credits), entries, ledger_total)

    def fold_entries(
        self, round_: int, total: int, count: int, entries: list[Entry], ledger_total: int
    ) -> None:
        """Folds round `round_`, which stands with `count` credits of `total` signal in the book
        and `ledger_total` in the ledger's lane, knowing only `entries` of them (all of them,
        from `fold`; or a producer's own, as it folds its own history: it can then judge only
        its own earnings, Auditor.earnings)."""
        if round_ <= self.folded:
            raise ValueError(f"round {round_} folded after round {self.folded}: fold in order")
        entries = [replace(e, ledger_total=ledger_total) for e in entries]
        self.folded = round_
        for old in [q for q in self.totals if q < round_ - self.keep_rounds]:
            del self.totals[old], self.counts[old]
        self.totals[round_] = total
        self.counts[round_] = count
        for entry in entries:
            credit = entry.credit
            history = self.credits.setdefault(credit.producer.lower(), [])
            history.append(entry)
            self.places[(round_, entry.index)] = entry
            for old in history[: -2 * self.lag]:  # never an anchor or a recent credit again
                self.places.pop((old.round, old.index), None)
            del history[: -2 * self.lag]

    def standing(self, round_: int) -> bool:
        """Whether round `round_` stands (see `known`)."""
        return round_ in self.totals

    def known(self, round_: int) -> bool:
        """Whether this book can tell if round `round_` stands: folded, and not pruned."""
        return max(self.first, self.folded - self.keep_rounds) <= round_ <= self.folded

    def share(self, entry: Entry) -> int:
        """A credit's share of its round's reward, as RoundBook._share computes it."""
        return entry.share(self.reward_per_round)

    def at(self, round_: int, index: int) -> Entry | None:
        """The credit at `index` of round `round_`'s tree, if still held."""
        return self.places.get((round_, index))

    def entry(self, producer: str, round_: int) -> Entry | None:
        return next((e for e in self.credits.get(producer.lower(), ()) if e.round == round_), None)

    def earnings(self, producer: str, round_: int) -> Earnings:
        """The earnings a credit of `producer` in round `round_` must carry."""
        horizon = round_ - self.lag
        if horizon > self.folded:
            raise ValueError(
                f"round {round_}'s earnings need every round to {horizon} folded; "
                f"folded to {self.folded}"
            )
        settled = [e for e in self.credits.get(producer.lower(), ()) if e.round <= horizon]
        if not settled:
            return NO_EARNINGS
        anchor = settled[-1]
        total = anchor.credit.earnings.settled + self.share(anchor)
        recent = []
        for k in range(self.lag - 1):
            q = anchor.round - 1 - k
            found = self.entry(producer, q) if q >= 0 else None
            recent.append(NO_INDEX if found is None else found.index)
            if found is not None:
                total += self.share(found)
        return Earnings(total, anchor.round, anchor.index, tuple(recent))

    def tail(self, producer: str, round_: int) -> list[Entry]:
        """`producer`'s credits in the rounds a claim from round `round_` pays beside its
        settled earnings: round - lag < q < round, standing."""
        return [
            e
            for e in self.credits.get(producer.lower(), ())
            if round_ - self.lag < e.round < round_
        ]

    def due(self, producer: str, round_: int) -> int:
        """What a claim from `producer`'s credit in round `round_` (with its whole tail) pays in
        all: its settled earnings, its own share and its tail's."""
        own = self.entry(producer, round_)
        if own is None:
            raise ValueError(f"no standing credit of {producer} in round {round_}")
        return (
            own.credit.earnings.settled
            + self.share(own)
            + sum(self.share(e) for e in self.tail(producer, round_))
        )
