// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {SwarmLedger} from "../../SwarmLedger.sol";
import {CheatsBase} from "./Cheats.sol";

/// @notice The gas of the calls every node makes every round, recorded with forge's gas snapshot
/// cheatcode (each test measures exactly one ledger call, made in its own transaction on a state
/// built in setUp) into contracts/gas/LedgerGasTest.json. scripts/gas-ledger --check compares a
/// fresh measurement with that committed file and fails when a call grew by more than 5%.
contract LedgerGasTest is CheatsBase {
    SwarmLedger internal ledger;
    address internal constant A = address(0xA11CE);
    address internal constant B = address(0xB0B);
    address internal constant C = address(0xCA201);
    address internal constant D = address(0xDA7E);
    address internal constant E = address(0xE7E);

    uint64 internal constant L = 60;

    function _as(address who) internal {
        vm.prank(who);
    }

    function setUp() public {
        vm.warp(1_700_000_000);
        // the devnet's shape: late by one round, challenged for two, 10% slashes, 1% tolerance
        ledger = new SwarmLedger(L, 1 ether, 6 * L, 2, 1, 1 ether, 1000, 100, keccak256("catalog"));
        address[5] memory nodes = [A, B, C, D, E];
        for (uint256 i; i < nodes.length; ++i) {
            vm.deal(nodes[i], 100 ether);
            _as(nodes[i]);
            ledger.register{value: 2 ether + i * 1 ether}("{\"peer\":\"12D3KooW\"}");
        }
        ledger.fund{value: 50 ether}();
        // rounds 0-9: A and B submit, C and D agree; in round 1 E submits and C, D dispute it
        for (uint64 r; r < 10; ++r) {
            vm.warp(ledger.genesis() + uint256(r) * L + 1);
            _as(A);
            ledger.submit(r, keccak256(abi.encode("A", r)), 64, 40_000);
            _as(B);
            ledger.submit(r, keccak256(abi.encode("B", r)), 64, 30_000);
            _as(C);
            ledger.attest(r, A, 40_000);
            _as(D);
            ledger.attest(r, B, 30_000);
        }
        _as(E);
        ledger.submit(9, keccak256("E"), 64, 640_000);
        _as(C);
        ledger.attest(9, E, 1_000);
        // round 20: rounds 0-9 are final; A has submitted in round 20, nobody in round 19
        vm.warp(ledger.genesis() + 20 * uint256(L) + 1);
        _as(A);
        ledger.submit(20, keccak256(abi.encode("A", uint64(20))), 64, 40_000);
    }

    function test_gas_submitFirstInRound() public {
        _as(B);
        ledger.submit(19, keccak256("B19"), 64, 30_000);
        vm.snapshotGasLastCall("submit (first in round)");
    }

    function test_gas_submitLaterInRound() public {
        _as(B);
        ledger.submit(20, keccak256("B20"), 64, 30_000);
        vm.snapshotGasLastCall("submit (later in round)");
    }

    function test_gas_attestAgreeing() public {
        _as(C);
        ledger.attest(20, A, 40_000);
        vm.snapshotGasLastCall("attest (agreeing)");
    }

    function test_gas_attestFlippingCredit() public {
        _as(C);
        ledger.attest(20, A, 1_000);
        vm.snapshotGasLastCall("attest (flips credit)");
    }

    function test_gas_settleCredited() public {
        ledger.settle(0, A);
        vm.snapshotGasLastCall("settle (credited)");
    }

    function test_gas_settleDisputed() public {
        ledger.settle(9, E);
        vm.snapshotGasLastCall("settle (disputed, slashes)");
    }

    function test_gas_claimOneRound() public {
        uint64[] memory rounds = new uint64[](1);
        _as(A);
        ledger.claim(rounds);
        vm.snapshotGasLastCall("claim (1 round)");
    }

    function test_gas_claimTenRounds() public {
        uint64[] memory rounds = new uint64[](10);
        for (uint64 r; r < 10; ++r) rounds[r] = r;
        _as(A);
        ledger.claim(rounds);
        vm.snapshotGasLastCall("claim (10 rounds)");
    }
}
