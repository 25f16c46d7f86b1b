"""The aggregator's role as a node runs it (client/node/aggregation/service.py), on a real anvil
with the committed SwarmLedger and RoundBook, its endpoint served on loopback and spoken to over
real sockets, its lists published on a real js-ipfs daemon: round after round it collects the
producers' and checkers' signed messages, posts the submission root on the book's clock, draws
the beacon, posts the verdict root with each credit's earnings, answers a data challenge, takes
its bond back, and the producers claim what they earned; a round no batch reached its quorum in is
still posted (the no-credit root); a batch escalated to the ledger is left out of the verdict
root, whatever votes it held. Killed between the submission root and the verdict root, it
comes back from its store with every receipted message, and the roots it posts hold against
every auditor's check."""

from __future__ import annotations

from dataclasses import replace

import pytest

from client.chain.book import EscalationVote, RoundBook
from client.chain.events import EventReader
from client.chain.messages import Signed, Submission
from client.chain.roots import (
    NO_CREDITS_ROOT,
    NO_ROUND,
    SubmissionRoot,
    VerdictRoot,
    submission_struct,
)
from client.devnet import rpc_call
from client.node.aggregation.auditor import Auditor
from client.node.aggregation.service import Aggregator
from client.node.aggregation.watch import Watcher
from client.store import IpfsStore
from tests.harness.ledger_swarm import ETH
from tests.harness.roundbook import (
    BOND,
    CHALLENGE_BOND,
    Running,
    audit,
    claim,
    open_book,
    paid_by,
    seats,
    sign_submissions,
    signed_vote,
    stranger,
)

pytestmark = pytest.mark.slow


def collecting(world, daemon, tmp_path) -> tuple[Running, int]:
    """An aggregator started afresh, collecting the round it moved the chain to."""
    swarm, _, _ = world
    agg = Running(
        world, tmp_path / "aggregator.db", IpfsStore(daemon.api, index_dir=tmp_path / "index")
    )
    r = swarm.ledger.current_round() + 1
    swarm.goto(r)
    assert r in agg.service.tick().opened
    return agg, r


def post_and_draw(agg: Running, swarm, r: int) -> None:
    """The clock reaches round r's post round: the aggregator posts its submission root, and
    draws the beacon once the next block is mined."""
    swarm.goto(agg.service.windows.post_round(r))
    assert agg.service.tick().posted_submissions == [r]
    swarm.mine()
    assert agg.service.tick().drawn == [r]


def vote_on(agg: Running, book, nodes, sent, r: int) -> None:
    """Every seated checker of each submission in `sent` sends its agreeing vote over HTTP;
    the aggregator holds each."""
    for signed in sent:
        seated = seats(book, nodes, signed.signer, r)
        votes = [signed_vote(book, n, signed) for n in nodes if n.tx.account.address in seated]
        assert [a.refused for a in agg.client(book.domain).send(votes)] == [None] * len(votes)


@pytest.fixture
def world(chain):
    swarm, nodes, book = open_book(chain)
    book.send(swarm.deployer, "fund", value=10 * ETH)
    return swarm, nodes, book


def test_an_aggregator_runs_its_rounds_and_a_restart_loses_nothing(world, daemon, tmp_path):
    swarm, nodes, book = world
    store = IpfsStore(daemon.api, index_dir=tmp_path / "index")
    agg = Running(world, tmp_path / "aggregator.db", store)
    r = swarm.ledger.current_round() + 1
    swarm.goto(r)
    assert r in agg.service.tick().opened

    # the producers send their submissions over HTTP and keep the receipts
    producers = nodes[:4]
    sent = sign_submissions(book, producers, r)
    client = agg.client(book.domain)
    answers = client.send(sent)
    assert all(a.refused is None and a.receipt is not None for a in answers)

    windows = agg.service.windows
    post_and_draw(agg, swarm, r)
    subs = SubmissionRoot(sent)
    assert book.view(r)[3] == subs.root  # every receipted submission is in it

    # the seated checkers vote over HTTP; then the aggregator dies, votes and all on disk
    vote_on(agg, book, nodes, sent, r)
    agg.stop()
    agg = Running(world, tmp_path / "aggregator.db", store)
    assert r in agg.service.collectors and r in agg.service.submission_roots
    assert len(agg.service.collectors[r].votes) > 0

    # a submission now is refused (its root is posted), a vote still held (the close is later)
    late = sign_submissions(book, nodes[5:6], r)
    assert "closed" in (agg.client(book.domain).send(late)[0].refused or "")

    swarm.goto(windows.verdict_round(r))
    done = agg.service.tick()
    assert done.posted_verdicts == [r], done.skipped
    verdicts: VerdictRoot = agg.service.verdict_roots[r]
    assert {c.producer for c in verdicts.credits} == {s.signer for s in sent}
    assert audit(book, subs, verdicts, round_=r) is None  # every auditor check holds

    # a stranger asks for a credit on chain: the aggregator answers in its next pass
    asker = stranger(book)
    book.send(asker, "challengeData", r, True, 1, value=CHALLENGE_BOND)
    assert agg.service.tick().answered == [(r, True, 1)]
    assert book.view(r)[11] == 0  # no challenge open

    swarm.goto(windows.challenge_end(r) + 1)
    assert agg.service.tick().released == [r]
    swarm.goto(windows.challenge_end(r) + 2)
    assert r in agg.service.tick().folded  # it stands: its credits earn

    # what it folded survives a restart: it goes on from there, not from the book's first round
    folded = agg.service.earned
    agg.stop()
    agg = Running(world, tmp_path / "aggregator.db", store)
    assert agg.service.earned.folded == folded.folded and agg.service.earned.places == folded.places
    assert agg.service.earned.totals == folded.totals

    # each producer claims what the aggregator's book says it earned, with one proof
    for producer in producers:
        entry = agg.service.earned.entry(producer.tx.account.address, r)
        assert entry is not None
        assert paid_by(book, claim(book, producer, entry)) == agg.service.earned.share(entry)
    agg.stop()


