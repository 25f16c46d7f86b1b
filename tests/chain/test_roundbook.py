"""The root lane's RoundBook on a real anvil beside the SwarmLedger it reads: an aggregator posts
a round's submission root and verdict root with a bond; an honest round stands against every
proof and its bond comes back; each lie the book knows (a forged submission, two submissions of
one producer, a credit with an invented signer, a signer without a seat, too few voters, a
disagreeing vote, an amount that is not its signal, a credit of no submission, a sum that is not
its children's) is proven by a stranger with the signed messages, voids the root, pays the
prover half the bond and the ledger's pool the other half; a leaf nobody can get is asked for on
chain, and an aggregator that does not answer (it withholds the data, or no proof of it exists)
loses its bond the same way."""

from __future__ import annotations

from dataclasses import replace

import pytest
from eth_abi import encode as abi_encode
from eth_account import Account
from web3.logs import DISCARD

from client.chain.artifacts import load_artifact
from client.chain.book import BookRound
from client.chain.deploy import POST_PAY_BPS, deploy_book
from client.chain.errors import ErrorDecoder, LedgerRevert
from client.chain.hashing import keccak256
from client.chain.messages import ReceiptSigner, Signed, Submission
from client.chain.roots import (
    NO_CREDITS_ROOT,
    NO_EARNINGS,
    Credit,
    SubmissionRoot,
    VerdictRoot,
    submission_leaf,
    submission_struct,
)
from client.chain.sumtree import Node, SumTree, leaf
from client.chain.tx import TxSender
from client.node.aggregation.earnings import EarningsBook
from client.units import SCORE_SCALE
from tests.harness.ledger_swarm import ETH, Swarm, deploy_artifact, digest
from tests.harness.roundbook import (
    BOND,
    CHALLENGE_BOND,
    LIST,
    ROUND,
    Book,
    Q,
    act_on,
    agreeing_votes,
    assert_paid_for,
    audit,
    auditor_of,
    balances,
    claim,
    credit_of,
    forged,
    honest_round,
    left_out,
    lies,
    open_book,
    paid_by,
    post_submissions,
    post_verdicts,
    prove_credit,
    proven_and_paid,
    seats,
    sign_submissions,
    stranger,
    submit_in_v4,
    uncredited,
)


@pytest.fixture
def world(chain):
    return open_book(chain)


def test_an_honest_round_stands_against_every_proof_and_its_bond_comes_back(world) -> None:
    swarm, nodes, book = world
    aggregator, subs, credits, votes = honest_round(book, nodes)
    verdicts = VerdictRoot(credits)
    post_verdicts(book, aggregator, verdicts)
    view = book.view()
    assert view[0] == aggregator.tx.account.address and view[2] == 4 and view[6] == verdicts.total
    assert audit(book, subs, VerdictRoot(credits, votes=votes)) is None  # the lists hold
    prover = stranger(book)
    for i in range(len(credits)):
        with pytest.raises(LedgerRevert, match="NoLie"):
            prove_credit(book, prover, verdicts, subs, i, votes[i])
    for i in range(len(subs.signed)):
        with pytest.raises(LedgerRevert, match="NoLie"):
            book.send(
                prover,
                "proveForgedSubmission",
                ROUND,
                i,
                submission_struct(subs.signed[i]),
                subs.proof(i),
            )
    with pytest.raises(LedgerRevert, match="NoLie"):
        book.send(
            prover,
            "proveUnsorted",
            ROUND,
            0,
            submission_struct(subs.signed[0]),
            subs.proof(0),
            submission_struct(subs.signed[1]),
            subs.proof(1),
        )
    top = verdicts.tree.levels[-2]
    with pytest.raises(LedgerRevert, match="NoLie"):
        book.send(
            prover,
            "proveBadSum",
            ROUND,
            verdicts.tree.depth,
            0,
            verdicts.tree.root.as_abi(),
            [],
            top[0].as_abi(),
            top[1].as_abi(),
        )
    with pytest.raises(LedgerRevert, match="ChallengeWindowOpen"):
        book.send(aggregator.tx.account, "release", ROUND)
    swarm.goto(book.window("challengeEnd") + 1)
    with pytest.raises(LedgerRevert, match="ChallengeWindowClosed"):
        prove_credit(book, prover, verdicts, subs, 0, votes[0])
    with pytest.raises(LedgerRevert, match="NotTheAggregator"):  # its bond and pay are its own
        book.send(prover, "release", ROUND)
    before = swarm.w3.eth.get_balance(aggregator.tx.account.address)
    receipt = book.send(aggregator.tx.account, "release", ROUND)
    gas = receipt.gas_used * receipt.effective_gas_price
    assert swarm.w3.eth.get_balance(aggregator.tx.account.address) - before + gas == BOND


@pytest.mark.parametrize(
    "lie",
    [
        "a vote its voter did not sign",
        "a vote from a node without a seat",
        "a credit with fewer votes than quorum",
        "a vote that does not agree",
        "a credit's amount is not its signal",
        "a credit of no submission",
        "a credit's votes not sorted by voter",
    ],
)
def test_each_lie_in_a_credit_is_proven_and_costs_the_aggregator_its_bond(world, lie) -> None:
    _, nodes, book = world
    aggregator, subs, credits, votes = honest_round(book, nodes)
    target = 1
    signed = subs.signed[target]
    seated = seats(book, nodes, signed.signer)
    amounts = [c.signal for c in credits]
    if lie == "a vote its voter did not sign":  # invents a signer: a seated voter's name, a key
        # that is not its
        voter = next(n for n in nodes if n.tx.account.address in seated)
        invented = forged(book, agreeing_votes(book, [voter], signed)[0], signed)
        rest = [v for v in votes[target] if v[0] != voter.tx.account.address]
        votes[target] = sorted([invented, *rest], key=lambda v: int(v[0], 16))
    elif lie == "a vote from a node without a seat":
        # a node of the family that staked after the snapshot (the root's block) holds no seat
        late = book.swarm.node(2 * ETH)
        votes[target] = sorted(
            [*votes[target][:1], *agreeing_votes(book, [late], signed)],
            key=lambda v: int(v[0], 16),
        )
    elif lie == "a credit with fewer votes than quorum":
        votes[target] = votes[target][:1]
    elif lie == "a vote that does not agree":  # a checker whose score is far off the claim
        voters = [n for n in nodes if n.tx.account.address in seated][:Q]
        votes[target] = agreeing_votes(book, voters, signed, score=0)
    elif lie == "a credit's amount is not its signal":
        amounts[target] = credits[target].signal * 100
    elif lie == "a credit's votes not sorted by voter":
        votes[target] = list(reversed(votes[target]))
    credits[target] = credit_of(subs, target, votes[target])
    if lie == "a credit of no submission":
        c = credits[target]
        credits[target] = Credit(7, c.producer, c.digest, c.score, c.signal, c.votes)
    # as the liar ordered them, and published with their votes
    verdicts = VerdictRoot(credits, amounts, votes=votes, presorted=True)
    post_verdicts(book, aggregator, verdicts)
    prover = stranger(book)
    for i in range(len(credits)):  # the other credits hold
        if i != target:
            with pytest.raises(LedgerRevert, match="NoLie"):
                prove_credit(book, prover, verdicts, subs, i, votes[i])
    # an auditor reading the published lists finds the lie, and its call proves it
    finding = audit(book, subs, verdicts)
    assert finding is not None and (finding.what, finding.function) == (lie, "proveBadCredit")
    before = balances(book, prover.address)
    receipt = act_on(book, prover, finding)
    assert_paid_for(book, prover, before, lie, receipt)


def test_a_vote_of_a_staked_node_the_draw_did_not_seat_is_proven(chain) -> None:
    """One seat trial a committee (K = Q = 1) among six staked members of the family: each holds
    a seat with odds of about 1/6, so some hold none (all six seated: ~2e-5), and a credit
    resting on one of their votes is a lie the book's own draw (rule 4, stakes as of the root's
    block) proves; nothing else about the vote is wrong."""
    swarm, nodes, book = open_book(chain, quorum=1, checkers=1)
    producer, aggregator = nodes[0], nodes[6]
    subs = SubmissionRoot(sign_submissions(book, [producer]))
    post_submissions(book, aggregator, subs)
    signed = subs.signed[0]
    seated = seats(book, nodes, signed.signer)
    unseated = [n for n in nodes[1:] if n.tx.account.address not in seated]
    assert unseated, "every member drew a seat (odds ~2e-5): this test's draw"
    voter = unseated[0].tx.account.address
    assert swarm.ledger.stake_at(voter, book.view()[1]) == 2 * ETH  # staked at the snapshot
    votes = agreeing_votes(book, unseated[:1], signed)
    verdicts = VerdictRoot([credit_of(subs, 0, votes)], votes=[votes])
    post_verdicts(book, aggregator, verdicts)
    finding = audit(book, subs, verdicts)
    lie = "a vote from a node without a seat"
    assert finding is not None and finding.what == lie
    prover = stranger(book)
    before = balances(book, prover.address)
    assert_paid_for(book, prover, before, lie, act_on(book, prover, finding))


