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
