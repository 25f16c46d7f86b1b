// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {SwarmLedger} from "../../SwarmLedger.sol";
import {CheatsBase} from "./Cheats.sol";

/// @notice Directed tests of the credit rule's edges, which the invariant campaigns reach too
/// rarely to catch a fault in (scripts/mutate-ledger runs these beside the campaigns): a tie
/// between agreeing and disputing + unavailable seats, a quorum reached exactly, and unavailable
/// votes that cancel credit without slashing. Stakes are equal and the beacon is chosen (forge's
/// setBlockhash) so that the four checkers hold one seat each of 3 trials: each vote moves the
/// tallies by the same weight. Block numbers are set explicitly: via-IR may reuse a block.number
/// read across vm.roll.
contract LedgerRulesTest is CheatsBase {
    SwarmLedger internal ledger;
    address internal constant P = address(0x9001);
    address internal constant A = address(0xA001);
    address internal constant B = address(0xB001);
    address internal constant C = address(0xC001);
    address internal constant D = address(0xD001);
    uint64 internal constant L = 60;

    function _deploy(uint8 quorum) internal {
        vm.warp(1_700_000_000);
        vm.roll(100);
        ledger = SwarmLedger(
            deployLedger(abi.encode(L, 1 ether, 6 * L, 2, 1, 1 ether, 1000, 100, keccak256("catalog"), quorum, 3))
        );
        address[5] memory nodes = [P, A, B, C, D];
        for (uint256 i; i < nodes.length; ++i) {
            vm.deal(nodes[i], 10 ether);
            vm.prank(nodes[i]);
            ledger.register{value: 2 ether}("{}");
        }
        vm.warp(ledger.genesis() + 1);
        vm.roll(110);
        vm.prank(P);
        ledger.submit(0, keccak256("p"), 8, 40_000, 20_000);
        vm.roll(112); // past the beacon block (111): checkers may vote
        // a beacon that gives A, B, C and D one seat each (each holds Binomial(3, 1/5) seats:
        // all four hold one with chance 0.384^4, about one beacon in 46)
        for (uint256 i = 1;; ++i) {
            require(i < 2_000, "no beacon of 2,000 gives the four checkers one seat each");
            vm.setBlockhash(111, keccak256(abi.encode("beacon", i)));
            if (_seats(A) == 1 && _seats(B) == 1 && _seats(C) == 1 && _seats(D) == 1) break;
        }
    }

    function _seats(address who) internal view returns (uint256) {
        return ledger.seatsOf(0, P, who);
    }

    function _agree(address who) internal {
        vm.prank(who);
        ledger.attest(0, P, 40_000, 20_000, 0);
    }

    function _dispute(address who) internal {
        vm.prank(who);
        ledger.attest(0, P, 0, 0, 6);
    }

    function _unavailable(address who) internal {
        vm.prank(who);
        ledger.reportUnavailable(0, P);
    }

    function _credited() internal view returns (uint256) {
        return ledger.submissionOf(0, P).credited;
    }

    function test_tieBetweenAgreeingAndDisputingStakeIsCredited() public {
        _deploy(1);
        _agree(A);
        _dispute(B);
        require(_credited() == 20_000, "1 seat agreeing vs 1 seat disputing: not outweighed, credited");
        _unavailable(C);
        require(_credited() == 0, "1 seat agreeing vs 2 against: outweighed");
        _agree(D);
        require(_credited() == 20_000, "2 seats agreeing vs 1 disputing + 1 unavailable: a tie, credited");
        (uint256 total,) = ledger.roundInfo(0);
        require(total == 20_000, "the round's total follows the credit");
    }

    function test_quorumReachedExactlyAtItsCount() public {
        _deploy(3);
        _agree(A);
        _agree(B);
        require(_credited() == 0, "2 of 3 agreeing checkers: nothing yet");
        _agree(C);
        require(_credited() == 20_000, "3 of 3: credited");
    }

    function test_unavailableVotesCancelCreditButNeverSlash() public {
        _deploy(1);
        _agree(A);
        _unavailable(B);
        require(_credited() == 20_000, "a tie with unavailable seats: credited");
        _unavailable(C);
        require(_credited() == 0, "outweighed by unavailable seats: no credit");
        vm.warp(ledger.genesis() + 4 * L + 1);
        vm.roll(200);
        ledger.settle(0, P);
        require(ledger.nodeInfo(P).activeStake == 2 ether, "unavailable is not wrong: no slash");
    }

    function test_aSubmissionNobodyCheckedEarnsNothing() public {
        _deploy(1);
        vm.deal(address(this), 1 ether);
        ledger.fund{value: 1 ether}();
        vm.warp(ledger.genesis() + 4 * L + 1);
        vm.roll(200);
        uint64[] memory rounds = new uint64[](1);
        rounds[0] = 0;
        require(ledger.claimable(P, rounds) == 0, "no attestation: nothing to claim");
    }

    function test_disputingSeatsThatComeToOutweighTakeCreditAndItsShare() public {
        _deploy(1);
        vm.deal(address(this), 1 ether);
        ledger.fund{value: 1 ether}();
        _agree(A);
        _dispute(B);
        require(_credited() == 20_000, "a tie: credited");
        _dispute(C);
        require(_credited() == 0, "1 seat agreeing vs 2 disputing: no credit");
        (uint256 total,) = ledger.roundInfo(0);
        require(total == 0, "the round's total loses it");
        vm.warp(ledger.genesis() + 4 * L + 1);
        vm.roll(200);
        uint64[] memory rounds = new uint64[](1);
        rounds[0] = 0;
        require(ledger.claimable(P, rounds) == 0, "an outweighed submission is owed nothing");
    }

    function test_votesCloseWithTheChallengeWindow() public {
        _deploy(1);
        vm.warp(ledger.genesis() + 3 * L + 1); // round 3 = 0 + submitRounds + challengeRounds
        vm.roll(150);
        _agree(A);
        vm.warp(ledger.genesis() + 4 * L + 1);
        vm.roll(160);
        vm.prank(B);
        (bool ok,) = address(ledger).call(abi.encodeCall(SwarmLedger.attest, (0, P, 40_000, 20_000, 0)));
        require(!ok, "an attestation after the window is refused");
        vm.prank(C);
        (ok,) = address(ledger).call(abi.encodeCall(SwarmLedger.reportUnavailable, (0, P)));
        require(!ok, "an unavailable vote after the window is refused");
    }

    function test_stakeMovedAfterTheSubmissionChangesNoSeat() public {
        _deploy(1); // the submission is in block 110: stakes are read as of its end
        address late = address(0xE001);
        vm.roll(113); // once the beacon is known: a whale registers, B tops up, C unbonds
        vm.deal(late, 1_000 ether);
        vm.prank(late);
        ledger.register{value: 100 ether}("{}");
        vm.prank(B);
        ledger.addStake{value: 8 ether}();
        vm.prank(C);
        ledger.requestUnstake(1 ether);
        require(ledger.totalStakeAt(110) == 10 ether && ledger.stakeAt(B, 110) == 2 ether, "the snapshot");
        require(ledger.stakeAt(B, 113) == 10 ether && ledger.stakeAt(late, 110) == 0, "and after it");
        vm.roll(114);
        vm.prank(late);
        (bool ok,) = address(ledger).call(abi.encodeCall(SwarmLedger.attest, (0, P, 40_000, 20_000, 0)));
        require(!ok, "stake registered after the submission buys no seat");
        require(_seats(late) == 0 && !ledger.isChecker(0, P, late), "seatsOf and isChecker agree");
        require(_seats(A) == 1 && _seats(B) == 1 && _seats(C) == 1, "the other seats are as drawn");
        _agree(B);
        _agree(C);
        require(ledger.submissionOf(0, P).agreeSeats == 2, "votes count their seats as of the snapshot");
    }

    function test_eachSubmissionIsDrawnFromItsOwnLaterBlock() public {
        _deploy(1); // P submitted in block 110
        vm.roll(130); // a late submitter in the same round, 20 blocks on, when P's beacon is known
        vm.prank(A);
        ledger.submit(0, keccak256("a"), 8, 40_000, 20_000);
        (, uint64 pBlock, bool pReady,) = ledger.beaconOf(0, P);
        (, uint64 aBlock, bool aReady,) = ledger.beaconOf(0, A);
        require(pBlock == 111 && pReady, "P's beacon is block 111's hash");
        // A's checkers come from a block that did not exist when A sent its submission: the
        // beacons known then (P's) cannot tell A which identity or moment draws friendly checkers
        require(aBlock == 131 && !aReady, "A's beacon is the next block's hash, unknown yet");
        vm.prank(B);
        (bool ok,) = address(ledger).call(abi.encodeCall(SwarmLedger.attest, (0, A, 40_000, 20_000, 0)));
        require(!ok, "no vote before the submission's own beacon is known");
        vm.roll(132);
        for (uint256 i = 1; ledger.seatsOf(0, A, B) == 0; ++i) {
            vm.setBlockhash(131, keccak256(abi.encode("A's beacon", i))); // one that seats B
        }
        vm.prank(B);
        ledger.attest(0, A, 40_000, 20_000, 0);
        require(ledger.submissionOf(0, A).credited == 20_000, "then its checkers vote");
    }

    function test_aBeaconNobodyDrewLapsesAndIsNeverDrawnAgain() public {
        _deploy(1); // P's beacon is block 111's hash; the search above chose it
        uint256 seatsA = _seats(A);
        vm.roll(111 + 256); // the last block whose EVM still knows block 111's hash
        require(_seats(A) == seatsA, "the beacon still draws");
        vm.roll(111 + 257); // the hash is gone: no new beacon, no new committee, no new openings
        (uint256 beacon,, bool ready, bool stored) = ledger.beaconOf(0, P);
        require(beacon == 0 && !ready && !stored, "a lapsed beacon is not ready");
        require(_seats(A) == 0, "and seats nobody");
        vm.prank(A);
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(SwarmLedger.attest, (0, P, 40_000, 20_000, 0)));
        require(!ok && bytes4(reason) == SwarmLedger.BeaconLapsed.selector, "a vote is refused: lapsed");
        (ok, reason) = address(ledger).call(abi.encodeCall(SwarmLedger.drawBeacon, (0, P)));
        require(!ok && bytes4(reason) == SwarmLedger.BeaconLapsed.selector, "so is drawing it");
    }

    function test_aDrawnBeaconNeverLapses() public {
        _deploy(1);
        uint256 seatsA = _seats(A);
        ledger.drawBeacon(0, P); // anyone: the producer's client does it for its own batches
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(SwarmLedger.drawBeacon, (0, P)));
        require(!ok && bytes4(reason) == SwarmLedger.BeaconAlreadyDrawn.selector, "once");
        vm.roll(111 + 1_000);
        (,, bool ready, bool stored) = ledger.beaconOf(0, P);
        require(ready && stored && _seats(A) == seatsA, "the stored beacon draws the same seats");
        _agree(A);
        require(_credited() == 20_000, "and its checkers vote");
    }
}