def test_a_batch_the_v4_lane_holds_is_never_credited_in_the_book(world) -> None:
    """A producer that also submitted its round in the v4 lane is paid there: v4's submit window
    closed before the submission root was posted, so the aggregator knew, and a credit of it in
    the book is a lie (one round of one producer is never paid by both lanes)."""
    _, nodes, book = world
    twice = nodes[1]
    twice.submit(ROUND, digest("the same round in v4"), 8, 4 * SCORE_SCALE, SCORE_SCALE)
    aggregator, subs, credits, votes = honest_round(book, nodes)  # credits all four
    v4 = {twice.tx.account.address.lower()}
    verdicts = VerdictRoot(credits, votes=votes)
    post_verdicts(book, aggregator, verdicts)
    assert audit(book, subs, verdicts) is None  # an auditor that does not read v4 sees nothing
    finding = audit(book, subs, verdicts, v4=v4)
    lie = "a credit the v4 lane holds"
    assert finding is not None and finding.what == lie
    assert finding.args[2][1] == twice.tx.account.address
    prover = stranger(book)
    before = balances(book, prover.address)
    assert_paid_for(book, prover, before, lie, act_on(book, prover, finding))


def test_an_inflated_total_is_proven_where_the_sums_stop_adding_up(world) -> None:
    """The aggregator posts a root whose top sum is twice its leaves': every honest leaf's path
    then fails to reach it, and the top node's own children prove the lie."""
    _, nodes, book = world
    aggregator, subs, credits, votes = honest_round(book, nodes)
    honest = VerdictRoot(credits)
    left, right = honest.tree.levels[-2]
    inflated = Node(honest.tree.root.hash, honest.total * 2)
    book.swarm.goto(book.window("verdictRound"))
    book.send(aggregator.tx.account, "postVerdicts", ROUND, inflated.hash, 4, inflated.sum, LIST)
    prover = stranger(book)
    with pytest.raises(LedgerRevert, match="NotInRoot"):  # no honest path reaches the lie
        prove_credit(book, prover, honest, subs, 0, votes[0])
    # an auditor holding the leaves finds they are not the root's (the sums above them are not
    # published): it would challenge a leaf; the top node's children prove the lie at once
    finding = audit(book, subs, VerdictRoot(credits, votes=votes))
    assert finding is not None and finding.challenge and "not the root's data" in finding.what
    before = balances(book, prover.address)
    receipt = book.send(
        prover,
        "proveBadSum",
        ROUND,
        honest.tree.depth,
        0,
        inflated.as_abi(),
        [],
        left.as_abi(),
        right.as_abi(),
    )
    assert_paid_for(book, prover, before, "a sum that is not its children's", receipt)


def test_a_forged_or_doubled_submission_is_proven_against_the_submission_root(world) -> None:
    swarm, nodes, book = world
    producers, aggregator = nodes[:3], nodes[4]
    signed = sign_submissions(book, producers)
    # a submission "by" producers[2] that another key signed
    forged = Signed.sign(signed[2].message, book.domain, Account.create().key)
    forged = forged.model_copy(update={"signer": signed[2].signer})
    subs = SubmissionRoot([signed[0], signed[1], forged])
    post_submissions(book, aggregator, subs)
    prover = stranger(book)
    i = subs.signed.index(forged)
    finding = audit(book, subs)
    assert finding is not None and finding.args[:2] == (ROUND, i)
    before = balances(book, prover.address)
    receipt = act_on(book, prover, finding)
    assert_paid_for(book, prover, before, "a submission its producer did not sign", receipt)

    # a submission its signer did sign, of a key that never registered with the ledger
    unknown = Account.create()
    far = book.window("verdictRound")
    stray = Signed.sign(
        Submission(round=far, digest="0x" + digest("stray").hex(), rollouts=1, score=0, signal=0),
        book.domain,
        unknown.key,
    )
    subs4 = SubmissionRoot([stray, *sign_submissions(book, producers[:2], round_=far)])
    swarm.goto(book.window("postRound", far))
    book.draw_to(aggregator, far)
    count = len(subs4.signed)
    book.send(aggregator.tx.account, "postSubmissions", far, subs4.root, count, LIST, value=BOND)
    finding = audit(book, subs4, round_=far)
    assert finding is not None and finding.args[:2] == (far, subs4.signed.index(stray))
    assert lies(book, act_on(book, prover, finding)) == ["a submission of no registered node"]

    # a submission its producer did sign, claiming more than its rollouts can score
    far = book.window("verdictRound") + 1
    greedy = Signed.sign(
        Submission(
            round=far,
            digest="0x" + digest("greedy").hex(),
            rollouts=8,
            score=8 * SCORE_SCALE + 1,
            signal=0,
        ),
        book.domain,
        producers[0].tx.account.key,
    )
    subs3 = SubmissionRoot([greedy, *sign_submissions(book, producers[1:], round_=far)])
    swarm.goto(book.window("postRound", far))
    book.draw_to(aggregator, far)
    count = len(subs3.signed)
    book.send(aggregator.tx.account, "postSubmissions", far, subs3.root, count, LIST, value=BOND)
    k = subs3.signed.index(greedy)
    finding = audit(book, subs3, round_=far)
    assert finding is not None and finding.args[:2] == (far, k)
    assert lies(book, act_on(book, prover, finding)) == ["a submission out of range"]

    # the next round: the same producer twice, neighbours in the sorted root
    book2_round = far + 1
    again = sign_submissions(book, producers, round_=book2_round)
    doubled = Signed.sign(
        again[0].message.model_copy(update={"signal": 7}), book.domain, producers[0].tx.account.key
    )
    subs2 = SubmissionRoot([*again, doubled])
    j = next(k for k in range(3) if subs2.signed[k].signer == subs2.signed[k + 1].signer)
    swarm.goto(book.window("postRound", book2_round))
    book.draw_to(aggregator, book2_round)
    book.send(
        aggregator.tx.account,
        "postSubmissions",
        book2_round,
        subs2.root,
        len(subs2.signed),
        LIST,
        value=BOND,
    )
    finding = audit(book, subs2, round_=book2_round)
    assert finding is not None and finding.function == "proveUnsorted"
    assert finding.args[1] == j
    before = balances(book, prover.address)
    receipt = act_on(book, prover, finding)
    assert lies(book, receipt) == ["submissions out of order"]
    after = balances(book, prover.address)
    gas = receipt.gas_used * receipt.effective_gas_price
    assert after[0] - before[0] + gas == BOND // 2


