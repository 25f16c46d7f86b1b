"""The publisher and the intake on their own, on a real anvil ledger and a local block store: no
node loop, no devnet. A producer's publisher seals, pins and submits its batch once, even when its
journal lost the receipt; a checker's intake discovers the batch, re-verifies it and queues the
vote its seat allows, which its publisher then casts; a forged claim gets a dispute and the
settlement that makes its slash land; what the chain refuses is dropped with the chain's reason.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from client.chain import Ledger
from client.chain.events import EventReader
from client.chain.models import VoteSide
from client.config.models import SapoSection, StoreSection
from client.node.clock import SystemClock
from client.node.eventlog import EventLog
from client.node.health import Health
from client.node.intake import Intake
from client.node.journal import Journal, LocalRoundRecord
from client.node.journal.outbox import Attest, OutboxStatus, Settle, Submit
from client.node.journal.states import RoundPhase, Verdict
from client.node.proving import Snapshots
from client.node.publishing import Publisher
from client.node.rollouts import task_seed
from client.node.services import Services
from client.policy import load_policy
from client.store import LocalStore, Sampling
from client.tasks import load_catalog
from tests.harness.batches import local_round
from tests.harness.ledger_swarm import ETH, Swarm
from tests.harness.policies import copied_seed_test

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    directory = copied_seed_test(seed_test, tmp_path_factory.mktemp("seed") / "seed-test")
    return load_policy(directory, device="cpu", dtype="float32")


class Side:
    """One node's publisher and intake over its own journal, on a shared local block store."""

    def __init__(self, swarm: Swarm, ledger: Ledger, root: Path, policy, blocks: Path):
        root.mkdir(parents=True)
        self.ledger, self.policy = ledger, policy
        self.address = ledger.account_address
        events = EventLog(root / "events.jsonl")
        self.journal = Journal(root / "journal.sqlite")
        self.services = Services(
            ledger=ledger,
            params=ledger.params(),
            chain_id=swarm.w3.eth.chain_id,
            journal=self.journal,
            events=events,
            health=Health(events),
            clock=SwarmClock(swarm),
        )
        self.store_cfg = StoreSection(backend="local", store_dir=blocks)
        self.store = LocalStore(blocks, max_bytes=self.store_cfg.max_batch_bytes)
        self.catalog = load_catalog("tiny")
        sapo = SapoSection()
        self.publisher = Publisher(
            self.services,
            self.store,
            self.catalog,
            policy.descriptor(),
            Sampling.of(1.0, 1.0, 12),
            Snapshots(root / "weights"),
            store_cfg=self.store_cfg,
            sapo=sapo,
            metadata=lambda peer: "{}",
            reader=EventReader(ledger),
        )
        self.intake = Intake(
            self.services,
            self.store,
            self.catalog,
            self.publisher.wake,
            reader=EventReader(ledger),
            sapo=sapo,
            store_cfg=self.store_cfg,
            spool=root / "spool",
        )

    def generate(self, round_: int) -> None:
        """Journals one real local round of `round_`, as the compute stage does."""
        seed = task_seed(self.services.chain_id, self.ledger.address, round_, self.address)
        lr = local_round(
            self.policy, seed=seed, round_=round_, node=self.address, k=0, items=4, completions=4
        )
        part = lr.part.model_dump_json().encode()
        record = LocalRoundRecord(round_, 0, part, 16, 0, 0.0, 1.0)
        self.journal.add_local_round(record)

    def outbox(self) -> dict[str, OutboxStatus]:
        return {e.key: e.status for e in self.journal.outbox_entries()}


class SwarmClock(SystemClock):
    """The node's clock on the test chain's time (the swarm moves it, block by block)."""

    def __init__(self, swarm: Swarm):
        super().__init__()
        self.swarm = swarm

    def now(self) -> float:
        return float(self.swarm.now())

    def wait_until(self, moment: float, stop: threading.Event, *, at_most: float = 1.0) -> bool:
        return stop.wait(min(at_most, 0.05))


@pytest.fixture
def pair(chain, policy, tmp_path: Path) -> tuple[Swarm, Side, Side]:
    swarm = Swarm(chain)
    blocks = tmp_path / "blocks"
    producer = Side(swarm, swarm.node(2 * ETH), tmp_path / "producer", policy, blocks)
    checker = Side(swarm, swarm.node(50 * ETH), tmp_path / "checker", policy, blocks)
    return swarm, producer, checker


