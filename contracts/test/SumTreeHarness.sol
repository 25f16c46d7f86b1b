// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {SumTree} from "../lib/SumTree.sol";

/// @notice Test-only: `SumTree` behind external calls, so that client/chain/sumtree.py's trees
/// and proofs are checked against the contract's on a real chain. Never deployed outside tests.
contract SumTreeHarness {
    function leaf(bytes32 dataHash, uint128 amount) external pure returns (SumTree.Node memory) {
        return SumTree.leaf(dataHash, amount);
    }

    function parent(SumTree.Node calldata left, SumTree.Node calldata right)
        external
        pure
        returns (SumTree.Node memory)
    {
        return SumTree.parent(left, right);
    }

    function rootOf(SumTree.Node calldata node, uint256 index, SumTree.Node[] calldata siblings)
        external
        pure
        returns (SumTree.Node memory)
    {
        return SumTree.rootOf(node, index, siblings);
    }
}
