"""The root lane's RoundBook beside its SwarmLedger on anvil, as the tests drive it: a deployed
book, signed submissions and votes of the world's staked nodes, an honest round built by the
aggregator's own collector, the posts, the proofs an auditor's findings name, claims, and an
aggregator's service with its endpoint on loopback (`Running`; tests/chain/test_roundbook.py,
test_roundbook_stateful.py, test_aggregator_service.py, test_root_lane_node.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from eth_account import Account
from web3.logs import DISCARD

from client.chain.artifacts import load_artifact
from client.chain.book import JUDGED, WINDOWS, BookRound, RoundBook
from client.chain.deploy import POST_PAY_BPS
from client.chain.errors import ErrorDecoder, LedgerRevert
from client.chain.messages import Domain, ReceiptSigner, Signed, Submission, Vote
from client.chain.models import Beacon
from client.chain.roots import (
    Credit,
    SubmissionRoot,
    VerdictRoot,
    submission_list,
    submission_struct,
    verdict_list,
    vote_struct,
    votes_hash,
)
from client.chain.tx import TxSender
from client.node.aggregation.auditor import Auditor, Finding
from client.node.aggregation.collector import Collector
from client.node.aggregation.earnings import EarningsBook, Entry
from client.node.aggregation.endpoint import AggregatorClient, AggregatorServer, Desk
from client.node.aggregation.held import Held
from client.node.aggregation.service import Aggregator
from client.store import BlockStore
from client.units import SCORE_SCALE
from tests.harness.ledger_swarm import ETH, Swarm, deploy_artifact, digest

BOND = ETH
CHALLENGE_BOND = ETH // 10
LIST = bytes.fromhex("5a" * 32)  # the digest of a list's index (what the posts name)
K, Q = 32, 2  # 32 seat trials: 6 candidates, each seated but with (6/7)^32 = 0.7%
ROUND = 0


@dataclass
class Book:
    swarm: Swarm
    contract: object
    domain: Domain
    # the accounts that enlisted on the book's roster of aggregators, by address (lowercase)
    enlisted: dict = field(default_factory=dict)

    def send(self, who, fn: str, *args, value: int = 0):
        """`who` calls the book's `fn` (or its judge's, for the proofs it takes: JUDGED)."""
        contract = self.judge if fn in JUDGED else self.contract
        call = getattr(contract.functions, fn)(*args)
        tx = {"to": contract.address, "data": call._encode_transaction_data(), "value": value}
        sender = TxSender(self.swarm.w3, who, ErrorDecoder(self.contract.abi))
        return sender.send(tx, fn)

    @property
    def aggregators(self):
        """The book's AggregatorDraw (the roster of aggregators, each round's draw)."""
        address = self.contract.functions.aggregators().call()
        abi = load_artifact("AggregatorDraw")["abi"]
        return self.swarm.w3.eth.contract(address=address, abi=abi)

    def draw_send(self, account, fn: str, *args, value: int = 0):
        """`account` calls the AggregatorDraw's `fn` (its errors are the book's)."""
        draw = self.aggregators
        call = getattr(draw.functions, fn)(*args)
        tx = {"to": draw.address, "data": call._encode_transaction_data(), "value": value}
        return TxSender(self.swarm.w3, account, ErrorDecoder(self.contract.abi)).send(tx, fn)

    def enlist(self, account) -> None:
        """`account` enlists with the bond (less what it still holds on the roster)."""
        held = self.aggregators.functions.bondOf(account.address).call()
        self.draw_send(account, "enlist", value=BOND - held)
        self.enlisted[account.address.lower()] = account

    def draw_to(self, node, round_: int = ROUND) -> None:
        """Makes `node` `round_`'s drawn aggregator: it alone on the roster, then the draw's
        request and the draw (a round drawn already must be drawn to it)."""
        aggregator, drawn, requested = self.aggregators.functions.drawOf(round_).call()
        me = node.tx.account.address
        if drawn:
            assert aggregator.lower() == me.lower(), f"round {round_} is drawn to {aggregator}"
            return
        assert not requested, f"round {round_}'s draw is requested already"
        for address in self.aggregators.functions.roster().call():
            if int(address, 16) and address.lower() != me.lower():
                self.draw_send(self.enlisted[address.lower()], "resign")
        if not self.aggregators.functions.enlisted(me).call():
            self.enlist(node.tx.account)
        self.draw_send(node.tx.account, "draw", round_)  # the request
        self.draw_send(node.tx.account, "draw", round_)  # the draw, in the next block

    @property
    def judge(self):
        address = self.contract.functions.judge().call()
        return self.swarm.w3.eth.contract(address=address, abi=load_artifact("RoundJudge")["abi"])

    def view(self, round_: int = ROUND):
        return self.contract.functions.roundOf(round_).call()

    def window(self, name: str, round_: int = ROUND) -> int:
        return self.contract.functions.windows(round_).call()[WINDOWS.index(name)]


def open_book(chain, post_pay_bps: int = POST_PAY_BPS, **params) -> tuple[Swarm, list, Book]:
    """A ledger with `params` (tests.harness.ledger_swarm.PARAMS by default; K = 32 seat
    trials and a quorum of 2 here unless given), seven nodes staked 2 ETH each, and a RoundBook
    on it with BOND, CHALLENGE_BOND and `post_pay_bps`."""
    swarm = Swarm(chain, **{"quorum": Q, "checkers": K, **params})
    nodes = [swarm.node(2 * ETH) for _ in range(7)]
    address = deploy_artifact(
        swarm, "RoundBook", swarm.ledger.address, BOND, CHALLENGE_BOND, post_pay_bps
    )
    contract = swarm.w3.eth.contract(address=address, abi=load_artifact("RoundBook")["abi"])
    book = Book(swarm, contract, Domain(chain_id=swarm.w3.eth.chain_id, contract=address))
    return swarm, nodes, book


def sign_submissions(book: Book, producers, round_: int = ROUND) -> list[Signed]:
    return [
        Signed.sign(
            Submission(
                round=round_,
                digest="0x" + digest(f"{round_}-{p.tx.account.address}").hex(),
                rollouts=8,
                score=4 * SCORE_SCALE,  # of 8 rollouts: at most 8 x SCORE_SCALE
                signal=SCORE_SCALE + i,
            ),
            book.domain,
            p.tx.account.key,
        )
        for i, p in enumerate(producers)
    ]


def post_submissions(
    book: Book, aggregator, subs: SubmissionRoot, round_: int = ROUND, listed: bytes = LIST
) -> None:
    book.swarm.goto(book.window("postRound", round_))
    book.draw_to(aggregator, round_)
    count = len(subs.signed)
    book.send(
        aggregator.tx.account, "postSubmissions", round_, subs.root, count, listed, value=BOND
    )
    book.swarm.mine()
    book.send(aggregator.tx.account, "drawBeacon", round_)


def seats(book: Book, nodes, producer: str, round_: int = ROUND) -> dict[str, int]:
    """Who holds seats on `producer`'s committee: the ledger's rule with the round's beacon."""
    view = book.view(round_)
    posted, beacon = view[1], view[7]
    ledger = book.swarm.ledger
    family = ledger.node_info(producer).family
    total = ledger.family_stake_at(family, posted)
    drawn = Beacon(round=round_, node=producer, beacon=beacon, block=posted + 1, ready=True)
    found = {}
    for n in nodes:
        voter = n.tx.account.address
        if voter.lower() == producer.lower():
            continue
        won = drawn.seats(voter, ledger.stake_at(voter, posted), total, book.swarm.params.checkers)
        if won:
            found[voter] = won
    return found


