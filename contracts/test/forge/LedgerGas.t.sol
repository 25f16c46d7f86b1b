// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {ISwarmLedger} from "../../ISwarmLedger.sol";
import {CheatsBase} from "./Cheats.sol";

/// @notice The gas of the calls every node makes every round (and of an appeal and the judging of
/// votes, rarer), recorded with forge's gas snapshot
/// cheatcode (each test measures exactly one ledger call, made in its own transaction on a state
/// built in setUp) into contracts/gas/LedgerGasTest.json. scripts/check_gas.py --check compares a
/// fresh measurement with that committed file and fails when a call grew by more than 5%.
contract LedgerGasTest is CheatsBase {
    /// @dev The next call is a settler's: an account with ether (a node's), paid its cut of a
    /// slash (a new account would add 25,000 gas to the transfer).
    function _asSettler() internal {
        address settler = address(0x5E771E);
        vm.deal(settler, 1 ether);
        vm.prank(settler);
    }

    ISwarmLedger internal ledger;
    address internal constant A = address(0xA11CE);
    address internal constant B = address(0xB0B);
    address internal constant C = address(0xCA201);
    address internal constant D = address(0xDA7E);
    address internal constant E = address(0xE7E);

    uint64 internal constant L = 60;

    function _as(address who) internal {
        vm.prank(who);
    }

    function _nextBlock() internal {
        vm.roll(block.number + 1);
    }

    /// @dev Sets the hash of the beacon block of `node`'s submission of round `r` (forge's
    /// setBlockhash) to one that seats C and D, and E (unless it is the producer) with more seats
    /// than C and D together, so that every vote below is a checker's and E's unavailable vote
    /// cancels their credit. About one beacon in three does.
    function _seatCheckers(uint64 r, address node) internal {
        (, uint64 beaconBlock,,) = ledger.beaconOf(r, node);
        for (uint256 i = 1;; ++i) {
            require(i < 1_000, "no beacon of 1,000 seats the checkers");
            vm.setBlockhash(beaconBlock, keccak256(abi.encode(r, node, i)));
            uint256 c = ledger.seatsOf(r, node, C);
            uint256 d = ledger.seatsOf(r, node, D);
            if (c != 0 && d != 0 && (node == E || ledger.seatsOf(r, node, E) > c + d)) return;
        }
    }

    /// @dev Sets the hash of the beacon block of the appeal of `node`'s submission of round `r`
    /// to one that seats `checker` on the appeal's committee.
    function _seatAppealChecker(uint64 r, address node, address checker) internal {
        uint64 beaconBlock = ledger.appealOf(r, node).beaconBlock;
        for (uint256 i = 1; ledger.appealSeatsOf(r, node, checker) == 0; ++i) {
            require(i < 1_000, "no appeal beacon of 1,000 seats the checker");
            vm.setBlockhash(beaconBlock, keccak256(abi.encode("appeal", r, node, i)));
        }
    }

    /// @dev In round `r`: `node` submits, C and D agree, and E disputes unless `honest`.
    function _checkedBatch(uint64 r, address node, bool honest) internal {
        vm.warp(ledger.genesis() + uint256(r) * L + 1);
        _nextBlock();
        _as(node);
        ledger.submit(r, keccak256(abi.encode(node, r)), 64, 40_000, 20_000);
        _nextBlock();
        _nextBlock();
        _seatCheckers(r, node);
        _as(C);
        ledger.attest(r, node, 40_000, 20_000, 0);
        _as(D);
        ledger.attest(r, node, 40_000, 20_000, 0);
        if (!honest) {
            _as(E);
            ledger.attest(r, node, 1_000, 0, 1);
        }
    }

    function setUp() public {
        vm.warp(1_700_000_000);
        vm.roll(1_000);
        // the devnet's shape: late by one round, challenged for two, 10% slashes, 1% tolerance, a
        // quorum of 2 on committees of 8 seat trials (configs/devnet.toml)
        ledger = ISwarmLedger(
            deployLedger(abi.encode(L, 1 ether, 9 * L, 2, 1, 1 ether, 1000, 100, keccak256("catalog"), 2, 8, 2, 32, families(), address(0)))
        );
        address[5] memory nodes = [A, B, C, D, E];
        uint256[5] memory stakes = [uint256(2 ether), 3 ether, 4 ether, 5 ether, 20 ether];
        for (uint256 i; i < nodes.length; ++i) {
            vm.deal(nodes[i], 100 ether);
            _as(nodes[i]);
            ledger.register{value: stakes[i]}("{\"peer\":\"12D3KooW\"}", FAMILY);
        }
        ledger.fund{value: 50 ether}();
        // rounds 1-10: A and B submit, C and D agree with both (the quorum); in round 10 E submits
        // and C, D dispute it
        for (uint64 r = 1; r <= 10; ++r) {
            vm.warp(ledger.genesis() + uint256(r) * L + 1);
            _nextBlock();
            _as(A);
            ledger.submit(r, keccak256(abi.encode("A", r)), 64, 40_000, 20_000);
            _nextBlock(); // a beacon block of its own for each batch
            _as(B);
            ledger.submit(r, keccak256(abi.encode("B", r)), 64, 30_000, 15_000);
            _nextBlock();
            _nextBlock();
            _seatCheckers(r, A);
            _seatCheckers(r, B);
            _as(C);
            ledger.attest(r, A, 40_000, 20_000, 0);
            _as(D);
            ledger.attest(r, A, 40_000, 20_000, 0);
            _as(C);
            ledger.attest(r, B, 30_000, 15_000, 0);
            _as(D);
            ledger.attest(r, B, 30_000, 15_000, 0);
        }
        _as(E);
        ledger.submit(10, keccak256("E"), 64, 640_000, 320_000);
        _nextBlock();
        _nextBlock(); // past E's own beacon block
        _seatCheckers(10, E);
        _as(C);
        ledger.attest(10, E, 1_000, 0, 1);
        _as(D);
        ledger.attest(10, E, 1_000, 0, 1);
        // round 14: B's batch is credited (its votes are judged in rounds 20-21); round 15: A's
        // is disputed by E (judged in rounds 21-22); round 17: B's, disputed by E too, is not
        // credited when its challenge window closes (B appeals it in round 21)
        _checkedBatch(14, B, true);
        _checkedBatch(15, A, false);
        _checkedBatch(17, B, false);
        // round 21: rounds 1-10 are final; A and B have submitted in round 21, nobody in round 20
        vm.warp(ledger.genesis() + 21 * uint256(L) + 1);
        _nextBlock();
        _as(A);
        ledger.submit(21, keccak256(abi.encode("A", uint64(21))), 64, 40_000, 20_000);
        _nextBlock();
        _as(B);
        ledger.submit(21, keccak256(abi.encode("B", uint64(21))), 64, 30_000, 15_000);
        _nextBlock();
        _nextBlock();
        _seatCheckers(21, A);
        _seatCheckers(21, B);
    }

    function test_gas_submitFirstInRound() public {
        _as(B);
        ledger.submit(20, keccak256("B20"), 64, 30_000, 15_000);
        vm.snapshotGasLastCall("submit (first in round)");
    }

    function test_gas_submitLaterInRound() public {
        _as(C);
        ledger.submit(21, keccak256("C21"), 64, 30_000, 15_000);
        vm.snapshotGasLastCall("submit (later in round)");
    }

    function test_gas_attestDrawingTheBeacon() public {
        _as(C);
        ledger.attest(21, A, 40_000, 20_000, 0);
        vm.snapshotGasLastCall("attest (first vote on a batch: draws its beacon)");
    }

    function test_gas_attestAgreeing() public {
        _as(D);
        ledger.attest(21, B, 30_000, 15_000, 0);
        _as(C);
        ledger.attest(21, A, 40_000, 20_000, 0);
        vm.snapshotGasLastCall("attest (agreeing, below quorum)");
    }

    function test_gas_attestCompletingTheQuorum() public {
        _as(D);
        ledger.attest(21, A, 40_000, 20_000, 0);
        _as(C);
        ledger.attest(21, A, 40_000, 20_000, 0);
        vm.snapshotGasLastCall("attest (completes the quorum: credits)");
    }

    function test_gas_attestDisputing() public {
        _as(D);
        ledger.attest(21, A, 40_000, 20_000, 0);
        _as(C);
        ledger.attest(21, A, 1_000, 0, 1);
        vm.snapshotGasLastCall("attest (disputing)");
    }

    function test_gas_reportUnavailableCancellingCredit() public {
        _as(C);
        ledger.attest(21, A, 40_000, 20_000, 0);
        _as(D);
        ledger.attest(21, A, 40_000, 20_000, 0);
        _as(E);
        ledger.reportUnavailable(21, A);
        vm.snapshotGasLastCall("reportUnavailable (cancels credit)");
    }

    function test_gas_settleCredited() public {
        _asSettler();
        ledger.settle(1, A);
        vm.snapshotGasLastCall("settle (credited)");
    }

    function test_gas_settleDisputed() public {
        _asSettler();
        ledger.settle(10, E);
        vm.snapshotGasLastCall("settle (disputed, slashes)");
    }

    function test_gas_appeal() public {
        _as(B);
        ledger.appeal(17);
        vm.snapshotGasLastCall("appeal");
    }

    function test_gas_attestOnAppeal() public {
        _as(B);
        ledger.appeal(17);
        _nextBlock();
        _nextBlock(); // past the appeal's beacon block
        _seatAppealChecker(17, B, D);
        _as(D);
        ledger.attest(17, B, 40_000, 20_000, 0);
        vm.snapshotGasLastCall("attest (on an appeal: draws its beacon)");
    }

    function test_gas_settleVotesNoneLost() public {
        address[] memory voters = new address[](2);
        (voters[0], voters[1]) = (C, D);
        _asSettler();
        ledger.settleVotes(14, B, voters);
        vm.snapshotGasLastCall("settleVotes (2 voters, none lost)");
    }

    function test_gas_settleVotesSlashing() public {
        address[] memory voters = new address[](3);
        (voters[0], voters[1], voters[2]) = (C, D, E);
        _asSettler();
        ledger.settleVotes(15, A, voters);
        vm.snapshotGasLastCall("settleVotes (3 voters, 2 lost: slashed)");
    }

    function test_gas_claimOneRound() public {
        uint64[] memory rounds = new uint64[](1);
        rounds[0] = 1;
        _as(A);
        ledger.claim(rounds);
        vm.snapshotGasLastCall("claim (1 round)");
    }

    function test_gas_claimTenRounds() public {
        uint64[] memory rounds = new uint64[](10);
        for (uint64 r; r < 10; ++r) rounds[r] = r + 1;
        _as(A);
        ledger.claim(rounds);
        vm.snapshotGasLastCall("claim (10 rounds)");
    }
}
