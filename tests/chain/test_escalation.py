"""Escalation, on a real anvil: a batch of the root lane that a checker drawn on its committee
disputes goes to the ledger's v4 lane (RoundBook.escalate, SwarmLedger.escalate), keeping the
root lane's committee, and is judged and slashed there by the ledger's rules. Without it a
forger in the root lane risked nothing but its time: its checkers would only not sign. Only a
drawn checker may escalate, only a submission the root holds and its producer signed, only
while the ledger's committee can still vote; a producer that unstakes once it has signed does
not escape: the escalated batch holds its withdrawal until it is settled."""

from __future__ import annotations

import pytest
from eth_account import Account
from web3.logs import DISCARD

from client.chain.artifacts import load_artifact
from client.chain.book import EscalationVote
from client.chain.errors import LedgerRevert
from client.chain.events import EventReader
from client.chain.messages import Signed
from client.chain.roots import SubmissionRoot, submission_struct
from client.node.aggregation.auditor import VerdictRoot, v4_producers
from client.units import SCORE_SCALE
from tests.harness.ledger_swarm import ETH, OTHER_FAMILY
from tests.harness.roundbook import (
    ROUND,
    act_on,
    audit,
    honest_round,
    lies,
    open_book,
    post_submissions,
    post_verdicts,
    seats,
    sign_submissions,
    stranger,
)


@pytest.fixture
def world(chain):
    return open_book(chain)


DISPUTE = EscalationVote(unavailable=False, score=0, signal=SCORE_SCALE, findings=2)


def escalate(
    book,
    who,
    subs: SubmissionRoot,
    index: int,
    at: int | None = None,
    vote: EscalationVote = DISPUTE,
):
    """`who` escalates the submission at `index` of the root (claimed at `at`, if given), with
    its `vote` (by default a dispute: a score of 0, where the batches claim 4 units)."""
    signed = subs.signed[index]
    place = index if at is None else at
    leaf, proof = submission_struct(signed), subs.proof(index)
    return book.send(who, "escalate", ROUND, place, leaf, proof, vote.struct())


def test_a_disputed_batch_escalates_with_its_committee_and_its_forger_is_slashed(world) -> None:
    swarm, nodes, book = world
    producers, aggregator = nodes[:4], nodes[4]
    subs = SubmissionRoot(sign_submissions(book, producers))
    forger = subs.signed[1].signer
    index = 1
    forger_node = next(p for p in producers if p.tx.account.address == forger)
    stake = forger_node.node_info(forger).active_stake
    outsider = swarm.node(2 * ETH, family=OTHER_FAMILY)  # cannot run the batch's model: no seat
    post_submissions(book, aggregator, subs)
    held = seats(book, nodes, forger)
    seated = [n for n in nodes if n.tx.account.address in held]
    checker = seated[0]

    # the forger, once its root is posted, asks for its whole stake back: it signed before
    forger_node.request_unstake(stake)

    # refused: the producer itself, a claimed place that is not the leaf's, a node with no seat
    with pytest.raises(LedgerRevert, match="SelfAttestation"):
        escalate(book, forger_node.tx.account, subs, index)
    with pytest.raises(LedgerRevert, match="NotInRoot"):
        escalate(book, checker.tx.account, subs, index, at=index + 1)
    with pytest.raises(LedgerRevert, match="NotDrawn"):
        escalate(book, outsider.tx.account, subs, index)
    # and an escalation whose vote agrees (an agreeing checker signs off chain), or is out of range
    claimed = subs.signed[index].message
    agreeing = EscalationVote(False, claimed.score, claimed.signal, 0)
    with pytest.raises(LedgerRevert, match="NotADispute"):
        escalate(book, checker.tx.account, subs, index, vote=agreeing)
    with pytest.raises(LedgerRevert, match="SignalOutOfRange"):
        escalate(book, checker.tx.account, subs, index, vote=EscalationVote(False, 0, 10**9, 0))

    result = escalate(book, checker.tx.account, subs, index)
    ledger = swarm.ledger
    record = ledger.submission(ROUND, forger)
    assert record.exists and record.digest == claimed.digest and record.signal == claimed.signal
    assert record.snapshot_block == book.view()[1]  # the root lane's snapshot, and its beacon:
    for n in nodes:  # the v4 committee is the one the book drew
        address = n.tx.account.address
        assert ledger.seats_of(ROUND, forger, address) == held.get(address, 0), address
    contract = swarm.w3.eth.contract(
        address=ledger.address, abi=load_artifact("SwarmLedger")["abi"]
    )
    receipt = swarm.w3.eth.get_transaction_receipt(result.tx_hash)
    [event] = contract.events.Escalated().process_receipt(receipt, errors=DISCARD)
    assert (event.args["node"], event.args["checker"]) == (forger, checker.tx.account.address)
    with pytest.raises(LedgerRevert, match="AlreadySubmitted"):  # once
        escalate(book, seated[1].tx.account, subs, index)

    # the escalating checker's dispute came with it; judged by v4's rules: the other drawn
    # checkers dispute on the ledger, and settling slashes it
    assert ledger.vote_of(checker.tx.account.address, ROUND, forger)[0] == 2  # disputed
    with pytest.raises(LedgerRevert, match="AlreadyAttested"):
        checker.attest(ROUND, forger, 0, claimed.signal, 1)
    for n in seated[1:]:
        n.attest(ROUND, forger, 0, claimed.signal, 1)
    params = ledger.params()
    unbonding_end = ledger.node_info(forger).unbonding_end
    swarm.set_time(unbonding_end + 1)  # long past the record's windows
    with pytest.raises(LedgerRevert, match="UnsettledSubmissions"):  # it backs the escalated batch
        forger_node.withdraw()
    nodes[5].settle(ROUND, forger)
    info = ledger.node_info(forger)
    assert info.unbonding == stake - stake * params.slash_bps // 10_000
    forger_node.withdraw()
    assert ledger.node_info(forger).unbonding == 0