def test_a_sealed_batch_is_pinned_then_submitted_once_even_when_the_receipt_was_lost(
    pair,
) -> None:
    swarm, producer, _ = pair
    swarm.goto(1)
    producer.generate(1)
    assert producer.publisher.seal(1)
    assert producer.outbox() == {"pin:1": "pending", "submit:1": "pending"}
    producer.publisher.flush()
    assert producer.outbox() == {
        "pin:1": "done",
        "submit:1": "done",
        "open:1": "pending",
        "settle:1": "pending",
        "appeal:1": "pending",
    }
    record = producer.journal.round(1)
    assert record.phase == RoundPhase.CONFIRMED and record.cid
    on_chain = producer.ledger.submission(1, producer.address)
    assert on_chain.digest.lower() == record.digest.lower()
    # a crash after the transaction was mined and before the journal said so: the submission
    # is found on chain, not sent a second time (which the ledger would refuse: the round lost)
    with producer.journal.db.tx() as db:
        db.execute("UPDATE outbox SET status = 'pending' WHERE key = 'submit:1'")
    nonce = swarm.w3.eth.get_transaction_count(producer.address)
    producer.publisher.flush()
    assert producer.outbox()["submit:1"] == OutboxStatus.DONE
    assert swarm.w3.eth.get_transaction_count(producer.address) == nonce
    assert not producer.publisher.seal(2)  # nothing generated in round 2: nothing to seal


def test_the_checker_verifies_the_batch_and_casts_the_vote_its_seat_allows(pair) -> None:
    swarm, producer, checker = pair
    swarm.goto(1)
    producer.generate(1)
    producer.publisher.seal(1)
    producer.publisher.flush()
    swarm.await_beacon(1, producer.address)
    assert checker.ledger.seats_of(1, producer.address, checker.address) > 0
    checker.intake.poll()  # outside run(): discovers, fetches and verifies right here
    [verdict] = checker.journal.peers.peer_verdicts()
    assert verdict["verdict"] == Verdict.VERIFIED and verdict["recomputed"] == verdict["claimed"]
    [vote] = [e.message for e in checker.journal.pending() if isinstance(e.message, Attest)]
    claim = producer.journal.outbox("submit:1").message
    assert isinstance(claim, Submit)
    assert (vote.node, vote.score, vote.signal, vote.findings) == (
        producer.address.lower(),
        claim.score,
        claim.signal,
        0,
    )
    checker.publisher.flush()
    assert checker.ledger.vote_of(checker.address, 1, producer.address)[0] == VoteSide.AGREED
    assert checker.outbox()[vote.key] == OutboxStatus.DONE
    # an agreement needs no settlement of ours; the first verdict's appeal waits for its window
    assert f"appeal-of:1:{producer.address.lower()}" in checker.outbox()
    assert not [k for k in checker.outbox() if k.startswith("settle:")]


def test_a_forged_claim_is_disputed_and_settled_by_the_checker(pair) -> None:
    swarm, producer, checker = pair
    swarm.goto(1)
    producer.generate(1)
    producer.publisher.seal(1)
    with producer.journal.db.tx() as db:  # the producer claims more signal than it generated
        db.execute(
            "UPDATE outbox SET payload = json_set(payload, '$.signal', "
            "json_extract(payload, '$.signal') + 10000) WHERE key = 'submit:1'"
        )
    producer.publisher.flush()
    swarm.await_beacon(1, producer.address)
    checker.intake.poll()
    pending = {type(e.message): e.message for e in checker.journal.pending()}
    vote = pending[Attest]
    assert vote.signal + 10_000 == producer.journal.outbox("submit:1").message.signal
    assert pending[Settle] == Settle(round=1, node=producer.address.lower())
    checker.publisher.flush()
    assert checker.ledger.vote_of(checker.address, 1, producer.address)[0] == VoteSide.DISPUTED
    assert checker.outbox()["settle:1:" + producer.address.lower()] == OutboxStatus.PENDING


def test_what_the_chain_refuses_or_a_closed_window_forbids_is_dropped_with_the_reason(
    pair,
) -> None:
    swarm, producer, checker = pair
    swarm.goto(4)  # round 0's window closed after round 3
    nobody = Attest(round=4, node=producer.address.lower(), score=1, signal=1, findings=0)
    late = Attest(round=0, node=producer.address.lower(), score=1, signal=1, findings=0)
    for message in (nobody, late):
        assert checker.journal.enqueue(message)
    checker.publisher.flush()
    entries = {e.key: e for e in checker.journal.outbox_entries()}
    assert entries[late.key].status == OutboxStatus.DROPPED
    assert "window closed" in entries[late.key].error
    # no submission of round 4: the ledger's revert, by its name, is the reason
    assert entries[nobody.key].status == OutboxStatus.DROPPED
    assert entries[nobody.key].error and entries[nobody.key].error != "the challenge window closed"
