"""A node against its ledger on anvil: the task seed it computes is the ledger's, and its data
dir is bound to one deployment."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.node.journal import Journal, LocalRoundRecord
from client.node.rollouts import task_seed
from tests.harness.ledger_swarm import Swarm


@pytest.mark.e2e
def test_local_task_seed_is_the_ledgers(swarm) -> None:
    node = swarm.node()
    round_ = 3
    on_chain = node.task_seed(round_, node.account_address)
    local = task_seed(swarm.w3.eth.chain_id, node.address, round_, node.account_address)
    assert local == on_chain


def test_a_data_dir_is_bound_to_one_deployment_and_refuses_another_unchanged(
    anvil, tmp_path: Path
) -> None:
    """A node's data dir records its ledger deployment the first time a node starts in it; a
    data dir of another deployment is refused before anything in it changes, a data dir from
    before deployments were recorded is refused only when its journal is ahead of the chain,
    and a corrected [chain].ledger_deploy_block still names the same deployment."""
    from client.node.datadir import DataDir
    from client.node.deployment import (
        UnreadableDeployment,
        WrongDeployment,
        bind_data_dir,
        check_data_dir,
    )

    first, second = Swarm(anvil), Swarm(anvil)  # two deployments on one chain
    block = first.deploy_tx.block_number
    data_dir = DataDir(tmp_path / "node")
    here = check_data_dir(data_dir, first.ledger, block)
    assert not data_dir.path.exists()  # a check writes nothing
    bind_data_dir(data_dir, here)
    assert check_data_dir(data_dir, first.ledger, block) == here
    assert check_data_dir(data_dir, first.ledger, 0) == here  # deploy block corrected later
    recorded = data_dir.deployment.read_bytes()
    with pytest.raises(WrongDeployment, match="another deployment") as refused:
        check_data_dir(data_dir, second.ledger, second.deploy_tx.block_number)
    assert first.ledger.address in str(refused.value) and second.ledger.address in str(
        refused.value
    )
    assert data_dir.deployment.read_bytes() == recorded

    # a journal from before deployments were recorded, at a round this ledger has not reached
    legacy = DataDir(tmp_path / "legacy")
    legacy.path.mkdir()
    journal = Journal(legacy.journal)
    journal.add_local_round(
        LocalRoundRecord(first.ledger.current_round() + 9, 0, b"x", 8, 1, 1.0, 2.0)
    )
    journal.close()
    files = {p.name: p.read_bytes() for p in legacy.path.iterdir()}
    with pytest.raises(WrongDeployment, match="journal up to round"):
        check_data_dir(legacy, first.ledger, block)
    assert {p.name: p.read_bytes() for p in legacy.path.iterdir()} == files
    current = DataDir(tmp_path / "current")
    current.path.mkdir()
    journal = Journal(current.journal)
    journal.add_local_round(LocalRoundRecord(first.ledger.current_round(), 0, b"x", 8, 1, 1.0, 2.0))
    journal.close()
    assert check_data_dir(current, first.ledger, block) == here  # taken as this deployment's

    data_dir.deployment.write_text("{not json")
    with pytest.raises(UnreadableDeployment, match="cannot be read"):
        check_data_dir(data_dir, first.ledger, block)


def test_the_read_model_stays_bounded_as_the_swarm_ages_and_counts_as_the_ledger(swarm) -> None:
    """The TUI's and /metrics' read of the ledger keeps running totals: after 40 rounds a peer's
    record holds only the rounds whose credit can still change, ours only the last few (and
    the credited ones not claimed yet), and it reads the swarm's submissions and credit but
    only the votes that concern us; every count is still the ledger's."""
    from client.chain.ledger_events import Attested
    from client.node.view.ledger import LedgerView
    from tests.harness.ledger_swarm import digest

    me, *peers = [swarm.node() for _ in range(4)]
    swarm.bind(swarm.deployer).fund(100 * 10**18)
    view = LedgerView(swarm.ledger, me.account_address, keep_rounds=5, clock=swarm.now)
    view.reader.start_block = view.cursor.next_block = swarm.deploy_tx.block_number
    params = me.params()
    rounds = 40
    for round_ in range(rounds):
        if round_:
            swarm.goto(round_)
        for i, node in enumerate([me, *peers]):
            node.submit(round_, digest(f"{round_}-{i}"), 8, 1_000 * (i + 1), 100 * (i + 1))
        swarm.await_beacon(round_)
        # peers[0] credits everyone every round but every third; peers[1] votes on peers[2]
        # (a vote that is none of our business)
        if round_ % 3:
            for node in [me, *peers[1:]]:
                sig = (1_000 * (1 + [me, *peers].index(node)), 100 * (1 + [me, *peers].index(node)))
                peers[0].attest(round_, node.account_address, *sig, findings=0)
        peers[1].attest(round_, peers[2].account_address, 3_000, 300, findings=0)
        if round_ == 30:
            claimed = [r for r in range(round_) if params.is_final(r, round_) and r % 3]
            me.claim(claimed)
        view.refresh()

    current = params.round_at(swarm.now())
    horizon = params.final_after(0) + 2  # rounds not final (a margin early) and this one
    for address, record in view.nodes.items():
        assert len(record.open) <= horizon, (address, sorted(record.open))
        submissions = [me.submission(r, address) for r in range(rounds)]
        row = next(p for p in view.peers({}) if p.address.lower() == address)
        assert row.submissions == rounds and row.last_round == rounds - 1
        assert row.credited == sum(s.credited for s in submissions)
    # older rounds, claimed or uncredited, are forgotten; the credited ones not claimed stay
    unclaimed = {r for r in range(rounds) if r % 3 and r not in claimed}
    recent = {r for r in range(rounds) if r >= current - 5}
    assert set(view.our_submissions()) == recent | unclaimed
    outcomes = view.tally.outcomes
    final = [r for r in range(rounds) if params.is_final(r, current)]
    assert outcomes["credited"] == sum(1 for r in final if r % 3)
    assert outcomes["uncredited"] == sum(1 for r in final if r % 3 == 0)
    assert outcomes["pending"] == rounds - len(final)
    assert len(view.payouts) == 1 and view.account.total_paid == view.payouts[0].amount
    # what it reads: the swarm's submissions and credit, and only our part of the votes
    read = [e.typed() for e in view.reader.read_any(view._queries)]
    votes = [e for e in read if isinstance(e, Attested)]
    mine = me.account_address.lower()
    assert votes and all(mine in (e.node, e.attester) for e in votes)
    everyone = list(view.reader.events(Attested))
    assert len(everyone) > len(votes)
