"""A training node's producer side of the root lane (client/node/publishing/rootlane.py), on a real
anvil with the committed SwarmLedger and RoundBook: the node's publisher signs its real batch's
submission and sends it to the aggregator its `[root_lane]` names, at the endpoint that
aggregator's on-chain metadata lists (a real `Aggregator` service and its HTTP endpoint on
loopback); it keeps the receipt, sends no transaction, opens its checkpoints by the book's beacon
and checks that the posted root lists it. With the aggregator's endpoint stopped, the batch goes
on the ledger in its window's last round. An aggregator that receipts the batch and posts a root
without it (its collector's memory edited: an honest service cannot be made to censor) is proven
by the node itself, and pays it half its bond."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from eth_account import Account

from client.chain.keystore import write_keystore
from client.chain.messages import ReceiptSigner, Signed, Submission
from client.chain.roots import (
    NO_CREDITS_ROOT,
    SubmissionRoot,
    VerdictRoot,
    submission_list,
    submission_struct,
    verdict_list,
)
from client.config import load_config, with_sections
from client.devnet import IpfsDaemon, start_daemons
from client.devnet.process import free_loopback_port
from client.node.aggregation.claims import Claimant, Known
from client.node.aggregation.lists import publish_list
from client.node.eventlog import read_events
from client.node.journal.outbox import OutboxStatus
from client.node.journal.records import Kept
from client.node.journal.states import RoundPhase
from client.node.publishing.relay import (
    BAD_SIGNATURE,
    OTHER_BATCH,
    UNSEATED,
    VoteInbox,
    relay_message,
)
from client.node.publishing.relay import topic as relay_topic
from client.node.publishing.rootlane import DRAW_AFTER_BLOCKS, DRAW_SPREAD_BLOCKS, draw_delay
from client.node.view.journal import NodeView
from client.node.view.watcher import Watcher
from client.store import IpfsStore, LocalStore, cid_to_digest
from client.store.pubsub import PubSub
from tests.harness.ledger_swarm import ETH
from tests.harness.policies import loaded_seed_test
from tests.harness.processes import sapo_run
from tests.harness.roundbook import (
    BOND,
    CHALLENGE_BOND,
    Running,
    lies,
    open_book,
    seats,
    sign_submissions,
)
from tests.harness.sides import Side

pytestmark = pytest.mark.slow

DONE, PENDING, DROPPED = OutboxStatus.DONE, OutboxStatus.PENDING, OutboxStatus.DROPPED
PASSWORD = "producer test password"


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    return loaded_seed_test(seed_test, tmp_path_factory.mktemp("seed") / "seed-test")


class World:
    """open_book's ledger and book; its fifth node aggregates (its metadata lists its endpoint),
    its first produces through a publisher in the root lane; all share one local block store."""

    def __init__(self, chain, policy, tmp_path: Path, relay: tuple[str, str] | None = None):
        """`relay`: the IPFS APIs (producer's, checkers') whose pubsub carries the checkers'
        receipted votes to the producer ([root_lane].relay_votes; None: no relay)."""
        self.swarm, self.nodes, self.book = open_book(chain)
        self.tmp = tmp_path
        blocks = tmp_path / "blocks"
        world = (self.swarm, self.nodes, self.book)
        self.agg = Running(world, tmp_path / "aggregator.db", LocalStore(blocks))
        self.nodes[4].set_metadata(json.dumps({"model": "test", "aggregator": self.agg.server.url}))
        ledger = self.nodes[0]
        address = self.book.contract.address
        self.producer = Side(
            self.swarm,
            ledger,
            tmp_path / "producer",
            policy,
            blocks,
            book=address,
            submit=True,
            pubsub=PubSub(relay[0]) if relay else None,
        )
        # three checkers, each seated on the producer's committee but in 0.7% of draws
        self.checkers = [
            Side(
                self.swarm,
                node,
                tmp_path / f"checker{i}",
                policy,
                blocks,
                book=address,
                pubsub=PubSub(relay[1]) if relay else None,
            )
            for i, node in enumerate(self.nodes[1:4])
        ]
        self.me = ledger.account_address
        self.windows = self.agg.service.windows

    def sealed(self) -> int:
        """A round the aggregator collects, and the producer's batch of it sealed."""
        r = self.swarm.ledger.current_round() + 1
        self.swarm.goto(r)
        assert r in self.agg.service.tick().opened
        self.producer.generate_learning(r)  # a batch with no signal is paid nothing
        assert self.producer.publisher.seal(r)
        return r

    def post_and_draw(self, r: int) -> None:
        self.swarm.goto(self.windows.post_round(r))
        assert self.agg.service.tick().posted_submissions == [r]
        self.swarm.mine()
        assert self.agg.service.tick().drawn == [r]

    def nonce(self, who: str | None = None) -> int:
        return self.swarm.w3.eth.get_transaction_count(who or self.me)

    def listed_and_opened(self, r: int) -> None:
        """The aggregator posts the round's root and draws its beacon; the producer checks the
        list and opens its checkpoints."""
        self.post_and_draw(r)
        self.producer.publisher.flush()
        self.producer.publisher.flush()
        assert self.producer.outbox()[f"open:{r}"] == DONE

    def voted(self, r: int) -> None:
        """Round r's root posted and listed by the producer, its checkpoints opened, and its
        seated checkers' votes sent; then its verdict round."""
        self.producer.publisher.flush()
        self.listed_and_opened(r)
        for checker in self.checkers:
            checker.intake.poll()
            checker.publisher.flush()
        self.swarm.goto(self.windows.verdict_round(r))

    def verdicts(self, r: int, earned: bool = True) -> VerdictRoot:
        """The verdict root the aggregator's service would post for round r (its earnings as
        the service folded them; without `earned`, none: every earlier credit left out)."""
        service = self.agg.service
        posted = service.book.round_of(r)
        return service.collectors[r].verdict_root(
            service.submission_roots[r],
            seated=lambda p, v: service.auditor.seated(posted, p, v),
            quorum=self.swarm.ledger.params().quorum,
            earnings=(lambda p: service.earned.earnings(p, r)) if earned else None,
        )

    def post_verdicts(self, r: int, verdicts: VerdictRoot, store: LocalStore) -> None:
        """The aggregator (node 4, by hand) posts `verdicts` for round r, its list published
        on `store` only."""
        listed = cid_to_digest(publish_list(store, "verdicts", r, verdict_list(verdicts), r + 100))
        self.book.send(
            self.nodes[4].tx.account,
            "postVerdicts",
            r,
            verdicts.root,
            len(verdicts.credits),
            verdicts.total,
            listed,
        )

    def seated(self, r: int) -> list[Side]:
        """The checkers the book's draw seats on the producer's committee of round r."""
        drawn = seats(self.book, self.nodes, self.me, r)
        return [c for c in self.checkers if c.address in drawn]

    def claimant_config(self) -> Path:
        """A config for the producer's own `sapo` commands (its keystore, the shared store)."""
        keystore = self.tmp / "producer.json"
        write_keystore(keystore, self.nodes[0].tx.account.key, PASSWORD)
        (self.tmp / "password").write_text(PASSWORD)
        config = self.tmp / "producer.toml"
        config.write_text(
            "\n".join(
                [
                    "[chain]",
                    f'rpc_url = "{self.swarm.url}"',
                    f'ledger_address = "{self.swarm.ledger.address}"',
                    f'round_book_address = "{self.book.contract.address}"',
                    f'keystore = "{keystore}"',
                    f'password_file = "{self.tmp / "password"}"',
                    "[store]",
                    'backend = "local"',
                    f'store_dir = "{self.tmp / "blocks"}"',
                ]
            )
            + "\n"
        )
        return config

    def forge(self, r: int) -> None:
        """The producer claims more learning signal than its batch has (before it is sent)."""
        with self.producer.journal.db.tx() as db:
            db.execute(
                "UPDATE outbox SET payload = json_set(payload, '$.signal', "
                "json_extract(payload, '$.signal') + 10000) WHERE key = ?",
                (f"submit:{r}",),
            )

    def events(self, kind: str) -> list[dict]:
        return [e for e in read_events(self.producer.services.events.path) if e["kind"] == kind]