def test_a_receipted_submission_left_out_is_proven_by_its_producer(world) -> None:
    """A censoring aggregator: it gave a producer a receipt and posts a root without the
    submission. The producer learns it only once v4's submit window has closed, so the receipt
    and the two leaves it sorts between prove it, wherever it sorts (first, between, last): the
    root is void and the producer takes half the bond. A receipt of anyone but the aggregator,
    a place the producer does not sort into, a receipt of another round's submission, and a
    producer the v4 lane holds prove nothing."""
    _swarm, nodes, book = world
    ordered = sorted(nodes[:4], key=lambda n: int(n.tx.account.address, 16))
    round_ = ROUND
    for place in (0, 2, 3):
        censored = ordered[place]
        got: dict[str, tuple[Signed, str]] = {}
        aggregator, subs, _, _ = honest_round(
            book, nodes, round_, receipts=got, leave_out=censored.tx.account.address
        )
        assert audit(book, subs, round_=round_) is None  # the list itself holds: sorted, signed
        mine, receipt = got[censored.tx.account.address]
        finding = left_out(book, subs, mine, receipt, round_)
        assert finding is not None and finding.args[3] == place
        who = censored.tx.account
        if place == 2:
            # a receipt the aggregator did not sign (another node's key) binds nobody
            other = ReceiptSigner(book.domain, nodes[5].tx.account.key).sign(mine)
            forged_args = (*finding.args[:2], bytes.fromhex(other[2:]), *finding.args[3:])
            with pytest.raises(LedgerRevert, match="not the aggregator's receipt"):
                book.send(who, "proveLeftOut", *forged_args)
            # a place it does not sort into: its neighbours there do not bracket it
            wrong = (
                *finding.args[:3],
                place - 1,
                submission_struct(subs.signed[place - 2]),
                subs.proof(place - 2),
                submission_struct(subs.signed[place - 1]),
                subs.proof(place - 1),
            )
            with pytest.raises(LedgerRevert, match="not its place"):
                book.send(who, "proveLeftOut", *wrong)
            # nor where its neighbour below sorts after it
            past = (
                *finding.args[:3],
                place + 1,
                submission_struct(subs.signed[place]),
                subs.proof(place),
                *finding.args[6:],
            )
            with pytest.raises(LedgerRevert, match="not its place"):
                book.send(who, "proveLeftOut", *past)
            # the aggregator's receipt of its submission of another round proves nothing here
            [stale] = sign_submissions(book, [censored], round_ + 1)
            later = ReceiptSigner(book.domain, aggregator.tx.account.key).sign(stale)
            moved = (round_, submission_struct(stale), bytes.fromhex(later[2:]))
            with pytest.raises(LedgerRevert, match="a submission the root may leave out"):
                book.send(who, "proveLeftOut", *moved, *finding.args[3:])
            # a submission that is in the root: no left-out proof of a kept producer
            kept, kept_receipt = got[subs.signed[1].signer]
            assert left_out(book, subs, kept, kept_receipt, round_) is None
        round_ = proven_and_paid(book, who, finding, "a receipted submission left out", round_)

    # a producer that submitted the round in the v4 lane may be left out of the book's root
    twice = ordered[1]
    submit_in_v4(book, twice, round_)
    got = {}
    _, subs, _, _ = honest_round(
        book, nodes, round_, receipts=got, leave_out=twice.tx.account.address
    )
    finding = left_out(book, subs, *got[twice.tx.account.address], round_)
    with pytest.raises(LedgerRevert, match="a submission the root may leave out"):
        act_on(book, twice.tx.account, finding)


def test_a_receipted_quorum_left_uncredited_is_proven(world) -> None:
    """A vote-dropping aggregator: it gave receipts of a quorum of a batch's agreeing votes and
    posts a verdict root that leaves the batch uncredited (its lists hold: only the receipts show
    it). Whoever holds the receipted votes proves it, wherever the batch sorts (first, between,
    last, or in a round posted as crediting nothing): the verdict root is void and the prover
    takes half the bond. A vote without the aggregator's receipt, fewer votes than quorum, a
    place the batch does not sort into, a credited batch and one the v4 lane holds prove
    nothing."""
    swarm, nodes, book = world
    prover = stranger(book)
    round_ = ROUND
    for place in (0, 2, 3, None):  # None: the aggregator posts the no-credit root
        got: dict[str, list[tuple[Signed, str]]] = {}
        aggregator, subs, credits, votes = honest_round(book, nodes, round_, vote_receipts=got)
        dropped = subs.signed[0 if place is None else place].signer
        if place is None:
            verdicts = None
            swarm.goto(book.window("verdictRound", round_))
            book.send(aggregator.tx.account, "postVerdicts", round_, NO_CREDITS_ROOT, 0, 0, LIST)
        else:
            kept = [(c, v) for c, v in zip(credits, votes, strict=True) if c.producer != dropped]
            verdicts = VerdictRoot([c for c, _ in kept], votes=[v for _, v in kept])
            post_verdicts(book, aggregator, verdicts, round_)
            assert audit(book, subs, verdicts, round_=round_) is None  # its lists hold
            # a batch it credits: no proof of it
            credited = subs.signed[1].signer  # (place is never 1)
            assert uncredited(book, subs, verdicts, got[credited], round_) is None
        finding = uncredited(book, subs, verdicts, got[dropped], round_)
        assert finding is not None and finding.args[1] == (place or 0)
        if place == 2:
            ordered = sorted(got[dropped], key=lambda vr: int(vr[0].signer, 16))
            args = list(finding.args)
            # a receipt another key signed binds nobody
            other = ReceiptSigner(book.domain, nodes[6].tx.account.key).sign(ordered[0][0])
            bad = [bytes.fromhex(other[2:]), *args[5][1:]]
            with pytest.raises(LedgerRevert, match="no receipt"):
                book.send(prover, "proveUncredited", *args[:5], bad, args[6])
            # a receipt binds its voter: the checkers re-scored the batch alike, so their votes
            # are one message, and one checker's receipt must not pass for another's (a checker
            # that never sent its vote would fake a quorum with a receipt the relay made public)
            assert ordered[0][0].message == ordered[1][0].message
            borrowed = [args[5][0], args[5][0], *args[5][2:]]
            with pytest.raises(LedgerRevert, match="no receipt"):
                book.send(prover, "proveUncredited", *args[:5], borrowed, args[6])
            # fewer votes than quorum
            with pytest.raises(LedgerRevert, match="fewer votes than quorum"):
                book.send(prover, "proveUncredited", *args[:4], args[4][1:], args[5][1:], args[6])
            # leaves it does not sort between (the first two credits sort below it)
            assert verdicts is not None
            low = [
                (round_, p, verdicts.credits[p].struct(), verdicts.amounts[p], verdicts.proof(p))
                for p in (0, 1)
            ]
            with pytest.raises(LedgerRevert, match="the batch may be credited"):
                book.send(prover, "proveUncredited", *args[:6], low)
            with pytest.raises(LedgerRevert, match="the batch may be credited"):
                book.send(prover, "proveUncredited", *args[:6], [])
            # and only the judge has the book void a verdict root on its word
            with pytest.raises(LedgerRevert, match="NotTheJudge"):
                book.send(prover, "voidVerdicts", round_, "a lie nobody proved", prover.address)
        lie = "a receipted quorum left uncredited"
        round_ = proven_and_paid(book, prover, finding, lie, round_)

    # a batch of a producer that submitted the round in the v4 lane too is the v4 lane's to pay
    twice = nodes[0]
    submit_in_v4(book, twice, round_)
    got = {}
    aggregator, subs, credits, votes = honest_round(book, nodes, round_, vote_receipts=got)
    mine = twice.tx.account.address
    kept = [(c, v) for c, v in zip(credits, votes, strict=True) if c.producer != mine]
    verdicts = VerdictRoot([c for c, _ in kept], votes=[v for _, v in kept])
    post_verdicts(book, aggregator, verdicts, round_)
    finding = uncredited(book, subs, verdicts, got[mine], round_)
    assert finding is not None  # (this auditor was not told of the v4 lane)
    with pytest.raises(LedgerRevert, match="a batch of the v4 lane"):
        act_on(book, prover, finding)


def expected_draw(book, round_: int, slots: list[tuple[str, int]]) -> tuple[str | None, list]:
    """The draw AggregatorDraw must make of `round_`, computed here from its request's block
    hash, and the slots it tried: `slots` are as many as the request counted, each (node, the
    block it enlisted or moved in) as at the draw (a gone slot's block past any request), all
    still registered."""
    _, drawn, requested = book.aggregators.functions.drawOf(round_).call()
    assert drawn
    seed = book.swarm.w3.eth.get_block(requested)["hash"]
    tried = []
    for t in range(4):  # AggregatorDraw.TRIES
        at = keccak256(abi_encode(["bytes32", "uint64", "uint256"], [seed, round_, t]))
        tried.append(int.from_bytes(at, "big") % len(slots))
        node, since = slots[tried[-1]]
        if since <= requested:
            return node, tried
    return None, tried


