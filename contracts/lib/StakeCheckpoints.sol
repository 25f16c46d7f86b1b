// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// @title StakeCheckpoints
/// @notice A history of one stake sum (a node's active stake, a family's, all of it): one
/// checkpoint per block in which it changed, so that a committee is drawn from stake as of its
/// submission's block, whatever moved since.
/// @dev Not OpenZeppelin's Checkpoints (Trace208), which would fit the idea but not this ledger:
/// its checkpoint packs a uint48 key below a uint208 value where this ledger's storage holds a
/// uint64 block below a uint192 value, its push reverts on an older key where a block number
/// never goes back, and its lookups (upperLookupRecent) probe sqrt(length) from the end before
/// a binary search, where ours reads the last checkpoint first: stake moves rarely, so the draw
/// of a vote on a recent submission finds its answer there in one read.
library StakeCheckpoints {
    struct Checkpoint {
        uint64 fromBlock;
        uint192 value;
    }

    /// @dev Records `value` as of this block: a later change in the same block overwrites the
    /// block's checkpoint, so a history holds one per block.
    function record(Checkpoint[] storage history, uint256 value) internal {
        uint256 len = history.length;
        if (len != 0 && history[len - 1].fromBlock == block.number) {
            history[len - 1].value = uint192(value);
        } else {
            history.push(Checkpoint({fromBlock: uint64(block.number), value: uint192(value)}));
        }
    }

    /// @dev The value recorded last at or before `blockNumber` (0 before the first checkpoint):
    /// the last checkpoint first, then a binary search of those before it.
    function valueAt(Checkpoint[] storage history, uint256 blockNumber) internal view returns (uint256) {
        uint256 hi = history.length;
        if (hi == 0) return 0;
        Checkpoint storage last = history[hi - 1];
        if (last.fromBlock <= blockNumber) return last.value;
        uint256 lo;
        --hi; // the answer is before the last checkpoint: the first index past it is in [0, hi]
        while (lo < hi) {
            uint256 mid = (lo + hi) / 2;
            if (history[mid].fromBlock > blockNumber) hi = mid;
            else lo = mid + 1;
        }
        return lo == 0 ? 0 : history[lo - 1].value;
    }

    /// @dev The block of the last change (0 when it never changed).
    function lastChange(Checkpoint[] storage history) internal view returns (uint64) {
        uint256 len = history.length;
        return len == 0 ? 0 : history[len - 1].fromBlock;
    }
}