@pytest.fixture
def world(chain, policy, tmp_path: Path):
    world = World(chain, policy, tmp_path)
    yield world
    world.agg.stop()


def test_a_receipted_batch_sends_no_transaction_opens_by_the_books_beacon_and_is_listed(
    world,
) -> None:
    r = world.sealed()
    before = world.nonce()
    world.producer.publisher.flush()
    outbox = world.producer.outbox()
    assert (outbox[f"pin:{r}"], outbox[f"submit:{r}"]) == (DONE, DONE)
    assert (outbox[f"open:{r}"], outbox[f"listed:{r}"]) == (PENDING, PENDING)
    assert world.nonce() == before  # nothing on the ledger
    assert not world.swarm.ledger.submission(r, world.me).exists
    kept = world.producer.journal.receipt(Kept.submission_key(r))
    assert kept is not None and kept.aggregator == world.agg.address
    assert world.producer.journal.round(r).phase == RoundPhase.CONFIRMED
    [submitted] = world.events("round.submitted")
    assert submitted["lane"] == "root" and "receipt kept" in submitted["message"]

    world.producer.publisher.flush()  # before the root: the list check and the beacon wait
    assert world.producer.outbox()[f"listed:{r}"] == PENDING
    world.post_and_draw(r)
    # a crash after the receipt was kept and before the journal said so, and a restart once
    # the submission window has closed: the kept receipt stands, the aggregator is not asked
    # again, and the batch is not dropped as missed
    with world.producer.journal.db.tx() as db:
        db.execute("UPDATE outbox SET status = 'pending' WHERE key = ?", (f"submit:{r}",))
    endpoint = world.producer.root.endpoint(world.agg.address)
    asked = endpoint.requests
    world.producer.publisher.flush()  # the receipt stands; the root lists it; then it opens
    assert world.producer.outbox()[f"submit:{r}"] == DONE and endpoint.requests == asked
    assert world.producer.journal.outbox(f"listed:{r}").error is None
    assert world.producer.outbox()[f"listed:{r}"] == DONE
    world.producer.publisher.flush()
    assert world.producer.outbox()[f"open:{r}"] == DONE
    [opened] = world.events("round.opened")
    local_rounds = world.producer.journal.round(r).local_rounds
    assert opened["round"] == r and opened["opened"]
    assert set(opened["opened"]) <= set(range(local_rounds))
    posted = world.agg.client_book.round_of(r)
    assert posted.count == 1 and not posted.void
    assert world.nonce() == before  # the aggregator drew the beacon: still no transaction
    # settlement and appeal wait for the round to be final: a batch nobody escalated has no
    # ledger record, and they end as no-ops then
    world.swarm.goto(world.producer.services.params.final_after(r) + 1)
    world.producer.publisher.flush()
    outbox = world.producer.outbox()
    assert (outbox[f"settle:{r}"], outbox[f"appeal:{r}"]) == (DONE, DONE)
    assert world.nonce() == before
    # the receipt is kept until the round's lies can no longer be proven
    upkeep = world.producer.publisher.upkeep
    upkeep.prune_journal(world.windows.challenge_end(r))
    assert world.producer.journal.receipt(Kept.submission_key(r)) is not None
    upkeep.prune_journal(world.windows.challenge_end(r) + 1)
    assert world.producer.journal.receipt(Kept.submission_key(r)) is None


def test_a_beacon_its_poster_does_not_draw_is_drawn_by_one_producer_after_its_own_delay(
    world,
) -> None:
    r = world.sealed()
    world.producer.publisher.flush()  # receipted
    world.swarm.goto(world.windows.post_round(r))
    assert world.agg.service.tick().posted_submissions == [r]  # and no pass after: no draw
    posted = world.agg.client_book.round_of(r).posted_block
    delay = draw_delay(world.me, r)
    # each producer waits its own number of blocks (so that they do not all draw in one block)
    delays = {draw_delay(node.account_address, r) for node in world.nodes}
    assert len(delays) > 1
    assert all(DRAW_AFTER_BLOCKS <= d < DRAW_AFTER_BLOCKS + DRAW_SPREAD_BLOCKS for d in delays)
    before = world.nonce()
    world.swarm.mine(posted + delay - world.swarm.w3.eth.block_number)  # head = posted + delay
    world.producer.publisher.flush()
    world.producer.publisher.flush()
    assert world.nonce() == before and world.producer.outbox()[f"open:{r}"] == PENDING
    world.swarm.mine()
    world.producer.publisher.flush()
    world.producer.publisher.flush()
    assert world.nonce() == before + 1  # one transaction: the draw
    assert world.agg.client_book.round_of(r).beacon
    assert world.producer.outbox()[f"open:{r}"] == DONE


