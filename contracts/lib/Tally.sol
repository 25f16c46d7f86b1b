// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {ISwarmLedger} from "../ISwarmLedger.sol";

// A vote's side, as a committee's tally and a voter's record (LedgerState's _votes) write it.
uint256 constant AGREE = 1;
uint256 constant DISPUTE = 2;
uint256 constant UNAVAILABLE = 3;

/// @title Tally
/// @notice A committee's votes packed in 72 bits, so that a submission's tally shares the slot
/// its submit writes: the seats agreeing, disputing and unavailable (16 bits each, from bit 0;
/// at most 255 votes of 255 seats), then the three vote counts (8 bits each, from bit 48).
/// Side index i is side - 1: 0 agree, 1 dispute, 2 unavailable.
library Tally {
    /// @dev A tally plus one vote of `seats` on `side`; reverts past 255 votes a side, which
    /// keeps every seat count under 2^16. `round` and `node` name the submission in the error.
    function add(uint72 t, uint256 seats, uint256 side, uint64 round, address node) internal pure returns (uint72) {
        uint256 i = side - 1;
        if (count(t, i) == type(uint8).max) revert ISwarmLedger.TooManyAttestations(round, node);
        return uint72(uint256(t) + (seats << (16 * i)) + (1 << (48 + 8 * i)));
    }

    /// @dev Seats of side index i in a tally.
    function seatsIn(uint72 t, uint256 i) internal pure returns (uint256) {
        return (uint256(t) >> (16 * i)) & 0xffff;
    }

    /// @dev Votes of side index i in a tally.
    function count(uint72 t, uint256 i) internal pure returns (uint256) {
        return (uint256(t) >> (48 + 8 * i)) & 0xff;
    }

    /// @dev A tally's verdict for credit: `quorum` checkers agreed and their seats are at least
    /// those of the checkers who disputed plus those who could not fetch the batch (no
    /// evidence, no credit; a tie is credited).
    function wins(uint72 t, uint256 quorum) internal pure returns (bool) {
        return count(t, 0) >= quorum && seatsIn(t, 0) >= seatsIn(t, 1) + seatsIn(t, 2);
    }

    /// @dev More seats disputed than agreed (unavailable seats count for neither).
    function disputes(uint72 t) internal pure returns (bool) {
        return seatsIn(t, 1) > seatsIn(t, 0);
    }
}
