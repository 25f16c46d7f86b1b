"""Random sequences of the root lane's rounds, data challenges, claims, releases and time jumps on
the real RoundBook and SwarmLedger, against a small model of where the money must be.

Each round is the aggregator's own: its collector builds the roots from the signed messages of
four producers and their seated checkers, with each credit's earnings from the rounds before
(EarningsBook), and it posts them with its bond. Half the rounds carry one lie (LIES); an
auditor reading the published lists always finds it (or, for a submission left out, its
producer holding the aggregator's receipt) and proves it in the round's challenge window (the
honest-auditor assumption the book rests on), which voids the round: half the bond to the
prover, half to the ledger's pool. A stranger may challenge a leaf of the latest round,
which the aggregator answers at once, never (the challenger claims the bond), or later (in time
or too late, while the bond waits). Producers claim what their standing credits earned,
cumulatively, retry, claim from rounds that do not stand; attackers claim falsely (HOW);
aggregators ask for their bonds back after time passes.

The model predicts each call's outcome (the named error, or what moves) and, after every step,
the invariants are read from the chain:
- the book holds exactly its reward pool (less each released round's pay to its aggregator), the
  bonds of rounds neither released nor void, and the bond of the open challenge;
- each producer was paid exactly its share of every round that stands and credits it
  (reward_per_round x its amount / the round's total), never a round twice, never a void one;
- the ledger's pool grew by the forfeited halves of bonds and nothing else;
- an honest round is never void, and every lie is.

Against the book's 21 seeded faults (`python -m scripts.mutate_roundbook --tests` this file) it
caught 14 alone; the lies it never plays (a forged or doubled submission, a credit twice, a sum,
an unseated voter) and a tail (whole rounds played one after another are never less than `lag`
apart) are left to tests/chain/test_roundbook.py, which catches all 21.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import ClassVar

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from client.chain.errors import LedgerRevert
from client.chain.roots import (
    NO_EARNINGS,
    Credit,
    SubmissionRoot,
    VerdictRoot,
    submission_struct,
)
from client.devnet import Anvil
from client.node.aggregation.earnings import EarningsBook, Entry
from client.units import SCORE_SCALE
from tests.harness.ledger_swarm import ETH, digest
from tests.harness.roundbook import (
    BOND,
    CHALLENGE_BOND,
    Book,
    act_on,
    audit,
    claim,
    credit_of,
    forged,
    honest_round,
    left_out,
    lies,
    open_book,
    paid_by,
    post_verdicts,
    stranger,
)

pytestmark = [pytest.mark.slow]
FUNDED = 20 * ETH
LIES = (
    "a credit's amount is not its signal",
    "a credit with fewer votes than quorum",
    "a credit of no submission",
    "a vote its voter did not sign",
    "a credit the v4 lane holds",
    "earnings that do not add up",  # when the credit has earnings to inflate
    "earnings that skip a credit",  # when it has earnings to leave out
    "a receipted submission left out",  # proven by its producer, with its receipt
    "no verdict root",  # never posted: its bond asked back after the window voids the round
)
ANSWERS = ("now", "never", "later")
# a tail naming a credit twice needs two credits of one producer less than `lag` rounds apart,
# which whole rounds played one after another never are (the directed test plays it)
HOW = ("another's credit", "a tail naming its own round", "an amount its leaf does not hold")


@dataclass
class MRound:
    aggregator: str
    subs: SubmissionRoot
    verdicts: VerdictRoot
    votes: list
    lie: str | None
    void: bool = False
    released: bool = False
    amounts: dict[str, int] = field(default_factory=dict)  # producer -> its credit's amount


class BookMachine(RuleBasedStateMachine):
    chain: Anvil
    seen: ClassVar[Counter[str]] = Counter()

    @initialize()
    def deploy(self) -> None:
        self.swarm, self.nodes, self.book = open_book(self.chain)
        self.book: Book
        p = self.swarm.params
        self.W, self.C, self.reward = p.submit_rounds, p.challenge_rounds, p.reward_per_round
        self.lag = self.book.contract.functions.lag().call()
        self.earned = EarningsBook(self.reward, self.lag)
        self.folded = -1
        self.rounds: dict[int, MRound] = {}
        self.latest: int | None = None  # the only round a challenge may target
        self.book.send(self.swarm.deployer, "fund", value=FUNDED)
        self.pool = FUNDED
        self.challenged: set[tuple[int, bool, int]] = set()
        # the challenge left open, (round, of the verdict tree?, index, answer by, challenger)
        self.pending: tuple[int, bool, int, int, object] | None = None
        self.ledger_pool = self.swarm.ledger.reward_pool()
        self.paid: dict[str, int] = {}
        self.last_claim: dict[str, int] = {}  # producer -> the round it last claimed from

    # ------------------------------------------------------------------------------ helpers

    def current(self) -> int:
        return self.swarm.ledger.current_round()

    def window(self, name: str, round_: int) -> int:
        return self.book.window(name, round_)

    def expect(self, error: str | None, action, what: str) -> object:
        self.seen[f"{what}: {error or 'ok'}"] += 1
        if error is None:
            return action()
        with pytest.raises(LedgerRevert) as info:
            action()
        assert info.value.name == error, f"{what}: expected {error}, got {info.value}"
        return None

    def stands(self, q: int) -> bool:
        """The book's _standing: posted, not void, no open challenge, and two rounds past its
        challenge window."""
        r = self.rounds.get(q)
        return (
            r is not None
            and not r.void
            and (self.pending is None or self.pending[0] != q)
            and self.current() >= self.window("challengeEnd", q) + 2
        )

    def fold_to(self, last: int) -> None:
        """Folds the earnings of every round to `last`, each as it will stand: decided (no rule
        targets a round once a later one is played, and a lie is proven in its own round)."""
        for q in range(self.folded + 1, last + 1):
            r = self.rounds.get(q)
            # no batch of the ledger's lane in these rounds: the book's total is the whole
            self.earned.fold(q, r.verdicts if r is not None and not r.void else None, 0)
        self.folded = max(self.folded, last)

    def forfeit(self, r: MRound) -> None:
        r.void = True
        self.ledger_pool += BOND - BOND // 2

    # -------------------------------------------------------------------------------- rules

    @precondition(lambda self: self.pending is None)
    @rule(
        lie=st.none() | st.sampled_from(LIES),  # half the rounds honest
        liar=st.integers(0, 3),
        asked=st.none() | st.tuples(st.booleans(), st.integers(0, 3), st.sampled_from(ANSWERS)),
    )
    def play(self, lie: str | None, liar: int, asked: tuple[bool, int, str] | None) -> None:
        """The next round the clock allows: posted by the aggregator, voted by seated checkers,
        its verdicts posted; a lie is found by the auditor and proven in the window; `asked`, a
        leaf a stranger then challenges (of the verdict tree?, its index, answered?)."""
        round_ = self.current() - self.W
        if round_ in self.rounds or round_ < 0:
            round_ = max(self.rounds, default=-1) + 1
        self.fold_to(round_ - self.lag)
        v4: set[str] = set()
        if lie == "a credit the v4 lane holds":  # the producer submits the round there too
            twice = self.nodes[liar]
            twice.submit(round_, digest(f"v4 {round_}"), 8, 4 * SCORE_SCALE, SCORE_SCALE)
            v4.add(twice.tx.account.address.lower())
        censored = self.nodes[liar].tx.account
        receipts: dict = {}
        aggregator, subs, credits, votes = honest_round(
            self.book,
            self.nodes,
            round_,
            earnings=lambda p: self.earned.earnings(p, round_),
            receipts=receipts,
            leave_out=censored.address if lie == "a receipted submission left out" else None,
        )
        amounts = [c.signal for c in credits]
        target = liar
        if lie in ("earnings that do not add up", "earnings that skip a credit"):
            # a credit with earnings to inflate or leave out; none yet: an honest round
            held = [i for i, c in enumerate(credits) if c.earnings.settled > 0]
            target = held[liar % len(held)] if held else liar
            lie = lie if held else None
        kept = credits[target % len(credits)].earnings
        if lie == "earnings that skip a credit":
            credits[target] = replace(credits[target], earnings=NO_EARNINGS)
        elif lie not in (
            None,
            "a credit the v4 lane holds",
            "earnings that do not add up",
            "a receipted submission left out",
            "no verdict root",
        ):
            if lie == "a credit's amount is not its signal":
                amounts[target] = credits[target].signal * 100
            elif lie == "a credit with fewer votes than quorum":
                votes[target] = votes[target][:1]
            elif lie == "a vote its voter did not sign":
                first = forged(self.book, votes[target][0], subs.signed[target])
                votes[target] = [first, *votes[target][1:]]
            credits[target] = replace(credit_of(subs, target, votes[target]), earnings=kept)
            if lie == "a credit of no submission":
                c = credits[target]
                credits[target] = Credit(7, c.producer, c.digest, c.score, c.signal, c.votes, kept)
        if lie == "earnings that do not add up":
            doubled = replace(kept, settled=kept.settled * 2)
            credits[target] = replace(credits[target], earnings=doubled)
        verdicts = VerdictRoot(credits, amounts, votes=votes, presorted=True)
        if lie == "no verdict root":  # the round taken from its producers: void at release
            r = MRound(aggregator.tx.account.address, subs, verdicts, votes, lie)
            self.rounds[round_] = r
            self.latest = round_
            self.swarm.goto(self.window("challengeEnd", round_) + 1)
            result = self.book.send(stranger(self.book), "release", round_)
            assert lies(self.book, result) == [lie]
            self.forfeit(r)
            self.seen[f"round: {lie}"] += 1
            return
        post_verdicts(self.book, aggregator, verdicts, round_)
        r = MRound(aggregator.tx.account.address, subs, verdicts, votes, lie)
        r.amounts = {c.producer.lower(): a for c, a in zip(credits, amounts, strict=True)}
        self.rounds[round_] = r
        self.latest = round_
        finding = audit(self.book, subs, verdicts, round_, self.earned, v4)
        prover = stranger(self.book)
        if finding is None and lie == "a receipted submission left out":  # the lists hold
            finding = left_out(self.book, subs, *receipts[censored.address], round_)
            prover = censored
        self.seen[f"round: {lie or 'honest'}"] += 1
        if lie is None:
            assert finding is None, f"an honest round {round_} was found lying: {finding}"
        else:
            assert finding is not None and finding.what == lie, (lie, finding)
            act_on(self.book, prover, finding)
            self.forfeit(r)
        if asked is not None:
            self.challenge(*asked)

    @precondition(lambda self: self.latest is not None and self.pending is None)
    @rule(
        verdict_tree=st.booleans(),
        index=st.integers(0, 3),
        answer=st.sampled_from(ANSWERS),
        then=st.integers(0, 4),
    )
    def challenge(self, verdict_tree: bool, index: int, answer: str, then: int = 0) -> None:
        """A stranger asks for a leaf of the latest round; the aggregator answers it at once,
        never (the challenger claims the bond), or not yet (`resolve` decides later, `then`
        rounds on)."""
        round_ = self.latest
        r = self.rounds[round_]
        challenger = stranger(self.book)
        error = None
        if self.current() > self.window("challengeEnd", round_):
            error = "ChallengeWindowClosed"
        elif r.void:
            error = "NoSuchRoot"
        elif (round_, verdict_tree, index) in self.challenged:  # once, answered or not
            error = "AlreadyChallenged"
        self.expect(
            error,
            lambda: self.book.send(
                challenger, "challengeData", round_, verdict_tree, index, value=CHALLENGE_BOND
            ),
            "challenge",
        )
        if error is not None:
            return
        self.challenged.add((round_, verdict_tree, index))
        self.pending = (round_, verdict_tree, index, self.current() + 1, challenger)
        if answer == "now":
            self.resolve(True)
        elif answer == "never":
            self.swarm.goto(self.current() + 2)  # past the answer's round
            self.resolve(False)
        elif then:
            self.swarm.goto(self.current() + then)
            self.release(0)  # the aggregator asks for its bond while the challenge is open

    @precondition(lambda self: self.pending is not None)
    @rule(answer=st.booleans(), after_window=st.booleans())
    def resolve(self, answer: bool, after_window: bool = False) -> None:
        """The open challenge: the aggregator shows the leaf (refused once its round is past),
        or the challenger claims it unanswered (refused until then); `after_window`: once the
        round's challenge window has closed, and after the aggregator asked for its bond (it
        waits while the challenge is open)."""
        assert self.pending is not None
        round_, verdict_tree, index, answer_by, challenger = self.pending
        if after_window:
            closed = self.window("challengeEnd", round_) + 1
            if self.current() < closed:
                self.swarm.goto(closed)
            self.release(0)
        r = self.rounds[round_]
        late = self.current() > answer_by
        if answer:
            aggregator = next(n for n in self.nodes if n.tx.account.address == r.aggregator)
            if verdict_tree:
                v = r.verdicts
                fn = "answerCredit"
                args = (v.credits[index].struct(), v.amounts[index], v.proof(index), r.votes[index])
            else:
                fn = "answerSubmission"
                args = (submission_struct(r.subs.signed[index]), r.subs.proof(index))
            error = "AnswerWindowClosed" if late else None
            self.expect(
                error,
                lambda: self.book.send(aggregator.tx.account, fn, round_, index, *args),
                "answer",
            )
            if error is None:
                self.pending = None
            return
        error = None if late else "AnswerWindowOpen"
        self.expect(
            error,
            lambda: self.book.send(challenger, "claimUnanswered", round_, verdict_tree, index),
            "unanswered",
        )
        if error is None:
            self.pending = None
            self.forfeit(r)

    @rule(rounds=st.integers(1, 6), pick=st.integers(0, 3))
    def wait(self, rounds: int, pick: int) -> None:
        """Time passes; then an aggregator asks for its bond back (`release`)."""
        self.swarm.goto(self.current() + rounds)
        if self.rounds:
            self.release(pick)

    @rule(
        producer=st.integers(0, 3),
        pick=st.integers(0, 3),
        settle=st.booleans(),
        how=st.none() | st.sampled_from(HOW),
        thief=st.integers(0, 6),
        early=st.booleans(),
    )
    def claim_earned(
        self, producer: int, pick: int, settle: bool, how: str | None, thief: int, early: bool
    ) -> None:
        """The producer claims from one of its standing credits (`pick`: 0 the latest, then
        older), with the tail of credits its earnings do not count yet; `settle`: once the
        latest round stands; `how`: an attacker's false claim of that credit instead; `early`:
        from a round that does not stand instead (`claim_early`)."""
        if early:
            self.claim_early(producer, pick)
            return
        if settle and self.latest is not None:
            stands_at = self.window("challengeEnd", self.latest) + 2
            if self.current() < stands_at:
                self.swarm.goto(stands_at)
        node = self.nodes[producer]
        address = node.tx.account.address
        key = address.lower()
        standing = [q for q, r in self.rounds.items() if key in r.amounts and self.stands(q)]
        if not standing:
            self.seen["claim: nothing standing"] += 1
            return
        q = sorted(standing, reverse=True)[pick % len(standing)]
        self.fold_to(q)
        if how is not None:
            self.claim_falsely(producer, q, how, thief)
            return
        entry = self.earned.entry(address, q)
        assert entry is not None
        due = sum(
            self.reward * r.amounts[key] // r.verdicts.total
            for t, r in self.rounds.items()
            if t <= q and key in r.amounts and self.stands(t)
        )
        last = self.last_claim.get(key)
        error = None
        if last is not None and q < last + self.lag:
            error = "ClaimTooSoon"
        elif due <= self.paid.get(key, 0):
            error = "NothingToClaim"
        result = self.expect(
            error, lambda: claim(self.book, node, entry, self.earned.tail(address, q)), "claim"
        )
        if error is None:
            amount = paid_by(self.book, result)
            assert amount == due - self.paid.get(key, 0), (q, amount, due, self.paid.get(key))
            self.paid[key] = due
            self.pool -= amount
            self.last_claim[key] = q
            # a retry of the same claim (a node that did not see its receipt) pays nothing
            retry = lambda: claim(self.book, node, entry, self.earned.tail(address, q))  # noqa: E731
            self.expect("ClaimTooSoon", retry, "claim again")

    def claim_falsely(self, producer: int, q: int, how: str, thief: int) -> None:
        """An attacker's claim from the producer's standing credit of round q: as another node
        (a producer or not), or the producer's own with a tail naming its own round, or with
        an amount its leaf does not hold; each refused, and nothing moves."""
        owner = self.nodes[producer]
        address = owner.tx.account.address
        entry = self.earned.entry(address, q)
        assert entry is not None
        tail = self.earned.tail(address, q)
        claimant, error = owner, "BadTail"
        if how == "another's credit":
            claimant = self.nodes[thief if thief != producer else (thief + 1) % 7]
            error = "NotTheProducer"
        elif how == "a tail naming its own round":
            tail = [*tail, entry]
        elif how == "an amount its leaf does not hold":
            entry = replace(entry, amount=entry.amount * 2)
            error = "NotInRoot"
        last = self.last_claim.get(address.lower())
        if error == "BadTail" and last is not None and q < last + self.lag:
            error = "ClaimTooSoon"  # checked before the tail
        self.expect(error, lambda: claim(self.book, claimant, entry, tail), f"claim: {how}")

    def claim_early(self, producer: int, pick: int) -> None:
        """The producer claims from a credit of a round that does not stand (its window is
        open, or it is two rounds from closed, or it is void): refused, whatever its leaf."""
        node = self.nodes[producer]
        key = node.tx.account.address.lower()
        early = [q for q, r in self.rounds.items() if key in r.amounts and not self.stands(q)]
        if not early:
            return
        q = sorted(early)[pick % len(early)]
        v = self.rounds[q].verdicts
        index = next(i for i, c in enumerate(v.credits) if c.producer.lower() == key)
        proof = tuple(v.proof(index))
        entry = Entry(q, index, v.credits[index], v.amounts[index], v.total, proof)
        self.expect("NotSettled", lambda: claim(self.book, node, entry), "claim early")

    def release(self, pick: int) -> None:
        """An aggregator asks for its bond back (`pick`: 0 the latest round, then older)."""
        round_ = sorted(self.rounds, reverse=True)[min(pick, len(self.rounds) - 1)]
        r = self.rounds[round_]
        aggregator = next(n for n in self.nodes if n.tx.account.address == r.aggregator)
        error = None
        if r.void:
            error = "BondForfeited"
        elif r.released:
            error = "NoSuchRoot"
        elif self.current() <= self.window("challengeEnd", round_):
            error = "ChallengeWindowOpen"
        elif self.pending is not None and self.pending[0] == round_:
            error = "ChallengesOpen"
        self.expect(
            error, lambda: self.book.send(aggregator.tx.account, "release", round_), "release"
        )
        if error is None:
            r.released = True
            # the aggregator's pay, from the pool: postPayBps of the reward for its root's
            # share of the round's signal (the whole: no batch of these rounds is in the ledger)
            total = r.verdicts.total
            bps = self.book.contract.functions.postPayBps().call()
            pay = self.reward * total // total * bps // 10_000 if total else 0
            self.pool -= min(pay, self.pool)

    # --------------------------------------------------------------------------- invariants

    @invariant()
    def pool_check(self) -> None:
        if not hasattr(self, "book"):
            return
        contract = self.book.contract.functions
        held = sum(BOND for r in self.rounds.values() if not r.void and not r.released)
        balance = self.swarm.w3.eth.get_balance(self.book.contract.address)
        assert contract.rewardPool().call() == self.pool
        assert balance == self.pool + held + (self.pending is not None) * CHALLENGE_BOND
        assert self.swarm.ledger.reward_pool() == self.ledger_pool
        for node in self.nodes[:4]:
            address = node.tx.account.address
            total, _ = contract.paidOf(address).call()
            assert total == self.paid.get(address.lower(), 0)

    @invariant()
    def lies_void_honest_stand(self) -> None:
        for round_, r in getattr(self, "rounds", {}).items():
            if r.lie is not None:
                assert r.void, f"round {round_}: {r.lie} was not voided"
            view = self.book.view(round_)
            assert (view[8] or view[9]) == r.void


def test_random_rounds_keep_the_books_money_where_the_rules_put_it(chain: Anvil) -> None:
    BookMachine.chain = chain
    run_state_machine_as_test(
        BookMachine,
        settings=settings(
            max_examples=int(os.environ.get("SAPO_BOOK_EXAMPLES", "20")),
            derandomize=True,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
    seen = BookMachine.seen
    print(dict(sorted(seen.items())))
    for reached in ("claim: ok", "release: ok", "round: honest", "answer: ok", "unanswered: ok"):
        assert seen[reached], f"no sequence reached {reached!r}: {dict(seen)}"
