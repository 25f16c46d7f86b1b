// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {ISwarmLedger} from "../ISwarmLedger.sol";

/// @title LedgerParams
/// @notice The ledger's parameters, fixed at deployment, and its clock: the round now and the
/// windows of a round's batches, named as the Python client's mirror names them
/// (client/chain/models.py, LedgerParams: submit_open, close, final_after, vote_open,
/// appeal_open, is_final), so that each formula is written once on each side.
abstract contract LedgerParams is ISwarmLedger {
    uint256 public constant SCORE_SCALE = 10_000;
    uint256 public constant MAX_METADATA_BYTES = 1024;
    uint256 public constant MAX_FAMILIES = 255;
    uint256 public constant MAX_ROLLOUTS = 65_536;
    uint256 public constant BLOCKHASH_WINDOW = 256;
    uint256 public constant MAX_SEATS = type(uint8).max;
    uint256 public constant SETTLER_CUT_BPS = 1_000;
    uint256 internal constant BPS = 10_000;
    uint256 private constant GWEI = 1e9;

    uint64 public immutable roundLength;
    uint256 public immutable minStake;
    uint64 public immutable unbondingPeriod;
    uint64 public immutable challengeRounds;
    uint64 public immutable submitRounds;
    uint256 public immutable rewardPerRound;
    uint16 public immutable slashBps;
    uint16 public immutable agreeToleranceBps;
    bytes32 public immutable catalogDigest;
    uint16 public immutable quorum;
    uint16 public immutable checkers;
    uint64 public immutable appealRounds;
    uint16 public immutable appealCheckers;
    uint64 public immutable genesis;
    address public immutable book;

    /// @dev Checks and fixes the parameters (SwarmLedger's constructor documents each); genesis
    /// is the deployment's block time.
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
        address book_
    ) {
        if (roundLength_ == 0) revert InvalidParameter("roundLength");
        if (minStake_ < GWEI || minStake_ > type(uint96).max) revert InvalidParameter("minStake");
        if (challengeRounds_ == 0) revert InvalidParameter("challengeRounds");
        if (submitRounds_ == 0 || submitRounds_ > 10_000) revert InvalidParameter("submitRounds");
        if (slashBps_ > BPS) revert InvalidParameter("slashBps");
        if (agreeToleranceBps_ > BPS) revert InvalidParameter("agreeToleranceBps");
        if (catalogDigest_ == bytes32(0)) revert InvalidParameter("catalogDigest");
        if (quorum_ == 0 || quorum_ > type(uint8).max) revert InvalidParameter("quorum");
        if (checkers_ < quorum_ || checkers_ > MAX_SEATS) revert InvalidParameter("checkers");
        if (appealRounds_ < 2 || appealRounds_ > 10_000) revert InvalidParameter("appealRounds");
        if (appealCheckers_ < quorum_ || appealCheckers_ > MAX_SEATS) {
            revert InvalidParameter("appealCheckers");
        }
        // Stake that was active when a submission was made (as early as its round) must still be
        // here when it or a vote on it can be slashed: after the submission, challenge and appeal
        // windows, plus a settlement period as long as the challenge window (a vote is judged
        // only then; a submission's own slash is waited for: see withdraw).
        if (
            uint256(unbondingPeriod_)
                < (uint256(submitRounds_) + 2 * uint256(challengeRounds_) + appealRounds_ + 1)
                    * roundLength_
        ) {
            revert InvalidParameter("unbondingPeriod");
        }
        roundLength = roundLength_;
        minStake = minStake_;
        unbondingPeriod = unbondingPeriod_;
        challengeRounds = challengeRounds_;
        submitRounds = submitRounds_;
        rewardPerRound = rewardPerRound_;
        slashBps = slashBps_;
        agreeToleranceBps = agreeToleranceBps_;
        catalogDigest = catalogDigest_;
        quorum = quorum_;
        checkers = checkers_;
        appealRounds = appealRounds_;
        appealCheckers = appealCheckers_;
        genesis = uint64(block.timestamp);
        book = book_;
    }

    /// @inheritdoc ISwarmLedger
    function currentRound() public view returns (uint64) {
        return uint64((block.timestamp - genesis) / roundLength);
    }

    /// @inheritdoc ISwarmLedger
    function taskSeed(uint64 round, address node) external view returns (bytes32) {
        return keccak256(abi.encode(block.chainid, address(this), round, node));
    }

    /// @dev Whether a batch of `round` is accepted in round `current`: from its round until
    /// submitRounds later (slow hardware submits late rather than never).
    function _submitOpen(uint64 round, uint64 current) internal view returns (bool) {
        return round <= current && current - round <= submitRounds;
    }

    /// @dev The last round in which the first committee of a batch of `round` votes.
    function _close(uint64 round) internal view returns (uint64) {
        return round + submitRounds + challengeRounds;
    }

    /// @dev The last round in which a batch of `round` is voted on (its appeal's committee); its
    /// credit is final after it.
    function _finalAfter(uint64 round) internal view returns (uint64) {
        return _close(round) + appealRounds;
    }

    /// @dev Whether the committee voting now on a batch of `round` (the appeal's once
    /// `appealed`) can still vote in round `current`.
    function _voteOpen(uint64 round, uint64 current, bool appealed) internal view returns (bool) {
        return current <= (appealed ? _finalAfter(round) : _close(round));
    }

    /// @dev Whether a batch of `round` may be appealed in round `current`: after its close, but
    /// not in the last appeal round (its committee needs a round to vote).
    function _appealOpen(uint64 round, uint64 current) internal view returns (bool) {
        uint64 close = _close(round); // once: each checked sum costs its gas again
        return close < current && current < close + appealRounds; // _finalAfter(round)
    }

    /// @dev Whether the credit of `round` is final (settle and claim take it) in round `current`.
    function _isFinal(uint64 round, uint64 current) internal view returns (bool) {
        return current > _finalAfter(round);
    }
}
