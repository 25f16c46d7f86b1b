// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {ISwarmLedger} from "../../ISwarmLedger.sol";
import {CheatsBase} from "./Cheats.sol";

/// @notice Directed tests of the credit rule's edges, which the invariant campaigns reach too
/// rarely to catch a fault in (scripts/mutate_ledger.py runs these beside the campaigns): a tie
/// between agreeing and disputing + unavailable seats, a quorum reached exactly, unavailable
/// votes that cancel credit without slashing; and the appeal's: a whale's lucky first committee
/// overturned, a lost appeal's double slash, the appeal's window, the judging of votes. Stakes
/// are equal (but a whale's) and the beacon is chosen (forge's setBlockhash) so that the four
/// checkers hold one seat each of 3 trials: each vote moves the tallies by the same weight.
/// Block numbers are set explicitly: via-IR may reuse a block.number read across vm.roll.
/// Rounds of P's submission of round 0 (submitRounds 1, challengeRounds 2, appealRounds 2):
/// first votes until round 3, an appeal in round 4, appellate votes until round 5, final from
/// round 6, its votes judged in rounds 6 and 7.
contract LedgerRulesTest is CheatsBase {
    ISwarmLedger internal ledger;
    address internal constant P = address(0x9001);
    address internal constant A = address(0xA001);
    address internal constant B = address(0xB001);
    address internal constant C = address(0xC001);
    address internal constant D = address(0xD001);
    address internal constant W = address(0xF001);
    address internal constant S = address(0x5E771E); // a settler: no stake, paid its cut
    uint64 internal constant L = 60;

    /// @dev Deploys the ledger (quorum as given, committees of 3 seat trials, appeals' of 12,
    /// 10% slashes), registers P, A, B, C and D with 2 ether each (and the whale W with
    /// `whaleStake`, if any), and has P submit a batch of round 0 in block 110.
    function _launch(uint8 quorum, uint256 whaleStake) internal {
        _launch(quorum, whaleStake, FAMILY);
    }

    /// @dev As _launch, with the whale registered in `whaleFamily`.
    function _launch(uint8 quorum, uint256 whaleStake, bytes32 whaleFamily) internal {
        vm.warp(1_700_000_000);
        vm.roll(100);
        ledger = ISwarmLedger(
            deployLedger(abi.encode(L, 1 ether, 9 * L, 2, 1, 1 ether, 1000, 100, keccak256("catalog"), quorum, 3, 2, 12, families(), address(0)))
        );
        address[5] memory nodes = [P, A, B, C, D];
        for (uint256 i; i < nodes.length; ++i) {
            vm.deal(nodes[i], 10 ether);
            vm.prank(nodes[i]);
            ledger.register{value: 2 ether}("{}", FAMILY);
        }
        if (whaleStake != 0) {
            vm.deal(W, whaleStake);
            vm.prank(W);
            ledger.register{value: whaleStake}("{}", whaleFamily);
        }
        vm.warp(ledger.genesis() + 1);
        vm.roll(110);
        vm.prank(P);
        ledger.submit(0, keccak256("p"), 8, 40_000, 20_000);
        vm.roll(112); // past the beacon block (111): checkers may vote
    }

    function _deploy(uint8 quorum) internal {
        _launch(quorum, 0);
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
        vm.warp(ledger.genesis() + 6 * L + 1); // round 6: final (after round 0 + submit 1 + challenge 2 + appeal 2)
        vm.roll(200);
        _settle();
        require(ledger.nodeInfo(P).activeStake == 2 ether, "unavailable is not wrong: no slash");
    }

    function test_aSubmissionNobodyCheckedEarnsNothing() public {
        _deploy(1);
        vm.deal(address(this), 1 ether);
        ledger.fund{value: 1 ether}();
        vm.warp(ledger.genesis() + 6 * L + 1);
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
        vm.warp(ledger.genesis() + 6 * L + 1);
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
        (bool ok,) = address(ledger).call(abi.encodeCall(ISwarmLedger.attest, (0, P, 40_000, 20_000, 0)));
        require(!ok, "an attestation after the window is refused");
        vm.prank(C);
        (ok,) = address(ledger).call(abi.encodeCall(ISwarmLedger.reportUnavailable, (0, P)));
        require(!ok, "an unavailable vote after the window is refused");
    }

    function test_stakeMovedAfterTheSubmissionChangesNoSeat() public {
        _deploy(1); // the submission is in block 110: stakes are read as of its end
        address late = address(0xE001);
        vm.roll(113); // once the beacon is known: a whale registers, B tops up, C unbonds
        vm.deal(late, 1_000 ether);
        vm.prank(late);
        ledger.register{value: 100 ether}("{}", FAMILY);
        vm.prank(B);
        ledger.addStake{value: 8 ether}();
        vm.prank(C);
        ledger.requestUnstake(1 ether);
        require(ledger.totalStakeAt(110) == 10 ether && ledger.stakeAt(B, 110) == 2 ether, "the snapshot");
        require(ledger.stakeAt(B, 113) == 10 ether && ledger.stakeAt(late, 110) == 0, "and after it");
        vm.roll(114);
        vm.prank(late);
        (bool ok,) = address(ledger).call(abi.encodeCall(ISwarmLedger.attest, (0, P, 40_000, 20_000, 0)));
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
        (bool ok,) = address(ledger).call(abi.encodeCall(ISwarmLedger.attest, (0, A, 40_000, 20_000, 0)));
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
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(ISwarmLedger.attest, (0, P, 40_000, 20_000, 0)));
        require(!ok && bytes4(reason) == ISwarmLedger.BeaconLapsed.selector, "a vote is refused: lapsed");
        (ok, reason) = address(ledger).call(abi.encodeCall(ISwarmLedger.drawBeacon, (0, P)));
        require(!ok && bytes4(reason) == ISwarmLedger.BeaconLapsed.selector, "so is drawing it");
    }

    function test_aDrawnBeaconNeverLapses() public {
        _deploy(1);
        uint256 seatsA = _seats(A);
        ledger.drawBeacon(0, P); // anyone: the producer's client does it for its own batches
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(ISwarmLedger.drawBeacon, (0, P)));
        require(!ok && bytes4(reason) == ISwarmLedger.BeaconAlreadyDrawn.selector, "once");
        vm.roll(111 + 1_000);
        (,, bool ready, bool stored) = ledger.beaconOf(0, P);
        require(ready && stored && _seats(A) == seatsA, "the stored beacon draws the same seats");
        _agree(A);
        require(_credited() == 20_000, "and its checkers vote");
    }

    // ---------------------------------------------------------------------------------- appeals

    /// @dev Moves to round `round` (one second into it) and block `blockNumber`.
    function _at(uint64 round, uint256 blockNumber) internal {
        vm.warp(ledger.genesis() + uint256(round) * L + 1);
        vm.roll(blockNumber);
    }

    function _appealSeats(address who) internal view returns (uint256) {
        return ledger.appealSeatsOf(0, P, who);
    }

    /// @dev P appeals in block `appealBlock` of round 4, then the chain moves past the appeal's
    /// beacon block.
    function _appeal(uint256 appealBlock) internal {
        _at(4, appealBlock);
        vm.prank(P);
        ledger.appeal(0);
        vm.roll(appealBlock + 2);
    }

    /// @dev The error a call to the ledger reverted with (a revert expected).
    function _refusal(address caller, bytes memory call) internal returns (bytes4) {
        vm.prank(caller);
        (bool ok, bytes memory reason) = address(ledger).call(call);
        require(!ok, "the call was refused");
        return bytes4(reason);
    }

    /// @dev Settles P's submission as the settler S (a stranger, paid its cut of a slash).
    function _settle() internal {
        vm.prank(S);
        ledger.settle(0, P);
    }

    function _settleVotes(address[] memory voters) internal {
        vm.prank(S);
        ledger.settleVotes(0, P, voters);
    }

    function _list(address a, address b, address c) internal pure returns (address[] memory list) {
        list = new address[](3);
        (list[0], list[1], list[2]) = (a, b, c);
    }

    function test_anAppealOverturnsAWhalesLuckyCommitteeAndItsVotesLose() public {
        // W stakes 4 of 14 ether: more than any other node, less than the honest checkers
        // together. A first beacon on which W drew all 3 of its seats and A and B one each: a
        // small committee the luck of the draw handed to W (about one beacon in 430).
        _launch(2, 4 ether);
        for (uint256 i = 1;; ++i) {
            require(i < 5_000, "no beacon of 5,000 gives W 3 seats and A and B one each");
            vm.setBlockhash(111, keccak256(abi.encode("whale beacon", i)));
            if (_seats(A) == 1 && _seats(B) == 1 && ledger.seatsOf(0, P, W) == 3) break;
        }
        vm.deal(address(this), 1 ether);
        ledger.fund{value: 1 ether}();
        _agree(A);
        _agree(B);
        require(_credited() == 20_000, "the quorum of 2 agreed: credited");
        _dispute(W);
        require(_credited() == 0, "W's 3 seats outweigh 2: the honest batch is cancelled");
        // the producer, whose own re-check agrees with its claim, appeals; the appeal's committee
        // of 12 trials per node is drawn from a beacon that seats W, A, B, C and D, with A + B + C
        // at least W + D (in expectation W holds 3.4 seats, the four others 6.9)
        _appeal(130);
        for (uint256 i = 1;; ++i) {
            require(i < 2_000, "no appeal beacon of 2,000 seats the five checkers");
            vm.setBlockhash(131, keccak256(abi.encode("appeal beacon", i)));
            uint256 w = ledger.appealSeatsOf(0, P, W);
            uint256 a = _appealSeats(A);
            uint256 b = _appealSeats(B);
            uint256 c = _appealSeats(C);
            uint256 d = _appealSeats(D);
            if (w != 0 && a != 0 && b != 0 && c != 0 && d != 0 && a + b + c >= w + d) break;
        }
        require(!ledger.hasAttested(A, 0, P), "after the appeal, A has not voted on the committee voting now");
        _dispute(W); // the whale again, on the appeal's committee
        _agree(A); // a checker of the first committee votes again
        require(_credited() == 0, "one appellate agreement: short of the quorum");
        _unavailable(D);
        _agree(B);
        _agree(C);
        require(_credited() == 20_000, "the appeal's committee credits it: its verdict replaces the first");
        (uint256 total,) = ledger.roundInfo(0);
        require(total == 20_000, "the round's total follows the appeal's verdict");
        ISwarmLedger.SubmissionView memory v = ledger.submissionOf(0, P);
        require(v.agreeSeats == 2 && v.disputeSeats == 3 && v.appealBlock == 130, "the first tally stays as cast");
        ISwarmLedger.AppealView memory p = ledger.appealOf(0, P);
        require(p.agrees == 3 && p.disputes == 1 && p.unavailable == 1, "the appeal's votes are its own tally");
        (uint8 first, uint8 second,) = ledger.voteOf(W, 0, P);
        require(first == 2 && second == 2, "W disputed on both committees");
        _at(6, 200);
        _settle();
        require(ledger.nodeInfo(P).activeStake == 2 ether, "credited on appeal: the producer keeps its stake");
        uint64[] memory rounds = new uint64[](1);
        vm.prank(P);
        require(ledger.claim(rounds) == 1 ether, "and earns the round's reward");
        // the votes are judged by the final verdict: W's disputes lost (one slash for its record,
        // however many committees it disputed on), the agreements won, D's unavailable vote
        // never loses; W listed twice and E, who never voted, are skipped
        address[] memory voters = new address[](6);
        (voters[0], voters[1], voters[2], voters[3]) = (A, W, B, C);
        (voters[4], voters[5]) = (W, address(0xE001));
        _settleVotes(voters);
        _settleVotes(_list(D, D, W));
        require(ledger.nodeInfo(W).activeStake == 3.6 ether, "W loses slashBps of its stake, once");
        require(ledger.totalSlashed() == 0.4 ether, "nobody else is slashed");
        require(ledger.rewardPool() == 0.36 ether, "the slash goes to the reward pool, less...");
        require(S.balance == 0.04 ether, "...the settler's cut: SETTLER_CUT_BPS of it");
        address[5] memory kept = [A, B, C, D, P];
        for (uint256 i; i < kept.length; ++i) {
            require(ledger.nodeInfo(kept[i]).activeStake == 2 ether, "the winning and unavailable voters keep theirs");
        }
        (,, bool judged) = ledger.voteOf(D, 0, P);
        require(judged, "an unavailable vote is judged, and kept");
        (first, second, judged) = ledger.voteOf(address(0xE001), 0, P);
        require(first == 0 && second == 0 && !judged, "a non-voter listed is skipped: no record");
    }

    function test_aLostAppealSlashesTwiceSlashBps() public {
        _deploy(1);
        _dispute(A);
        _appeal(130);
        for (uint256 i = 1; _appealSeats(B) == 0; ++i) {
            vm.setBlockhash(131, keccak256(abi.encode("appeal beacon", i))); // one that seats B
        }
        _dispute(B);
        require(ledger.submissionOf(0, P).credited == 0, "the appeal's committee disputes it too");
        _at(6, 140);
        bytes4 late = _refusal(C, abi.encodeCall(ISwarmLedger.attest, (0, P, 40_000, 20_000, 0)));
        require(late == ISwarmLedger.ChallengeWindowClosed.selector, "appellate votes close after appealRounds");
        _settle();
        require(ledger.nodeInfo(P).activeStake == 1.6 ether, "a lost appeal slashes 2 x 10% of 2 ether");
        require(ledger.totalSlashed() == 0.4 ether && ledger.rewardPool() == 0.36 ether, "into the pool");
        require(S.balance == 0.04 ether && ledger.totalSettlerPaid() == 0.04 ether, "less the settler's cut");
    }

    function test_anAppealIsOpenOnlyInItsWindowOnceToABatchNotCredited() public {
        _deploy(1);
        _agree(A); // P's batch is credited
        vm.roll(120);
        vm.prank(B);
        ledger.submit(0, keccak256("b"), 8, 40_000, 20_000); // nobody checks B's
        vm.prank(C);
        ledger.submit(0, keccak256("c"), 8, 40_000, 20_000); // nor C's
        vm.roll(122);
        ledger.drawBeacon(0, B); // their producers' clients store their beacons
        ledger.drawBeacon(0, C);
        bytes memory appealRound0 = abi.encodeCall(ISwarmLedger.appeal, (0)); // by each caller: its own batch
        _at(3, 130);
        require(_refusal(B, appealRound0) == ISwarmLedger.NotAppealable.selector, "not in the challenge window's last round");
        _at(4, 131);
        require(_refusal(P, appealRound0) == ISwarmLedger.AlreadyCredited.selector, "not a credited batch");
        require(_refusal(A, appealRound0) == ISwarmLedger.NoSubmission.selector, "only a producer, its own batch");
        vm.prank(B);
        ledger.appeal(0);
        require(ledger.appealOf(0, B).appealBlock == 131, "B appeals in the round after the window");
        require(_refusal(B, appealRound0) == ISwarmLedger.AlreadyAppealed.selector, "once");
        _at(5, 132);
        require(_refusal(C, appealRound0) == ISwarmLedger.NotAppealable.selector, "not in the last appeal round");
        _at(6, 133);
        require(_refusal(C, appealRound0) == ISwarmLedger.NotAppealable.selector, "nor once final");
    }

    function test_anAppealOfABatchWhoseBeaconLapsedIsRefused() public {
        _deploy(1); // nobody stores P's beacon (block 111's hash)
        _at(4, 111 + 257);
        bytes4 refused = _refusal(P, abi.encodeCall(ISwarmLedger.appeal, (0)));
        require(refused == ISwarmLedger.BeaconLapsed.selector, "no openings can be drawn: no appeal either");
    }

    function test_votesAreJudgedOnceInTheirWindowAndUnavailableNeverLoses() public {
        _deploy(1);
        _agree(A);
        _agree(B);
        _dispute(C);
        _unavailable(D);
        require(_credited() == 20_000, "2 agreeing seats vs 1 + 1: credited");
        bytes memory judgeC = abi.encodeCall(ISwarmLedger.settleVotes, (0, P, _list(C, C, C)));
        _at(5, 150);
        require(_refusal(A, judgeC) == ISwarmLedger.RoundNotFinal.selector, "not before the round is final");
        _at(6, 160);
        _settleVotes(_list(D, P, address(0xE001))); // the producer and E never voted: skipped
        require(ledger.totalSlashed() == 0, "an unavailable vote never loses");
        (,, bool judged) = ledger.voteOf(D, 0, P);
        require(judged, "but it is judged");
        _settleVotes(_list(C, A, B));
        require(ledger.nodeInfo(C).activeStake == 1.8 ether, "C disputed a credited batch: slashBps of its stake");
        _at(7, 170);
        _settleVotes(_list(C, D, C)); // the window's last round
        require(ledger.nodeInfo(C).activeStake == 1.8 ether, "a vote is judged once");
        require(ledger.totalSlashed() == 0.2 ether, "only C lost");
        address[3] memory kept = [A, B, D];
        for (uint256 i; i < kept.length; ++i) {
            require(ledger.nodeInfo(kept[i]).activeStake == 2 ether, "winners and the unavailable vote keep theirs");
        }
        _at(8, 180);
        require(_refusal(A, judgeC) == ISwarmLedger.SettlementWindowClosed.selector, "not after challengeRounds more");
    }

    function test_anAppealNobodyVotesOnLeavesTheFirstDisputeStanding() public {
        _deploy(1);
        _dispute(A);
        _appeal(130); // and nobody on the appeal's committee votes (or its beacon lapses)
        _at(6, 140);
        _settle();
        require(ledger.nodeInfo(P).activeStake == 1.8 ether, "the first dispute stands: 10% of 2 ether");
        _settleVotes(_list(A, B, C));
        require(ledger.nodeInfo(A).activeStake == 2 ether, "the disputer did not lose");
    }

    function test_anAppealWithoutAVerdictHasOnlyTheFirstCommitteesVotesJudged() public {
        _deploy(2);
        _dispute(A);
        _dispute(D);
        _agree(C); // 2 disputing seats vs 1 agreeing: disputed
        _appeal(130);
        for (uint256 i = 1; _appealSeats(B) == 0; ++i) {
            vm.setBlockhash(131, keccak256(abi.encode("appeal beacon", i))); // one that seats B
        }
        _agree(B); // alone on the appeal: short of the quorum of 2, no verdict
        require(_credited() == 0, "one appellate agreement: not credited");
        (uint8 first, uint8 second,) = ledger.voteOf(B, 0, P);
        require(first == 0 && second == 1, "B agreed on the appeal's committee only");
        _at(6, 140);
        _settle();
        require(ledger.nodeInfo(P).activeStake == 1.8 ether, "the first dispute stands: slashBps, once");
        _settleVotes(_list(A, B, C));
        _settleVotes(_list(D, D, B));
        require(ledger.nodeInfo(C).activeStake == 1.8 ether, "C agreed with the standing dispute: it lost");
        require(ledger.nodeInfo(B).activeStake == 2 ether, "B's vote on an appeal that decided nothing is not judged lost");
        require(ledger.totalSlashed() == 0.4 ether, "only P and C lost");
    }

    function test_aSettlerIsPaidItsCutOfOthersSlashesOnly() public {
        _deploy(1);
        _agree(A);
        _agree(B);
        _dispute(C);
        _dispute(D); // 2 agreeing seats vs 2 disputing: a tie, credited; C and D lost
        require(_credited() == 20_000, "credited");
        _at(6, 160);
        vm.prank(C);
        ledger.settleVotes(0, P, _list(C, D, A)); // C judges its own losing vote and D's
        require(C.balance == 8 ether + 0.02 ether, "C's cut: a tenth of D's 0.2 ether, none of its own");
        require(ledger.totalSlashed() == 0.4 ether && ledger.rewardPool() == 0.38 ether, "the rest in the pool");
        // a disputed batch settled by its own producer pays it nothing back
        vm.roll(170);
        vm.prank(B);
        ledger.submit(6, keccak256("b"), 8, 40_000, 20_000);
        vm.roll(172);
        for (uint256 i = 1; ledger.seatsOf(6, B, A) == 0; ++i) {
            vm.setBlockhash(171, keccak256(abi.encode("b beacon", i)));
        }
        vm.prank(A);
        ledger.attest(6, B, 0, 0, 6);
        _at(13, 250);
        uint256 before = B.balance;
        vm.prank(B);
        ledger.settle(6, B);
        require(ledger.nodeInfo(B).activeStake == 1.8 ether && B.balance == before, "slashed in full, no cut");
        require(ledger.totalSettlerPaid() == 0.02 ether, "only C's cut was ever paid");
    }

    // --------------------------------------------------------------- voter appeals (issue 57)

    /// @dev `voter` appeals P's verdict in block `appealBlock` of round 4; the chain moves past
    /// the appeal's beacon block, and a beacon is chosen that seats each of `seated`.
    function _appealAsVoter(address voter, uint256 appealBlock, address[] memory seated) internal {
        _at(4, appealBlock);
        vm.prank(voter);
        ledger.appealVote(0, P);
        vm.roll(appealBlock + 2);
        for (uint256 i = 1;; ++i) {
            require(i < 5_000, "no appeal beacon of 5,000 seats every checker asked for");
            vm.setBlockhash(appealBlock + 1, keccak256(abi.encode("voter appeal beacon", i)));
            bool all = true;
            for (uint256 k; k < seated.length; ++k) {
                all = all && _appealSeats(seated[k]) != 0;
            }
            if (all) break;
        }
    }

    function test_aBaitBatchIsAppealedByAnHonestAgreerAndItsDisputersLose() public {
        // P's honest batch: A agrees, then B and C (P's allies) dispute in the window's last
        // block, outseating A. Until issue 57 only P could appeal, and P, one of the baiters, did
        // not: A lost slashBps for an honest vote.
        _deploy(1);
        vm.deal(address(this), 1 ether);
        ledger.fund{value: 1 ether}();
        _agree(A);
        _dispute(B);
        _dispute(C);
        require(_credited() == 0, "2 disputing seats vs 1 agreeing: disputed");
        _appealAsVoter(A, 130, _list(A, D, D));
        (uint8 first,,) = ledger.voteOf(A, 0, P);
        require(first == 1 && ledger.appealOf(0, P).appealBlock == 130, "A's appeal is the submission's");
        _agree(A);
        _agree(D);
        require(_credited() == 20_000, "the appeal's committee credits it");
        _at(6, 200);
        _settle();
        require(ledger.nodeInfo(P).activeStake == 2 ether, "credited on appeal: nobody slashes the producer");
        _settleVotes(_list(A, B, C));
        _settleVotes(_list(D, D, A));
        require(ledger.nodeInfo(B).activeStake == 1.8 ether, "B's dispute lost");
        require(ledger.nodeInfo(C).activeStake == 1.8 ether, "C's dispute lost");
        require(ledger.nodeInfo(A).activeStake == 2 ether, "the honest agreer keeps its stake");
        require(ledger.totalSlashed() == 0.4 ether, "only the baiters lost");
    }

    function test_onlyAVoteTheFirstVerdictJudgesLostMayBeAppealed() public {
        _deploy(1);
        _agree(A);
        _dispute(B);
        _unavailable(C);
        require(_credited() == 0, "1 agreeing vs 1 + 1: not credited, and not disputed (1 vs 1)");
        bytes memory appealP = abi.encodeCall(ISwarmLedger.appealVote, (0, P));
        _at(4, 130);
        require(_refusal(A, appealP) == ISwarmLedger.VoteNotLosing.selector, "A's agreement loses nothing");
        require(_refusal(B, appealP) == ISwarmLedger.VoteNotLosing.selector, "nor B's dispute");
        require(_refusal(C, appealP) == ISwarmLedger.VoteNotLosing.selector, "an unavailable vote never loses");
        require(_refusal(D, appealP) == ISwarmLedger.VoteNotLosing.selector, "nor does a vote never cast");
        bytes memory appealNone = abi.encodeCall(ISwarmLedger.appealVote, (0, A));
        require(_refusal(B, appealNone) == ISwarmLedger.NoSubmission.selector, "a submission there is");
    }

    function test_aLostVoterAppealCostsItsVoterTwiceAndTheProducerNothing() public {
        _deploy(1);
        _agree(A);
        _dispute(B); // a tie: credited, so B's dispute would lose
        require(_credited() == 20_000, "credited");
        bytes memory appealP = abi.encodeCall(ISwarmLedger.appealVote, (0, P));
        _at(3, 125);
        require(_refusal(B, appealP) == ISwarmLedger.NotAppealable.selector, "not in the challenge window");
        _appealAsVoter(B, 130, _list(A, C, C));
        require(_refusal(A, appealP) == ISwarmLedger.AlreadyAppealed.selector, "once per submission");
        require(
            _refusal(P, abi.encodeCall(ISwarmLedger.appeal, (0))) == ISwarmLedger.AlreadyAppealed.selector,
            "the producer's appeal too"
        );
        require(_credited() == 20_000, "until the appeal's committee decides, the first verdict stands");
        _agree(A);
        _agree(C);
        require(_credited() == 20_000, "the appeal's committee credits it too");
        _at(6, 200);
        _settle();
        require(ledger.nodeInfo(P).activeStake == 2 ether, "credited: the producer keeps its stake");
        _settleVotes(_list(A, B, C));
        require(ledger.nodeInfo(B).activeStake == 1.6 ether, "B appealed and lost: twice slashBps");
        require(ledger.totalSlashed() == 0.4 ether, "nobody else lost");
    }

    function test_aVoterAppealWithoutAVerdictCostsItsVoterOnce() public {
        // B disputes a batch A's agreement credits (a tie) and appeals; nobody votes on the
        // appeal, so the first verdict stands and B's dispute loses slashBps, once: the appeal's
        // committee never ruled against B (allies voting unavailable on a bait batch's appeal
        // must not double an honest appellant's loss)
        _deploy(1);
        _agree(A);
        _dispute(B);
        require(_credited() == 20_000, "a tie: credited");
        _appealAsVoter(B, 130, _list(A, C, C));
        _at(6, 200);
        _settle();
        _settleVotes(_list(A, B, C));
        require(ledger.nodeInfo(B).activeStake == 1.8 ether, "B's dispute lost: slashBps, once");
        require(ledger.nodeInfo(A).activeStake == 2 ether, "A's agreement stands");
        require(ledger.totalSlashed() == 0.2 ether, "nobody else lost");
    }

    function test_aVoterAppealUpheldSlashesTheProducerOnceAndItsAgreersLose() public {
        // a forgery the first committee credited (A agreed), B disputed and appealed: the appeal's
        // committee disputes it; P did not ask for the second draw, so it loses slashBps, once
        _deploy(1);
        _agree(A);
        _dispute(B);
        require(_credited() == 20_000, "a tie: credited");
        _appealAsVoter(B, 130, _list(B, C, D));
        _dispute(B);
        require(_credited() == 0, "one appellate dispute decides: credit removed");
        (uint256 total,) = ledger.roundInfo(0);
        require(total == 0, "and the round's total follows");
        _dispute(C);
        _at(6, 200);
        _settle();
        require(ledger.nodeInfo(P).activeStake == 1.8 ether, "disputed on a voter's appeal: slashBps, once");
        _settleVotes(_list(A, B, C));
        require(ledger.nodeInfo(A).activeStake == 1.8 ether, "A agreed with a disputed batch: it lost");
        require(ledger.nodeInfo(B).activeStake == 2 ether, "the appellant won");
        require(ledger.nodeInfo(C).activeStake == 2 ether, "and so did C");
    }

    function test_aClaimNoBatchCanHoldIsRefused() public {
        _deploy(1);
        vm.roll(120);
        bytes memory tooMany = abi.encodeCall(ISwarmLedger.submit, (0, keccak256("a"), 65_537, 0, 0));
        require(_refusal(A, tooMany) == ISwarmLedger.TooManyRollouts.selector, "over 1,024 x 64 rollouts");
        // 8 rollouts carry at most 4 score units of signal (half of each group right)
        bytes memory overSignal = abi.encodeCall(ISwarmLedger.submit, (0, keccak256("a"), 8, 40_000, 40_001));
        require(_refusal(A, overSignal) == ISwarmLedger.SignalOutOfRange.selector, "signal over rollouts x 0.5");
        vm.prank(A);
        ledger.submit(0, keccak256("a"), 65_536, 0, 65_536 * 5_000);
        bytes memory overVote = abi.encodeCall(ISwarmLedger.attest, (0, P, 40_000, 40_001, 0));
        require(_refusal(B, overVote) == ISwarmLedger.SignalOutOfRange.selector, "an attested signal too");
    }

    function test_aVerdictNeitherCreditedNorDisputedJudgesNoVoteLost() public {
        _deploy(1);
        _agree(A);
        _dispute(B);
        _unavailable(C); // 1 agreeing seat vs 1 + 1: not credited, and not disputed (1 vs 1)
        _at(6, 160);
        _settleVotes(_list(A, B, C));
        require(ledger.totalSlashed() == 0, "no side lost");
    }

    function test_stakeMovedAfterTheSubmissionChangesNoAppealSeat() public {
        _deploy(1); // P's batch in block 110: the snapshot of its committees, the appeal's too
        address late = address(0xE001);
        _at(4, 125);
        vm.deal(late, 1_000 ether);
        vm.prank(late);
        ledger.register{value: 100 ether}("{}", FAMILY); // before the appeal, after the snapshot
        _appeal(130);
        vm.prank(B);
        ledger.addStake{value: 8 ether}(); // after the appeal, once its beacon is known
        vm.prank(C);
        ledger.requestUnstake(1 ether);
        for (uint256 i = 1; _appealSeats(B) == 0 || _appealSeats(C) == 0; ++i) {
            vm.setBlockhash(131, keccak256(abi.encode("appeal beacon", i)));
        }
        uint256 beacon = ledger.appealOf(0, P).beacon;
        require(_appealSeats(late) == 0, "stake registered after the submission buys no appeal seat");
        require(_appealSeats(B) == _drawn(beacon, B) && _appealSeats(C) == _drawn(beacon, C), "seats as of block 110");
        bytes4 refused = _refusal(late, abi.encodeCall(ISwarmLedger.attest, (0, P, 40_000, 20_000, 0)));
        require(refused == ISwarmLedger.NotDrawn.selector, "the late whale cannot vote on the appeal");
        _agree(B);
        _agree(C);
        require(
            ledger.appealOf(0, P).agreeSeats == _drawn(beacon, B) + _drawn(beacon, C),
            "appellate votes count their seats as of the snapshot"
        );
    }

    function test_aCheckerOfAnotherFamilyIsNeverDrawnAndDilutesNoDraw() public {
        // W holds 20 times the stake of P's whole family, in another family: it cannot run P's
        // model, so it never sits on P's committees, and P's checkers are drawn from P's family's
        // stake alone (2 of 10 ether each, as without W)
        _launch(1, 200 ether, OTHER_FAMILY);
        require(ledger.familyStakeAt(FAMILY, 110) == 10 ether, "P's family: P, A, B, C, D");
        require(ledger.familyStakeAt(OTHER_FAMILY, 110) == 200 ether, "W's family: W alone");
        require(ledger.totalStakeAt(110) == 210 ether, "the total counts both");
        require(ledger.nodeInfo(W).family == OTHER_FAMILY && ledger.nodeInfo(A).family == FAMILY, "families");
        for (uint256 i = 1; i <= 20; ++i) {
            vm.setBlockhash(111, keccak256(abi.encode("beacon", i)));
            require(_seats(W) == 0 && !ledger.isChecker(0, P, W), "no seat for another family");
            uint256 beacon = uint256(keccak256(abi.encode("beacon", i))) & type(uint88).max;
            require(_seats(A) == _drawnFirst(beacon, A), "seats drawn from the family's stake");
        }
        bytes4 refused = _refusal(W, abi.encodeCall(ISwarmLedger.attest, (0, P, 40_000, 20_000, 0)));
        require(refused == ISwarmLedger.NotDrawn.selector, "W's vote on P's batch is refused");
        refused = _refusal(W, abi.encodeCall(ISwarmLedger.reportUnavailable, (0, P)));
        require(refused == ISwarmLedger.NotDrawn.selector, "and so is its unavailable report");
        // and the reverse: W's batch has nobody to check it, so it can never earn
        vm.prank(W);
        ledger.submit(0, keccak256("w"), 8, 40_000, 20_000);
        vm.roll(200);
        address[4] memory others = [A, B, C, D];
        for (uint256 i; i < others.length; ++i) {
            require(ledger.seatsOf(0, W, others[i]) == 0, "a lone family's batch draws no checker");
        }
    }

    function test_aNodeRegistersOnlyInAFamilyTheLedgerChecks() public {
        _launch(1, 0);
        address stranger = address(0xE002);
        vm.deal(stranger, 10 ether);
        bytes4 refused =
            _refusal(stranger, abi.encodeCall(ISwarmLedger.register, ("{}", keccak256("a base of its own"))));
        require(refused == ISwarmLedger.UnknownFamily.selector, "a family of its own is refused");
        refused = _refusal(stranger, abi.encodeCall(ISwarmLedger.register, ("{}", bytes32(0))));
        require(refused == ISwarmLedger.UnknownFamily.selector, "so is none");
        require(!ledger.nodeInfo(stranger).registered && ledger.nodeInfo(stranger).family == 0, "nothing written");
        bytes32[] memory listed = ledger.families();
        require(listed.length == 2 && listed[0] == FAMILY && listed[1] == OTHER_FAMILY, "families() as deployed");
    }

    function test_familiesAreCheckedAtDeployment() public {
        bytes32[] memory none = new bytes32[](0);
        bytes32[] memory zero = new bytes32[](1);
        bytes32[] memory twice = new bytes32[](2);
        twice[0] = FAMILY;
        twice[1] = FAMILY;
        bytes32[] memory many = new bytes32[](256);
        for (uint256 i; i < many.length; ++i) {
            many[i] = keccak256(abi.encode(i));
        }
        bytes32[][4] memory bad = [none, zero, twice, many];
        for (uint256 i; i < bad.length; ++i) {
            bytes memory args = abi.encode(L, 1 ether, 9 * L, 2, 1, 1 ether, 1000, 100, keccak256("catalog"), 1, 3, 2, 12, bad[i], address(0));
            try this.deployFor(args) {
                revert("a bad family list was accepted");
            } catch (bytes memory reason) {
                require(
                    keccak256(reason) == keccak256(abi.encodeWithSelector(ISwarmLedger.InvalidParameter.selector, "families")),
                    "refused as InvalidParameter(families)"
                );
            }
        }
        many = new bytes32[](255);
        for (uint256 i; i < many.length; ++i) {
            many[i] = keccak256(abi.encode(i));
        }
        this.deployFor(abi.encode(L, 1 ether, 9 * L, 2, 1, 1 ether, 1000, 100, keccak256("catalog"), 1, 3, 2, 12, many, address(0)));
    }

    // ------------------------------------------------------------------------------ escalation


    /// @dev A ledger that names BOOK as its round book, P, A, B, C and D registered with 2 ether
    /// each, the clock in round 2 (the book's post round for round 0: first votes until round 3),
    /// block 120; returns a beacon that seats A, B and C on P's committee of round 0 and not D,
    /// with stakes as of block 110 (the round's submission root, in the book).
    function _launchWithBook() internal returns (uint88 beacon) {
        vm.warp(1_700_000_000);
        vm.roll(100);
        ledger = ISwarmLedger(
            deployLedger(abi.encode(L, 1 ether, 9 * L, 2, 1, 1 ether, 1000, 100, keccak256("catalog"), 1, 3, 2, 12, families(), BOOK))
        );
        address[5] memory nodes = [P, A, B, C, D];
        for (uint256 i; i < nodes.length; ++i) {
            vm.deal(nodes[i], 10 ether);
            vm.prank(nodes[i]);
            ledger.register{value: 2 ether}("{}", FAMILY);
        }
        vm.warp(ledger.genesis() + 2 * L + 1);
        vm.roll(120);
        for (uint256 i = 1;; ++i) {
            require(i < 2_000, "no beacon of 2,000 seats A, B and C and not D");
            beacon = uint88(uint256(keccak256(abi.encode("book beacon", i))));
            if (_drawnFirst(beacon, A) > 0 && _drawnFirst(beacon, B) > 0 && _drawnFirst(beacon, C) > 0) {
                if (_drawnFirst(beacon, D) == 0) break;
            }
        }
    }

    /// @dev BOOK's call escalating P's batch of round 0 (claimed: 8 rollouts, score 40,000, signal
    /// 20,000) for `checker`, with `vote`.
    function _escalation(address checker, uint88 beacon, ISwarmLedger.EscalationVote memory vote)
        internal
        pure
        returns (bytes memory)
    {
        return abi.encodeCall(
            ISwarmLedger.escalate, (0, P, checker, keccak256("p"), 8, 40_000, 20_000, 110, beacon, vote)
        );
    }

    /// @dev A dispute (a score of 0, findings 6), as _dispute votes.
    function _escalation(address checker, uint88 beacon) internal pure returns (bytes memory) {
        return _escalation(checker, beacon, ISwarmLedger.EscalationVote(false, 0, 0, 6));
    }

    function test_onlyTheBookTheLedgerNamesEscalates() public {
        uint88 beacon = _launchWithBook();
        require(ledger.book() == BOOK, "named at deployment");
        require(_refusal(A, _escalation(A, beacon)) == ISwarmLedger.NotTheBook.selector, "a node is not the book");
        // a ledger that names no book: not even the zero address escalates
        ledger = ISwarmLedger(
            deployLedger(abi.encode(L, 1 ether, 9 * L, 2, 1, 1 ether, 1000, 100, keccak256("catalog"), 1, 3, 2, 12, families(), address(0)))
        );
        require(_refusal(address(0), _escalation(A, beacon)) == ISwarmLedger.NotTheBook.selector, "no book");
    }

    /// @dev The book slashes an equivocating checker (its judge found two sides of one voter):
    /// slashBps of its stake, unbonding too, into the pool; the prover paid the settler's cut.
    function test_onlyTheBookSlashesAnEquivocationAndItsProverIsPaidTheCut() public {
        _launchWithBook();
        bytes memory call = abi.encodeCall(ISwarmLedger.slashEquivocation, (0, P, A, S));
        require(_refusal(A, call) == ISwarmLedger.NotTheBook.selector, "a node is not the book");
        require(_refusal(S, call) == ISwarmLedger.NotTheBook.selector, "nor is its prover");
        vm.prank(A);
        ledger.requestUnstake(1 ether); // it asks half its stake back: unbonding is slashed too
        uint256 pool = ledger.rewardPool();
        uint256 paid = S.balance;
        vm.prank(BOOK);
        uint256 slashed = ledger.slashEquivocation(0, P, A, S);
        require(slashed == 0.2 ether, "slashBps (10%) of its stake, active and unbonding");
        ISwarmLedger.NodeView memory a = ledger.nodeInfo(A);
        require(a.activeStake + a.unbonding == 1.8 ether, "taken from its stake");
        require(S.balance - paid == 0.02 ether, "the prover paid SETTLER_CUT_BPS of it");
        require(ledger.rewardPool() - pool == 0.18 ether, "the rest into the pool");
    }

    function test_anEscalatedBatchKeepsTheRootLanesCommitteeAndIsJudgedHere() public {
        uint88 beacon = _launchWithBook();
        require(_refusal(BOOK, _escalation(D, beacon)) == ISwarmLedger.NotDrawn.selector, "D holds no seat");
        require(_refusal(BOOK, _escalation(P, beacon)) == ISwarmLedger.SelfAttestation.selector, "nor its producer");
        ISwarmLedger.EscalationVote memory agreeing = ISwarmLedger.EscalationVote(false, 40_000, 20_000, 0);
        require(
            _refusal(BOOK, _escalation(A, beacon, agreeing)) == ISwarmLedger.NotADispute.selector,
            "an agreeing checker signs off chain: its vote cannot escalate"
        );
        vm.prank(BOOK);
        (bool ok,) = address(ledger).call(_escalation(A, beacon));
        require(ok, "a seated checker's escalation is taken");
        require(_refusal(BOOK, _escalation(B, beacon)) == ISwarmLedger.AlreadySubmitted.selector, "once");
        ISwarmLedger.SubmissionView memory s = ledger.submissionOf(0, P);
        require(s.digest == keccak256("p") && s.signal == 20_000 && s.snapshotBlock == 110, "the signed batch, as of the root");
        (uint256 drawn, uint64 beaconBlock, bool ready,) = ledger.beaconOf(0, P);
        require(drawn == beacon && beaconBlock == 111 && ready, "the root lane's beacon");
        address[4] memory checkers = [A, B, C, D];
        for (uint256 i; i < checkers.length; ++i) {
            require(_seats(checkers[i]) == _drawnFirst(beacon, checkers[i]), "the committee the book drew");
        }
        (uint8 side,,) = ledger.voteOf(A, 0, P);
        require(side == 2, "the escalating checker's dispute came with it");
        require(_refusal(A, abi.encodeCall(ISwarmLedger.attest, (0, P, 0, 0, 6))) == ISwarmLedger.AlreadyAttested.selector, "once");
        _dispute(B);
        _agree(C);
        require(_refusal(D, abi.encodeCall(ISwarmLedger.attest, (0, P, 0, 0, 6))) == ISwarmLedger.NotDrawn.selector, "D votes nowhere");
        vm.warp(ledger.genesis() + 6 * L + 1); // final (round 0's appeals end in round 5)
        uint256 before = ledger.nodeInfo(P).activeStake;
        _settle();
        require(ledger.nodeInfo(P).activeStake == before - before / 10, "disputed: its producer slashed 10%");
    }

    function test_anEscalatedBatchHoldsItsUnstakedProducersWithdrawal() public {
        uint88 beacon = _launchWithBook();
        vm.prank(P); // signed in the root lane, then the whole stake asked back before it escalates
        ledger.requestUnstake(2 ether);
        vm.prank(BOOK);
        (bool ok,) = address(ledger).call(_escalation(A, beacon));
        require(ok, "escalated");
        _dispute(B);
        vm.warp(ledger.nodeInfo(P).unbondingEnd + 1);
        require(_refusal(P, abi.encodeCall(ISwarmLedger.withdraw, ())) == ISwarmLedger.UnsettledSubmissions.selector, "held");
        _settle();
        uint256 balance = P.balance;
        vm.prank(P);
        ledger.withdraw();
        require(P.balance - balance == 1.8 ether, "what is left after the slash");
    }

    /// @dev External so that a deployment's revert can be caught.
    function deployFor(bytes memory args) external returns (address) {
        return deployLedger(args);
    }

    /// @dev The documented draw of the first committee's seats of `checker`, with its stake and
    /// its family's as of P's submission (2 of 10 ether) and checkers (3) trials.
    function _drawnFirst(uint256 beacon, address checker) internal pure returns (uint256 held) {
        bytes32 base = keccak256(abi.encode(beacon, uint64(0), P, checker));
        for (uint256 j; j < 3; ++j) {
            if ((uint256(keccak256(abi.encode(base, j))) >> 128) * 10 ether < uint256(2 ether) << 128) ++held;
        }
    }

    /// @dev The documented draw of the appeal's seats of `checker`, with its stake and the total
    /// as of P's submission (2 of 10 ether) and appealCheckers (12) trials.
    function _drawn(uint256 beacon, address checker) internal pure returns (uint256 held) {
        bytes32 base = keccak256(abi.encode(beacon, uint64(0), P, checker));
        for (uint256 j; j < 12; ++j) {
            if ((uint256(keccak256(abi.encode(base, j))) >> 128) * 10 ether < uint256(2 ether) << 128) ++held;
        }
    }
}