def test_without_a_receipt_the_batch_goes_on_the_ledger_in_its_windows_last_round(world) -> None:
    world.agg.server.close()  # the aggregator's endpoint is really gone
    r = world.sealed()
    before = world.nonce()
    world.producer.publisher.flush()
    entry = world.producer.journal.outbox(f"submit:{r}")
    assert entry.status == PENDING and "not reachable" in entry.error
    assert world.nonce() == before
    [unsent] = world.events("rootlane.unsent")
    assert (
        f"on the ledger in round {r + world.producer.services.params.submit_rounds}"
        in unsent["message"]
    )

    world.swarm.goto(r + world.producer.services.params.submit_rounds)  # the window's last round
    world.producer.publisher.flush()
    outbox = world.producer.outbox()
    assert outbox[f"submit:{r}"] == DONE and f"listed:{r}" not in outbox
    on_chain = world.swarm.ledger.submission(r, world.me)
    assert on_chain.digest.lower() == world.producer.journal.round(r).digest.lower()
    assert world.producer.journal.receipt(Kept.submission_key(r)) is None
    assert world.events("round.submitted")[0]["lane"] == "ledger"


def test_a_round_drawn_with_no_aggregator_goes_on_the_ledger_at_once(world) -> None:
    """The only aggregator left the roster before the round's draw, which a stranger made: the
    round has nobody who may post its root, the service collects nothing of it, and the
    producer, who learns so while the ledger's window is open, submits there at once."""
    r = world.swarm.ledger.current_round() + 1
    world.book.draw_send(world.nodes[4].tx.account, "resign")
    world.swarm.goto(r)
    for _ in range(2):  # the request, then the draw: anyone may make both
        world.book.draw_send(world.nodes[5].tx.account, "draw", r)
    assert world.agg.service.tick().opened == []
    on_the_ledger_at_once(world, r, "drawn with no aggregator")


def on_the_ledger_at_once(world, r: int, why: str) -> None:
    """The producer's batch of round `r`, sealed now, goes on the ledger at once, not in its
    window's last round, saying `why`."""
    world.producer.generate_learning(r)
    assert world.producer.publisher.seal(r)
    world.producer.publisher.flush()
    assert world.producer.outbox()[f"submit:{r}"] == DONE
    on_chain = world.swarm.ledger.submission(r, world.me)
    assert on_chain.digest.lower() == world.producer.journal.round(r).digest.lower()
    [unsent] = world.events("rootlane.unsent")
    assert why in unsent["message"] and "last round" not in unsent["message"]
    assert world.events("round.submitted")[0]["lane"] == "ledger"


def test_a_round_drawn_to_a_node_that_lists_no_endpoint_goes_on_the_ledger_at_once(world) -> None:
    """The round's drawn aggregator lists no endpoint in its metadata (it enlisted and never
    served): no receipt can come, so the producer submits on the ledger at once instead of
    waiting for the window's last round."""
    r = world.swarm.ledger.current_round() + 1
    silent = world.nodes[5]
    world.book.enlist(silent.tx.account)
    world.book.draw_to(silent, r)
    world.swarm.goto(r)
    on_the_ledger_at_once(world, r, "lists no endpoint")


def test_a_receipted_round_its_aggregator_never_posts_is_proven_by_its_producer(world) -> None:
    """The drawn aggregator receipts our batch, then posts no root in the post round (its
    service never passes there): our ledger window is closed, so the receipt is all we hold. The
    producer proves it the round after: half the aggregator's roster bond is ours, and it is off
    the roster."""
    r = world.sealed()
    world.producer.publisher.flush()
    assert world.producer.journal.receipt(Kept.submission_key(r)) is not None
    world.swarm.goto(world.windows.post_round(r) + 1)  # no pass of the service in between
    before = world.swarm.w3.eth.get_balance(world.me)
    world.producer.publisher.flush()
    assert world.producer.outbox()[f"listed:{r}"] == DONE
    [proven] = world.events("rootlane.proven")
    assert proven["lie"] == "a receipted round left unposted"
    assert proven["aggregator"] == world.agg.address
    gained = world.swarm.w3.eth.get_balance(world.me) - before
    assert BOND // 2 - BOND // 100 < gained < BOND // 2  # half the bond, less the gas
    assert not world.book.aggregators.functions.enlisted(world.agg.address).call()


def test_a_receipted_batch_left_out_of_the_root_is_proven_by_its_producer(world) -> None:
    r = world.sealed()
    world.producer.publisher.flush()
    assert world.producer.outbox()[f"submit:{r}"] == DONE
    # another producer's submission is held too, so the aggregator has a root to post
    [other] = sign_submissions(world.book, [world.nodes[1]], r)
    assert world.agg.client(world.book.domain).send([other])[0].receipt
    # the censoring aggregator: it forgets our submission after receipting it
    del world.agg.service.collectors[r].submissions[world.me.lower()]
    world.post_and_draw(r)
    balance = world.swarm.w3.eth.get_balance(world.me)

    world.producer.publisher.flush()
    entry = world.producer.journal.outbox(f"listed:{r}")
    assert entry.status == DONE and entry.tx_hash
    receipt = world.swarm.w3.eth.get_transaction_receipt(entry.tx_hash)
    gas = receipt["gasUsed"] * receipt["effectiveGasPrice"]
    assert world.swarm.w3.eth.get_balance(world.me) - balance == BOND // 2 - gas
    assert world.agg.client_book.round_of(r).submissions_voided
    [proven] = world.events("rootlane.proven")
    assert "left out" in proven["lie"] and proven["aggregator"] == world.agg.address

    world.producer.publisher.flush()  # nothing to open on a voided root
    entry = world.producer.journal.outbox(f"open:{r}")
    assert entry.status == DROPPED and "voided" in entry.error


