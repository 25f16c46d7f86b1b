"""The publisher and the intake on their own, on a real anvil ledger and a local block store: no
node loop, no devnet. A producer's publisher seals, pins and submits its batch once, even when its
journal lost the receipt; a checker's intake discovers the batch, re-verifies it and queues the
vote its seat allows, which its publisher then casts; a forged claim gets a dispute and the
settlement that makes its slash land; what the chain refuses is dropped with the chain's reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from client.chain.models import VoteSide
from client.node.journal.outbox import Attest, OutboxStatus, Settle, Submit
from client.node.journal.states import RoundPhase, Verdict
from tests.harness.ledger_swarm import ETH, Swarm
from tests.harness.policies import loaded_seed_test
from tests.harness.sides import Side

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    return loaded_seed_test(seed_test, tmp_path_factory.mktemp("seed") / "seed-test")


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
