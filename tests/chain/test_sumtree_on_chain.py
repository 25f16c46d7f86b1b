"""Merkle-sum trees (client/chain/sumtree.py) as the contract verifies them
(contracts/lib/SumTree.sol, behind the test-only SumTreeHarness on anvil): every leaf's proof of
trees of 1 to 33 leaves reaches the same root, hash and total, on both sides; a proof of a moved
or re-weighted leaf does not; a leaf cannot pass for an internal node; sums past 128 bits and
proofs past 32 levels are refused alike."""

from __future__ import annotations

import random

import pytest
from web3.exceptions import ContractLogicError

from client.chain.artifacts import load_artifact
from client.chain.sumtree import MAX_SUM, Node, SumTree, leaf, parent, root_of
from tests.harness.ledger_swarm import Swarm, deploy_artifact


@pytest.fixture
def harness(swarm: Swarm):
    address = deploy_artifact(swarm, "SumTreeHarness")
    return swarm.w3.eth.contract(address=address, abi=load_artifact("SumTreeHarness")["abi"])


def on_chain(harness, node: Node, index: int, siblings: list[Node]) -> Node:
    found = harness.functions.rootOf(node.as_abi(), index, [s.as_abi() for s in siblings]).call()
    return Node(bytes(found[0]), found[1])


def test_every_proof_of_every_tree_reaches_the_same_root_on_both_sides(harness) -> None:
    rng = random.Random(59)
    for n in [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33]:
        leaves = [leaf(rng.randbytes(32), rng.randrange(2**64)) for _ in range(n)]
        tree = SumTree(leaves)
        assert tree.root.sum == sum(x.sum for x in leaves)
        for i, x in enumerate(leaves):
            proof = tree.proof(i)
            assert root_of(x, i, proof) == tree.root == on_chain(harness, x, i, proof)
        # an internal node's proof reaches it too (an inconsistent sum is proven from one)
        if tree.depth >= 2:
            assert on_chain(harness, tree.levels[1][1], 1, tree.proof(1, 1)) == tree.root
        first = leaves[0]
        assert tuple(harness.functions.leaf(bytes(32), 5).call()) == leaf(bytes(32), 5).as_abi()
        assert tuple(harness.functions.parent(first.as_abi(), first.as_abi()).call()) == (
            parent(first, first).as_abi()
        )


def test_a_moved_reweighted_or_disguised_leaf_does_not_reach_the_root(harness) -> None:
    rng = random.Random(7)
    leaves = [leaf(rng.randbytes(32), rng.randrange(1, 2**64)) for _ in range(6)]
    tree = SumTree(leaves)
    root = tree.root
    heavier = Node(leaves[2].hash, leaves[2].sum + 1)  # the same hash, a larger amount
    assert on_chain(harness, heavier, 2, tree.proof(2)) != root
    assert on_chain(harness, leaves[2], 3, tree.proof(2)) != root  # moved to another index
    # an internal node's preimage presented as a leaf's data: the prefixes differ
    inner = tree.levels[1][0]
    a, b = tree.levels[0][0], tree.levels[0][1]
    fake = leaf(inner.hash, inner.sum)
    assert fake.hash != parent(a, b).hash
    assert on_chain(harness, fake, 0, tree.proof(0, 1)) != root


def test_overflowing_sums_and_overlong_proofs_are_refused_on_both_sides(harness) -> None:
    big = Node(b"\x01" * 32, MAX_SUM)
    with pytest.raises(ValueError, match="128 bits"):
        parent(big, big)
    with pytest.raises(ContractLogicError):
        harness.functions.parent(big.as_abi(), big.as_abi()).call()
    siblings = [Node(bytes(32), 0)] * 33
    with pytest.raises(ValueError, match="longer than 32"):
        root_of(big, 0, siblings)
    with pytest.raises(ContractLogicError):
        on_chain(harness, big, 0, siblings)
    with pytest.raises(ContractLogicError):  # index 4 in a tree of depth 2
        on_chain(harness, big, 4, siblings[:2])
