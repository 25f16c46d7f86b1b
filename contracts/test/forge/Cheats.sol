// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// @notice The few forge cheatcodes these tests use, declared against forge's cheatcode address
/// (keccak256("hevm cheat code")). Written here rather than vendoring forge-std: the npm release
/// of forge-std is an old unofficial copy, and these signatures are forge's stable interface.
interface Vm {
    function warp(uint256 timestamp) external;
    function roll(uint256 blockNumber) external;
    function setBlockhash(uint256 blockNumber, bytes32 blockHash) external;
    function deal(address who, uint256 balance) external;
    function prank(address sender) external;
    function label(address who, string calldata name) external;
    function toString(uint256 value) external pure returns (string memory);
    function toString(address value) external pure returns (string memory);
    function createDir(string calldata path, bool recursive) external;
    function writeLine(string calldata path, string calldata data) external;
    function snapshotGasLastCall(string calldata name) external returns (uint256 gasUsed);
    function envOr(string calldata name, string calldata defaultValue) external view returns (string memory);
    function deployCode(string calldata artifactPath, bytes calldata constructorArgs) external returns (address);
    function addr(uint256 privateKey) external pure returns (address);
    function sign(uint256 privateKey, bytes32 digest) external pure returns (uint8 v, bytes32 r, bytes32 s);
    function getNonce(address account) external view returns (uint64);
}

/// @notice What forge reads from an invariant test contract to choose its fuzz targets.
struct FuzzSelector {
    address addr;
    bytes4[] selectors;
}

abstract contract CheatsBase {
    /// @dev The round book the suites' ledgers name (an address the tests act as: only it may
    /// escalate a batch or slash an equivocation)
    address internal constant BOOK = address(0xB00C);

    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    /// @dev The artifact a suite deploys as its ledger; scripts/mutate_ledger.py names a seeded fault's
    /// copy here instead (contracts/mutants/<fault>/SwarmLedger.sol, compiled with the suites in one
    /// build).
    string internal constant LEDGER_ARTIFACT = "contracts/SwarmLedger.sol:SwarmLedger";

    /// @dev The model families the suites' ledgers check: most nodes run FAMILY; OTHER_FAMILY is
    /// a second base whose nodes never check FAMILY's batches (nor the reverse).
    bytes32 internal constant FAMILY = keccak256("family: qwen2-style base");
    bytes32 internal constant OTHER_FAMILY = keccak256("family: llama-style base");

    /// @dev [FAMILY, OTHER_FAMILY], as a constructor takes them.
    function families() internal pure returns (bytes32[] memory list) {
        list = new bytes32[](2);
        list[0] = FAMILY;
        list[1] = OTHER_FAMILY;
    }

    /// @dev Deploys the ledger under test from its compiled artifact, with ABI-encoded constructor
    /// arguments. Not `new SwarmLedger(...)`: that would put the ledger's creation code inside each
    /// suite, and via-IR would optimize the whole ledger again for every suite that creates one.
    /// The suites hold it as an ISwarmLedger, never import SwarmLedger.sol: a change to the ledger
    /// (a gas check's inflated copy) then recompiles the ledger alone, not every suite with it.
    /// SAPO_LEDGER_ARTIFACT, when set, names another artifact of the same interface (a mutant).
    function deployLedger(bytes memory constructorArgs) internal returns (address) {
        return vm.deployCode(vm.envOr("SAPO_LEDGER_ARTIFACT", LEDGER_ARTIFACT), constructorArgs);
    }

    /// @dev A revert's 4-byte selector as 0x-hex ("no reason" when it has none): the handlers
    /// quote it in a violation, and tests/harness/foundry.py names the error beside it.
    function _hex4(bytes memory reason) internal pure returns (string memory) {
        if (reason.length < 4) return "no reason";
        bytes memory out = new bytes(10);
        bytes16 digits = "0123456789abcdef";
        out[0] = "0";
        out[1] = "x";
        for (uint256 i; i < 4; ++i) {
            out[2 + 2 * i] = digits[uint8(reason[i]) >> 4];
            out[3 + 2 * i] = digits[uint8(reason[i]) & 0xf];
        }
        return string(out);
    }

    /// @dev Maps `x` into [lo, hi] (inclusive) uniformly enough for fuzzing; keeps small values
    /// as they are so that forge's dictionary of interesting numbers still reaches the bounds.
    function bound(uint256 x, uint256 lo, uint256 hi) internal pure returns (uint256) {
        require(lo <= hi, "bound: lo > hi");
        if (x >= lo && x <= hi) return x;
        uint256 size = hi - lo;
        if (size == type(uint256).max) return x;
        return lo + (x % (size + 1));
    }
}