def test_drawn_checkers_agree_off_chain_and_the_verdict_root_credits_the_batch(world) -> None:
    r = world.sealed()
    world.producer.publisher.flush()
    world.listed_and_opened(r)
    seated = world.seated(r)
    assert len(seated) >= world.swarm.ledger.params().quorum
    nonces = [world.nonce(c.address) for c in world.checkers]
    for checker in world.checkers:
        checker.intake.poll()  # reads the root's list, draws, fetches, verifies, votes
        checker.publisher.flush()
    for checker in world.checkers:
        key = f"root-vote:{r}:{world.me.lower()}"
        if checker in seated:
            assert checker.outbox()[key] == DONE
            kept = checker.journal.receipt(key)
            assert kept is not None and kept.aggregator == world.agg.address
            [event] = [
                e for e in read_events(checker.services.events.path) if e["kind"] == "peer.attested"
            ]
            assert event["lane"] == "root"
        else:
            assert key not in checker.outbox()  # no seat, no vote
    # nothing went on chain: not one transaction of a checker
    assert [world.nonce(c.address) for c in world.checkers] == nonces
    # each checker counted the list's batch for its peers table, once (a list read again after
    # a restart is not counted twice)
    for checker in world.checkers:
        assert checker.journal.peers.in_book()[world.me.lower()] == (1, r, 0)
        assert not checker.journal.peers.count_in_book(r, "submissions", {world.me.lower(): 1})
    world.producer.intake.poll()  # the producer's own intake reads the list too (its own entry)
    assert len(world.agg.service.collectors[r].votes) == len(seated)

    world.swarm.goto(world.windows.verdict_round(r))
    done = world.agg.service.tick()
    assert done.posted_verdicts == [r], done.skipped
    [credit] = world.agg.service.verdict_roots[r].credits
    assert credit.producer.lower() == world.me.lower()
    world.producer.publisher.flush()  # the producer audits the verdict root: it holds
    assert world.producer.outbox()[f"audit:{r}"] == DONE
    assert not world.producer.journal.outbox(f"audit:{r}").tx_hash
    assert not world.events("rootlane.unsent") and not world.events("rootlane.proven")
    # what `sapo devnet status` counts: the verdict lists' credits, standing yet or not
    claimant = Claimant(world.swarm.ledger, world.agg.client_book, LocalStore(world.tmp / "blocks"))
    seen = Known()
    mine = {world.me.lower(): credit.signal}
    assert claimant.credited(0, world.swarm.ledger.current_round(), known=seen) == mine
    assert credit.signal > 0
    # counted and its list kept as read, but not as final: a lie may still be proven against it
    assert r not in seen.final and seen.read == {r: mine}
    # the next call counts it without fetching the list (a store that holds none of them)
    blind = Claimant(world.swarm.ledger, world.agg.client_book, LocalStore(world.tmp / "empty"))
    unreadable: list[int] = []
    assert blind.credited(0, world.swarm.ledger.current_round(), unreadable, seen) == mine
    assert unreadable == [] and seen.read == {r: mine}
    # the TUI's rounds and /metrics show it credited (the ledger has no record of it)
    config = world.claimant_config()
    producer_dir = world.tmp / "producer"
    watcher = Watcher(with_sections(load_config(config), node={"data_dir": producer_dir}), world.me)
    try:
        [point] = [p for p in watcher.snapshot().rounds if p.round == r]
    finally:
        watcher.close()
    assert (point.claimed, point.credited, point.lane) == (credit.signal, credit.signal, "root")
    # ... and its peers table counts the root lane's batch (its intake read the list) and its
    # credit (its audit read the verdict list): the ledger has neither
    [row] = [p for p in watcher.last.peers if p.me]
    assert (row.submissions, row.last_round, row.credited) == (1, r, credit.signal)
    # its checkers' votes, signed off chain, as the credit carries them
    votes = len(world.agg.service.verdict_roots[r].votes[0])
    assert point.votes == (votes, 0, 0) and votes >= world.swarm.ledger.params().quorum
    assert NodeView(producer_dir).totals().book == {"credited": 1, "uncredited": 0}

    # once the round stands, its producer claims with `sapo rewards claim --book`: the round's
    # whole reward (its only credit), from the book's pool
    world.book.send(world.swarm.deployer, "fund", value=10 * ETH)
    code, early = claim_book(config)
    assert code == 1 and "no round can stand yet" in early, early
    world.swarm.goto(world.windows.challenge_end(r) + 2)
    balance = world.swarm.w3.eth.get_balance(world.me)
    code, claimed = claim_book(config)
    assert code == 0, claimed
    reward = world.swarm.ledger.params().reward_per_round
    assert claimed["rounds"] == [r] and claimed["paid"] == reward
    receipt = world.swarm.w3.eth.get_transaction_receipt(claimed["tx_hash"])
    gas = receipt["gasUsed"] * receipt["effectiveGasPrice"]
    assert world.swarm.w3.eth.get_balance(world.me) - balance == claimed["paid"] - gas
    code, again = claim_book(config)
    assert code == 1 and "paid already" in again, again
    # the TUI shows the claim among its payouts, and says so in its activity
    watcher = Watcher(with_sections(load_config(config), node={"data_dir": producer_dir}), world.me)
    try:
        snap = watcher.snapshot()
    finally:
        watcher.close()
    assert [p.amount for p in snap.payouts] == [claimed["paid"]]
    said = [a.text for a in snap.activity if a.kind == "claim"]
    assert len(said) == 1 and f"from the round book, for credits through round {r}" in said[0]

    # `sapo devnet status` keeps what a round that stands for good credits: read once, it is
    # answered from the keeping, even where the lists can no longer be fetched (a store that
    # holds none of them), while without the keeping the round's list is needed again
    current = world.swarm.ledger.current_round()
    assert blind.credited(0, current, [], seen) == mine  # what was read, now standing
    assert seen.final[r] == mine and seen.read == {}
    known = Known()
    assert claimant.credited(0, current, known=known) == mine
    # kept: the round that stands, and as crediting nothing each round whose verdict round is
    # two rounds past with no verdict root (none can be posted now); the rounds after are not
    closed = [q for q in range(current + 1) if world.windows.verdict_round(q) + 2 <= current]
    assert r in closed and len(closed) < current + 1
    assert known.final == {q: {} for q in closed} | {r: mine} and known.read == {}
    unreadable = []
    assert blind.credited(0, current, unreadable) == {} and unreadable == [r]
    unreadable = []
    kept = Known(final=dict(known.final))
    assert blind.credited(0, current, unreadable, kept) == mine
    assert unreadable == [] and kept.final == known.final
    # a list that cannot be read is not kept, but its digest is: the next call fetches it again
    # without looking for its VerdictsPosted event again
    unreadable, lost = [], Known()
    assert blind.credited(0, current, unreadable, lost) == {}
    assert unreadable == [r] and r not in lost.final and r not in lost.read and r in lost.lists
    assert claimant.credited(0, current, known=lost) == mine and lost.final[r] == mine


