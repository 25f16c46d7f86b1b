// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {ISwarmLedger} from "../../ISwarmLedger.sol";
import {CheatsBase, FuzzSelector} from "./Cheats.sol";
import {LedgerHandler} from "./LedgerHandler.sol";

/// @notice Stateful fuzzing of SwarmLedger: forge calls LedgerHandler's actions in random
/// sequences (the campaign's runs x depth are in foundry.toml) and checks every invariant below
/// after every 4th call and at the end of each run (foundry.toml's check_interval says why;
/// LedgerHandler itself judges every call as it makes it). Each invariant is a rule of the ledger in plain words; a failure names the
/// rule and the offending values, and forge prints the shrunk sequence that broke it.
abstract contract LedgerInvariantsBase is CheatsBase {
    ISwarmLedger internal ledger;
    LedgerHandler internal handler;


    struct Params {
        uint64 roundLength;
        uint256 minStake;
        uint64 unbondingPeriod;
        uint64 challengeRounds;
        uint64 submitRounds;
        uint256 rewardPerRound;
        uint16 slashBps;
        uint16 agreeToleranceBps;
        uint16 quorum;
        uint16 checkers;
        uint64 appealRounds;
        uint16 appealCheckers;
    }

    /// @dev The parameters of the ledger under test.
    function params() internal pure virtual returns (Params memory);

    function setUp() public {
        Params memory p = params();
        vm.warp(1_700_000_000);
        vm.roll(1_000);
        ledger = ISwarmLedger(
            deployLedger(
                abi.encode(
                    p.roundLength,
                    p.minStake,
                    p.unbondingPeriod,
                    p.challengeRounds,
                    p.submitRounds,
                    p.rewardPerRound,
                    p.slashBps,
                    p.agreeToleranceBps,
                    keccak256("catalog"),
                    p.quorum,
                    p.checkers,
                    p.appealRounds,
                    p.appealCheckers,
                    families(),
                    BOOK // a round book's address: only it slashes an equivocation (the handler acts as it)
                )
            )
        );
        handler = new LedgerHandler(ledger);
        handler.seedNodes(3);
        vm.createDir(".forge/metrics", true); // afterInvariant's report, also under a bare `forge test`
    }

    /// @dev Appends this run's count of the hard paths reached to .forge/metrics/paths.jsonl, one
    /// line per run, which scripts/fuzz_ledger.py sums into its report.
    function afterInvariant() public {
        vm.writeLine(".forge/metrics/paths.jsonl", handler.pathsLine(suiteName()));
    }

    function suiteName() internal pure virtual returns (string memory);

    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    function targetSelectors() public view returns (FuzzSelector[] memory targets) {
        bytes4[] memory actions = new bytes4[](18);
        actions[0] = LedgerHandler.register.selector;
        actions[1] = LedgerHandler.addStake.selector;
        actions[2] = LedgerHandler.requestUnstake.selector;
        actions[3] = LedgerHandler.withdraw.selector;
        actions[4] = LedgerHandler.setMetadata.selector;
        actions[5] = LedgerHandler.submit.selector;
        actions[6] = LedgerHandler.attest.selector;
        actions[7] = LedgerHandler.settle.selector;
        actions[8] = LedgerHandler.fund.selector;
        actions[9] = LedgerHandler.claim.selector;
        actions[10] = LedgerHandler.warp.selector;
        actions[11] = LedgerHandler.reportUnavailable.selector;
        actions[12] = LedgerHandler.drawBeacon.selector;
        actions[13] = LedgerHandler.attestAgreeing.selector;
        actions[14] = LedgerHandler.appeal.selector;
        actions[15] = LedgerHandler.settleVotes.selector;
        actions[16] = LedgerHandler.appealVote.selector;
        actions[17] = LedgerHandler.slashEquivocation.selector;
        targets = new FuzzSelector[](1);
        targets[0] = FuzzSelector(address(handler), actions);
    }

    function _eq(uint256 got, uint256 want, string memory rule) internal pure {
        if (got != want) {
            revert(string.concat(rule, " (ledger ", vm.toString(got), ", expected ", vm.toString(want), ")"));
        }
    }

    // ------------------------------------------------------------------------------ invariants

    /// The ledger holds exactly the stake (active + unbonding) plus the reward pool: no wei is
    /// stranded and none is owed that is not there.
    function invariant_ledgerBalanceIsStakePlusPool() public view {
        (uint256 active, uint256 unbonding) = ledger.stakeTotals();
        _eq(address(ledger).balance, active + unbonding + ledger.rewardPool(), "balance = active + unbonding + pool");
        uint256 modelActive;
        uint256 modelUnbonding;
        for (uint256 i; i < 7; ++i) {
            (, uint256 a, uint256 u,,,,,,,) = handler.stakeOf(handler.actors(i));
            modelActive += a;
            modelUnbonding += u;
        }
        _eq(active, modelActive, "active stake = the sum of the nodes' active stake");
        _eq(unbonding, modelUnbonding, "unbonding stake = the sum of the nodes' unbonding stake");
    }

    /// Every wei that entered the pool (funded, or slashed from a disputed producer or a losing
    /// voter) is in the pool or was paid out (to claimants, or to settlers as their cut).
    function invariant_poolInEqualsPoolOut() public view {
        _eq(
            ledger.totalFunded() + ledger.totalSlashed(),
            ledger.rewardPool() + ledger.totalPaidOut() + ledger.totalSettlerPaid(),
            "funded + slashed = pool + paid out + paid to settlers"
        );
        _eq(
            ledger.rewardPool(),
            handler.pool(),
            "pool = what was funded and slashed minus what claims and settlers' cuts paid"
        );
        _eq(ledger.totalSettlerPaid(), handler.settlerPaid(), "settlers' total = the sum of their cuts");
        _eq(ledger.totalSlashed(), handler.slashed(), "slashed total = the sum of the settlements' and the judged votes' slashes");
    }

    /// A node's stake is what it staked, minus what it moved to unbonding, withdrew or lost to a
    /// slash; its total paid is the sum of its claims.
    function invariant_eachNodesStakeAndPayoutsFollowItsCalls() public view {
        for (uint256 i; i < 7; ++i) {
            address a = handler.actors(i);
            ISwarmLedger.NodeView memory v = ledger.nodeInfo(a);
            (
                bool registered,
                uint256 active,
                uint256 unbonding,
                uint256 end,,
                uint256 claimedTotal,
                uint256 stakeBlock,
                uint256 unsettled,
                uint256 backing,
            ) = handler.stakeOf(a);
            _eq(v.unsettled, unsettled, "a node's unsettled count = its submissions not settled");
            _eq(v.backing, backing, "its backing count = those made before its last unstake request");
            _eq(v.registered ? 1 : 0, registered ? 1 : 0, "a node is registered once it registered");
            _eq(v.activeStake, active, "a node's active stake follows its calls and slashes");
            _eq(v.unbonding, unbonding, "a node's unbonding stake follows its calls and slashes");
            if (unbonding > 0) _eq(v.unbondingEnd, end, "unbonding frees unbondingPeriod after the last request");
            _eq(v.totalPaid, claimedTotal, "a node's total paid = the sum of its claims");
            if (registered) _eq(v.stakeBlock, stakeBlock, "a node's stake block is that of its last stake change");
            require(
                v.family == (registered ? handler.familyOf(a) : bytes32(0)), "a node's family is the one it registered in"
            );
            for (uint256 back; back < 4 && back < block.number; ++back) {
                _eq(
                    ledger.stakeAt(a, block.number - back),
                    handler.stakeAtModel(a, block.number - back),
                    "a node's stake at a block is its active stake after that block"
                );
            }
        }
        bytes32[2] memory fams = [FAMILY, OTHER_FAMILY];
        for (uint256 f; f < fams.length; ++f) {
            for (uint256 back; back < 4 && back < block.number; ++back) {
                _eq(
                    ledger.familyStakeAt(fams[f], block.number - back),
                    handler.stakeAtModel(handler.familyKey(fams[f]), block.number - back),
                    "a family's stake at a block is its nodes' active stake after that block"
                );
            }
        }
    }

    /// Credit follows the votes: a submission is credited exactly while at least `quorum` drawn
    /// checkers of its deciding committee (the appeal's once its producer appealed, else the
    /// first) agreed and their seats are at least those of the checkers who disputed it plus
    /// those who reported it unavailable, each vote counted once per seat its checker drew, on
    /// its committee's tally and the side it falls (the signal exactly the claim and the score
    /// within agreeToleranceBps of the batch's maximum: agree); what it earns is its signal,
    /// which every agreeing checker recomputed; a round's credited total is the sum of its
    /// credited signals.
    function invariant_creditFollowsTheVotes() public view {
        uint256 n = handler.subCount();
        uint64[] memory one = new uint64[](1);
        for (uint256 i; i < n; ++i) {
            LedgerHandler.Sub memory s = handler.subAt(i);
            ISwarmLedger.SubmissionView memory v = ledger.submissionOf(s.round, s.node);
            _eq(v.score, s.score, "a submission keeps its score");
            _eq(v.signal, s.signal, "a submission keeps its signal");
            _eq(v.agrees, s.votes.agrees, "each agreeing vote is counted once");
            _eq(v.disputes, s.votes.disputes, "each disputing vote is counted once");
            _eq(v.unavailable, s.votes.unavailable, "each unavailable vote is counted once");
            _eq(v.agreeSeats, s.votes.agreeSeats, "agreeing seats = the agreeing checkers' seats");
            _eq(v.disputeSeats, s.votes.disputeSeats, "disputing seats = the disputing checkers' seats");
            _eq(v.unavailableSeats, s.votes.unavailableSeats, "unavailable seats = the seats of the checkers who could not fetch it");
            _eq(v.snapshotBlock, s.snapshotBlock, "a submission's stake snapshot is its block");
            _eq(v.appealBlock, s.appealBlock, "a submission is appealed once its producer or a losing voter appealed, in that block");
            ISwarmLedger.AppealView memory p = ledger.appealOf(s.round, s.node);
            _eq(p.appealBlock, s.appealBlock, "appealOf reports the appeal's block");
            _eq(p.agrees, s.appealVotes.agrees, "each agreeing vote on an appeal is counted once, on the appeal");
            _eq(p.disputes, s.appealVotes.disputes, "each disputing vote on an appeal is counted once, on the appeal");
            _eq(p.unavailable, s.appealVotes.unavailable, "each unavailable vote on an appeal is counted once, on the appeal");
            _eq(p.agreeSeats, s.appealVotes.agreeSeats, "an appeal's agreeing seats = its agreeing checkers' seats");
            _eq(p.disputeSeats, s.appealVotes.disputeSeats, "an appeal's disputing seats = its disputing checkers' seats");
            _eq(p.unavailableSeats, s.appealVotes.unavailableSeats, "an appeal's unavailable seats = its unavailable checkers' seats");
            _eq(
                v.credited,
                handler.credited(s) ? s.signal : 0,
                "credited iff the deciding committee's quorum agreed and its agree seats >= dispute + unavailable seats"
            );
            _eq(v.settled ? 1 : 0, s.settled ? 1 : 0, "a submission is settled once settled");
            _eq(v.paid, s.paid ? s.paidAmount : 0, "a paid submission reports what it was paid");
            (, bool isFinal) = ledger.roundInfo(s.round);
            if (isFinal && !s.paid) {
                one[0] = s.round;
                _eq(ledger.claimable(s.node, one), handler.shareOf(i), "a final submission is owed its credited share");
            }
        }
        uint64[] memory rounds = handler.roundsWithSubs();
        for (uint256 i; i < rounds.length; ++i) {
            (uint256 total,) = ledger.roundInfo(rounds[i]);
            _eq(total, handler.creditedTotal(rounds[i]), "a round's credited total = the sum of its credited signals");
        }
    }

    /// No evidence, no credit: a submission that fewer than `quorum` checkers of its deciding
    /// committee agreed with earns nothing (an appeal that reached a verdict decides, whatever
    /// the first committee said), and once its round is final nobody can make it earn (its share
    /// is 0 and stays 0).
    function invariant_noEvidenceNoCredit() public view {
        uint256 n = handler.subCount();
        uint64[] memory one = new uint64[](1);
        for (uint256 i; i < n; ++i) {
            LedgerHandler.Sub memory s = handler.subAt(i);
            ISwarmLedger.SubmissionView memory v = ledger.submissionOf(s.round, s.node);
            uint256 agrees = handler.appealDecides(s) ? ledger.appealOf(s.round, s.node).agrees : v.agrees;
            if (agrees >= ledger.quorum()) continue;
            _eq(v.credited, 0, "a submission short of its quorum is not credited");
            one[0] = s.round;
            if (!s.paid) _eq(ledger.claimable(s.node, one), 0, "a submission short of its quorum pays nothing");
        }
    }

    /// Checkers are drawn from the submission's own beacon, the hash of the block after the one
    /// that holds it (unknown when it was sent), with the stakes as of the submission's block:
    /// the ledger's beacon and every actor's seats on every submission are the documented rule's
    /// (a producer cannot choose its checkers; stake moved later changes no committee), and a
    /// beacon nobody stored within the EVM's window lapses instead of being drawn again (no
    /// re-roll of its committee or openings). An appeal's committee is drawn the same way from
    /// the hash of the block after the appeal's, with appealCheckers trials, from the same
    /// snapshot.
    function invariant_checkersAreDrawnFromTheBeacon() public view {
        uint256 n = handler.subCount();
        for (uint256 i; i < n; ++i) {
            LedgerHandler.Sub memory t = handler.subAt(i);
            (uint256 beacon, uint64 beaconBlock, bool ready, bool stored) = ledger.beaconOf(t.round, t.node);
            (uint256 want, bool wantReady) = handler.beaconNow(t.round, t.node);
            _eq(beaconBlock, handler.beaconBlockOf(t.round, t.node), "a beacon block follows its submission's");
            _eq(ready ? 1 : 0, wantReady ? 1 : 0, "a beacon is ready once its block is past and its hash known");
            _eq(beacon, want, "a submission's beacon is its block's hash");
            _eq(
                stored ? 1 : 0,
                handler.beaconOf(t.round, t.node) != 0 ? 1 : 0,
                "a beacon is stored once a vote, drawBeacon or the appeal drew it, and then never lapses"
            );
            ISwarmLedger.AppealView memory p = ledger.appealOf(t.round, t.node);
            (want, wantReady) = handler.appealBeaconNow(t.round, t.node);
            _eq(p.beaconBlock, handler.appealBeaconBlock(t.round, t.node), "an appeal's beacon block follows the appeal's");
            _eq(p.ready ? 1 : 0, wantReady ? 1 : 0, "an appeal's beacon is ready once its block is past and its hash known");
            _eq(p.beacon, want, "an appeal's beacon is its block's hash");
            _eq(
                p.drawn ? 1 : 0,
                handler.appealBeaconOf(t.round, t.node) != 0 ? 1 : 0,
                "an appeal's beacon is stored once an appellate vote or drawBeacon drew it"
            );
        }
        for (uint256 i; i < n && i < 24; ++i) {
            LedgerHandler.Sub memory s = handler.subAt(n - 1 - i);
            for (uint256 k; k < 7; ++k) {
                address a = handler.actors(k);
                _eq(ledger.seatsOf(s.round, s.node, a), handler.seats(s.round, s.node, a), "seatsOf follows the documented draw");
                _eq(
                    ledger.appealSeatsOf(s.round, s.node, a),
                    handler.appealSeats(s.round, s.node, a),
                    "appealSeatsOf follows the documented draw, with the appeal's beacon and trials"
                );
            }
        }
    }

    /// Each vote is recorded on the committee it was cast on (the first, or once appealed the
    /// appeal's: a checker may vote once on each), hasAttested answers for the committee voting
    /// now, and a vote is judged at most once (settleVotes marks it, and skips it after).
    function invariant_eachVoteIsRecordedOnItsCommitteeAndJudgedOnce() public view {
        uint256 n = handler.subCount();
        for (uint256 i; i < n; ++i) {
            LedgerHandler.Sub memory s = handler.subAt(i);
            for (uint256 k; k < 7; ++k) {
                address a = handler.actors(k);
                uint8 record = handler.voteRecord(a, s.round, s.node);
                (uint8 first, uint8 second, bool judged) = ledger.voteOf(a, s.round, s.node);
                _eq(first, record & 3, "voteOf: the side voted on the first committee");
                _eq(second, (record >> 2) & 3, "voteOf: the side voted on the appeal's committee");
                _eq(judged ? 1 : 0, record & 16 != 0 ? 1 : 0, "voteOf: judged once settleVotes judged it");
                uint8 voting = s.appealBlock != 0 ? second : first;
                _eq(
                    ledger.hasAttested(a, s.round, s.node) ? 1 : 0,
                    voting != 0 ? 1 : 0,
                    "hasAttested: voted on the committee voting now"
                );
            }
        }
    }

    /// No round pays out more than rewardPerRound, whoever claims and in whatever order.
    function invariant_noRoundPaysMoreThanItsReward() public view {
        uint64[] memory rounds = handler.roundsWithSubs();
        for (uint256 i; i < rounds.length; ++i) {
            uint256 paid = handler.paidInRound(rounds[i]);
            if (paid > ledger.rewardPerRound()) {
                revert(string.concat("round ", vm.toString(rounds[i]), " paid ", vm.toString(paid), " > rewardPerRound"));
            }
        }
    }

    /// Every call did what the rules say: accepted exactly the calls the rules allow, paid each
    /// claim its pro-rata shares and no submission twice, slashed slashBps of a disputed node's
    /// stake (twice that after a lost appeal) and of each losing voter's, once per vote, and
    /// never let stake that can still be slashed leave (see LedgerHandler).
    function invariant_everyCallFollowedTheRules() public view {
        if (handler.violationCount() != 0) revert(handler.firstViolation());
    }
}

