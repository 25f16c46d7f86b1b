// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {LedgerParams} from "./ledger/LedgerParams.sol";
import {Rewards} from "./ledger/Rewards.sol";
import {Staking} from "./ledger/Staking.sol";

/// @title SwarmLedger
/// @notice The public memory of a SAPO swarm: who staked, which rollout batch (by its sha256) each
/// node published in each round, the score and learning signal it claimed, what the drawn peers
/// who re-verified the batch attested, what was credited, slashed and paid. It is also the
/// swarm's clock (rounds derive from block time) and its bulletin board (nodes find each other's
/// batches through its events). The rules it enforces, and why, are in docs/credit.md; its
/// functions are documented in ISwarmLedger.
/// @dev No owner, no admin function, no upgrade path: every parameter, the model families it
/// checks included, is fixed here at deployment. The modules, most basic first (C3 order, which
/// is also their storage's): LedgerParams (parameters and round windows), LedgerState (all
/// storage), Staking, Committees, Rewards (contracts/ledger/).
contract SwarmLedger is Rewards {
    /// @param roundLength_ Seconds per round (> 0).
    /// @param minStake_ Least active stake, in wei, to submit or attest (>= 1 gwei).
    /// @param unbondingPeriod_ Seconds between `requestUnstake` and `withdraw`: at least the
    /// submission, challenge and appeal windows plus a settlement period of challengeRounds, so
    /// that stake which backed a submission or a vote is still here when it can be slashed.
    /// @param challengeRounds_ Rounds, after the submission window, during which a submission can
    /// be attested.
    /// @param submitRounds_ Rounds after a round during which its batches are still accepted (>= 1).
    /// @param rewardPerRound_ Wei split pro rata among a round's credited submissions.
    /// @param slashBps_ Share of a disputed node's stake moved to the reward pool at settlement.
    /// @param agreeToleranceBps_ Largest attested-vs-claimed score gap that still agrees, in bps of
    /// the batch's maximum score (the signal must agree exactly).
    /// @param catalogDigest_ sha256 of the canonical task catalog nodes must draw tasks from.
    /// @param quorum_ Least number of distinct drawn checkers who must agree before a submission
    /// earns (>= 1).
    /// @param checkers_ Seat trials per node and submission: the committee's expected seats
    /// (quorum_ .. MAX_SEATS).
    /// @param appealRounds_ Rounds after the challenge window in which an appeal is filed (all
    /// but the last) and voted on (>= 2); a round is final after them.
    /// @param appealCheckers_ Seat trials per node on an appeal's committee (quorum_ ..
    /// MAX_SEATS): larger than checkers_, so a verdict a minority won by the luck of a small
    /// draw does not survive it.
    /// @param families_ The model families (content ids of base weights) whose nodes may register
    /// and whose batches are checked: 1 .. MAX_FAMILIES distinct, non-zero ids.
    /// @param book_ The round book that may escalate its root lane's batches into this ledger (its
    /// address is known before it exists: the deployer's next contract's); zero for none.
    constructor(
        uint64 roundLength_,
        uint256 minStake_,
        uint64 unbondingPeriod_,
        uint64 challengeRounds_,
        uint64 submitRounds_,
        uint256 rewardPerRound_,
        uint16 slashBps_,
        uint16 agreeToleranceBps_,
        bytes32 catalogDigest_,
        uint16 quorum_,
        uint16 checkers_,
        uint64 appealRounds_,
        uint16 appealCheckers_,
        bytes32[] memory families_,
        address book_
    )
        LedgerParams(
            roundLength_,
            minStake_,
            unbondingPeriod_,
            challengeRounds_,
            submitRounds_,
            rewardPerRound_,
            slashBps_,
            agreeToleranceBps_,
            catalogDigest_,
            quorum_,
            checkers_,
            appealRounds_,
            appealCheckers_,
            book_
        )
        Staking(families_)
    {}
}