def test_a_forged_batch_is_escalated_to_the_ledger_and_disputed_there(world) -> None:
    r = world.sealed()
    world.forge(r)
    world.producer.publisher.flush()
    world.listed_and_opened(r)
    world.producer.intake.poll()  # its own intake reads the list too (its own entry)
    seated = world.seated(r)
    first, *others = seated
    first.intake.poll()
    first.publisher.flush()
    # the first seated checker took the batch to the ledger with its dispute
    entry = first.journal.outbox(f"attest:{r}:{world.me.lower()}")
    assert entry.status == DONE and entry.tx_hash
    on_chain = world.swarm.ledger.submission(r, world.me)
    assert on_chain.exists and on_chain.disputes == 1
    assert f"root-vote:{r}:{world.me.lower()}" not in first.outbox()
    # the others find it on the ledger: they vote there, as on any ledger batch
    for checker in others:
        checker.intake.poll()
        checker.publisher.flush()
        assert checker.outbox()[f"attest:{r}:{world.me.lower()}"] == DONE
    assert world.swarm.ledger.submission(r, world.me).disputes == len(seated)
    # each drew its seats on it as the ledger does, from the root's block (its stake snapshot,
    # the next block's hash its beacon), not from the later block of the escalation's Submitted
    # event: drawn from that, a seated checker found no seat in about one run of 140 (fresh20)
    # and never voted
    snapshot = on_chain.snapshot_block
    for checker in others:
        [(key, block)] = [(k, b) for k, b in checker.intake.window.blocks.items() if k[0] == r]
        assert block == snapshot, (checker.address, block, snapshot)
        local = checker.intake.seats._local[key]
        assert local == world.swarm.ledger.seats_of(r, world.me, checker.address), checker.address
    # and the verdict root credits none of it: the round's only batch, so the no-credit root
    world.swarm.goto(world.windows.verdict_round(r))
    assert world.agg.service.tick().posted_verdicts == [r]
    assert r in world.agg.service.no_credits
    world.producer.publisher.flush()  # its producer's audit finds its batch uncredited
    assert world.producer.outbox()[f"audit:{r}"] == DONE
    [uncredited] = world.events("rootlane.unsent")
    assert "does not credit our batch" in uncredited["message"]
    assert [c for _, c, _ in world.producer.journal.book_credits().values()] == [False]
    # its peers table counts the batch once, though the book's list holds it and, escalated,
    # the ledger too
    config = with_sections(
        load_config(world.claimant_config()), node={"data_dir": world.tmp / "producer"}
    )
    watcher = Watcher(config, world.me)
    try:
        [row] = [p for p in watcher.snapshot().peers if p.me]
    finally:
        watcher.close()
    assert row.submissions == 1


def test_an_entry_its_producer_did_not_sign_gets_no_vote_and_no_transaction(world, caplog) -> None:
    """A lying aggregator lists the producer's real batch, claim and all, signed by another key:
    no checker votes on it, on or off chain (the book would refuse its escalation: it is the
    root's lie, which an auditor proves), though the batch itself verifies."""
    r = world.sealed()
    world.producer.publisher.flush()  # pinned (and receipted by the honest service)
    claim = world.producer.journal.outbox(f"submit:{r}").message
    forger = world.nodes[6].tx.account
    submission = Submission(
        round=r,
        digest=claim.digest,
        rollouts=claim.rollouts,
        score=claim.score,
        signal=claim.signal,
    )
    signed = Signed.sign(submission, world.book.domain, forger.key)
    forged = signed.model_copy(update={"signer": world.me})
    root = SubmissionRoot([forged])
    store = LocalStore(world.tmp / "blocks")
    listed = publish_list(store, "submissions", r, submission_list(root.signed), r + 100)
    world.swarm.goto(world.windows.post_round(r))
    aggregator = world.nodes[4].tx.account  # posts before its honest service would
    digest = cid_to_digest(listed)
    world.book.draw_to(world.nodes[4], r)  # (drawn to it: the only one enlisted)
    world.book.send(aggregator, "postSubmissions", r, root.root, 1, digest, value=BOND)
    world.swarm.mine()
    world.book.send(aggregator, "drawBeacon", r)
    assert world.seated(r)  # the producer's committee has seats among our checkers
    nonces = [world.nonce(c.address) for c in world.checkers]
    for checker in world.checkers:
        checker.intake.poll()
        checker.publisher.flush()
        assert not [k for k in checker.outbox() if world.me.lower() in k]
    assert [world.nonce(c.address) for c in world.checkers] == nonces
    assert "a submission its producer did not sign" in caplog.text


def test_a_lie_in_the_verdict_root_is_proven_by_the_producer_that_audits_it(world) -> None:
    """The aggregator posts a verdict root whose credit of the producer's batch has an amount
    other than its learning signal (more of the round's reward): the producer's audit proves it,
    the root is void and the producer gets half the bond."""
    r = world.sealed()
    world.voted(r)
    honest = world.verdicts(r)
    inflated = [2 * c.signal for c in honest.credits]
    lie = VerdictRoot(honest.credits, inflated, votes=honest.votes, presorted=True)
    store = LocalStore(world.tmp / "blocks")
    world.post_verdicts(r, lie, store)
    balance = world.swarm.w3.eth.get_balance(world.me)
    world.producer.publisher.flush()
    entry = world.producer.journal.outbox(f"audit:{r}")
    assert entry.status == DONE and entry.tx_hash, entry
    receipt = world.swarm.w3.eth.get_transaction_receipt(entry.tx_hash)
    gas = receipt["gasUsed"] * receipt["effectiveGasPrice"]
    assert world.swarm.w3.eth.get_balance(world.me) - balance == BOND // 2 - gas
    assert world.agg.client_book.round_of(r).verdicts_voided
    [proven] = world.events("rootlane.proven")
    assert proven["aggregator"] == world.agg.address
    # what `sapo devnet status` counts: nothing from the void root, which it keeps as crediting
    # nothing at once (a void root stays void), so that no later call reads the round again
    claimant = Claimant(world.swarm.ledger, world.agg.client_book, store)
    known = Known()
    assert claimant.credited(r, world.swarm.ledger.current_round(), known=known) == {}
    assert known.final[r] == {} and r not in known.read


def test_a_verdict_root_that_leaves_out_an_earlier_credit_of_ours_is_proven_by_our_audit(
    world,
) -> None:
    """Round r1 credits the producer (its audit keeps the credit, with its proof); a later
    round's verdict root, lag rounds on, carries earnings that leave r1's credit out (a claim
    from it would pay the producer less): the producer's audit of that root, from its own
    credits alone, proves it on chain (proveSkippedCredit), and gets half the bond."""
    r1 = world.sealed()
    world.voted(r1)
    assert world.agg.service.tick().posted_verdicts == [r1]
    world.producer.publisher.flush()
    assert world.producer.outbox()[f"audit:{r1}"] == DONE
    [(kept, _)] = world.producer.journal.book_entries()
    assert kept == r1

    r2 = world.sealed()
    assert r2 - world.windows.lag >= r1  # r1's credit is settled for r2
    world.voted(r2)
    skipping = world.verdicts(r2, earned=False)  # no earnings: r1's credit left out
    world.post_verdicts(r2, skipping, LocalStore(world.tmp / "blocks"))
    balance = world.swarm.w3.eth.get_balance(world.me)
    world.producer.publisher.flush()
    entry = world.producer.journal.outbox(f"audit:{r2}")
    assert entry.status == DONE and entry.tx_hash, entry
    assert lies(world.book, entry) == ["earnings that skip a credit"]
    assert world.swarm.w3.eth.get_balance(world.me) - balance == BOND // 2 - _gas(
        world, entry.tx_hash
    )
    assert world.agg.client_book.round_of(r2).verdicts_voided
    [proven] = world.events("rootlane.proven")
    assert proven["lie"] == "earnings that skip a credit"
    # kept as audited: the void round is left out by its standing, read again when it is named
    assert [q for q, _ in world.producer.journal.book_entries()] == [r1, r2]

    # the honest root of a round after it carries r1's credit in its earnings: nothing to prove
    r3 = world.sealed()
    world.voted(r3)
    assert world.agg.service.tick().posted_verdicts == [r3]
    [credit] = world.agg.service.verdict_roots[r3].credits
    assert credit.earnings.anchor == r1 and credit.earnings.settled > 0
    world.producer.publisher.flush()
    entry = world.producer.journal.outbox(f"audit:{r3}")
    assert entry.status == DONE and not entry.tx_hash
    assert len(world.events("rootlane.proven")) == 1
    assert [q for q, _ in world.producer.journal.book_entries()] == [r1, r2, r3]


