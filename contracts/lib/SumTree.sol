// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// @title SumTree
/// @notice A Merkle-sum tree: each node is a hash and the sum of the amounts of the leaves under
/// it, and a parent's hash commits to both children's hashes *and sums*, so that a root carries
/// a total (a round's credited signal) that no leaf can be hidden from. Leaves and internal
/// nodes hash under different prefixes (0x00, 0x01): a leaf cannot pass for an internal node
/// (the second-preimage attack on plain Merkle trees). A tree of n leaves is the complete binary
/// tree of depth ceil(log2 n), padded with empty nodes (hash 0, sum 0); leaf i's path reads the
/// bits of i from the bottom (0: it is the left child). client/chain/sumtree.py builds the same
/// trees and proofs.
library SumTree {
    struct Node {
        bytes32 hash;
        uint128 sum;
    }

    uint256 internal constant MAX_DEPTH = 32;

    error SumOverflow();
    error ProofTooLong(uint256 depth);
    error IndexOutsideTree(uint256 index, uint256 depth);

    /// @dev A leaf over `dataHash` (the hash of what the leaf says) with `amount`.
    function leaf(bytes32 dataHash, uint128 amount) internal pure returns (Node memory) {
        return Node(keccak256(abi.encodePacked(bytes1(0x00), dataHash, amount)), amount);
    }

    /// @dev The parent of `left` and `right`; reverts if the sum leaves 128 bits.
    function parent(Node memory left, Node memory right) internal pure returns (Node memory) {
        uint256 total = uint256(left.sum) + uint256(right.sum);
        if (total > type(uint128).max) revert SumOverflow();
        return Node(parentHash(left, right), uint128(total));
    }

    /// @dev A parent's hash alone, whatever its children's sums add up to: a proof that they do
    /// not add up to what the parent's own parent committed (even past 128 bits) reads it.
    function parentHash(Node memory left, Node memory right) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked(bytes1(0x01), left.hash, left.sum, right.hash, right.sum));
    }

    /// @dev The depth of the complete tree of `n` leaves (ceil(log2 n); 0 for one leaf).
    function depth(uint256 n) internal pure returns (uint256 d) {
        while ((uint256(1) << d) < n) ++d;
    }

    /// @dev Whether `node`, at (`height`, `index`) of the tree of `leaves` leaves, reaches the
    /// root (`root`, `total`) through `siblings`, which must be as long as that tree is deep
    /// above it: no leaf hides below a proof cut short.
    function reaches(
        Node memory node,
        uint256 index,
        Node[] memory siblings,
        uint256 height,
        uint256 leaves,
        bytes32 root,
        uint128 total
    ) internal pure returns (bool) {
        if (siblings.length + height != depth(leaves)) return false;
        Node memory top = rootOf(node, index, siblings);
        return top.hash == root && top.sum == total;
    }

    /// @dev The root reached from `node`, at position `index` among the nodes of its height,
    /// through `siblings` (the nearest first).
    function rootOf(Node memory node, uint256 index, Node[] memory siblings) internal pure returns (Node memory) {
        uint256 levels = siblings.length;
        if (levels > MAX_DEPTH) revert ProofTooLong(levels);
        if (index >> levels != 0) revert IndexOutsideTree(index, levels);
        for (uint256 i = 0; i < levels; i++) {
            node = (index >> i) & 1 == 0 ? parent(node, siblings[i]) : parent(siblings[i], node);
        }
        return node;
    }
}