def test_only_the_drawn_aggregator_posts_once_in_its_window_with_the_bond(world) -> None:
    """The attack: a rival posts the round's submission root first, leaving out every producer
    that holds the real aggregator's receipts, whom no receipt then protects (their v4 window is
    closed). Now only the round's drawn aggregator may post; a rival, enlisted or not, is
    refused, and the producers knew whose receipt to wait for while they could still fall back."""
    swarm, nodes, book = world
    subs = SubmissionRoot(sign_submissions(book, nodes[:2]))
    args = (ROUND, subs.root, 2, LIST)
    with pytest.raises(LedgerRevert, match="NotInPostWindow"):
        book.send(nodes[4].tx.account, "postSubmissions", *args, value=BOND)
    with pytest.raises(LedgerRevert, match="NotARegisteredNode"):
        book.draw_send(stranger(book), "enlist")
    book.enlist(nodes[4].tx.account)
    book.enlist(nodes[5].tx.account)
    with pytest.raises(LedgerRevert, match="AlreadyEnlisted"):
        book.enlist(nodes[4].tx.account)
    with pytest.raises(LedgerRevert, match="NotEnlisted"):
        book.draw_send(nodes[6].tx.account, "resign")
    current = swarm.ledger.current_round()
    with pytest.raises(LedgerRevert, match="DrawNotOpen"):  # at most one round ahead
        book.draw_send(nodes[6].tx.account, "draw", current + 2)
    book.draw_send(nodes[6].tx.account, "draw", ROUND)  # anyone may request it, and draw it
    assert book.aggregators.functions.drawOf(ROUND).call()[1] is False
    book.draw_send(nodes[6].tx.account, "draw", ROUND)
    drawn, _, _ = book.aggregators.functions.drawOf(ROUND).call()
    addresses = [n.tx.account.address for n in nodes[4:6]]
    assert drawn in addresses
    rival = nodes[4 + (1 - addresses.index(drawn))]
    ours = nodes[4 + addresses.index(drawn)]

    swarm.goto(book.window("postRound"))
    for who in (rival.tx.account, stranger(book)):
        with pytest.raises(LedgerRevert, match="NotTheDrawnAggregator"):
            book.send(who, "postSubmissions", *args, value=BOND)
    with pytest.raises(LedgerRevert, match="WrongBond"):
        book.send(ours.tx.account, "postSubmissions", *args, value=BOND - 1)
    book.send(ours.tx.account, "postSubmissions", *args, value=BOND)
    with pytest.raises(LedgerRevert, match="AlreadyPosted"):
        book.send(ours.tx.account, "postSubmissions", *args, value=BOND)
    swarm.goto(book.window("verdictRound"))
    with pytest.raises(LedgerRevert, match="NotTheAggregator"):
        book.send(rival.tx.account, "postVerdicts", ROUND, b"\x01" * 32, 1, 1, LIST)


def test_a_drawn_aggregator_that_receipts_and_posts_no_root_loses_its_roster_bond(world) -> None:
    """The attack: the round's drawn aggregator receipts its producers' submissions (so they wait
    for its root, and their ledger window closes) and posts nothing: with no root, no
    `proveLeftOut` reaches it. Its receipt and the signed submission prove it from the round after
    the post round: half its roster bond to the prover, half to the book's pool, and it is off
    the roster. A receipt of another key, or a root posted, proves nothing."""
    swarm, nodes, book = world
    producers, aggregator, rival = nodes[:2], nodes[4], nodes[5]
    book.draw_to(aggregator, ROUND)
    signed = sign_submissions(book, producers)
    receipt = ReceiptSigner(book.domain, aggregator.tx.account.key).sign(signed[0])
    args = (ROUND, submission_struct(signed[0]), receipt)
    prover = stranger(book)
    swarm.goto(book.window("postRound"))
    with pytest.raises(LedgerRevert, match="ChallengeWindowOpen"):  # its root may still come
        book.draw_send(prover, "proveUnposted", *args)
    swarm.goto(book.window("postRound") + 1)
    forged = ReceiptSigner(book.domain, rival.tx.account.key).sign(signed[0])
    with pytest.raises(LedgerRevert, match="not the aggregator's receipt"):
        book.draw_send(prover, "proveUnposted", ROUND, submission_struct(signed[0]), forged)
    pool = book.contract.functions.rewardPool().call()
    before = book.swarm.w3.eth.get_balance(prover.address)
    result = book.draw_send(prover, "proveUnposted", *args)
    fee = result.gas_used * result.effective_gas_price
    assert book.swarm.w3.eth.get_balance(prover.address) == before - fee + BOND // 2
    assert book.contract.functions.rewardPool().call() == pool + BOND - BOND // 2
    assert not book.aggregators.functions.enlisted(aggregator.tx.account.address).call()
    with pytest.raises(LedgerRevert, match="NothingOwed"):
        book.draw_send(aggregator.tx.account, "withdrawBond")
    # enlisted again with a new bond (a restarted service): the round is paid for once
    book.enlist(aggregator.tx.account)
    with pytest.raises(LedgerRevert, match="proven already"):
        book.draw_send(prover, "proveUnposted", *args)
    # a receipt of its submission of another round proves nothing of this one
    other = sign_submissions(book, producers, ROUND + 1)[0]
    stray = ReceiptSigner(book.domain, aggregator.tx.account.key).sign(other)
    with pytest.raises(LedgerRevert, match="not a submission of the round"):
        book.draw_send(prover, "proveUnposted", ROUND, submission_struct(other), stray)
    swarm.goto(book.window("voteClose") + 1)  # C rounds after the post round: closed
    with pytest.raises(LedgerRevert, match="ChallengeWindowClosed"):
        book.draw_send(prover, "proveUnposted", *args)

    # a round whose root its drawn aggregator posted: nothing to prove; its bond comes back only
    # once it resigned and the last round drawn to it is past its proofs
    later = book.window("voteClose") + 1
    subs = SubmissionRoot(sign_submissions(book, producers, later))
    post_submissions(book, rival, subs, later)
    receipt = ReceiptSigner(book.domain, rival.tx.account.key).sign(subs.signed[0])
    swarm.goto(book.window("postRound", later) + 1)
    with pytest.raises(LedgerRevert, match="a round posted"):
        book.draw_send(prover, "proveUnposted", later, submission_struct(subs.signed[0]), receipt)
    with pytest.raises(LedgerRevert, match="StillEnlisted"):
        book.draw_send(rival.tx.account, "withdrawBond")
    book.draw_send(rival.tx.account, "resign")
    with pytest.raises(LedgerRevert, match="BondHeld"):
        book.draw_send(rival.tx.account, "withdrawBond")
    swarm.goto(book.aggregators.functions.heldUntil(rival.tx.account.address).call() + 1)
    book.draw_send(rival.tx.account, "withdrawBond")
    assert book.aggregators.functions.bondOf(rival.tx.account.address).call() == 0


def test_the_draw_counts_only_who_was_enlisted_at_its_request(world) -> None:
    """The attack: a node that sees the draw's block hash moves onto the slot it falls on. A draw
    counts only the slots of its request and the nodes enlisted by its block: a node that
    resigns moves the roster's last into its slot as enlisted anew, and a slot gone (past the
    shrunk roster) or taken after the request is passed over (four tries, then no aggregator:
    the round's producers submit on the ledger). Each round here the first node resigns after
    the request, moving the last under the draw, and enlists again at the end; the draw counts
    the request's three slots, not the two left when it is made."""
    swarm, nodes, book = world
    accounts = [n.tx.account for n in (nodes[4], nodes[6], nodes[1])]
    since: dict[str, int] = {}
    for a in accounts:
        book.enlist(a)
        since[a.address] = swarm.w3.eth.block_number
    by_address = {a.address: a for a in accounts}
    passed_over, nobody = 0, 0
    round_ = swarm.ledger.current_round()
    # until a try fell on a moved or gone slot twice, and a draw found nobody once (all four
    # tries on those two slots: (2/3)^4 a round, so 0.8^n of not yet)
    while passed_over < 2 or not nobody:
        round_ += 1
        assert round_ < 80, "the draw never fell on a moved or gone slot"
        swarm.goto(round_)
        roster = book.aggregators.functions.roster().call()
        first, moved = roster[0], roster[-1]
        book.draw_send(by_address[roster[1]], "draw", round_)  # the request: three slots
        book.draw_send(by_address[first], "resign")  # the last moves into slot 0, anew
        since[moved] = swarm.w3.eth.block_number
        slots = [(a, since[a]) for a in book.aggregators.functions.roster().call()]
        slots.append((None, 1 << 62))  # slot 2: gone since the request
        book.draw_send(by_address[roster[1]], "draw", round_)
        drawn, _, _ = book.aggregators.functions.drawOf(round_).call()
        expected, tried = expected_draw(book, round_, slots)
        assert (None if int(drawn, 16) == 0 else drawn) == expected
        assert drawn not in (moved, first)
        passed_over += bool({0, 2} & set(tried[: tried.index(1) if 1 in tried else 4]))
        nobody += expected is None
        book.enlist(by_address[first])  # back, at the end
        since[first] = swarm.w3.eth.block_number


