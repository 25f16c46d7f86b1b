"""Random sequences of the root lane's rounds, data challenges, claims, releases and time jumps on
the real RoundBook and SwarmLedger, against a small model of where the money must be.

Each round is the aggregator's own: its collector builds the roots from the signed messages of
four producers and their seated checkers, with each credit's earnings from the rounds before
(EarningsBook), and it posts them with its bond. A round may carry one lie in a credit; an
auditor reading the published lists always finds it and proves it in the round's challenge
window (the honest-auditor assumption the book rests on), which voids the round: half the bond
to the prover, half to the ledger's pool. A stranger may challenge any leaf of the latest round,
which the aggregator answers (taking the challenge bond) or leaves unanswered (the root is void,
the challenger gets its bond back and half the aggregator's). Producers claim what their
standing credits earned, cumulatively; aggregators ask for their bonds back.

The model predicts each call's outcome (the named error, or what moves) and, after every step,
the invariants are read from the chain:
- the book holds exactly its reward pool, the bonds of rounds neither released nor void, and the
  challenge bonds of open challenges;
- each producer was paid exactly its share of every round that stands and credits it
  (reward_per_round x its amount / the round's total), never a round twice, never a void one;
- the ledger's pool grew by the forfeited halves of bonds and nothing else;
- an honest round is never void, and every lie is.
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
from client.chain.roots import Credit, SubmissionRoot, VerdictRoot, submission_struct
from client.devnet import Anvil
from client.node.aggregation.earnings import EarningsBook, Entry
from tests.harness.ledger_swarm import ETH
from tests.harness.roundbook import (
    BOND,
    CHALLENGE_BOND,
    Book,
    act_on,
    audit,
    claim,
    credit_of,
    honest_round,
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
)


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
        self.open_challenges = 0
        self.challenged: set[tuple[int, bool, int]] = set()
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
            and self.open_challenges == 0
            and self.current() >= self.window("challengeEnd", q) + 2
        )

    def fold_to(self, last: int) -> None:
        """Folds the earnings of every round to `last`, each as it will stand: decided (no rule
        targets a round once a later one is played, and a lie is proven in its own round)."""
        for q in range(self.folded + 1, last + 1):
            r = self.rounds.get(q)
            self.earned.fold(q, r.verdicts if r is not None and not r.void else None)
        self.folded = max(self.folded, last)

    def forfeit(self, r: MRound) -> None:
        r.void = True
        self.ledger_pool += BOND - BOND // 2

    # -------------------------------------------------------------------------------- rules

    @rule(
        lie=st.sampled_from((None, None, None, *LIES)),
        liar=st.integers(0, 3),
        asked=st.none() | st.tuples(st.booleans(), st.integers(0, 3), st.booleans()),
    )
    def play(self, lie: str | None, liar: int, asked: tuple[bool, int, bool] | None) -> None:
        """The next round the clock allows: posted by the aggregator, voted by seated checkers,
        its verdicts posted; a lie is found by the auditor and proven in the window; `asked`, a
        leaf a stranger then challenges (of the verdict tree?, its index, answered?)."""
        round_ = self.current() - self.W
        if round_ in self.rounds or round_ < 0:
            round_ = max(self.rounds, default=-1) + 1
        self.fold_to(round_ - self.lag)
        aggregator, subs, credits, votes = honest_round(
            self.book,
            self.nodes,
            round_,
            earnings=lambda p: self.earned.earnings(p, round_),
        )
        amounts = [c.signal for c in credits]
        target = liar
        if lie is not None:
            kept = credits[target].earnings
            if lie == "a credit's amount is not its signal":
                amounts[target] = credits[target].signal * 100
            elif lie == "a credit with fewer votes than quorum":
                votes[target] = votes[target][:1]
            credits[target] = replace(credit_of(subs, target, votes[target]), earnings=kept)
            if lie == "a credit of no submission":
                c = credits[target]
                credits[target] = Credit(7, c.producer, c.digest, c.score, c.signal, c.votes, kept)
        verdicts = VerdictRoot(credits, amounts, votes=votes, presorted=True)
        post_verdicts(self.book, aggregator, verdicts, round_)
        r = MRound(aggregator.tx.account.address, subs, verdicts, votes, lie)
        r.amounts = {c.producer.lower(): a for c, a in zip(credits, amounts, strict=True)}
        self.rounds[round_] = r
        self.latest = round_
        finding = audit(self.book, subs, verdicts, round_, self.earned)
        self.seen[f"round: {lie or 'honest'}"] += 1
        if lie is None:
            assert finding is None, f"an honest round {round_} was found lying: {finding}"
        else:
            assert finding is not None and finding.what == lie, (lie, finding)
            act_on(self.book, stranger(self.book), finding)
            self.forfeit(r)
        if asked is not None:
            self.challenge(*asked)

    @precondition(lambda self: self.latest is not None)
    @rule(verdict_tree=st.booleans(), index=st.integers(0, 3), answer=st.booleans())
    def challenge(self, verdict_tree: bool, index: int, answer: bool) -> None:
        """A stranger asks for a leaf of the latest round; the aggregator answers it or not."""
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
        self.open_challenges += 1
        self.challenged.add((round_, verdict_tree, index))
        aggregator = next(n for n in self.nodes if n.tx.account.address == r.aggregator)
        if answer:
            if verdict_tree:
                v = r.verdicts
                args = (v.credits[index].struct(), v.amounts[index], v.proof(index), r.votes[index])
                self.book.send(aggregator.tx.account, "answerCredit", round_, index, *args)
            else:
                signed = r.subs.signed[index]
                proof = r.subs.proof(index)
                self.book.send(
                    aggregator.tx.account,
                    "answerSubmission",
                    round_,
                    index,
                    submission_struct(signed),
                    proof,
                )
            self.open_challenges -= 1
            self.seen["challenge answered"] += 1
            return
        self.swarm.goto(self.current() + 2)  # past the answer's round
        self.book.send(challenger, "claimUnanswered", round_, verdict_tree, index)
        self.open_challenges -= 1
        self.forfeit(r)
        self.seen["challenge unanswered"] += 1

    @rule(rounds=st.integers(1, 6))
    def wait(self, rounds: int) -> None:
        self.swarm.goto(self.current() + rounds)

    @rule(producer=st.integers(0, 3), pick=st.integers(0, 3), settle=st.booleans())
    def claim_earned(self, producer: int, pick: int, settle: bool) -> None:
        """The producer claims from one of its standing credits (`pick`: 0 the latest, then
        older), with the tail of credits its earnings do not count yet; `settle`: once the
        latest round stands."""
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

    @precondition(lambda self: self.rounds)
    @rule(producer=st.integers(0, 3), pick=st.integers(0, 1_000))
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

    @precondition(lambda self: self.rounds)
    @rule(pick=st.integers(0, 1_000))
    def release(self, pick: int) -> None:
        round_ = sorted(self.rounds)[pick % len(self.rounds)]
        r = self.rounds[round_]
        aggregator = next(n for n in self.nodes if n.tx.account.address == r.aggregator)
        error = None
        if r.void:
            error = "BondForfeited"
        elif r.released:
            error = "NoSuchRoot"
        elif self.current() <= self.window("challengeEnd", round_):
            error = "ChallengeWindowOpen"
        self.expect(
            error, lambda: self.book.send(aggregator.tx.account, "release", round_), "release"
        )
        if error is None:
            r.released = True

    # --------------------------------------------------------------------------- invariants

    @invariant()
    def pool_check(self) -> None:
        if not hasattr(self, "book"):
            return
        contract = self.book.contract.functions
        held = sum(BOND for r in self.rounds.values() if not r.void and not r.released)
        balance = self.swarm.w3.eth.get_balance(self.book.contract.address)
        assert contract.rewardPool().call() == self.pool
        assert balance == self.pool + held + self.open_challenges * CHALLENGE_BOND
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
            max_examples=int(os.environ.get("SAPO_BOOK_EXAMPLES", "10")),
            derandomize=True,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
    seen = BookMachine.seen
    print(dict(sorted(seen.items())))
    for reached in ("claim: ok", "release: ok", "round: honest", "challenge answered"):
        assert seen[reached], f"no sequence reached {reached!r}: {dict(seen)}"
