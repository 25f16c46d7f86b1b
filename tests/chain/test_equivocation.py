"""Equivocation, on a real anvil: a checker that signs two different votes on one batch, or signs a
vote and then takes the other side on the ledger, is slashed for it (RoundJudge.proveEquivocation,
judged by RoundJudge.equivocator; SwarmLedger.slashEquivocation), whoever proves it is paid the
ledger's settler cut, and it is slashed once; so is a producer that signs two different
submissions of one round, or signs one and submits another on the ledger
(RoundJudge.proveDoubleSubmission). The attack each test runs: a checker (or a producer) that
tells the aggregator one thing and the chain another, then asks its stake back to escape."""

from __future__ import annotations

import pytest
from web3.logs import DISCARD

from client.chain.artifacts import load_artifact
from client.chain.book import NO_SUBMISSION, EscalationVote
from client.chain.errors import ErrorDecoder, LedgerRevert
from client.chain.messages import Signed, Submission
from client.chain.roots import SubmissionRoot, cast_vote_struct, submission_struct
from client.chain.tx import TxSender
from client.units import SCORE_SCALE
from tests.harness.ledger_swarm import ETH
from tests.harness.roundbook import (
    ROUND,
    agreement,
    open_book,
    post_submissions,
    seats,
    sign_submissions,
    signed_vote,
    stranger,
    submit_in_v4,
)

CUT_BPS = 1_000  # the ledger's SETTLER_CUT_BPS


@pytest.fixture
def world(chain):
    return open_book(chain)


def prove(book, who, first: Signed, second: Signed | None = None, round_: int = ROUND):
    """`who` proves it to the book's judge (the book slashes only on its word)."""
    producer = first.message.producer
    first_, second_ = cast_vote_struct(first), cast_vote_struct(second)
    return book.send(who, "proveEquivocation", round_, producer, first_, second_)


def proven(book, result) -> list[tuple[str, str, int]]:
    receipt = book.swarm.w3.eth.get_transaction_receipt(result.tx_hash)
    found = book.contract.events.EquivocationProven().process_receipt(receipt, errors=DISCARD)
    return [(e.args["voter"], e.args["prover"], e.args["slashed"]) for e in found]


def posted_round(book, nodes):
    producers, aggregator = nodes[:4], nodes[4]
    subs = SubmissionRoot(sign_submissions(book, producers))
    post_submissions(book, aggregator, subs)
    return subs


def test_two_different_votes_on_one_batch_slash_their_signer_once(world) -> None:
    swarm, nodes, book = world
    subs = posted_round(book, nodes)
    batch = subs.signed[0]
    producer = batch.signer
    checker = next(n for n in nodes if n.tx.account.address in seats(book, nodes, producer))
    voter = checker.tx.account.address
    one = signed_vote(book, checker, batch)
    other = signed_vote(book, checker, batch, score=batch.message.score - 1)  # both agree
    ledger = swarm.ledger
    stake = ledger.node_info(voter).active_stake
    # it asks its whole stake back once it has signed: the slash takes unbonding stake too
    checker.request_unstake(stake)
    prover = stranger(book)

    # not an equivocation: one vote shown twice, or two votes of two signers
    with pytest.raises(LedgerRevert, match="NoLie"):
        prove(book, prover, one, one)
    someone = next(n for n in nodes if n.tx.account.address not in (voter, producer))
    with pytest.raises(LedgerRevert, match="NoLie"):
        prove(book, prover, one, signed_vote(book, someone, batch, score=0))
    # nor a producer's two "votes" on its own batch: it holds no seat there (and its double
    # submission is slashed under that key)
    own = next(n for n in nodes if n.tx.account.address == producer)
    with pytest.raises(LedgerRevert, match="NoLie"):
        prove(book, prover, signed_vote(book, own, batch), signed_vote(book, own, batch, score=0))

    pool, paid = ledger.reward_pool(), swarm.w3.eth.get_balance(prover.address)
    result = prove(book, prover, one, other)
    slashed = stake * swarm.params.slash_bps // 10_000
    assert proven(book, result) == [(voter, prover.address, slashed)]
    assert ledger.node_info(voter).unbonding == stake - slashed
    receipt = swarm.w3.eth.get_transaction_receipt(result.tx_hash)
    gas = receipt["gasUsed"] * receipt["effectiveGasPrice"]
    cut = slashed * CUT_BPS // 10_000
    assert swarm.w3.eth.get_balance(prover.address) - paid + gas == cut
    assert ledger.reward_pool() - pool == slashed - cut

    # once per checker and batch: another pair, or another prover, slashes nothing more
    third = Signed.sign(agreement(batch, findings=3), book.domain, checker.tx.account.key)
    with pytest.raises(LedgerRevert, match="AlreadyProven"):
        prove(book, stranger(book), one, third)
    # only the judge has the book slash, and only the book the ledger (an equivocation judged
    # by nobody would be a free slash of anyone)
    with pytest.raises(LedgerRevert, match="NotTheJudge"):
        book.send(prover, "slashEquivocation", ROUND, producer, someone.tx.account.address, voter)
    contract = swarm.w3.eth.contract(
        address=ledger.address, abi=load_artifact("SwarmLedger")["abi"]
    )
    call = contract.functions.slashEquivocation(ROUND, producer, someone.tx.account.address, voter)
    sender = TxSender(swarm.w3, prover, ErrorDecoder(contract.abi))
    tx = {"to": ledger.address, "data": call._encode_transaction_data(), "value": 0}
    with pytest.raises(LedgerRevert, match="NotTheBook"):
        sender.send(tx, "slashEquivocation")

    # until the round's challenge window ends
    later = signed_vote(book, someone, batch)
    again = signed_vote(book, someone, batch, score=batch.message.score + 1)
    swarm.goto(book.window("challengeEnd") + 1)
    with pytest.raises(LedgerRevert, match="ChallengeWindowClosed"):
        prove(book, prover, later, again)