def test_a_withheld_leaf_is_asked_for_on_chain_and_silence_costs_the_bond(world) -> None:
    """A stranger who cannot get a leaf challenges the aggregator to post it: the honest answer
    puts the leaf in an event (and takes the challenge bond for its gas), and the bond waits for
    it; an unanswered challenge voids the root, returns the challenger's bond with half the
    aggregator's, and the pool gets the rest."""
    swarm, nodes, book = world
    aggregator, subs, credits, votes = honest_round(book, nodes)
    prover = stranger(book)
    book.send(prover, "challengeData", ROUND, False, 2, value=CHALLENGE_BOND)
    with pytest.raises(LedgerRevert, match="AlreadyChallenged"):
        book.send(prover, "challengeData", ROUND, False, 2, value=CHALLENGE_BOND)
    with pytest.raises(LedgerRevert, match="NotInRoot"):  # past the root's count
        book.send(prover, "challengeData", ROUND, False, 4, value=CHALLENGE_BOND)
    with pytest.raises(LedgerRevert, match="NotInRoot"):  # a leaf not at its index
        book.send(
            aggregator.tx.account,
            "answerSubmission",
            ROUND,
            2,
            submission_struct(subs.signed[1]),
            subs.proof(1),
        )
    before = swarm.w3.eth.get_balance(aggregator.tx.account.address)
    result = book.send(
        aggregator.tx.account,
        "answerSubmission",
        ROUND,
        2,
        submission_struct(subs.signed[2]),
        subs.proof(2),
    )
    gas = result.gas_used * result.effective_gas_price
    assert swarm.w3.eth.get_balance(aggregator.tx.account.address) - before + gas == CHALLENGE_BOND
    receipt = swarm.w3.eth.get_transaction_receipt(result.tx_hash)
    answered = book.contract.events.DataAnswered().process_receipt(receipt, errors=DISCARD)
    assert len(answered) == 1 and answered[0].args["index"] == 2
    assert subs.signed[2].signer.lower()[2:] in answered[0].args["leaf"].hex()

    verdicts = VerdictRoot(credits)
    post_verdicts(book, aggregator, verdicts)
    book.send(prover, "challengeData", ROUND, True, 1, value=CHALLENGE_BOND)
    with pytest.raises(LedgerRevert, match="AnswerWindowOpen"):
        book.send(prover, "claimUnanswered", ROUND, True, 1)
    swarm.goto(book.window("challengeEnd") + 1)
    with pytest.raises(LedgerRevert, match="ChallengesOpen"):  # the bond waits for the answer
        book.send(aggregator.tx.account, "release", ROUND)
    with pytest.raises(LedgerRevert, match="AnswerWindowClosed"):  # too late now
        book.send(
            aggregator.tx.account,
            "answerCredit",
            ROUND,
            1,
            credits[1].struct(),
            verdicts.amounts[1],
            verdicts.proof(1),
            votes[1],
        )
    before = balances(book, prover.address)
    result = book.send(prover, "claimUnanswered", ROUND, True, 1)
    after = balances(book, prover.address)
    gas = result.gas_used * result.effective_gas_price
    assert after[0] - before[0] + gas == CHALLENGE_BOND + BOND // 2
    assert after[1] - before[1] == BOND - BOND // 2
    assert lies(book, result) == ["data withheld"]
    assert book.view()[9], "the verdict root is void"
    with pytest.raises(LedgerRevert, match="BondForfeited"):
        book.send(aggregator.tx.account, "release", ROUND)


def test_an_aggregator_must_post_a_verdict_root_even_of_no_credit(world) -> None:
    """An aggregator that posts a submission root and then no verdict root takes the round from
    its producers: asking for its bond back then voids the round instead, half the bond to
    whoever asked. A round in which no batch reached its quorum is posted as the no-credit root
    (0 credits, a total of 0): it stands, nothing in it can be challenged, and its bond comes
    back."""
    swarm, nodes, book = world
    aggregator = nodes[4]
    subs = SubmissionRoot(sign_submissions(book, nodes[:3]))
    post_submissions(book, aggregator, subs)
    swarm.goto(book.window("challengeEnd") + 1)  # its verdict round passed without a post
    caller = stranger(book)
    before = balances(book, caller.address)
    result = book.send(caller, "release", ROUND)
    assert_paid_for(book, caller, before, "no verdict root", result)

    later = swarm.ledger.current_round()
    subs = SubmissionRoot(sign_submissions(book, nodes[:3], later))
    post_submissions(book, aggregator, subs, later)
    swarm.goto(book.window("verdictRound", later))
    agg = aggregator.tx.account
    for root, total in ((bytes(32), 0), (digest("not the no-credit root"), 0)):
        with pytest.raises(LedgerRevert, match="EmptyRoot"):
            book.send(agg, "postVerdicts", later, root, 0, total, LIST)
    with pytest.raises(LedgerRevert, match="EmptyRoot"):  # no credit carries no signal
        book.send(agg, "postVerdicts", later, NO_CREDITS_ROOT, 0, 5, LIST)
    book.send(agg, "postVerdicts", later, NO_CREDITS_ROOT, 0, 0, bytes(32))
    with pytest.raises(LedgerRevert, match="NotInRoot"):  # no leaf of it to ask for
        book.send(caller, "challengeData", later, True, 0, value=CHALLENGE_BOND)
    swarm.goto(book.window("challengeEnd", later) + 1)
    book.send(caller, "fund", value=ETH)  # the pool holds pay, but a root of no credit earns none
    before = swarm.w3.eth.get_balance(agg.address)
    result = book.send(agg, "release", later)
    gas = result.gas_used * result.effective_gas_price
    assert swarm.w3.eth.get_balance(agg.address) - before + gas == BOND


def test_a_tree_no_leaf_can_be_proven_in_is_void_once_challenged(world) -> None:
    """A submission root built with amounts where the book expects none: no leaf of it reaches
    the root as the book checks it, so no lie in it could be proven; challenged, the aggregator
    cannot answer either, and silence voids it."""
    swarm, nodes, book = world
    producers, aggregator = nodes[:3], nodes[4]
    signed = sign_submissions(book, producers)
    crooked = SumTree([leaf(submission_leaf(s).hash, 1) for s in signed])
    swarm.goto(book.window("postRound"))
    book.draw_to(aggregator)
    book.send(
        aggregator.tx.account,
        "postSubmissions",
        ROUND,
        crooked.root.hash,
        3,
        LIST,
        value=BOND,
    )
    prover = stranger(book)
    book.send(prover, "challengeData", ROUND, False, 0, value=CHALLENGE_BOND)
    proof = [n.as_abi() for n in crooked.proof(0)]
    with pytest.raises(LedgerRevert, match="NotInRoot"):
        book.send(
            aggregator.tx.account,
            "answerSubmission",
            ROUND,
            0,
            submission_struct(signed[0]),
            proof,
        )
    swarm.advance(2)
    result = book.send(prover, "claimUnanswered", ROUND, False, 0)
    assert lies(book, result) == ["data withheld"] and book.view()[8]


def test_a_submission_credited_twice_is_proven_by_its_two_neighbours(world) -> None:
    _, nodes, book = world
    aggregator, subs, credits, votes = honest_round(book, nodes)
    doubled = [credits[0], credits[1], credits[1], credits[2], credits[3]]
    verdicts = VerdictRoot(doubled, votes=[votes[0], votes[1], votes[1], votes[2], votes[3]])
    post_verdicts(book, aggregator, verdicts)
    prover = stranger(book)
    with pytest.raises(LedgerRevert, match="NoLie"):  # 0 and 1 are in order
        book.send(
            prover,
            "proveCreditsUnsorted",
            ROUND,
            0,
            doubled[0].struct(),
            doubled[0].signal,
            verdicts.proof(0),
            doubled[1].struct(),
            doubled[1].signal,
            verdicts.proof(1),
        )
    finding = audit(book, subs, verdicts)  # each credit holds alone; the second is a double
    assert finding is not None and finding.function == "proveCreditsUnsorted"
    assert finding.args[1] == 1
    before = balances(book, prover.address)
    receipt = act_on(book, prover, finding)
    assert_paid_for(book, prover, before, "credits out of order", receipt)


