"""Shows that the round book's tests can fail: seeds one fault at a time into a copy of
contracts/RoundBook.sol or of a contract it creates (its judge, contracts/RoundJudge.sol; its
draw of aggregators, contracts/AggregatorDraw.sol), each a one-line change a tired author could
make to a rule that moves credit or money; compiles every mutant in one build with the pinned
solcjs, and runs tests/chain/test_roundbook.py, tests/chain/test_escalation.py and
tests/chain/test_equivocation.py on anvil against each (tests/harness/ledger_swarm.deploy_artifact
deploys the artifact SAPO_ROUNDBOOK_ARTIFACT names). Prints which test caught each fault, and
exits 1 when one survives or the unmutated book fails. The ledger's side of a rule the two
share (one reward a round over both lanes) has faults of its own (LEDGER_FAULTS): each is built
as a SwarmLedger, which the tests deploy instead of the committed one (SAPO_SWARMLEDGER_ARTIFACT).

A fault's text must occur exactly once in RoundBook.sol and the contracts it creates together
(the table would lie otherwise). --quick runs, for each fault, only the tests named as its
catchers (what CI runs); the default runs the three files, stopping at the first failure.

--tests runs another file against each fault instead (the random sequences of
tests/chain/test_roundbook_stateful.py: what its invariants catch alone). --forge runs the round
book's forge campaign (contracts/test/forge/RoundBookInvariants.t.sol) instead: each mutant's
build is copied under .forge/mutants/ and deployed by the campaign (SAPO_ROUNDBOOK_ARTIFACT, or
SAPO_LEDGER_ARTIFACT for a fault of the ledger's side), and the fault is caught when an invariant
fails; --runs sets its runs per campaign (foundry.toml's 64 by default).

Usage: python -m scripts.mutate_roundbook [--only NAME[,NAME...]] [--list] [--quick]
                                          [--no-baseline] [--tests FILE] [--forge [--runs N]]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts import arguments
from scripts.table import Table

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "contracts" / "RoundBook.sol"
JUDGE = ROOT / "contracts" / "RoundJudge.sol"  # the book's judge of a credit's votes, its own
DRAW = ROOT / "contracts" / "AggregatorDraw.sol"  # the book's roster and draw of aggregators
# the contracts the book creates: a fault in one is built as that contract's mutant, which the
# otherwise unchanged book creates (path, contract name)
CREATED = ((JUDGE, "RoundJudge"), (DRAW, "AggregatorDraw"))
TESTS = (
    "tests/chain/test_roundbook.py,tests/chain/test_escalation.py,tests/chain/test_equivocation.py"
)
CLAIMS = "test_a_producer_claims_all_it_earned_with_one_proof_whenever_it_likes"
TAIL = "test_a_claim_shows_the_credits_its_settled_earnings_do_not_count_yet"
CREDIT_LIES = "test_each_lie_in_a_credit_is_proven_and_costs_the_aggregator_its_bond"
EARNINGS = "test_false_earnings_are_found_by_an_auditor_and_proven"
WITHHELD = "test_a_withheld_leaf_is_asked_for_on_chain_and_silence_costs_the_bond"
STANDS = "test_a_round_pays_nothing_until_it_stands"
ONE_REWARD = "test_both_lanes_split_one_reward_a_round"
FORGED = "test_a_forged_or_doubled_submission_is_proven_against_the_submission_root"
LEFT_OUT = "test_a_receipted_submission_left_out_is_proven_by_its_producer"
NO_VERDICTS = "test_an_aggregator_must_post_a_verdict_root_even_of_no_credit"
ESCALATED = "test_a_disputed_batch_escalates_with_its_committee_and_its_forger_is_slashed"
ESCALATION_CLOSES = "test_escalation_closes_with_the_ledgers_vote_window"
FRAMED = "test_a_forged_submission_is_not_escalated"
TWO_VOTES = "test_two_different_votes_on_one_batch_slash_their_signer_once"
UNCREDITED = "test_a_receipted_quorum_left_uncredited_is_proven"
CONTRADICTED = "test_a_vote_signed_off_chain_and_the_other_side_on_the_ledger_is_an_equivocation"
DOUBLE = "test_two_different_submissions_of_one_round_slash_their_producer_once"
DOUBLE_LEDGER = (
    "test_a_submission_signed_off_chain_and_another_on_the_ledger_is_a_double_submission"
)

# name -> (what the fault does, source text, replacement, the tests meant to catch it)
FAULTS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "claim-by-anyone": (
        "anyone may claim a producer's credit (and so push back its next claim)",
        "        if (msg.sender != producer) revert NotTheProducer(msg.sender, producer);\n",
        "",
        (CLAIMS,),
    ),
    "claim-before-it-stands": (
        "a credit is paid once its challenge window closes, before the round stands",
        "if (current < challengeEnd(round) + 2 || !_standing(round)) revert NotSettled",
        "if (current <= challengeEnd(round)) revert NotSettled",
        (STANDS,),
    ),
    "claim-too-soon": (
        "a producer claims again before its last claim's rounds are settled (paid twice)",
        "        if (p.through != 0 && round < p.through - 1 + lag_) revert ClaimTooSoon",
        "        if (false) revert ClaimTooSoon",
        (CLAIMS,),
    ),
    "claim-not-recorded": (
        "a claim does not record what it paid (the same credit paid again)",
        "        p.total = uint128(due);\n",
        "",
        (CLAIMS,),
    ),
    "tail-may-repeat": (
        "a claim's tail may name one round twice (its share paid twice)",
        "            next = uint256(t.round) + 1;\n",
        "",
        (TAIL,),
    ),
    "share-by-credits": (
        "a round's reward is shared by the number of credits, not by the credited signal",
        "return total == 0 ? 0 : (_rewardPerRound * amount) / total;",
        "return total == 0 ? 0 : _rewardPerRound / _rounds[q].credits;",
        (CLAIMS, TAIL),
    ),
    "share-ignores-the-ledger": (
        "a book's credit is paid over the book's total alone, as if the ledger's lane credited "
        "nothing in its round (both lanes together pay more than the round's reward)",
        "uint256 total = _rounds[q].total + other;",
        "uint256 total = _rounds[q].total;",
        (ONE_REWARD,),
    ),
    "decided-early": (
        "the book tells the ledger a round is decided once its challenge window closes, while an "
        "unanswered challenge may still void it (the ledger then pays its batches over a total "
        "that later falls)",
        "return (_ledger.currentRound() >= challengeEnd(round) + 2,",
        "return (_ledger.currentRound() > challengeEnd(round),",
        (ONE_REWARD,),
    ),
    "book-never-binds": (
        "the book does not bind itself to its ledger, which then pays its own batches over its "
        "own total alone (a lone batch on the ledger takes the round's whole reward)",
        "        _ledger.bindBook(); // the ledger pays its rounds over both lanes from now on\n",
        "",
        (ONE_REWARD,),
    ),
    "post-pay-whole": (
        "the aggregator is paid its whole share of the round's reward at release, whatever share "
        "of the round's signal its root credits (one that leaves every batch to the ledger is "
        "paid as much)",
        "uint256 pay = (_share(round, r.total) * postPayBps) / 10_000;",
        "uint256 pay = (_rewardPerRound * postPayBps) / 10_000;",
        (ONE_REWARD, NO_VERDICTS),
    ),
    "release-by-anyone": (
        "anyone may release a posted round, so a producer can release it while the pool is "
        "short and cut the aggregator's pay to nothing",
        "short to cut its pay\n        if (msg.sender != r.aggregator) revert NotTheAggregator(",
        "short to cut its pay\n        if (false) revert NotTheAggregator(",
        ("test_an_honest_round_stands_against_every_proof_and_its_bond_comes_back",),
    ),
    "post-pay-beyond-pool": (
        "the aggregator's pay is taken from the pool whether it holds it or not (an empty pool "
        "keeps every bond)",
        "        if (pay > rewardPool) pay = rewardPool;\n",
        "",
        ("test_an_honest_round_stands_against_every_proof_and_its_bond_comes_back",),
    ),
    "paid-by-both-lanes": (
        "a batch the v4 lane holds may be credited in the book too (one round paid twice)",
        'if (_ledger.hasSubmitted(round, credit.producer)) return "a credit the v4 lane holds";',
        "",
        ("test_a_batch_the_v4_lane_holds_is_never_credited_in_the_book",),
    ),
    "quorum-ignored": (
        "a credit with a single vote holds",
        'if (votes.length < _quorum) return "a credit with fewer votes than quorum";',
        'if (votes.length < 1) return "a credit with fewer votes than quorum";',
        (CREDIT_LIES,),
    ),
    "seat-not-drawn": (
        "any voter of the producer's family holds a seat",
        "return SeatDraw.seats(beacon, round, producer, voter, stake, total, _checkers) != 0;",
        "return total != 0;",
        ("test_a_vote_of_a_staked_node_the_draw_did_not_seat_is_proven",),
    ),
    "vote-signature-unchecked": (
        "a vote's signature is not recovered (an invented signer holds)",
        "if (Messages.signer(hash, v.signature) != v.voter) return",
        "if (hash == bytes32(0)) return",
        (CREDIT_LIES,),
    ),
    "amount-not-its-signal": (
        "a credit may carry an amount other than its signal (the round's total inflated)",
        "string memory lie = amount != credit.signal\n",
        "string memory lie = false\n",
        (CREDIT_LIES,),
    ),
    "sums-not-checked": (
        "a node's sum need not be its children's",
        "lie = uint256(left.sum) + uint256(right.sum) != node.sum;",
        "lie = false;",
        ("test_an_inflated_total_is_proven_where_the_sums_stop_adding_up",),
    ),
    "forged-registration-unchecked": (
        "a submission of a node that never registered holds",
        '        if (_ledger.familyOf(leaf.producer) == bytes32(0)) return "a submission of no '
        'registered node";\n',
        "",
        (FORGED,),
    ),
    "credited-twice": (
        "two credits of one submission are never out of order",
        'if (first.index < second.index) revert NoLie("the two credits are in order");',
        'if (first.index <= second.index) revert NoLie("the two credits are in order");',
        ("test_a_submission_credited_twice_is_proven_by_its_two_neighbours",),
    ),
    "earnings-not-added": (
        "a credit's earnings need not add up",
        'return sum != e.settled ? "earnings that do not add up" : "";',
        'return "";',
        (EARNINGS,),
    ),
    "skipped-credit-unchecked": (
        "earnings may leave out a standing credit of the producer",
        'if (!left) revert NoLie("the earnings count it");',
        'if (left || !left) revert NoLie("the earnings count it");',
        (EARNINGS,),
    ),
    "silence-forgiven": (
        "an unanswered data challenge returns the challenger's bond but costs the aggregator "
        "nothing",
        '_void(r, round, !verdictTree, "data withheld", challenger);',
        "r.released = r.released;",
        (WITHHELD,),
    ),
    "answer-after-deadline": (
        "a challenged leaf may be answered after its deadline",
        "if (current > c.answerBy) revert AnswerWindowClosed",
        "if (false) revert AnswerWindowClosed",
        (WITHHELD,),
    ),
    "release-with-challenges-open": (
        "the bond comes back while a data challenge is open",
        "        if (r.openChallenges != 0) revert ChallengesOpen(round, r.openChallenges);\n",
        "",
        (WITHHELD,),
    ),
    "standing-with-challenges-open": (
        "a round with an open data challenge stands (its credits paid before it can be voided)",
        "&& !r.verdictsVoided && r.openChallenges == 0\n",
        "&& !r.verdictsVoided\n",
        (STANDS,),
    ),
    "receipt-unchecked": (
        "any receipt binds the aggregator (a producer signs its own and takes the bond)",
        "Messages.signingHash(_separator, receiptHash), receipt) != r.aggregator) {",
        "Messages.signingHash(_separator, receiptHash), receipt) == address(1)) {",
        (LEFT_OUT,),
    ),
    "left-out-below-unchecked": (
        "a left-out proof's neighbour below need not sort below it",
        'if (below.producer >= leaf.producer) revert NoLie("not its place");',
        'if (below.producer == address(1)) revert NoLie("not its place");',
        (LEFT_OUT,),
    ),
    "left-out-above-unchecked": (
        "a left-out proof's neighbour above need not sort above it (a kept submission proven "
        "left out)",
        'if (above.producer <= leaf.producer) revert NoLie("not its place");',
        'if (above.producer == address(1)) revert NoLie("not its place");',
        (LEFT_OUT,),
    ),
    "left-out-of-another-round": (
        "a receipt of any valid submission proves it left out of any round (a stale receipt "
        "takes a bond)",
        "if (bytes(_forged(round, leaf)).length != 0 || _ledger.hasSubmitted(round, leaf",
        "if (_ledger.hasSubmitted(round, leaf",
        (LEFT_OUT,),
    ),
    "left-out-of-v4": (
        "a producer the v4 lane holds may prove itself left out (paid by v4, and half a bond)",
        "|| _ledger.hasSubmitted(round, leaf.producer)) {",
        ") {",
        (LEFT_OUT,),
    ),
    "verdicts-may-be-skipped": (
        "an aggregator that never posts its verdict root takes its bond back (its round's "
        "producers lose the round)",
        '        if (r.verdicts == bytes32(0)) return _void(r, round, false, "no verdict root", '
        "msg.sender);\n",
        "",
        (NO_VERDICTS,),
    ),
    "no-credit-root-unchecked": (
        "a verdict root of no credit may be any hash (one that credits, posted as none)",
        "(credits == 0 && (root != NO_CREDITS || total != 0))",
        "(credits == 0 && total != 0)",
        (NO_VERDICTS,),
    ),
    "escalate-any-leaf": (
        "a batch escalates without being in the submission root (any signed batch of the round "
        "goes to v4, not the one its committee was drawn for)",
        "        _checkSubmission(r, round, index, leaf, proof);\n"
        "        if (bytes(_forged(round, leaf)).length != 0) revert ForgedSubmission",
        "        if (bytes(_forged(round, leaf)).length != 0) revert ForgedSubmission",
        (ESCALATED,),
    ),
    "escalate-forged": (
        "a leaf its producer did not sign escalates (an honest producer framed in v4)",
        "        if (bytes(_forged(round, leaf)).length != 0) revert ForgedSubmission(round, "
        "leaf.producer);\n",
        "",
        (FRAMED,),
    ),
    "escalate-late": (
        "a batch escalates in the book's last vote round, when the ledger's committee can no "
        "longer vote on it",
        "if (current >= voteClose(round)) revert EscalationClosed",
        "if (current > voteClose(round)) revert EscalationClosed",
        (ESCALATION_CLOSES,),
    ),
    "uncredited-receipts-unchecked": (
        "a quorum of votes proves an uncredited batch without the aggregator's receipts (an "
        "honest aggregator loses its bond for votes it never received)",
        "&& !receipted(round, leaf.producer, s.digest, s.signal, votes, receipts, r.aggregator)",
        "&& false",
        (UNCREDITED,),
    ),
    "uncredited-bracket-unchecked": (
        "two credit leaves below a batch are taken to show it uncredited (a credited batch "
        "proven left out)",
        "&& index < around[1].credit.index",
        "",
        (UNCREDITED,),
    ),
    "uncredited-of-v4": (
        "a batch the v4 lane holds is proven left uncredited (one round paid by both lanes, or "
        "an escalated batch's root voided)",
        "        if (_ledger.hasSubmitted(round, leaf.producer)) revert "
        'IRoundBook.NoLie("a batch of the v4 lane");\n',
        "",
        (UNCREDITED,),
    ),
    "verdicts-voided-by-anyone": (
        "anyone may have the book void a verdict root on a lie no judge found",
        "        if (msg.sender != address(judge)) revert NotTheJudge(msg.sender);\n        _void",
        "        _void",
        (UNCREDITED,),
    ),
    "equivocation-slashed-by-anyone": (
        "anyone may have the book slash a checker for an equivocation no judge found",
        "        if (msg.sender != address(judge)) revert NotTheJudge(msg.sender);\n"
        "        _posted",
        "        _posted",
        (TWO_VOTES,),
    ),
    "equivocation-slashed-twice": (
        "one equivocation slashes its voter again for each pair of its votes shown",
        "        if (_equivocations[key]) revert AlreadyProven(round, producer, voter);\n",
        "",
        (TWO_VOTES,),
    ),
    "equivocation-of-one-vote": (
        "one vote shown twice is taken for two (any checker that signed a vote is slashed)",
        "return other != hash && Messages.signer(other, second.signature) == voter",
        "return Messages.signer(other, second.signature) == voter",
        (TWO_VOTES,),
    ),
    "equivocation-of-a-kept-word": (
        "a signed vote and the same side on the ledger are taken for an equivocation (an honest "
        "checker that voted on chain what it signed is slashed)",
        "return side != onChain ? voter : address(0);",
        "return voter;",
        (CONTRADICTED,),
    ),
    "equivocation-after-the-window": (
        "an equivocation is proven after the round's challenge window, when the stake that gave "
        "the seat may be gone",
        "        if (current > challengeEnd(round)) revert ChallengeWindowClosed(round, current);\n"
        "        bytes32 key",
        "        bytes32 key",
        (TWO_VOTES,),
    ),
    "double-of-one-submission": (
        "one submission shown twice is taken for two (any producer that signed one is slashed)",
        "bool two = b.round == round && other != hash && Messages.signer",
        "bool two = b.round == round && Messages.signer",
        (DOUBLE,),
    ),
    "double-of-another-signer": (
        "a second submission signed by anyone is taken for its producer's",
        "other != hash && Messages.signer(other, second.signature) == producer;",
        "other != hash;",
        (DOUBLE,),
    ),
    "equivocation-of-a-producer": (
        "a producer's two votes on its own batch (no seat there) are slashed as a checker's, "
        "under the key of its double submission",
        "if (voter == address(0) || voter == producer ||",
        "if (voter == address(0) ||",
        (TWO_VOTES,),
    ),
    "double-of-another-round": (
        "a producer's submission of another round is shown against its record of this one (an "
        "honest producer framed: its next round's batch differs)",
        "if (a.round != round || producer == address(0) ||",
        "if (producer == address(0) ||",
        (DOUBLE_LEDGER,),
    ),
    "double-of-a-digest-only": (
        "a producer that signs one claim and submits the same digest with another score on the "
        "ledger is not taken for a double submitter",
        "bool same = s.digest == a.digest && s.rollouts == a.rollouts && s.score == a.score",
        "bool same = s.digest == a.digest && s.rollouts == a.rollouts",
        (DOUBLE_LEDGER,),
    ),
    "double-of-the-forced-batch": (
        "a producer that submits on the ledger the batch it signed (force inclusion) is taken "
        "for a double submitter",
        "        return same ? address(0) : producer;",
        "        return producer;",
        (DOUBLE_LEDGER,),
    ),
    "post-by-any-registered-node": (
        "any node may post a round's submission root, not only its drawn aggregator (a rival "
        "first with a root that leaves out the producers the drawn one receipted)",
        "if (aggregators.draw(round) != msg.sender) revert NotTheDrawnAggregator",
        "if (_ledger.familyOf(msg.sender) == bytes32(0)) revert NotTheDrawnAggregator",
        ("test_only_the_drawn_aggregator_posts_once_in_its_window_with_the_bond",),
    ),
    "draw-counts-late-enlisted": (
        "a node enlisted, or moved into a slot, after a draw's request (when the draw's block hash "
        "may be known) is drawn",
        "if (c.since <= d.requested && _ledger.familyOf(c.node)",
        "if (_ledger.familyOf(c.node)",
        ("test_the_draw_counts_only_who_was_enlisted_at_its_request",),
    ),
    "draw-count-at-reveal": (
        "a draw counts the roster's slots when it is made, not when it was requested (a node "
        "that enlists or resigns once the hash is known moves the draw)",
        "uint256 slot = uint256(keccak256(abi.encode(seed, round, t))) % d.count;",
        "uint256 slot = uint256(keccak256(abi.encode(seed, round, t))) % _roster.length;",
        ("test_the_draw_counts_only_who_was_enlisted_at_its_request",),
    ),
    "unposted-proven-twice": (
        "an unposted round is proven again once its aggregator enlists anew (a restarted "
        "service's new bond taken by a replay of the public proof)",
        '        if (_unpostedProven[round]) revert IRoundBook.NoLie("proven already");\n',
        "",
        ("test_a_drawn_aggregator_that_receipts_and_posts_no_root_loses_its_roster_bond",),
    ),
    "draw-far-ahead": (
        "a draw may be requested any number of rounds ahead (the roster fixed while it is "
        "only the requester)",
        "if (current + 1 < round || current > round",
        "if (current > round",
        ("test_only_the_drawn_aggregator_posts_once_in_its_window_with_the_bond",),
    ),
    "unposted-by-any-receipt": (
        "a receipt signed by any key proves that the drawn aggregator left its round unposted "
        "(an honest absent aggregator's roster bond taken by a stranger's own signature)",
        'if (Messages.signer(receiptHash, receipt) != aggregator) revert IRoundBook.NoLie("not',
        'if (false) revert IRoundBook.NoLie("not',
        ("test_a_drawn_aggregator_that_receipts_and_posts_no_root_loses_its_roster_bond",),
    ),
    "unposted-though-posted": (
        "an aggregator that posted its round's root is taken for one that left it unposted",
        "aggregator == NOBODY || _book.roundOf(round).aggregator != address(0)) {",
        "aggregator == NOBODY) {",
        ("test_a_drawn_aggregator_that_receipts_and_posts_no_root_loses_its_roster_bond",),
    ),
    "prover-paid-the-bond": (
        "a proven lie pays its prover the whole bond, and the pool too",
        "        _pay(prover, half);\n    }",
        "        _pay(prover, bond);\n    }",
        (CREDIT_LIES,),
    ),
}

# Faults on the ledger's side of a rule it shares with the book (one reward a round over both
# lanes), each built as a SwarmLedger of its own, which the tests deploy instead of the
# committed one (tests/harness/ledger_swarm.Swarm reads SAPO_SWARMLEDGER_ARTIFACT) beside the
# book as it is. A text must occur exactly once in SwarmLedger.sol and the files it imports.
LEDGER_FAULTS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "ledger-pays-before-the-book-decides": (
        "the ledger pays a round's batch before the book has decided the round (over a total "
        "of the book's that may still grow, or a root that may still be voided)",
        "if (!_isFinal(round, current) || !decided) revert RoundNotFinal(round, current);",
        "if (!_isFinal(round, current)) revert RoundNotFinal(round, current);",
        (ONE_REWARD,),
    ),
    "ledger-share-ignores-the-book": (
        "the ledger splits the round's reward over its own credited signal (a lone batch there "
        "takes the whole reward of a round the book paid too)",
        "        return IRoundTotals(book).standingTotal(round);\n",
        "        (decided,) = IRoundTotals(book).standingTotal(round);\n",
        (ONE_REWARD,),
    ),
    "book-bound-by-anyone": (
        "anyone may bind the ledger to the book it names (a stranger binds an address that never "
        "became a book, and every claim of the ledger reverts for good)",
        "        if (book != msg.sender) revert NotTheBook(msg.sender, book);\n",
        "",
        ("test_a_ledger_whose_named_book_is_something_else_pays_as_without_one",),
    ),
}
LEDGER = ROOT / "contracts" / "SwarmLedger.sol"
ALL_FAULTS = FAULTS | LEDGER_FAULTS


def _mutant_name(fault: str) -> str:
    return "RoundBook_" + re.sub(r"[^A-Za-z0-9]", "_", fault)


def write_project(faults: list[str]) -> Path:
    """A throwaway project: the contracts RoundBook.sol imports, as here (`imported_by`), plus
    each mutant as contracts/mutants/<fault>.sol
    (its contract renamed, its imports pointed back at contracts/), built by the same
    scripts/build-contracts in one solcjs run. A fault in the judge (RoundJudge.sol, which the
    book creates) is written as contracts/mutants/<fault>_judge.sol, its contract renamed too,
    and the mutant book, otherwise the book as it is, creates that judge. A fault of the
    ledger's (LEDGER_FAULTS) is a project of its own, ledger/<fault>/: SwarmLedger.sol and
    what it imports, the fault seeded in place (`artifact_of` says where each build lands)."""
    ledger = [f for f in faults if f in LEDGER_FAULTS]
    faults = [f for f in faults if f not in LEDGER_FAULTS]
    ledger_files = {path: path.read_text() for path in [LEDGER, *imported_by(LEDGER)]}
    for fault in ledger:
        text = LEDGER_FAULTS[fault][1]
        found = sum(code.count(text) for code in ledger_files.values())
        if found != 1:
            raise SystemExit(
                f"fault {fault}: its text occurs {found} times in {LEDGER.name} and its "
                "imports, not once"
            )
    source = SOURCE.read_text()
    created = [(path.read_text(), contract) for path, contract in CREATED]
    for fault in faults:  # every fault's text is checked before anything is written
        text = FAULTS[fault][1]
        found = source.count(text) + sum(c.count(text) for c, _ in created)
        if found != 1:
            names = ", ".join(p.name for p, _ in CREATED)
            raise SystemExit(
                f"fault {fault}: its text occurs {found} times in {SOURCE.name}, {names}, not once"
            )
    project = Path(tempfile.mkdtemp(prefix="sapo-roundbook-mutants-"))
    for fault in ledger:
        _, text, replacement, _ = LEDGER_FAULTS[fault]
        here = project / "ledger" / fault
        for path, code in ledger_files.items():
            target = here / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code.replace(text, replacement))
        (here / "scripts").mkdir()
        shutil.copy2(ROOT / "scripts" / "build-contracts", here / "scripts" / "build-contracts")
        (here / "node_modules").symlink_to(ROOT / "node_modules")
    if not faults:
        return project
    # only what a mutant imports: the build then compiles the mutants and their imports, not the
    # ledger and the test harnesses (their artifacts are the checkout's: the tests deploy those),
    # which were 3/4 of the build's time
    for needed in imported_by(SOURCE):
        target = project / needed.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(needed, target)
    (project / "scripts").mkdir()
    (project / "scripts" / "build-contracts").write_text(_build_for_size())
    (project / "scripts" / "build-contracts").chmod(0o755)
    (project / "node_modules").symlink_to(ROOT / "node_modules")
    mutants = project / "contracts" / "mutants"
    mutants.mkdir()
    for fault in faults:
        _, text, replacement, _ = FAULTS[fault]
        name = _mutant_name(fault)
        mutant = source.replace(text, replacement)
        mutant = mutant.replace("contract RoundBook is", f"contract {name} is")
        mutant = re.sub(r'from "\./', 'from "../', mutant)
        for code, contract in created:
            if text not in code:
                continue
            stem = f"{fault}_{contract}"
            bad = code.replace(text, replacement)
            bad = bad.replace(f"contract {contract} {{", f"contract {name}_{contract} {{")
            (mutants / f"{stem}.sol").write_text(re.sub(r'from "\./', 'from "../', bad))
            mutant = mutant.replace(
                f'import {{{contract}}} from "../{contract}.sol";',
                f'import {{{name}_{contract} as {contract}}} from "./{stem}.sol";',
            )
        (mutants / f"{fault}.sol").write_text(mutant)
    return project


def imported_by(source: Path) -> list[Path]:
    """Every file `source` imports, directly or through another (itself left out)."""
    found: dict[Path, None] = {}
    todo = [source]
    while todo:
        here = todo.pop()
        for name in re.findall(r'^import [^;]*?"([^"]+)";', here.read_text(), re.MULTILINE):
            path = (here.parent / name).resolve()
            if path not in found and path != source:
                found[path] = None
                todo.append(path)
    return sorted(found)


def _build_for_size() -> str:
    """scripts/build-contracts with every contract compiled at the optimizer runs it gives the
    book (RUNS): the mutants are the book's copies, under EIP-170 as it is, and one solcjs run
    builds them all."""
    script = (ROOT / "scripts" / "build-contracts").read_text()
    found = re.search(r"const RUNS = \{ RoundBook: (\d+) \};", script)
    if found is None or script.count("runs: 1000") != 1:
        raise SystemExit("scripts/build-contracts: its RUNS or optimizer settings moved")
    script = script.replace("runs: 1000", f"runs: {found.group(1)}")
    return script.replace(found.group(0), "const RUNS = {};")


def build(project: Path) -> None:
    """Builds the book's mutants (one solcjs run) and each of the ledger's (one run each)."""
    ledgers = sorted((project / "ledger").iterdir()) if (project / "ledger").is_dir() else []
    for here in [project, *ledgers]:
        if not (here / "scripts" / "build-contracts").exists():
            continue  # no fault of the book's
        done = subprocess.run(
            ["node", str(here / "scripts" / "build-contracts")],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"the mutants do not compile:\n{done.stderr[-3000:]}")


def artifact_of(project: Path, fault: str) -> tuple[str, Path]:
    """The environment variable the tests read a mutant's build from, and where it is."""
    if fault in LEDGER_FAULTS:
        built = project / "ledger" / fault / "contracts" / "artifacts" / "SwarmLedger.json"
        return "SAPO_SWARMLEDGER_ARTIFACT", built
    built = project / "contracts" / "artifacts" / f"{_mutant_name(fault)}.json"
    return "SAPO_ROUNDBOOK_ARTIFACT", built