def test_a_vote_signed_off_chain_and_the_other_side_on_the_ledger_is_an_equivocation(
    world,
) -> None:
    """Two checkers sign agreements with a batch to the aggregator; a third escalates it with a
    dispute. On the ledger the first votes what it signed; the second disputes there: its signed
    agreement and its vote on chain take two sides, and it is slashed for it."""
    swarm, nodes, book = world
    subs = posted_round(book, nodes)
    index = 2
    batch = subs.signed[index]
    producer = batch.signer
    held = seats(book, nodes, producer)
    honest, turncoat, escalator = [n for n in nodes if n.tx.account.address in held][:3]
    signed = {n: signed_vote(book, n, batch) for n in (honest, turncoat)}
    dispute = EscalationVote(unavailable=False, score=0, signal=SCORE_SCALE, findings=2)
    leaf, proof = submission_struct(batch), subs.proof(index)
    book.send(escalator.tx.account, "escalate", ROUND, index, leaf, proof, dispute.struct())
    claim = batch.message
    honest.attest(ROUND, producer, claim.score, claim.signal, 0)
    turncoat.attest(ROUND, producer, 0, claim.signal, 1)

    prover = stranger(book)
    with pytest.raises(LedgerRevert, match="NoLie"):  # it voted what it signed
        prove(book, prover, signed[honest])
    before = swarm.ledger.node_info(turncoat.tx.account.address).active_stake
    result = prove(book, prover, signed[turncoat])
    [(voter, _, slashed)] = proven(book, result)
    assert voter == turncoat.tx.account.address and slashed == before // 10
    assert swarm.ledger.node_info(voter).active_stake == before - slashed
    assert slashed == 2 * ETH * swarm.params.slash_bps // 10_000


