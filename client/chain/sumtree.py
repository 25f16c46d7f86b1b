"""Merkle-sum trees, as contracts/lib/SumTree.sol verifies them: each node a hash and the sum of
the amounts under it, a parent's hash committing to both children's hashes and sums (so a root
carries a total no leaf can be hidden from), leaves and internal nodes under different prefixes
(0x00, 0x01). A tree of n leaves is the complete binary tree of depth ceil(log2 n), padded with
empty nodes (hash 0, sum 0); a proof is the siblings from the leaf up, and leaf i's side at each
height is bit i of its index (0: left).

What a round's verdict root will be built from (docs/scaling.md); the tests check every tree and
proof against the contract on anvil.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from client.chain.hashing import keccak256

MAX_DEPTH = 32
MAX_SUM = 2**128 - 1


@dataclass(frozen=True)
class Node:
    hash: bytes  # 32 bytes
    sum: int

    def __post_init__(self) -> None:
        if len(self.hash) != 32:
            raise ValueError(f"a node's hash is 32 bytes, got {len(self.hash)}")
        if not 0 <= self.sum <= MAX_SUM:
            raise ValueError(f"a node's sum is a uint128, got {self.sum}")

    def as_abi(self) -> tuple[bytes, int]:
        return (self.hash, self.sum)


EMPTY = Node(bytes(32), 0)


def leaf(data_hash: bytes, amount: int) -> Node:
    """A leaf over `data_hash` (the hash of what the leaf says) carrying `amount`."""
    if len(data_hash) != 32 or not 0 <= amount <= MAX_SUM:
        raise ValueError("a leaf is a 32-byte hash and a uint128 amount")
    return Node(keccak256(b"\x00" + data_hash + amount.to_bytes(16, "big")), amount)


def parent(left: Node, right: Node) -> Node:
    total = left.sum + right.sum
    if total > MAX_SUM:
        raise ValueError("the sum leaves 128 bits")
    packed = (
        b"\x01"
        + left.hash
        + left.sum.to_bytes(16, "big")
        + right.hash
        + right.sum.to_bytes(16, "big")
    )
    return Node(keccak256(packed), total)


class SumTree:
    """A whole tree over `leaves` (in their order), its levels kept for proofs."""

    def __init__(self, leaves: Sequence[Node]):
        if not leaves:
            raise ValueError("a tree has at least one leaf")
        depth = (len(leaves) - 1).bit_length()
        if depth > MAX_DEPTH:
            raise ValueError(f"at most 2**{MAX_DEPTH} leaves")
        level = list(leaves) + [EMPTY] * ((1 << depth) - len(leaves))
        self.levels = [level]
        while len(level) > 1:
            level = [parent(level[i], level[i + 1]) for i in range(0, len(level), 2)]
            self.levels.append(level)

    @property
    def root(self) -> Node:
        return self.levels[-1][0]

    @property
    def depth(self) -> int:
        return len(self.levels) - 1

    def proof(self, index: int, height: int = 0) -> list[Node]:
        """The siblings from the node at (`height`, `index`) up to the root."""
        if not 0 <= index < len(self.levels[height]):
            raise IndexError(f"no node {index} at height {height}")
        siblings = []
        for level in self.levels[height:-1]:
            siblings.append(level[index ^ 1])
            index >>= 1
        return siblings


def root_of(node: Node, index: int, siblings: Sequence[Node]) -> Node:
    """The root reached from `node` at `index` through `siblings` (SumTree.rootOf)."""
    if len(siblings) > MAX_DEPTH or index >> len(siblings):
        raise ValueError("a proof longer than 32, or an index outside its tree")
    for i, sibling in enumerate(siblings):
        node = parent(node, sibling) if (index >> i) & 1 == 0 else parent(sibling, node)
    return node