def agreement(signed: Signed, score: int | None = None, findings: int = 0) -> Vote:
    """An agreeing vote on the submission `signed` (with its own `score`, if given), unsigned."""
    s = signed.message
    return Vote(
        round=s.round,
        producer=signed.signer,
        digest=s.digest,
        unavailable=False,
        score=s.score if score is None else score,
        signal=s.signal,
        findings=findings,
    )


def signed_vote(book: Book, voter, signed: Signed, score: int | None = None) -> Signed:
    """`voter`'s agreeing vote on the submission `signed` (its own `score`, if given)."""
    return Signed.sign(agreement(signed, score), book.domain, voter.tx.account.key)


def forged(book: Book, vote: tuple, signed: Signed) -> tuple:
    """`vote` (a SignedVote on `signed`) with a signature by a key that is not its voter's."""
    message = agreement(signed, score=vote[1], findings=vote[2])
    other = Signed.sign(message, book.domain, Account.create().key)
    return (vote[0], vote[1], vote[2], vote_struct(other)[3])


def agreeing_votes(book: Book, voters, signed: Signed, score: int | None = None) -> list[tuple]:
    ordered = sorted(voters, key=lambda v: int(v.tx.account.address, 16))
    return [vote_struct(signed_vote(book, v, signed, score)) for v in ordered]


def credit_of(subs: SubmissionRoot, index: int, votes: list[tuple]) -> Credit:
    signed = subs.signed[index]
    s = signed.message
    return Credit(index, signed.signer, s.digest, s.score, s.signal, votes_hash(votes))