def test_two_different_submissions_of_one_round_slash_their_producer_once(world) -> None:
    """A producer signs one batch to the aggregator and another of the same round (to a second
    aggregator, or to the same one later): it is slashed its stake's slash share, once, and the
    prover paid the settler's cut; its batch on the ledger, if another, proves it the same way."""
    swarm, nodes, book = world
    subs = posted_round(book, nodes)
    first = subs.signed[1]
    producer = next(n for n in nodes if n.tx.account.address == first.signer)
    s = first.message
    other = Signed.sign(
        Submission(
            round=s.round, digest="0x" + "ee" * 32, rollouts=s.rollouts, score=s.score, signal=0
        ),
        book.domain,
        producer.tx.account.key,
    )
    ledger = swarm.ledger
    stake = ledger.node_info(first.signer).active_stake
    producer.request_unstake(stake)  # the slash takes unbonding stake too
    prover = stranger(book)

    def prove_double(first_: Signed, second_: Signed | None) -> object:
        second = submission_struct(second_) if second_ is not None else NO_SUBMISSION
        return book.send(prover, "proveDoubleSubmission", ROUND, submission_struct(first_), second)

    # not a double submission: one submission shown twice, two producers' submissions, another
    # round's, or no batch of it on the ledger
    with pytest.raises(LedgerRevert, match="NoLie"):
        prove_double(first, first)
    with pytest.raises(LedgerRevert, match="NoLie"):
        prove_double(first, subs.signed[0])
    with pytest.raises(LedgerRevert, match="NoLie"):
        prove_double(first, None)
    later = Signed.sign(
        Submission(round=ROUND + 1, digest=s.digest, rollouts=8, score=s.score, signal=s.signal),
        book.domain,
        producer.tx.account.key,
    )
    with pytest.raises(LedgerRevert, match="NoLie"):
        prove_double(first, later)

    pool, paid = ledger.reward_pool(), swarm.w3.eth.get_balance(prover.address)
    result = prove_double(first, other)
    slashed = stake * swarm.params.slash_bps // 10_000
    assert proven(book, result) == [(first.signer, prover.address, slashed)]
    assert ledger.node_info(first.signer).unbonding == stake - slashed
    receipt = swarm.w3.eth.get_transaction_receipt(result.tx_hash)
    cut = slashed * CUT_BPS // 10_000
    gas = receipt["gasUsed"] * receipt["effectiveGasPrice"]
    assert swarm.w3.eth.get_balance(prover.address) - paid + gas == cut
    assert ledger.reward_pool() - pool == slashed - cut
    with pytest.raises(LedgerRevert, match="AlreadyProven"):  # once per producer and round
        prove_double(other, first)


def test_a_submission_signed_off_chain_and_another_on_the_ledger_is_a_double_submission(
    chain,
) -> None:
    """A producer signs a batch to the aggregator and submits another of the round on the
    ledger (another digest, or the same digest with another score): slashed. One that submits
    the very batch it signed there (what an honest node does when the aggregator gives no
    receipt: force inclusion) is not, nor is it framed by its submission of another round."""
    swarm, nodes, book = open_book(chain)
    round_ = ROUND + 1  # the ledger's submit window of a round ahead
    signed = sign_submissions(book, nodes[:4], round_)
    honest, double, rescored = nodes[0], nodes[1], nodes[2]
    s = signed[0].message
    submit_in_v4(book, double, round_)  # another batch
    honest.submit(round_, s.digest, s.rollouts, s.score, s.signal)  # the same batch: no lie
    r = signed[2].message
    rescored.submit(round_, r.digest, r.rollouts, r.score - 1, r.signal)  # another claim
    post_submissions(book, nodes[4], SubmissionRoot(signed), round_)
    prover = stranger(book)
    with pytest.raises(LedgerRevert, match="NoLie"):
        book.send(
            prover, "proveDoubleSubmission", round_, submission_struct(signed[0]), NO_SUBMISSION
        )
    # the honest node's submission of the next round, shown against this round's record
    next_round = Signed.sign(
        Submission(round=round_ + 1, digest="0x" + "ab" * 32, rollouts=8, score=0, signal=0),
        book.domain,
        honest.tx.account.key,
    )
    with pytest.raises(LedgerRevert, match="NoLie"):
        book.send(
            prover, "proveDoubleSubmission", round_, submission_struct(next_round), NO_SUBMISSION
        )
    before = swarm.ledger.node_info(signed[2].signer).active_stake
    result = book.send(
        prover, "proveDoubleSubmission", round_, submission_struct(signed[2]), NO_SUBMISSION
    )
    [(who, _, slashed)] = proven(book, result)
    assert who == signed[2].signer and slashed == before * swarm.params.slash_bps // 10_000
    stake = swarm.ledger.node_info(signed[1].signer).active_stake
    result = book.send(
        prover, "proveDoubleSubmission", round_, submission_struct(signed[1]), NO_SUBMISSION
    )
    slashed = stake * swarm.params.slash_bps // 10_000
    assert proven(book, result) == [(signed[1].signer, prover.address, slashed)]
    assert swarm.ledger.node_info(signed[1].signer).active_stake == stake - slashed