def test_past_the_count_a_tree_is_empty_or_its_root_is_void(world) -> None:
    """Every proof is as long as the posted count makes the tree deep, and a position past the
    count is answered by showing it empty: a credit hidden there (its signal in the total, its
    leaf never shown) voids the root once anyone asks for that position."""
    swarm, nodes, book = world
    aggregator, _, credits, votes = honest_round(book, nodes)
    honest = VerdictRoot(credits[:3])  # 3 credits: a tree of 4 positions, the last empty
    post_verdicts(book, aggregator, honest)
    prover = stranger(book)
    book.send(prover, "challengeData", ROUND, True, 3, value=CHALLENGE_BOND)
    with pytest.raises(LedgerRevert, match="NotInRoot"):  # 4 positions: there is no 4th index
        book.send(prover, "challengeData", ROUND, True, 4, value=CHALLENGE_BOND)
    book.send(aggregator.tx.account, "answerEmpty", ROUND, True, 3, honest.proof(3))
    assert book.view()[11] == 0, "no challenge left open"

    # a later round: 4 credits posted, a fifth hidden past them (and in the total)
    round_ = book.window("verdictRound")  # its post window is still ahead
    signed = sign_submissions(book, nodes[:4], round_=round_)
    subs2 = SubmissionRoot(signed)
    swarm.goto(book.window("postRound", round_))
    book.draw_to(aggregator, round_)
    count = len(subs2.signed)
    book.send(aggregator.tx.account, "postSubmissions", round_, subs2.root, count, LIST, value=BOND)
    hidden = VerdictRoot([*credits, credits[0]], presorted=True)  # 5 leaves: 8 positions
    swarm.goto(book.window("verdictRound", round_))
    book.send(aggregator.tx.account, "postVerdicts", round_, hidden.root, 4, hidden.total, LIST)
    book.send(prover, "challengeData", round_, True, 0, value=CHALLENGE_BOND)
    with pytest.raises(LedgerRevert, match="NotInRoot"):  # its proofs are one level too long
        book.send(
            aggregator.tx.account,
            "answerCredit",
            round_,
            0,
            credits[0].struct(),
            credits[0].signal,
            hidden.proof(0),
            votes[0],
        )
    swarm.advance(2)
    result = book.send(prover, "claimUnanswered", round_, True, 0)
    assert lies(book, result) == ["data withheld"] and book.view(round_)[9]


def test_a_challenger_that_refuses_payment_cannot_block_its_challenge(world) -> None:
    """A challenger contract whose receive() reverts: the close of its unanswered challenge
    still voids the root (anyone may send it), and what it is paid waits for it to withdraw."""
    swarm, nodes, book = world
    honest_round(book, nodes)
    refusing = deploy_artifact(swarm, "RefusingChallenger", book.contract.address)
    contract = swarm.w3.eth.contract(
        address=refusing, abi=load_artifact("RefusingChallenger")["abi"]
    )
    call = contract.functions.challenge(ROUND, False, 1)
    TxSender(swarm.w3, swarm.deployer, ErrorDecoder(book.contract.abi)).send(
        {"to": refusing, "data": call._encode_transaction_data(), "value": CHALLENGE_BOND},
        "challenge",
    )
    swarm.advance(2)
    result = book.send(stranger(book), "claimUnanswered", ROUND, False, 1)
    assert lies(book, result) == ["data withheld"] and book.view()[8]
    owed = BOND // 2 + CHALLENGE_BOND
    assert book.contract.functions.owed(refusing).call() == owed
    assert swarm.w3.eth.get_balance(refusing) == 0
    collect = contract.functions.collect()._encode_transaction_data()
    TxSender(swarm.w3, swarm.deployer, ErrorDecoder(book.contract.abi)).send(
        {"to": refusing, "data": collect, "value": 0}, "collect"
    )
    assert swarm.w3.eth.get_balance(refusing) == owed
    assert book.contract.functions.owed(refusing).call() == 0


def lone_ledger_batch(book: Book, nodes, round_: int = ROUND):
    """nodes[5] submits a batch of `round_` on the ledger (none of the book's producers), and Q
    of its seated checkers vote it credited there. Returns the node."""
    swarm, alone = book.swarm, nodes[5]
    address = alone.tx.account.address
    alone.submit(round_, digest(f"alone in v4 in {round_}"), 8, 4 * SCORE_SCALE, SCORE_SCALE)
    swarm.await_beacon(round_, address)
    seated = [n for n in nodes if swarm.ledger.seats_of(round_, address, n.tx.account.address)]
    for checker in [n for n in seated if n is not alone][:Q]:
        checker.attest(round_, address, 4 * SCORE_SCALE, SCORE_SCALE)
    return alone


def two_rounds(book: Book, nodes, lie=None, ledger_total: int = 0):
    """Round 0, then round `lag` (the first for which round 0 is settled), each crediting the
    same four producers; the second's credits carry their earnings in round 0 (`lie` may
    rewrite them before the root is posted), whose share is over `ledger_total` (what the
    ledger credited in round 0) and the book's total. Returns the aggregator, the book of
    earnings folded to round 0, the second round's submission root and its verdicts."""
    lag = book.contract.functions.lag().call()
    earned = EarningsBook(book.swarm.params.reward_per_round, lag)
    aggregator, _, credits0, votes0 = honest_round(book, nodes, 0)
    first = VerdictRoot(credits0, votes=votes0)
    post_verdicts(book, aggregator, first, 0)
    for r in range(lag):  # folded as they stand (round 0 stands when round lag's root is due)
        earned.fold(r, first if r == 0 else None, ledger_total if r == 0 else 0)
    _, subs, credits1, votes1 = honest_round(
        book, nodes, lag, earnings=lambda p: earned.earnings(p, lag)
    )
    second = VerdictRoot(credits1, votes=votes1)
    assert all(c.earnings.anchor == 0 for c in second.credits)  # every producer earned in 0
    if lie is not None:
        second = VerdictRoot([lie(c, first) for c in credits1], votes=votes1)
    post_verdicts(book, aggregator, second, lag)
    return aggregator, earned, subs, second


def test_a_producer_claims_all_it_earned_with_one_proof_whenever_it_likes(world) -> None:
    """Two rounds lag apart: the second round's credits carry what the first paid (anchored to
    it), and a producer claims each round's share once, or both at once from the second."""
    swarm, nodes, book = world
    lag = book.contract.functions.lag().call()
    reward = swarm.params.reward_per_round
    book.send(stranger(book), "fund", value=5 * ETH)
    _, earned, subs, second = two_rounds(book, nodes)
    assert audit(book, subs, second, lag, earned) is None  # the earnings hold
    later = lag
    first_total = earned.totals[0]
    assert swarm.ledger.current_round() == book.window("challengeEnd", 0) + 2  # 0 stands now
    for r in range(lag, later + 1):
        earned.fold(r, second if r == later else None, 0)
    p, q = nodes[0], nodes[1]
    own = earned.entry(p.tx.account.address, 0)
    share0 = earned.share(own)
    receipt = claim(book, p, own)
    assert paid_by(book, receipt) == share0 == reward * own.credit.signal // first_total > 0
    with pytest.raises(LedgerRevert, match="ClaimTooSoon"):  # nothing new, and too soon
        claim(book, p, earned.entry(p.tx.account.address, 0))
    with pytest.raises(LedgerRevert, match="NotSettled"):  # round `later` does not stand yet
        claim(book, p, earned.entry(p.tx.account.address, later))
    swarm.goto(book.window("challengeEnd", later) + 2)
    with pytest.raises(LedgerRevert, match="NotTheProducer"):
        claim(book, q, earned.entry(p.tx.account.address, later))
    share1 = earned.share(earned.entry(p.tx.account.address, later))
    receipt = claim(book, p, earned.entry(p.tx.account.address, later))
    assert paid_by(book, receipt) == share1  # what round 0 paid is counted once
    assert book.contract.functions.paidOf(p.tx.account.address).call() == [
        share0 + share1,
        later + 1,
    ]
    # a producer that never claimed takes both rounds with one proof
    address = q.tx.account.address
    receipt = claim(book, q, earned.entry(address, later))
    assert paid_by(book, receipt) == earned.due(address, later) > share1
    print(f"claim gas: {receipt.gas_used:,}")