def test_a_restart_before_any_root_still_posts_what_it_receipted(world, daemon, tmp_path):
    """Receipted in round r on a book nobody posted to yet, stopped, and started again a round
    later (the book's first round is then later than r): r's root still goes up in its post
    round, as its receipts bind it to (AggregatorDraw.proveUnposted would take its bond)."""
    swarm, nodes, book = world
    agg, r = collecting(world, daemon, tmp_path)
    sent = sign_submissions(book, nodes[:2], r)
    assert all(a.receipt is not None for a in agg.client(book.domain).send(sent))
    agg.stop()
    swarm.goto(r + 1)
    store = IpfsStore(daemon.api, index_dir=tmp_path / "index")
    agg = Running(world, tmp_path / "aggregator.db", store)
    swarm.goto(agg.service.windows.post_round(r))
    assert agg.service.tick().posted_submissions == [r]
    assert book.view(r)[3] == SubmissionRoot(sent).root
    agg.stop()


def test_a_round_drawn_to_an_aggregator_that_cannot_pay_its_post_is_not_collected(
    world, daemon, tmp_path
):
    """A receipt binds its aggregator to post (its roster bond otherwise), so a round drawn to
    one whose balance no longer holds the post's bond is not collected: its producers get no
    receipt, and go to the ledger."""
    swarm, nodes, book = world
    agg = Running(
        world, tmp_path / "aggregator.db", IpfsStore(daemon.api, index_dir=tmp_path / "index")
    )
    rpc_call(swarm.url, "anvil_setBalance", [agg.address, hex(BOND // 2)])
    r = swarm.ledger.current_round() + 1
    swarm.goto(r)
    done = agg.service.tick()
    assert r in done.drew and agg.service.drawn(r).names(agg.address) and r not in done.opened
    [answer] = agg.client(book.domain).send(sign_submissions(book, nodes[:1], r))
    assert answer.receipt is None and "not collected here" in (answer.refused or "")
    agg.stop()


def test_a_message_the_store_cannot_write_is_refused_not_receipted(world, daemon, tmp_path):
    """A receipt is a promise to post: given only once the message is on disk. A store that
    cannot write (its file made read-only under it) refuses, and the sender may send again."""
    _, nodes, book = world
    agg, r = collecting(world, daemon, tmp_path)
    agg.held._db.execute("PRAGMA query_only = ON")  # writes now fail, as on a full disk
    [signed] = sign_submissions(book, nodes[:1], r)
    [answer] = agg.client(book.domain).send([signed])
    assert answer.receipt is None and "send it again" in (answer.refused or "")
    assert not agg.service.collectors[r].submissions
    agg.held._db.execute("PRAGMA query_only = OFF")
    [answer] = agg.client(book.domain).send([signed])
    assert answer.refused is None and answer.receipt is not None
    assert [s.signer for s in agg.held.messages(r)] == [signed.signer]
    agg.stop()


def test_a_round_no_batch_reached_is_posted_as_no_credit_and_its_bond_comes_back(
    world, daemon, tmp_path
):
    """No checker votes: the aggregator still posts a verdict root (the no-credit root), since
    a round without one is void at release; the round folds with no credit and the bond comes
    back."""
    swarm, nodes, book = world
    agg, r = collecting(world, daemon, tmp_path)
    assert all(
        a.receipt for a in agg.client(book.domain).send(sign_submissions(book, nodes[:3], r))
    )
    windows = agg.service.windows
    swarm.goto(windows.post_round(r))
    assert agg.service.tick().posted_submissions == [r]
    swarm.goto(windows.verdict_round(r))
    assert agg.service.tick().posted_verdicts == [r]
    view = book.view(r)
    assert view[4] == NO_CREDITS_ROOT and view[5] == 0 and view[6] == 0
    swarm.goto(windows.challenge_end(r) + 2)
    done = agg.service.tick()
    assert done.released == [r] and r in done.folded
    assert not agg.service.earned.standing(r)  # nothing of it earns
    agg.stop()


def test_a_batch_escalated_after_its_votes_came_is_left_out_of_the_verdict_root(
    world, daemon, tmp_path
):
    """The aggregator holds Q agreeing votes on a batch, then one of its seated checkers
    escalates it (it disputes it after all): the batch is the ledger's now, and the verdict root
    the service posts leaves it out, which every auditor check, the ledger's lane read too,
    holds against. The checker signed an agreement and escalated a dispute, and another sent a
    second, different vote: the service proves both equivocations, and the ledger slashes
    each."""
    swarm, nodes, book = world
    agg, r = collecting(world, daemon, tmp_path)
    sent = sign_submissions(book, nodes[:4], r)
    assert all(a.receipt for a in agg.client(book.domain).send(sent))
    windows = agg.service.windows
    post_and_draw(agg, swarm, r)
    subs = SubmissionRoot(sent)
    vote_on(agg, book, nodes, sent, r)
    i = 2
    disputed = subs.signed[i]
    checker = next(
        n for n in nodes if n.tx.account.address in seats(book, nodes, disputed.signer, r)
    )
    leaf = submission_struct(disputed)
    disputes = EscalationVote(unavailable=False, score=0, signal=disputed.message.signal)
    book.send(checker.tx.account, "escalate", r, i, leaf, subs.proof(i), disputes.struct())
    # another voter, on another batch, signs a second vote with another score: refused, proven
    other = subs.signed[0]
    twice = next(
        n
        for n in nodes
        if n.tx.account.address in seats(book, nodes, other.signer, r) and n is not checker
    )
    second = signed_vote(book, twice, other, score=other.message.score - 1)
    [answer] = agg.client(book.domain).send([second])
    assert answer.refused and "second, different vote" in answer.refused
    stakes = {n: swarm.ledger.node_info(n.tx.account.address).active_stake for n in nodes}
    assert agg.service.tick().equivocations == [(r, other.signer, twice.tx.account.address)]
    swarm.goto(windows.verdict_round(r))
    done = agg.service.tick()
    assert done.posted_verdicts == [r], done.skipped
    assert done.equivocations == [(r, disputed.signer, checker.tx.account.address)]
    slash = swarm.params.slash_bps
    for n in (twice, checker):
        after = swarm.ledger.node_info(n.tx.account.address).active_stake
        assert after == stakes[n] - stakes[n] * slash // 10_000
    verdicts: VerdictRoot = agg.service.verdict_roots[r]
    credited = {c.producer for c in verdicts.credits}
    assert credited == {s.signer for s in sent} - {disputed.signer}
    assert audit(book, subs, verdicts, round_=r, v4={disputed.signer.lower()}) is None
    agg.stop()


def test_a_producer_that_signs_two_submissions_of_a_round_is_proven_and_slashed(
    world, daemon, tmp_path
):
    """One producer sends the aggregator a second, different submission of the round (refused:
    the first stands); another signs one to the aggregator and submits its digest on the
    ledger with another claim. The service proves each (RoundJudge.proveDoubleSubmission), the
    first once the submission root is posted, the second when it reads the ledger's lane before
    the verdict root; the ledger slashes both, and no one else."""
    swarm, nodes, book = world
    agg, r = collecting(world, daemon, tmp_path)
    sent = sign_submissions(book, nodes[:4], r)
    assert all(a.receipt for a in agg.client(book.domain).send(sent))
    twice, both_lanes = nodes[3], nodes[2]

    def another(signed: Signed, node) -> Signed:
        s = signed.message
        other = Submission(
            round=s.round, digest="0x" + "ee" * 32, rollouts=s.rollouts, score=0, signal=0
        )
        return Signed.sign(other, book.domain, node.tx.account.key)

    [answer] = agg.client(book.domain).send([another(sent[3], twice)])
    assert answer.refused and "second, different submission" in answer.refused
    # the same batch's digest on the ledger with another claim: a double submission too
    v4 = sent[2].message
    both_lanes.submit(r, v4.digest, v4.rollouts, v4.score - 1, v4.signal)
    stakes = {n: swarm.ledger.node_info(n.tx.account.address).active_stake for n in nodes}

    swarm.goto(agg.service.windows.post_round(r))
    done = agg.service.tick()
    assert done.posted_submissions == [r]
    assert done.equivocations == [(r, sent[3].signer, sent[3].signer)]
    swarm.goto(agg.service.windows.verdict_round(r))
    done = agg.service.tick()
    assert done.posted_verdicts == [r], done.skipped
    assert done.equivocations == [(r, sent[2].signer, sent[2].signer)]
    slash = swarm.params.slash_bps
    for n in nodes:
        after = swarm.ledger.node_info(n.tx.account.address).active_stake
        cut = stakes[n] * slash // 10_000 if n in (twice, both_lanes) else 0
        assert after == stakes[n] - cut
    agg.stop()


class InflatingAggregator(Aggregator):
    """An aggregator that writes into one credit of each verdict root with earnings 1 ETH more
    than its producer earned (a friend's, to be claimed from the book's pool)."""

    def posting(self, round_: int, verdicts: VerdictRoot) -> VerdictRoot | None:
        credits = list(verdicts.credits)
        for i, credit in enumerate(credits):
            if credit.earnings.anchor != NO_ROUND:
                inflated = replace(credit.earnings, settled=credit.earnings.settled + ETH)
                credits[i] = replace(credit, earnings=inflated)
                return VerdictRoot(credits, verdicts.amounts, votes=verdicts.votes, presorted=True)
        return verdicts


def test_a_watcher_folds_every_round_and_proves_a_friends_inflated_earnings(
    world, daemon, tmp_path
):
    """`sapo audit watch`'s Watcher: the aggregator credits round r honestly, then writes 1 ETH
    more into a producer's earnings in round r + lag, which no training node checks (each checks
    its own). The watcher audited round r as it was posted (every rule holds), kept its list,
    folded it once it stood, and proves the lie in round r + lag: the root is void, half the
    bond the watcher's."""
    swarm, nodes, book = world
    store = IpfsStore(daemon.api, index_dir=tmp_path / "index")
    agg = Running(world, tmp_path / "aggregator.db", store, InflatingAggregator)
    w = agg.service.windows
    # a credit's earnings are judged from the lag rounds up to its anchor: the watcher folds
    # from there (rounds nobody posted, void)
    r = swarm.ledger.current_round() + w.lag + 1
    swarm.goto(r)
    agg.service.tick()
    watcher_account = stranger(book)
    watcher = Watcher(
        swarm.ledger,
        RoundBook(swarm.w3, book.contract.address, account=watcher_account),
        IpfsStore(daemon.api, index_dir=tmp_path / "watcher-index"),
        Auditor.of(book.domain, swarm.ledger, swarm.params),
        since=r - w.lag,
        prove=True,
    )
    sent = sign_submissions(book, nodes[:4], r)
    assert all(a.receipt for a in agg.client(book.domain).send(sent))
    post_and_draw(agg, swarm, r)
    vote_on(agg, book, nodes, sent, r)
    r2 = r + w.lag  # its credits' earnings count round r
    swarm.goto(r2)
    agg.service.tick()
    later = sign_submissions(book, nodes[:4], r2)
    assert all(a.receipt for a in agg.client(book.domain).send(later))
    swarm.goto(w.verdict_round(r))
    assert r in agg.service.tick().posted_verdicts
    [honest] = watcher.tick()
    assert (honest.round, honest.finding, honest.judged) == (r, None, 4), honest.describe()
    assert r in watcher.lists  # kept for its fold: lists are pinned only through their window
    post_and_draw(agg, swarm, r2)
    vote_on(agg, book, nodes, later, r2)
    swarm.goto(w.challenge_end(r) + 1)
    agg.service.tick()
    swarm.goto(w.verdict_round(r2))
    assert r2 in agg.service.tick().posted_verdicts
    [lie] = watcher.tick()
    agg.stop()
    assert watcher.earned.folded == r  # round r stood, folded from the list its audit kept
    assert lie.round == r2 and lie.finding is not None and lie.tx_hash, lie.describe()
    assert lie.finding.what == "earnings that do not add up", lie.describe()
    reader = RoundBook(swarm.w3, book.contract.address)
    proven = [e.args for e in EventReader(reader).read(["LieProven"])]  # type: ignore[arg-type]
    assert [(int(a["round"]), a["prover"]) for a in proven] == [(r2, watcher_account.address)]
    assert reader.round_of(r2).void