def honest_round(
    book: Book,
    nodes,
    round_: int = ROUND,
    earnings=None,
    receipts: dict[str, tuple[Signed, str]] | None = None,
    leave_out: str | None = None,
    publish=None,
    vote_receipts: dict[str, list[tuple[Signed, str]]] | None = None,
):
    """Four producers, an aggregator, and each batch credited with the votes of Q of its seated
    checkers: the roots an honest aggregator posts, built by its own collector (behind its
    endpoint's desk, which signs a receipt of each submission) from the messages as the peers
    send them (bytes); `earnings` (EarningsBook.earnings for the round) fills each credit's
    earnings; `receipts` gets each producer's signed submission and receipt. `leave_out`: the
    producer (an address) a censoring aggregator leaves out of the root it posts. `publish`:
    (kind, round, list bytes) -> the digest the post names (the list published on IPFS).
    `vote_receipts` gets, per producer, each agreeing vote with the desk's receipt of it."""
    producers, aggregator = nodes[:4], nodes[4]
    quorum = book.swarm.params.quorum
    tolerance = book.swarm.params.agree_tolerance_bps
    registered = lambda a: book.swarm.ledger.node_info(a).registered  # noqa: E731
    collector = Collector(book.domain, round_, tolerance_bps=tolerance, registered=registered)
    desk = Desk(book.domain, ReceiptSigner(book.domain, aggregator.tx.account.key))
    desk.open(collector)
    for signed in sign_submissions(book, producers, round_):
        answer = desk.accept(signed.to_bytes())
        assert answer.refused is None and answer.receipt is not None, answer
        if receipts is not None:
            receipts[signed.signer] = (signed, answer.receipt)
    with desk.hold(round_):
        subs = collector.submission_root()
    if leave_out is not None:
        subs = SubmissionRoot([x for x in subs.signed if x.signer != leave_out])
    listed = (
        LIST if publish is None else publish("submissions", round_, submission_list(subs.signed))
    )
    post_submissions(book, aggregator, subs, round_, listed)
    seated = {
        s.signer.lower(): {a.lower() for a in seats(book, nodes, s.signer, round_)}
        for s in subs.signed
    }
    for signed in subs.signed:
        held = seated[signed.signer.lower()]
        voters = [n for n in nodes if n.tx.account.address.lower() in held][:quorum]
        assert len(voters) == quorum, "too few seated checkers for this test's draw"
        for voter in voters:
            vote = signed_vote(book, voter, signed)
            answer = desk.accept(vote.to_bytes())
            assert answer.refused is None and answer.receipt is not None, answer
            if vote_receipts is not None:
                vote_receipts.setdefault(signed.signer, []).append((vote, answer.receipt))
    verdicts = collector.verdict_root(
        subs, seated=lambda p, v: v in seated[p], quorum=quorum, earnings=earnings
    )
    assert verdicts is not None and len(verdicts.credits) == len(subs.signed)
    return aggregator, subs, list(verdicts.credits), list(verdicts.votes)


def post_verdicts(
    book: Book, aggregator, verdicts: VerdictRoot, round_: int = ROUND, listed: bytes = LIST
) -> None:
    book.swarm.goto(book.window("verdictRound", round_))
    count = len(verdicts.credits)
    book.send(
        aggregator.tx.account, "postVerdicts", round_, verdicts.root, count, verdicts.total, listed
    )


def prove_credit(book, who, verdicts: VerdictRoot, subs: SubmissionRoot, i: int, votes):
    credit = verdicts.credits[i]
    sub_index = min(credit.index, len(subs.signed) - 1)
    return book.send(
        who,
        "proveBadCredit",
        ROUND,
        i,
        credit.struct(),
        verdicts.amounts[i],
        verdicts.proof(i),
        submission_struct(subs.signed[sub_index]),
        subs.proof(sub_index),
        votes,
    )


def balances(book: Book, who: str) -> tuple[int, int]:
    return book.swarm.w3.eth.get_balance(who), book.swarm.ledger.reward_pool()


def assert_paid_for(
    book: Book, prover, before: tuple[int, int], lie: str, receipt, round_: int = ROUND
) -> None:
    """The root is void, the prover got half the bond (less its gas) and the pool the rest."""
    after = balances(book, prover.address)
    gas = receipt.gas_used * receipt.effective_gas_price
    assert after[0] - before[0] + gas == BOND // 2
    assert after[1] - before[1] == BOND - BOND // 2
    assert lies(book, receipt) == [lie]
    view = book.view(round_)
    assert view[8] or view[9], "the root is void"
    with pytest.raises(LedgerRevert, match="BondForfeited"):  # one lie takes the bond, once
        book.send(prover, "release", round_)


def lies(book: Book, result) -> list[str]:
    """The lies a transaction proved (its LieProven events)."""
    receipt = book.swarm.w3.eth.get_transaction_receipt(result.tx_hash)
    found = book.contract.events.LieProven().process_receipt(receipt, errors=DISCARD)
    return [e.args["what"] for e in found]


def auditor_of(book: Book) -> Auditor:
    """An auditor of the book's rounds, reading its ledger as anyone can."""
    params = book.swarm.params
    return Auditor(
        book.domain,
        book.swarm.ledger,
        quorum=params.quorum,
        checkers=params.checkers,
        tolerance_bps=params.agree_tolerance_bps,
        min_stake=params.min_stake,
    )


