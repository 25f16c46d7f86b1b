// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// @title SeatDraw
/// @notice The committee draw, as pure functions of public data, so that anyone can recompute
/// who sits on a committee (the Python client does: client/chain/models.py, Beacon.seats).
library SeatDraw {
    /// @dev A beacon from a block hash: its low 88 bits (what a submission stores), never 0 for
    /// a real hash (0 means "not drawn"); 0 when the hash is (a block the EVM no longer knows).
    function beaconFrom(bytes32 hash) internal pure returns (uint256) {
        if (hash == bytes32(0)) return 0;
        uint256 b = uint256(hash) & type(uint88).max;
        return b == 0 ? 1 : b;
    }

    /// @dev The seats `checker` draws on the committee of `node`'s submission of `round`:
    /// `trials` independent trials, each won with probability stake / total. With base =
    /// keccak256(abi.encode(beacon, round, node, checker)), trial j is won when
    /// (keccak256(abi.encode(base, j)) >> 128) * total < stake << 128. A checker with a share s
    /// of its family's stake thus holds Binomial(trials, s) seats: about s of a committee's,
    /// however its stake is split among addresses.
    function seats(
        uint256 beacon,
        uint64 round,
        address node,
        address checker,
        uint256 stake,
        uint256 total,
        uint256 trials
    ) internal pure returns (uint256 won) {
        uint256 scaled = stake << 128;
        bytes32 base = keccak256(abi.encode(beacon, round, node, checker));
        for (uint256 j; j < trials; ++j) {
            if ((uint256(keccak256(abi.encode(base, j))) >> 128) * total < scaled) ++won;
        }
    }
}