def test_both_lanes_split_one_reward_a_round(world) -> None:
    """The attack: in a round whose batches go through the book, a producer submits on the
    ledger instead (force inclusion, always open), where it is alone, to take the round's whole
    reward, as many times what the book pays each of its producers. Both lanes now split one
    reward over the signal both credited: the ledger pays its lone batch at the book's rate,
    only once the book has decided the round, and the two lanes pay the round's reward once."""
    swarm, nodes, book = world
    ledger, reward = swarm.ledger, swarm.params.reward_per_round
    lag = book.contract.functions.lag().call()
    book.send(stranger(book), "fund", value=5 * ETH)
    assert ledger.current_round() == ROUND  # early in it: the book's producers sign mid-round
    alone = lone_ledger_batch(book, nodes)
    alone.fund(5 * ETH)
    address = alone.tx.account.address
    aggregator, _, credits, votes = honest_round(book, nodes)
    verdicts = VerdictRoot(credits, votes=votes)
    post_verdicts(book, aggregator, verdicts)

    # the ledger's round is final, the book's not decided yet: the lone batch waits for it
    swarm.goto(ledger.params().final_after(ROUND) + 1)
    assert swarm.ledger.round_info(ROUND).final
    assert book.contract.functions.standingTotal(ROUND).call() == [False, 0]
    assert ledger.claimable(address, [ROUND]) == 0
    with pytest.raises(LedgerRevert, match="RoundNotFinal"):
        alone.claim([ROUND])

    # nor once the book's challenge window closed: a challenge of its last round may still go
    # unanswered and void the root
    swarm.goto(book.window("challengeEnd", ROUND) + 1)
    assert book.contract.functions.standingTotal(ROUND).call() == [False, 0]
    with pytest.raises(LedgerRevert, match="RoundNotFinal"):
        alone.claim([ROUND])
    # the aggregator's pay comes with its bond: postPayBps of the round's reward for the share
    # of the round's signal its root credits (one that left every batch to the ledger: none)
    whole = ledger.round_info(ROUND).total_credited + verdicts.total
    bps = book.contract.functions.postPayBps().call()
    pay = reward * verdicts.total // whole * bps // 10_000
    before = swarm.w3.eth.get_balance(aggregator.tx.account.address)
    result = book.send(aggregator.tx.account, "release", ROUND)
    gas = result.gas_used * result.effective_gas_price
    assert swarm.w3.eth.get_balance(aggregator.tx.account.address) - before + gas == BOND + pay
    assert 0 < pay < reward * bps // 10_000

    swarm.goto(book.window("challengeEnd", ROUND) + 2)
    assert book.contract.functions.standingTotal(ROUND).call() == [True, verdicts.total]
    v4_total = ledger.round_info(ROUND).total_credited
    assert v4_total == SCORE_SCALE  # the lone batch's signal
    whole = v4_total + verdicts.total
    before = ledger.node_info(address).total_paid
    claimed = alone.claim([ROUND])
    v4_paid = ledger.node_info(address).total_paid - before
    assert v4_paid == reward * SCORE_SCALE // whole  # not the whole reward (before: `reward`)
    assert ledger.submission(ROUND, address).paid == v4_paid
    earned = EarningsBook(reward, lag, folded=ROUND - 1)
    earned.fold(ROUND, verdicts, v4_total)
    book_paid = 0
    for producer in nodes[:4]:
        entry = earned.entry(producer.tx.account.address, ROUND)
        paid = paid_by(book, claim(book, producer, entry))
        assert paid == earned.share(entry) == reward * entry.amount // whole > 0
        book_paid += paid
    # one reward: what both lanes paid is the round's reward, less each payout's rounding
    assert reward - 5 <= v4_paid + book_paid <= reward
    print(f"lone v4 batch: {v4_paid / reward:.3f} of the round's reward (before: 1.000)")
    print(f"its ledger claim beside the book: {claimed.gas_used:,} gas")


@pytest.mark.parametrize("lie", [False, True], ids=["honest", "a-book-alone"])
def test_earnings_count_each_rounds_share_over_both_lanes(world, lie: bool) -> None:
    """Round 0 credits a lone batch on the ledger beside the book's four. The earnings that
    round `lag`'s credits carry count each producer's round-0 share over both lanes' signal:
    they hold against an auditor, and a claim pays what they say. An aggregator that folds
    round 0 as if the ledger had credited nothing there (each share over the book's signal
    alone) posts earnings that do not add up: an auditor finds them, and the proof voids the
    root and pays the prover."""
    swarm, nodes, book = world
    reward, lag = swarm.params.reward_per_round, book.contract.functions.lag().call()
    book.send(stranger(book), "fund", value=5 * ETH)
    lone_ledger_batch(book, nodes, 0)
    v4_total = swarm.ledger.round_info(0).total_credited
    assert v4_total == SCORE_SCALE

    def book_alone(credit: Credit, first: VerdictRoot) -> Credit:  # round 0's share over Tb
        amount = first.credits[credit.earnings.anchor_index].signal
        settled = reward * amount // first.total
        return replace(credit, earnings=replace(credit.earnings, settled=settled))

    _, earned, subs, second = two_rounds(book, nodes, book_alone if lie else None, v4_total)
    finding = audit(book, subs, second, lag, earned)
    if lie:
        assert finding is not None and finding.what == "earnings that do not add up"
        prover = stranger(book)
        before = balances(book, prover.address)
        receipt = act_on(book, prover, finding)
        assert_paid_for(book, prover, before, "earnings that do not add up", receipt, lag)
        return
    assert finding is None
    p = nodes[0]
    address = p.tx.account.address
    first_entry, book_total = earned.entry(address, 0), earned.totals[0]
    assert earned.share(first_entry) == reward * first_entry.amount // (book_total + v4_total)
    settled = next(c for c in second.credits if c.producer == address).earnings.settled
    assert settled == earned.share(first_entry)  # over both lanes: less than over the book's
    assert settled < reward * first_entry.amount // book_total
    swarm.goto(book.window("challengeEnd", lag) + 2)
    earned.fold(lag, second, swarm.ledger.round_info(lag).total_credited)
    receipt = claim(book, p, earned.entry(address, lag))
    assert (
        paid_by(book, receipt)
        == earned.due(address, lag)
        == settled + earned.share(earned.entry(address, lag))
    )


def test_the_pay_for_posting_is_the_books_own_and_never_above_the_reward(chain) -> None:
    """A deployment sets what its book pays an aggregator at a round's release (basis points of
    the round's reward); more than the reward is refused, by the client before it sends
    anything and by the contract itself (`sapo aggregate run` logs it before it enlists)."""
    swarm = Swarm(chain)
    with pytest.raises(ValueError, match="0 to 10,000 basis points"):
        deploy_book(swarm.ledger, swarm.deployer, BOND, CHALLENGE_BOND, post_pay_bps=10_001)
    with pytest.raises(LedgerRevert, match="PostPayAboveTheReward"):
        deploy_artifact(swarm, "RoundBook", swarm.ledger.address, BOND, CHALLENGE_BOND, 10_001)
    book, _ = deploy_book(swarm.ledger, swarm.deployer, BOND, CHALLENGE_BOND, post_pay_bps=250)
    assert book.contract.functions.postPayBps().call() == 250
    # and it pays that much: an honest round of four credits, released
    swarm, nodes, book = open_book(chain, post_pay_bps=250)
    reward = swarm.params.reward_per_round
    book.send(stranger(book), "fund", value=5 * ETH)
    aggregator, _, credits, votes = honest_round(book, nodes)
    post_verdicts(book, aggregator, VerdictRoot(credits, votes=votes))
    swarm.goto(book.window("challengeEnd") + 1)
    before = swarm.w3.eth.get_balance(aggregator.tx.account.address)
    receipt = book.send(aggregator.tx.account, "release", ROUND)
    gas = receipt.gas_used * receipt.effective_gas_price
    paid = swarm.w3.eth.get_balance(aggregator.tx.account.address) - before + gas - BOND
    assert paid == reward * 250 // 10_000  # the whole round's signal is in its root