def test_escalation_closes_with_the_ledgers_vote_window(world) -> None:
    """A checker escalates while the ledger's committee can still vote on the round (the round
    before the book's vote close); after that the batch stays in the root lane."""
    swarm, nodes, book = world
    producers, aggregator = nodes[:4], nodes[4]
    subs = SubmissionRoot(sign_submissions(book, producers))
    post_submissions(book, aggregator, subs)
    producer = subs.signed[0].signer
    checker = next(n for n in nodes if n.tx.account.address in seats(book, nodes, producer))
    swarm.goto(book.window("voteClose"))
    with pytest.raises(LedgerRevert, match="EscalationClosed"):
        escalate(book, checker.tx.account, subs, 0)
    assert not swarm.ledger.submission(ROUND, producer).exists


def test_a_forged_submission_is_not_escalated(world) -> None:
    """A leaf its producer did not sign cannot open a v4 record in the producer's name (an
    aggregator and a friend on the committee would otherwise have an honest node slashed for a
    batch it never made): it is a lie of the root, proven as one."""
    swarm, nodes, book = world
    producers, aggregator = nodes[:4], nodes[4]
    signed = sign_submissions(book, producers)
    framed = Signed.sign(signed[0].message, book.domain, Account.create().key)
    framed = framed.model_copy(update={"signer": signed[0].signer})
    subs = SubmissionRoot([framed, *signed[1:]])
    post_submissions(book, aggregator, subs)
    i = subs.signed.index(framed)
    checker = next(n for n in nodes if n.tx.account.address in seats(book, nodes, framed.signer))
    with pytest.raises(LedgerRevert, match="ForgedSubmission"):
        escalate(book, checker.tx.account, subs, i)
    assert not swarm.ledger.submission(ROUND, framed.signer).exists


def test_a_root_that_credits_an_escalated_batch_is_a_lie(world) -> None:
    """Once escalated (here by a checker that could not fetch it: its vote is unavailable), the
    batch is the v4 lane's: the producers an aggregator must leave out of
    its verdict root (read from the ledger's Submitted events of the round, as the service and
    the auditor read them) name it, and a root that credits it anyway is proven false."""
    swarm, nodes, book = world
    aggregator, subs, credits, votes = honest_round(book, nodes)
    producer = subs.signed[2].signer
    checker = next(n for n in nodes if n.tx.account.address in seats(book, nodes, producer))
    escalate(book, checker.tx.account, subs, 2, vote=EscalationVote(unavailable=True))
    voter = checker.tx.account.address
    assert swarm.ledger.vote_of(voter, ROUND, producer)[0] == 3  # unavailable, as it said
    held = v4_producers(swarm.ledger, EventReader(swarm.ledger), ROUND)
    assert held == {producer.lower()}
    verdicts = VerdictRoot(credits, votes=votes)  # the agreeing votes it had still credit it
    post_verdicts(book, aggregator, verdicts)
    finding = audit(book, subs, verdicts, v4=held)
    assert finding is not None and finding.what == "a credit the v4 lane holds"
    assert finding.args[2][1] == producer
    receipt = act_on(book, stranger(book), finding)
    assert lies(book, receipt) == ["a credit the v4 lane holds"]