def audit(
    book: Book,
    subs: SubmissionRoot,
    verdicts: VerdictRoot | None = None,
    round_: int = ROUND,
    earned: EarningsBook | None = None,
    v4: set[str] = frozenset(),  # type: ignore[assignment]
) -> Finding | None:
    """What an auditor finds in the round's published lists (the submission list, then the
    verdict list when given), reading the book and the ledger as anyone can."""
    auditor = auditor_of(book)
    posted = BookRound.from_view(round_, book.view(round_))
    entries, found = auditor.submissions(posted, submission_list(subs.signed))
    if found is not None or verdicts is None:
        return found
    return auditor.verdicts(posted, entries, verdict_list(verdicts), earned, v4)


def left_out(
    book: Book, subs: SubmissionRoot, signed: Signed, receipt: str, round_: int = ROUND
) -> Finding | None:
    """What the producer of `signed`, holding the aggregator's `receipt` of it, finds in the
    round's published submission list: the proof that it was left out, or None."""
    auditor = auditor_of(book)
    posted = BookRound.from_view(round_, book.view(round_))
    entries, found = auditor.submissions(posted, submission_list(subs.signed))
    assert found is None, found
    return auditor.left_out(posted, entries, signed, receipt)


def uncredited(
    book: Book,
    subs: SubmissionRoot,
    verdicts: VerdictRoot | None,
    receipted: list[tuple[Signed, str]],
    round_: int = ROUND,
) -> Finding | None:
    """What whoever holds a batch's receipted agreeing votes finds in the round's published
    lists (`verdicts` None: the no-credit root): the proof that a quorum of them was left
    uncredited, or None."""
    auditor = auditor_of(book)
    posted = BookRound.from_view(round_, book.view(round_))
    entries, found = auditor.submissions(posted, submission_list(subs.signed))
    assert found is None, found
    return auditor.uncredited(posted, entries, verdicts, receipted)


def proven_and_paid(book: Book, who, finding: Finding, lie: str, round_: int) -> int:
    """`who` sends the proof `finding` names; the root is void and `who` was paid half the bond.
    Returns the next round a test may play (past this one's verdict round)."""
    before = balances(book, who.address)
    result = act_on(book, who, finding)
    assert_paid_for(book, who, before, lie, result, round_)
    return book.window("verdictRound", round_) + 1


def submit_in_v4(book: Book, producer, round_: int) -> None:
    """`producer` submits a batch of `round_` in the v4 lane too (the ledger then holds it)."""
    book.swarm.goto(round_)
    producer.submit(round_, digest("the same round in v4"), 8, 4 * SCORE_SCALE, SCORE_SCALE)


def act_on(book: Book, who, finding: Finding):
    """Sends the call the auditor's finding names (a data challenge with its bond)."""
    value = CHALLENGE_BOND if finding.challenge else 0
    return book.send(who, finding.function, *finding.args, value=value)


def stranger(book: Book):
    account = Account.create()
    book.swarm.w3.provider.make_request("anvil_setBalance", [account.address, hex(10 * ETH)])
    return account


def claim(book: Book, producer, entry: Entry, tail: list[Entry] = ()):
    """`producer` claims from its credit `entry`, with the tail of credits after its settled."""
    return book.send(
        producer.tx.account,
        "claim",
        entry.round,
        entry.index,
        entry.credit.struct(),
        entry.amount,
        list(entry.proof),
        [t.shown() for t in tail],
    )


def paid_by(book: Book, result) -> int:
    receipt = book.swarm.w3.eth.get_transaction_receipt(result.tx_hash)
    return book.contract.events.Claimed().process_receipt(receipt, errors=DISCARD)[0].args["amount"]


class Running:
    """One aggregator process's worth: the service, its endpoint, its store."""

    def __init__(self, world, path: Path, store: BlockStore, service_class=Aggregator):
        """`world`: open_book's; its fifth node aggregates (`service_class`: an Aggregator's,
        a liar's in a test of what catches it)."""
        swarm, nodes, book = world
        account = nodes[4].tx.account
        self.client_book = RoundBook(swarm.w3, book.contract.address, account=account)
        self.held = Held(path, book.domain)
        self.service = service_class(
            swarm.ledger,
            self.client_book,
            self.held,
            ReceiptSigner(book.domain, account.key),
            store=store,
        )
        book.enlisted[account.address.lower()] = account  # the service enlists it
        self.service.start()
        self.server = AggregatorServer("127.0.0.1:0", self.service.desk)
        self.address = account.address

    def client(self, domain) -> AggregatorClient:
        return AggregatorClient(self.server.url, domain, aggregator=self.address)

    def stop(self) -> None:
        self.server.close()
        self.held.close()