def _gas(world, tx_hash: str) -> int:
    receipt = world.swarm.w3.eth.get_transaction_receipt(tx_hash)
    return receipt["gasUsed"] * receipt["effectiveGasPrice"]


def _withheld_submissions(world, r: int, others: int = 0) -> SubmissionRoot:
    """The aggregator (node 4, by hand) posts round r's submission root over the producer's
    receipted submission and `others` more, with a list published only on a store nobody
    reaches, and draws its beacon."""
    signed = list(world.agg.service.collectors[r].submissions.values())
    signed += sign_submissions(world.book, world.nodes[5 : 5 + others], r)
    root = SubmissionRoot(signed)
    elsewhere = LocalStore(world.tmp / f"elsewhere-{r}")
    cid = publish_list(elsewhere, "submissions", r, submission_list(root.signed), r + 100)
    world.swarm.goto(world.windows.post_round(r))
    aggregator = world.nodes[4].tx.account
    count, digest = len(root.signed), cid_to_digest(cid)
    world.book.draw_to(world.nodes[4], r)  # (drawn to it: the only one enlisted)
    world.book.send(aggregator, "postSubmissions", r, root.root, count, digest, value=BOND)
    world.swarm.mine()
    world.book.send(aggregator, "drawBeacon", r)
    return root


def _due(world, r: int, posted_in: int) -> int:
    """The first round a list posted in round `posted_in` that cannot be read is challenged in:
    the last two of the round's challenge window, and not the round it was posted in."""
    return max(posted_in + 1, world.windows.challenge_end(r) - 1)


def test_a_withheld_verdict_list_is_challenged_by_its_producer_and_claimed_unanswered(
    world,
) -> None:
    """With [root_lane].challenge_lists, a producer that cannot read its round's verdict list
    (the root posted, its blocks published on no store the producer reaches) tries again until
    the last rounds of the challenge window, then bonds a data challenge of one of its leaves;
    nobody answers, and once the answer window closed the producer claims it: the root is void,
    and its challenge bond comes back with half the aggregator's bond."""
    world.producer.root.challenge_lists = True
    r = world.sealed()
    world.voted(r)
    # its list published on a daemon the producer never reaches
    world.post_verdicts(r, world.verdicts(r), LocalStore(world.tmp / "elsewhere"))
    world.producer.publisher.flush()
    audit = world.producer.journal.outbox(f"audit:{r}")
    assert audit.status == PENDING and audit.attempts >= 1  # not yet: it may be slow to come
    assert not world.events("rootlane.challenged")

    world.swarm.goto(_due(world, r, world.windows.verdict_round(r)))
    before = world.swarm.w3.eth.get_balance(world.me)
    world.producer.publisher.flush()
    [challenged] = world.events("rootlane.challenged")
    assert (challenged["verdict_tree"], challenged["index"]) == (True, 0)  # its only leaf
    assert challenged["aggregator"] == world.agg.address
    assert world.agg.client_book.round_of(r).open_challenges == 1
    paid = before - world.swarm.w3.eth.get_balance(world.me)
    assert paid == CHALLENGE_BOND + _gas(world, challenged["tx_hash"])
    # the audit goes on (the list may still come); the next pass sends nothing more
    audit = world.producer.journal.outbox(f"audit:{r}")
    assert audit.status == PENDING and "challenged leaf 0" in audit.error
    key = f"challenge:{r}:verdicts:0"
    world.producer.publisher.flush()
    assert world.producer.journal.outbox(key).status == PENDING  # not claimed yet
    assert len(world.events("rootlane.challenged")) == 1

    world.swarm.goto(world.windows.challenge_end(r) + 2)  # its answer window closed
    world.producer.publisher.flush()
    claim = world.producer.journal.outbox(key)
    assert claim.status == DONE and claim.tx_hash
    assert world.agg.client_book.round_of(r).verdicts_voided
    gained = world.swarm.w3.eth.get_balance(world.me) - before
    assert gained == BOND // 2 - _gas(world, challenged["tx_hash"]) - _gas(world, claim.tx_hash)
    [proven] = world.events("rootlane.proven")
    assert proven["lie"] == "data withheld" and proven["aggregator"] == world.agg.address
    assert lies(world.book, claim) == ["data withheld"]


def test_the_data_challenges_a_node_bonds_in_a_day_are_capped(world) -> None:
    """[root_lane].max_challenges_per_day = 1: a round whose verdict list the producer cannot
    read is challenged; the next such round, the same day, is not (its bond would be the
    second), and the audit's error names the cap and the command that sends one."""
    world.producer.root.challenge_lists = True
    world.producer.root.max_challenges_per_day = 1
    rounds = []
    for _ in range(2):
        r = world.sealed()
        world.voted(r)
        # (the service folds no earnings of rounds posted by hand: none written, none read)
        withheld = world.verdicts(r, earned=False)
        world.post_verdicts(r, withheld, LocalStore(world.tmp / f"elsewhere-{r}"))
        world.swarm.goto(_due(world, r, world.windows.verdict_round(r)))
        world.producer.publisher.flush()
        rounds.append(r)
    [challenged] = world.events("rootlane.challenged")
    assert challenged["round"] == rounds[0]
    audit = world.producer.journal.outbox(f"audit:{rounds[1]}")
    assert audit.status == PENDING
    assert "1 data challenges bonded in the last 24 hours" in audit.error, audit.error
    assert f"sapo audit book {rounds[1]} --prove --challenge" in audit.error
    assert world.agg.client_book.round_of(rounds[1]).open_challenges == 0


