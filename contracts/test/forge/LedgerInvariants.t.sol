// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {SwarmLedger} from "../../SwarmLedger.sol";
import {CheatsBase, FuzzSelector} from "./Cheats.sol";
import {LedgerHandler} from "./LedgerHandler.sol";

/// @notice Stateful fuzzing of SwarmLedger: forge calls LedgerHandler's actions in random
/// sequences (the campaign's runs x depth are in foundry.toml) and checks every invariant below
/// after each call. Each invariant is a rule of the ledger in plain words; a failure names the
/// rule and the offending values, and forge prints the shrunk sequence that broke it.
abstract contract LedgerInvariantsBase is CheatsBase {
    SwarmLedger internal ledger;
    LedgerHandler internal handler;

    uint256 internal constant GWEI = 1e9;

    /// @dev (roundLength, minStake, unbondingPeriod, challengeRounds, submitRounds,
    /// rewardPerRound, slashBps, agreeToleranceBps) of the ledger under test.
    function params()
        internal
        pure
        virtual
        returns (uint64, uint256, uint64, uint64, uint64, uint256, uint16, uint16);

    function setUp() public {
        (uint64 l, uint256 minStake, uint64 unbonding, uint64 c, uint64 s, uint256 reward, uint16 slash, uint16 tol) =
            params();
        vm.warp(1_700_000_000);
        ledger = new SwarmLedger(l, minStake, unbonding, c, s, reward, slash, tol, keccak256("catalog"));
        handler = new LedgerHandler(ledger);
        vm.createDir(".forge/metrics", true); // afterInvariant's report, also under a bare `forge test`
    }

    /// @dev Appends this run's count of the hard paths reached to .forge/metrics/paths.jsonl, one
    /// line per run, which scripts/fuzz-ledger sums into its report.
    function afterInvariant() public {
        (
            uint256 d,
            uint256 lost,
            uint256 regained,
            uint256 sl,
            uint256 slU,
            uint256 zero,
            uint256 full,
            uint256 wd,
            uint256 ties
        ) = handler.paths();
        string memory line = string.concat(
            "{\"suite\":\"", suiteName(), "\",\"disputedAttestations\":", vm.toString(d),
            ",\"creditLost\":", vm.toString(lost), ",\"creditRegained\":", vm.toString(regained)
        );
        line = string.concat(
            line, ",\"slashes\":", vm.toString(sl), ",\"slashesIntoUnbonding\":", vm.toString(slU),
            ",\"zeroShareClaims\":", vm.toString(zero), ",\"fullUnstakes\":", vm.toString(full)
        );
        vm.writeLine(".forge/metrics/paths.jsonl", string.concat(line, ",\"withdrawalsAfterSubmitting\":", vm.toString(wd), ",\"ties\":", vm.toString(ties), "}"));
    }

    function suiteName() internal pure virtual returns (string memory);

    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    function targetSelectors() public view returns (FuzzSelector[] memory targets) {
        bytes4[] memory actions = new bytes4[](11);
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
        for (uint256 i; i < 5; ++i) {
            (, uint256 a, uint256 u,,,) = handler.stakeOf(handler.actors(i));
            modelActive += a;
            modelUnbonding += u;
        }
        _eq(active, modelActive, "active stake = the sum of the nodes' active stake");
        _eq(unbonding, modelUnbonding, "unbonding stake = the sum of the nodes' unbonding stake");
    }

    /// Every wei that entered the pool (funded or slashed) is in the pool or was paid out.
    function invariant_poolInEqualsPoolOut() public view {
        _eq(
            ledger.totalFunded() + ledger.totalSlashed(),
            ledger.rewardPool() + ledger.totalPaidOut(),
            "funded + slashed = pool + paid out"
        );
        _eq(ledger.rewardPool(), handler.pool(), "pool = what was funded and slashed minus what claims paid");
        _eq(ledger.totalSlashed(), handler.slashed(), "slashed total = the sum of the settlements' slashes");
    }

    /// A node's stake is what it staked, minus what it moved to unbonding, withdrew or lost to a
    /// slash; its total paid is the sum of its claims.
    function invariant_eachNodesStakeAndPayoutsFollowItsCalls() public view {
        for (uint256 i; i < 5; ++i) {
            address a = handler.actors(i);
            SwarmLedger.NodeView memory v = ledger.nodeInfo(a);
            (bool registered, uint256 active, uint256 unbonding, uint256 end,, uint256 claimedTotal) = handler.stakeOf(a);
            _eq(v.registered ? 1 : 0, registered ? 1 : 0, "a node is registered once it registered");
            _eq(v.activeStake, active, "a node's active stake follows its calls and slashes");
            _eq(v.unbonding, unbonding, "a node's unbonding stake follows its calls and slashes");
            if (unbonding > 0) _eq(v.unbondingEnd, end, "unbonding frees unbondingPeriod after the last request");
            _eq(v.totalPaid, claimedTotal, "a node's total paid = the sum of its claims");
        }
    }

    /// Credit follows the stake tally: a submission is credited exactly while the stake that
    /// disputed it does not outweigh the stake that agreed, each attester's stake counted at whole
    /// gwei on the side its score falls (within agreeToleranceBps of the batch's maximum: agree);
    /// a round's credited total is the sum of its credited claims.
    function invariant_creditFollowsTheAttestedStake() public view {
        uint256 n = handler.subCount();
        for (uint256 i; i < n; ++i) {
            LedgerHandler.Sub memory s = handler.subAt(i);
            SwarmLedger.SubmissionView memory v = ledger.submissionOf(s.round, s.node);
            _eq(v.claimed, s.claimed, "a submission keeps its claim");
            _eq(v.attestations, s.attestations, "each attestation is counted once");
            _eq(v.agreeStake, uint256(s.agreeGwei) * GWEI, "agreeing stake = the agreeing attesters' stake");
            _eq(v.disputeStake, uint256(s.disputeGwei) * GWEI, "disputing stake = the disputing attesters' stake");
            _eq(v.credited, handler.credited(s) ? s.claimed : 0, "credited iff dispute stake <= agree stake");
            _eq(v.settled ? 1 : 0, s.settled ? 1 : 0, "a submission is settled once settled");
            _eq(v.paid, s.paid ? s.paidAmount : 0, "a paid submission reports what it was paid");
        }
        uint64[] memory rounds = handler.roundsWithSubs();
        for (uint256 i; i < rounds.length; ++i) {
            (, uint256 total,) = ledger.roundInfo(rounds[i]);
            _eq(total, handler.creditedTotal(rounds[i]), "a round's credited total = the sum of its credited claims");
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
    /// stake, and never let stake that can still be slashed leave (see LedgerHandler).
    function invariant_everyCallFollowedTheRules() public view {
        if (handler.violationCount() != 0) revert(handler.firstViolation());
    }
}

/// @notice The ledger with a short window: late by one round, challenged for two, 10% slashes,
/// a 1% agreement tolerance, and the shortest unbonding period the constructor allows.
contract LedgerInvariantsTest is LedgerInvariantsBase {
    function suiteName() internal pure override returns (string memory) {
        return "LedgerInvariantsTest";
    }

    function params() internal pure override returns (uint64, uint256, uint64, uint64, uint64, uint256, uint16, uint16) {
        return (60, 1 ether, (1 + 2 * 2 + 1) * 60, 2, 1, 1 ether, 1000, 100);
    }
}

/// @notice Another corner of the parameter space: a long submission window, one challenge round,
/// a whole-stake slash, no agreement tolerance at all, and an odd minimum stake in gwei.
contract LedgerInvariantsStrictTest is LedgerInvariantsBase {
    function suiteName() internal pure override returns (string memory) {
        return "LedgerInvariantsStrictTest";
    }

    function params() internal pure override returns (uint64, uint256, uint64, uint64, uint64, uint256, uint16, uint16) {
        return (37, 1 ether + 3 gwei, (3 + 2 * 1 + 1) * 37 + 1, 1, 3, 2_333_333_333_333_333_333, 10_000, 0);
    }
}