def run_tests(
    artifact: tuple[str, Path] | None, only: tuple[str, ...] = (), tests: str = TESTS
) -> tuple[int, str, float]:
    """(pytest's exit code, the first failing test, seconds) for a mutant's build, `artifact`
    (from `artifact_of`), or the committed contracts (None)."""
    env = dict(os.environ)
    env.pop("SAPO_ROUNDBOOK_ARTIFACT", None)
    env.pop("SAPO_SWARMLEDGER_ARTIFACT", None)
    if artifact is not None:
        env[artifact[0]] = str(artifact[1])
    select = ["-k", " or ".join(only)] if only else []
    files = tests.split(",")
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "-rf",
            *files,
            *select,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    failed = next(
        (
            line.split("::", 1)[1].split(" - ")[0]
            for line in done.stdout.splitlines()
            if line.startswith("FAILED ")
        ),
        "",
    )
    return done.returncode, failed, time.monotonic() - started


def run_campaign(artifact: tuple[str, Path] | None, runs: int | None) -> tuple[int, str, float]:
    """(1 when an invariant failed, else 0; the first failure; seconds) of the round book's forge
    campaign against a mutant's build (`artifact`, from `artifact_of`) or the committed contracts
    (None)."""
    from tests.harness.foundry import BOOK_SUITE, ForgeError, run_suites

    book = ledger = None
    if artifact is not None:
        # the campaign reads artifacts only under the project (foundry.toml's fs_permissions)
        name = f"{artifact[1].parent.parent.parent.name}-{artifact[1].name}"
        kept = ROOT / ".forge" / "mutants" / name
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(artifact[1], kept)
        relative = str(kept.relative_to(ROOT))
        if artifact[0] == "SAPO_SWARMLEDGER_ARTIFACT":
            ledger = relative
        else:
            book = relative
    started = time.monotonic()
    try:
        run = run_suites(
            match_contract=f"^{BOOK_SUITE}$",
            runs=runs,
            shrink_runs=50,
            fail_fast=True,
            ledger_artifact=ledger,
            book_artifact=book,
        )
    except ForgeError as exc:
        return 2, str(exc).splitlines()[0], time.monotonic() - started
    finally:
        if artifact is not None:
            kept.unlink(missing_ok=True)
    failed = run.failed
    said = f"{failed[0].name}: {failed[0].reason[:90]}" if failed else ""
    return (1 if failed else 0), said, time.monotonic() - started