/// @notice The ledger with a short window: late by one round, challenged for two, appealed in
/// one round and voted on in two (the fewest allowed), 10% slashes (20% after a lost appeal), a
/// 1% agreement tolerance, the shortest unbonding period the constructor allows, a quorum of 2
/// out of 4 checkers drawn on average (of five nodes with equal stakes, each is drawn 4 times in
/// 5), appeals' committees of 12 trials.
contract LedgerInvariantsTest is LedgerInvariantsBase {
    function suiteName() internal pure override returns (string memory) {
        return "LedgerInvariantsTest";
    }

    function params() internal pure override returns (Params memory) {
        return Params(60, 1 ether, (1 + 2 * 2 + 2 + 1) * 60, 2, 1, 1 ether, 1000, 100, 2, 4, 2, 12);
    }
}

/// @notice Another corner of the parameter space: a long submission window, one challenge round,
/// three appeal rounds, a whole-stake slash (a lost appeal's doubled slash is capped at all of
/// it), no agreement tolerance at all, an odd minimum stake in gwei, and a quorum of one out of
/// two checkers drawn on average (most nodes are not drawn for most batches), appeals' of 5.
contract LedgerInvariantsStrictTest is LedgerInvariantsBase {
    function suiteName() internal pure override returns (string memory) {
        return "LedgerInvariantsStrictTest";
    }

    function params() internal pure override returns (Params memory) {
        return Params(37, 1 ether + 3 gwei, (3 + 2 * 1 + 3 + 1) * 37 + 1, 1, 3, 2_333_333_333_333_333_333, 10_000, 0, 1, 2, 3, 5);
    }
}