def test_an_aggregator_that_challenges_and_answers_its_own_leaf_does_not_shield_its_list(
    world,
) -> None:
    """A withholding aggregator challenges one leaf of its own submission list and answers it
    at once (its bond back, for the gas): a leaf is challenged once, but the producer draws
    another leaf nobody challenged, and its challenge, unanswered, voids the root."""
    world.producer.root.challenge_lists = True
    r = world.sealed()
    world.producer.publisher.flush()
    root = _withheld_submissions(world, r, others=2)
    aggregator = world.nodes[4].tx.account
    world.book.send(aggregator, "challengeData", r, False, 0, value=CHALLENGE_BOND)
    world.book.send(
        aggregator, "answerSubmission", r, 0, submission_struct(root.signed[0]), root.proof(0)
    )
    world.swarm.goto(_due(world, r, world.windows.post_round(r)))
    world.producer.publisher.flush()
    [challenged] = world.events("rootlane.challenged")
    assert challenged["verdict_tree"] is False and challenged["index"] in (1, 2)
    world.swarm.goto(world.windows.challenge_end(r) + 2)
    world.producer.publisher.flush()
    claim = world.producer.journal.outbox(f"challenge:{r}:submissions:{challenged['index']}")
    assert claim.status == DONE and lies(world.book, claim) == ["data withheld"]
    assert world.agg.client_book.round_of(r).submissions_voided


def test_a_challenge_answered_on_chain_pays_its_bond_and_that_aggregator_is_not_challenged_again(
    world,
) -> None:
    """With [root_lane].challenge_lists, a producer whose round's submission list never reaches
    it challenges a leaf in the last rounds of the window; whoever holds the list (here another
    node) answers it on chain and takes the challenge bond; the producer's claim finds it
    answered and says so. An aggregator that answered once may be one that withholds to collect
    bonds: the node does not challenge its lists again, and names the command instead."""
    world.producer.root.challenge_lists = True
    r = world.sealed()
    world.producer.publisher.flush()
    root = _withheld_submissions(world, r)
    world.producer.publisher.flush()
    listed = world.producer.journal.outbox(f"listed:{r}")
    assert listed.status == PENDING and not world.events("rootlane.challenged")

    world.swarm.goto(_due(world, r, world.windows.post_round(r)))
    world.producer.publisher.flush()
    [challenged] = world.events("rootlane.challenged")  # once, though both checks read it
    assert (challenged["verdict_tree"], challenged["index"]) == (False, 0)
    answerer = world.nodes[5]
    before = world.swarm.w3.eth.get_balance(answerer.account_address)
    answered = world.book.send(
        answerer.tx.account,
        "answerSubmission",
        r,
        0,
        submission_struct(root.signed[0]),
        root.proof(0),
    )
    gas = answered.gas_used * answered.effective_gas_price
    assert world.swarm.w3.eth.get_balance(answerer.account_address) - before == (
        CHALLENGE_BOND - gas
    )

    world.swarm.goto(world.windows.challenge_end(r) + 2)
    world.producer.publisher.flush()
    claim = world.producer.journal.outbox(f"challenge:{r}:submissions:0")
    assert claim.status == DROPPED and "our challenge bond paid it" in claim.error
    [answered] = world.events("rootlane.answered")
    assert answered["aggregator"] == world.agg.address and answered["round"] == r
    assert not world.agg.client_book.round_of(r).void

    r2 = world.sealed()  # the same aggregator withholds again
    world.producer.publisher.flush()
    _withheld_submissions(world, r2)
    world.swarm.goto(_due(world, r2, world.windows.post_round(r2)))
    world.producer.publisher.flush()
    listed = world.producer.journal.outbox(f"listed:{r2}")
    assert listed.status == PENDING and "answered a challenge of ours before" in listed.error
    assert f"sapo audit book {r2} --prove --challenge" in listed.error
    assert len(world.events("rootlane.challenged")) == 1  # r's only


def test_a_node_whose_own_store_is_down_challenges_nothing(world) -> None:
    """With [root_lane].challenge_lists, a producer whose own IPFS daemon does not answer (its
    API at a loopback port nobody listens on) cannot read its round's submission list either;
    that is no fault of the aggregator's, which published it: in the window's last rounds the
    node challenges nothing and says its store is down."""
    world.producer.root.challenge_lists = True
    r = world.sealed()
    world.producer.publisher.flush()
    world.post_and_draw(r)  # the list published on the store the aggregator and checkers share
    dead = f"/ip4/127.0.0.1/tcp/{free_loopback_port()}/http"
    world.producer.root.store = IpfsStore(dead, index_dir=world.tmp / "dead-store")
    world.swarm.goto(_due(world, r, world.windows.post_round(r)))
    world.producer.publisher.flush()
    listed = world.producer.journal.outbox(f"listed:{r}")
    assert listed.status == PENDING and "127.0.0.1" in listed.error, listed
    assert not world.events("rootlane.challenged")
    assert world.agg.client_book.round_of(r).open_challenges == 0
    assert not world.producer.services.health.store_ok


def test_a_list_that_is_not_its_roots_data_gets_no_vote_and_is_named_to_its_producer(
    world, caplog
) -> None:
    """A lying aggregator posts the root of the producer's receipted submission with a list of
    other bytes: no checker reads a batch from it, and the producer's check names the challenge
    to send (a data challenge costs a bond: an operator's call)."""
    r = world.sealed()
    world.producer.publisher.flush()
    root = SubmissionRoot(world.agg.service.collectors[r].submissions.values())
    other = sign_submissions(world.book, [world.nodes[5]], r)
    store = LocalStore(world.tmp / "blocks")
    wrong = publish_list(store, "submissions", r, submission_list(other), r + 100)
    world.swarm.goto(world.windows.post_round(r))
    aggregator = world.nodes[4].tx.account
    digest = cid_to_digest(wrong)
    world.book.draw_to(world.nodes[4], r)  # (drawn to it: the only one enlisted)
    world.book.send(aggregator, "postSubmissions", r, root.root, 1, digest, value=BOND)
    world.swarm.mine()
    world.book.send(aggregator, "drawBeacon", r)
    for checker in world.checkers:
        checker.intake.poll()
        checker.publisher.flush()
        assert not [k for k in checker.outbox() if world.me.lower() in k]
    assert "is not its root's data" in caplog.text
    world.producer.publisher.flush()
    entry = world.producer.journal.outbox(f"listed:{r}")
    assert entry.status == DROPPED and f"sapo audit book {r} --prove --challenge" in entry.error


def claim_book(config: Path) -> tuple[int, dict | str]:
    done = sapo_run("rewards", "claim", "--book", "--config", str(config), "--json")
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


def wait_subscribed(inbox: VoteInbox, timeout_s: float = 10.0) -> None:
    """Blocks until the producer's daemon lists its topic among its subscriptions (a vote
    published before cannot reach it)."""
    _until(lambda: inbox.topic in inbox.pubsub.topics(), "subscribed", timeout_s)