def main() -> int:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--only", default="", help="faults to seed, comma-separated")
    parser.add_argument("--list", action="store_true", help="name each fault and stop")
    parser.add_argument("--quick", action="store_true", help="run only each fault's catchers")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument(
        "--tests",
        default=TESTS,
        help="the test files (comma-separated) run against each mutant (another suite's teeth, "
        "e.g. tests/chain/test_roundbook_stateful.py)",
    )
    parser.add_argument(
        "--forge", action="store_true", help="run the book's forge campaign against each mutant"
    )
    parser.add_argument("--runs", type=int, help="with --forge: runs per campaign (64)")
    args = parser.parse_args()
    if args.forge and (args.quick or args.tests != TESTS):
        parser.error("--forge runs the forge campaign; it goes with neither --quick nor --tests")
    if args.runs is not None and (not args.forge or args.runs < 1):
        parser.error("--runs goes with --forge and is at least 1")
    if args.quick and args.tests != TESTS:
        parser.error(f"--quick names tests of {TESTS}; it does not go with --tests")
    if args.list:
        for name, (what, *_rest) in ALL_FAULTS.items():
            print(f"{name}: {what}")
        return 0
    faults = [f for f in args.only.split(",") if f] or list(ALL_FAULTS)
    unknown = [f for f in faults if f not in ALL_FAULTS]
    if unknown:
        parser.error(f"unknown fault {unknown[0]!r}; --list names them")
    project = write_project(faults)
    try:
        started = time.monotonic()
        build(project)
        print(f"built {len(faults)} mutants in {time.monotonic() - started:.0f} s", flush=True)
        failed = 0
        against = "the forge campaign RoundBookInvariantsTest" if args.forge else args.tests

        def run(artifact, catchers=()):
            if args.forge:
                return run_campaign(artifact, args.runs)
            return run_tests(artifact, catchers if args.quick else (), args.tests)

        if not args.no_baseline:
            code, test, seconds = run(None)
            said = "passes" if code == 0 else f"FAILS {test}"
            print(f"the unmutated book: {said} ({seconds:.0f} s)")
            failed += code != 0
        table = Table(
            "fault",
            "what it breaks",
            "caught by",
            "s",
            left=["fault", "what it breaks", "caught by"],
            formats={"s": ".0f"},
        )
        caught = 0
        for fault in faults:
            what, _, _, catchers = ALL_FAULTS[fault]
            built = artifact_of(project, fault)
            code, test, seconds = run(built, catchers)
            if code == 1 and test:
                caught += 1
                verdict = test
            else:
                verdict = f"SURVIVED ({'forge' if args.forge else 'pytest'} exit {code})"
            table.row(fault, what, verdict, seconds)
            print(f"{fault}: {verdict} ({seconds:.0f} s)", flush=True)
        table.print(
            f"RoundBook: seeded faults against {against}"
            + (" (each fault's catchers only)" if args.quick else "")
        )
        print(f"\n{caught} of {len(faults)} seeded faults caught")
        return 0 if caught == len(faults) and not failed else 1
    finally:
        shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