def test_no_book_runs_beside_appeals_that_outlast_its_payouts(chain) -> None:
    """The book folds the ledger's total of a round into the aggregator's pay at the round's
    release, and into the earnings of the round it is settled for; with appeals longer than
    C + 2 rounds that total could still move, and the two lanes would no longer split one
    reward. The contract refuses such a ledger, and the client refuses it before sending
    anything."""
    swarm = Swarm(chain, appeal_rounds=5, unbonding_period_s=20_000)  # C = 2: at most 4
    with pytest.raises(LedgerRevert, match="AppealsOutlastTheBook"):
        deploy_artifact(
            swarm, "RoundBook", swarm.ledger.address, BOND, CHALLENGE_BOND, POST_PAY_BPS
        )
    sent = swarm.w3.eth.get_transaction_count(swarm.deployer.address)
    with pytest.raises(ValueError, match=r"more than challenge_rounds \+ 2"):
        deploy_book(swarm.ledger, swarm.deployer, BOND, CHALLENGE_BOND)
    assert swarm.w3.eth.get_transaction_count(swarm.deployer.address) == sent


def test_a_ledger_whose_named_book_is_something_else_pays_as_without_one(chain) -> None:
    """A ledger names its book before the book exists (its deployer's next contract). Where that
    transaction made something else, the ledger must not ask it for a round's total (the call
    would revert and lock every claim): only a book that bound itself from its constructor
    counts, and nobody else can bind one."""
    swarm = Swarm(chain)  # names the deployer's next contract as its book
    other = deploy_artifact(swarm, "SumTreeHarness")  # that contract: not a book
    assert swarm.ledger.book() == other
    producer, checker = swarm.node(), swarm.node()
    producer.fund(ETH)
    with pytest.raises(LedgerRevert, match="NotTheBook"):
        checker._send("bindBook")  # only a book sends it: no client method does
    address = producer.tx.account.address
    producer.submit(ROUND, digest("v4 beside no book"), 8, 4 * SCORE_SCALE, SCORE_SCALE)
    swarm.await_beacon(ROUND, address)
    checker.attest(ROUND, address, 4 * SCORE_SCALE, SCORE_SCALE)
    swarm.goto(swarm.ledger.params().final_after(ROUND) + 1)
    producer.claim([ROUND])  # alone in its round: the whole reward, as before any book
    assert swarm.ledger.node_info(address).total_paid == swarm.params.reward_per_round


def test_a_round_pays_nothing_until_it_stands(world) -> None:
    """A credit is paid only once nothing about its round can change: not in the round after its
    challenge window (a challenge opened in the window's last round may still go unanswered),
    not while a data challenge of it is open, and never once the round is void."""
    swarm, nodes, book = world
    lag = book.contract.functions.lag().call()
    book.send(stranger(book), "fund", value=5 * ETH)
    earned = EarningsBook(swarm.params.reward_per_round, lag)
    aggregator, _, credits, votes = honest_round(book, nodes, 0)
    verdicts = VerdictRoot(credits, votes=votes)
    post_verdicts(book, aggregator, verdicts, 0)
    earned.fold(0, verdicts, 0)
    p = nodes[0]
    entry = earned.entry(p.tx.account.address, 0)
    end = book.window("challengeEnd", 0)
    swarm.goto(end)
    challenger = stranger(book)
    book.send(challenger, "challengeData", 0, True, 0, value=CHALLENGE_BOND)
    for t in (end + 1, end + 2):  # the window closed; the challenge is open, then unanswered
        swarm.goto(t)
        with pytest.raises(LedgerRevert, match="NotSettled"):
            claim(book, p, entry)
    book.send(challenger, "claimUnanswered", 0, True, 0)
    assert book.view(0)[9]  # the verdict root is void
    with pytest.raises(LedgerRevert, match="NotSettled"):
        claim(book, p, entry)


def _skip(credit: Credit, first: VerdictRoot) -> Credit:  # as if round 0 had not paid it
    return replace(credit, earnings=NO_EARNINGS)


def _inflate(credit: Credit, first: VerdictRoot) -> Credit:
    return replace(credit, earnings=replace(credit.earnings, settled=credit.earnings.settled * 2))


def _borrow(credit: Credit, first: VerdictRoot) -> Credit:  # another producer's round-0 credit
    e = credit.earnings
    return replace(credit, earnings=replace(e, anchor_index=(e.anchor_index + 1) % 4))


def _reshape(credit: Credit, first: VerdictRoot) -> Credit:  # more recent credits than lag - 1
    e = credit.earnings
    return replace(credit, earnings=replace(e, recent=(*e.recent, *e.recent)))


@pytest.mark.parametrize(
    ("lie", "what"),
    [
        (_skip, "earnings that skip a credit"),
        (_inflate, "earnings that do not add up"),
        (_borrow, "an anchor that is not the producer's credit"),
    ],
)
def test_false_earnings_are_found_by_an_auditor_and_proven(world, lie, what) -> None:
    _, nodes, book = world
    lag = book.contract.functions.lag().call()
    _, earned, subs, second = two_rounds(book, nodes, lie)
    finding = audit(book, subs, second, lag, earned)
    assert finding is not None and finding.what == what
    prover = stranger(book)
    before = balances(book, prover.address)
    receipt = act_on(book, prover, finding)
    assert_paid_for(book, prover, before, what, receipt, lag)
    print(f"{what}: {receipt.gas_used:,} gas")


@pytest.mark.parametrize(
    ("lie", "what"),
    [
        (None, None),
        (_skip, "earnings that skip a credit"),
        (_inflate, "earnings that do not add up"),
        (_borrow, None),  # the anchor's credit is another producer's: not in its own history
        (_reshape, "earnings of the wrong shape"),
    ],
)
def test_a_producer_judges_its_own_earnings_from_its_own_credits_alone(world, lie, what) -> None:
    """What a node checks of its own credit (RootLane.audit): a book of its own credits only,
    with each round's standing, total and count, finds the lies of its earnings that its own
    credits prove (one of them left out, a sum that does not add up), and none in honest
    earnings; an anchor at another producer's credit it leaves to auditors that fold every
    credit of every round."""
    _, nodes, book = world
    lag = book.contract.functions.lag().call()
    _, earned, _, second = two_rounds(book, nodes, lie)
    me = nodes[0].tx.account.address
    own = EarningsBook(book.swarm.params.reward_per_round, lag)
    own.fold_entries(0, earned.totals[0], earned.counts[0], [earned.entry(me, 0)], 0)
    for r in range(1, lag):
        own.fold(r, None)
    assert not own.credits.keys() - {me.lower()}  # nobody else's credit
    [i] = [i for i, c in enumerate(second.credits) if c.producer == me]
    posted = BookRound.from_view(lag, book.view(lag))
    finding = auditor_of(book).earnings(posted, second, i, own)
    assert (finding.what if finding else None) == what
    if finding is not None:  # and the book takes the proof: the lie is real
        prover = stranger(book)
        before = balances(book, prover.address)
        assert_paid_for(book, prover, before, what, act_on(book, prover, finding), lag)


def test_a_claim_shows_the_credits_its_settled_earnings_do_not_count_yet(world) -> None:
    """Rounds 0 and 1 both credit a producer; round 1's earnings cannot count round 0 (it is not
    settled for it), so a claim from round 1 shows round 0's credit as its tail: paid once,
    and a tail naming a round twice, its own round or another producer's credit is refused."""
    swarm, nodes, book = world
    lag = book.contract.functions.lag().call()
    book.send(stranger(book), "fund", value=5 * ETH)
    earned = EarningsBook(swarm.params.reward_per_round, lag)
    aggregator, _, credits0, votes0 = honest_round(book, nodes, 0)
    _, _, credits1, votes1 = honest_round(book, nodes, 1, earnings=lambda p: earned.earnings(p, 1))
    rounds = [VerdictRoot(credits0, votes=votes0), VerdictRoot(credits1, votes=votes1)]
    assert all(c.earnings == NO_EARNINGS for c in rounds[1].credits)
    for r, verdicts in enumerate(rounds):
        post_verdicts(book, aggregator, verdicts, r)
    swarm.goto(book.window("challengeEnd", 1) + 2)
    for r, verdicts in enumerate(rounds):
        earned.fold(r, verdicts, 0)
    p = nodes[2]
    address = p.tx.account.address
    own, before = earned.entry(address, 1), earned.entry(address, 0)
    assert earned.tail(address, 1) == [before]
    other = next(e for e in earned.places.values() if e.round == 0 and e is not before)
    for tail in ([before, before], [own], [other]):
        with pytest.raises(LedgerRevert, match="BadTail"):
            claim(book, p, own, tail)
    receipt = claim(book, p, own, [before])
    assert (
        paid_by(book, receipt) == earned.share(own) + earned.share(before) == earned.due(address, 1)
    )
    print(f"claim with a tail of one: {receipt.gas_used:,} gas")