def _until(done, what: str, timeout_s: float = 30.0, step=None) -> None:
    """Waits (calling `step` between looks) until `done()`; fails naming `what`."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what}")
        if step is not None:
            step()
        time.sleep(0.2)


def test_a_quorum_the_aggregator_drops_is_relayed_by_the_checkers_and_proven_by_the_producer(
    chain, policy, tmp_path: Path
) -> None:
    """[root_lane].relay_votes, over real js-ipfs daemons with pubsub on (kubo's RPC). The
    aggregator posts the no-credit root although it receipted a quorum of the producer's
    checkers' agreeing votes (it dropped them). Each seated checker relays its receipted vote
    to the producer's topic, but only once the producer's daemon is on it (the peer id its
    on-chain metadata names): while the producer does not listen, the relays wait, and the
    producer's audit of the verdict root, finding its batch uncredited with no relayed vote
    yet, stays open. Once the producer subscribes, the relays go, its inbox keeps them, and its
    next audit proves the dropped quorum (proveUncredited): the root is void, half the bond the
    producer's. In the verdict round each checker publishes its vote a second time. What
    strangers (the aggregator among them) publish on the topic keeps nothing: a message that is
    no vote, a vote on another batch, a vote signed by a fresh key and receipted by the
    aggregator itself, and a signature of spaces (which once stopped the node)."""
    producer_ipfs = IpfsDaemon(tmp_path / "ipfs-producer", swarm=True, pubsub=True)
    checkers_ipfs = IpfsDaemon(tmp_path / "ipfs-checkers", swarm=True, pubsub=True)
    start_daemons([producer_ipfs, checkers_ipfs])
    stop = threading.Event()
    world = None
    try:
        world = World(
            chain, policy, tmp_path / "world", relay=(producer_ipfs.api, checkers_ipfs.api)
        )
        peer = IpfsStore(producer_ipfs.api, tmp_path / "pins-producer").peer()
        world.nodes[0].set_metadata(json.dumps({"ipfs": peer}))  # where its daemon is
        checkers_store = IpfsStore(checkers_ipfs.api, tmp_path / "pins-checkers")
        assert checkers_store.connect([f"{producer_ipfs.swarm_address}/p2p/{peer['id']}"])[0]

        r = world.sealed()
        world.producer.publisher.flush()
        world.listed_and_opened(r)
        seated = world.seated(r)
        quorum = world.swarm.ledger.params().quorum
        assert len(seated) >= quorum
        for checker in world.checkers:
            checker.intake.poll()  # votes, receipted by the aggregator, and queues its relay
            checker.publisher.flush()
            checker.publisher.flush()  # a first try: nobody listens on the topic
        relay = f"relay:{r}:{world.me.lower()}"
        for checker in world.checkers:
            assert (relay in checker.outbox()) == (checker in seated)
        for checker in seated:
            waiting = checker.journal.outbox(relay)
            assert waiting.status == PENDING and "not on its topic yet" in waiting.error

        # the aggregator drops the quorum it receipted: the no-credit root
        world.swarm.goto(world.windows.verdict_round(r))
        agg = world.nodes[4].tx.account
        world.book.send(agg, "postVerdicts", r, NO_CREDITS_ROOT, 0, 0, bytes(32))
        world.producer.publisher.flush()  # uncredited, no relayed vote yet: the audit waits
        audit = world.producer.journal.outbox(f"audit:{r}")
        assert audit.status == PENDING and "waits for a quorum" in audit.error, audit

        inbox = VoteInbox(world.producer.root, world.producer.root.pubsub)
        listening = threading.Thread(target=inbox.run, args=(stop,), daemon=True)
        listening.start()
        wait_subscribed(inbox)

        def flush() -> None:
            for checker in seated:
                checker.publisher.flush()  # again, once its pause since the last try is over

        _until(lambda: all(c.outbox()[relay] == DONE for c in seated), "relayed", step=flush)
        _until(lambda: inbox.kept == len(seated), "kept by the producer")
        kept = world.producer.journal.relayed_votes(r)
        assert len(kept) == len(seated)
        # what /metrics shows of them (sapo_relayed_votes)
        assert NodeView(world.tmp / "producer").totals().relayed_votes == len(seated)
        again = f"relay-again:{r}:{world.me.lower()}"  # due in the verdict round: now
        _until(lambda: all(c.outbox()[again] == DONE for c in seated), "relayed again", step=flush)

        # strangers on the topic: nothing more is kept, and the inbox goes on
        pubsub = PubSub(checkers_ipfs.api)
        name = relay_topic(world.swarm.w3.eth.chain_id, world.book.contract.address, world.me)
        domain = world.producer.root.domain
        vote = Signed.from_bytes(kept[0][0], domain).message
        receipts = ReceiptSigner(domain, agg.key)
        unseated = Signed.sign(vote, domain, Account.create().key)  # the aggregator's own key
        other_batch = Signed.sign(
            vote.model_copy(update={"digest": "0x" + "11" * 32}),
            domain,
            world.checkers[0].ledger.tx.account.key,
        )
        another = Signed.sign(vote, domain, Account.create().key)
        spaces = another.model_copy(update={"signature": "0x" + " " * 130})
        junk = [
            b"not json",
            relay_message(unseated.to_bytes(), receipts.sign(unseated)),
            relay_message(other_batch.to_bytes(), receipts.sign(other_batch)),
            relay_message(spaces.to_bytes(), receipts.sign(another)),
        ]
        refused_before = sum(inbox.refused.values())
        for data in junk:
            pubsub.publish(name, data)
        _until(lambda: sum(inbox.refused.values()) >= refused_before + len(junk), "refused")
        assert inbox.refused[UNSEATED] >= 1 and inbox.refused[OTHER_BATCH] >= 1
        assert inbox.refused[BAD_SIGNATURE] >= 1, inbox.refused
        assert listening.is_alive()
        assert world.producer.journal.relayed_votes(r) == kept

        # the producer's next pass audits again (a relayed vote more) and proves the lie
        balance = world.swarm.w3.eth.get_balance(world.me)
        world.producer.publisher.flush()
        entry = world.producer.journal.outbox(f"audit:{r}")
        assert entry.status == DONE and entry.tx_hash, entry
        assert lies(world.book, entry) == ["a receipted quorum left uncredited"]
        gained = world.swarm.w3.eth.get_balance(world.me) - balance
        assert gained == BOND // 2 - _gas(world, entry.tx_hash)
        assert world.agg.client_book.round_of(r).verdicts_voided
        [proven] = world.events("rootlane.proven")
        assert proven["lie"] == "a receipted quorum left uncredited"
    finally:
        stop.set()
        if world is not None:
            world.agg.stop()
        producer_ipfs.stop()
        checkers_ipfs.stop()
