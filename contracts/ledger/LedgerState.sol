// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {StakeCheckpoints} from "../lib/StakeCheckpoints.sol";
import {LedgerParams} from "./LedgerParams.sol";

/// @title LedgerState
/// @notice The ledger's storage, declared here alone and in this order, so that the modules
/// built on it (Staking, Committees, Rewards) add no state and every variable keeps its slot.
/// @dev Packed for the two hot paths, submit and attest, which touch as few slots as possible:
/// - submit reads the node's slot 0 (stake, uint96 wei: 7.9e10 ether) and writes nothing of
///   the node but its unsettled count: per-node counters (submissions, credited totals) are
///   derivable from events and submissionOf, so audits read them there instead of every submit
///   paying to keep them.
/// - Submission slot 1 holds all a submit writes besides the digest: the batch size, score,
///   signal, its block (the stake snapshot; the beacon block is the next one) and the first
///   committee's tally (lib/Tally.sol). Slot 2 holds the drawn beacon and the appeal.
/// - Stake history: one checkpoint (block, value) per block in which a node's active stake, its
///   family's or the total changed (lib/StakeCheckpoints.sol), so the draw reads stake as of a
///   submission's block.
/// - Round is one slot, the credited total, written only when credit moves: submit writes
///   nothing of the round (a round's submissions are its Submitted events).
abstract contract LedgerState is LedgerParams {
    // A submission's flags.
    uint8 internal constant SETTLED = 1;
    uint8 internal constant PAID = 2;
    uint8 internal constant APPEALED = 4; // beside appealBlock: the hot checks read slot 1 only
    uint8 internal constant VOTER_APPEAL = 8; // appealed by a voter, not by its producer
    // A voter's record of a submission (_votes): the first committee's side (lib/Tally.sol's
    // AGREE, DISPUTE, UNAVAILABLE) in bits 0-1, the appeal's in bits 2-3, then these.
    uint8 internal constant VOTE_SETTLED = 16; // judged by settleVotes
    uint8 internal constant VOTE_APPELLANT = 32; // this voter appealed the first verdict

    struct Node {
        uint96 active;
        uint96 unbonding;
        uint64 unbondingEnd;
        // slot 1
        bool registered;
        uint32 unsettled; // its submissions not settled yet
        uint32 backing; // of those, the ones made before its last unstake request: withdraw waits
        uint32 unstakes; // its unstake requests so far (a submission records the count)
        uint128 totalPaid;
        uint8 family; // index in _families, fixed at registration
        // slot 2+
        string metadata;
    }

    struct Submission {
        bytes32 digest;
        // slot 1
        uint24 rollouts;
        uint40 score;
        uint40 signal;
        uint72 votes; // the first committee's tally
        uint8 flags; // SETTLED | PAID | APPEALED | VOTER_APPEAL
        uint40 snapshotBlock; // the submission's block: stake is read as of it
        uint32 unstakes; // its node's unstake requests before it (did its unbonding stake back it?)
        // slot 2
        uint88 beacon; // the beacon block's hash (truncated), once drawn; 0 before
        uint40 appealBlock; // the block of its appeal; 0 when not appealed
        uint72 appealVotes; // the appeal committee's tally
        // slot 3
        uint88 appealBeacon; // the appeal's beacon, once drawn
    }

    struct Round {
        uint96 totalCredited;
    }

    mapping(address => Node) internal _nodes;
    mapping(uint64 => mapping(address => Submission)) internal _submissions;
    mapping(uint64 => Round) internal _rounds;
    mapping(address => mapping(uint64 => mapping(address => uint8))) internal _votes;
    address[] internal _nodeList;
    mapping(address => StakeCheckpoints.Checkpoint[]) internal _stakeHistory;
    StakeCheckpoints.Checkpoint[] internal _totalHistory;
    bytes32[] internal _families;
    mapping(bytes32 => uint256) internal _familySlot; // index in _families + 1; 0: not a family
    mapping(uint256 => StakeCheckpoints.Checkpoint[]) internal _familyHistory;
    mapping(uint256 => uint256) internal _familyActive;

    uint128 internal _totalActive;
    uint128 internal _totalUnbonding;
    uint256 public rewardPool;
    uint256 public totalFunded;
    uint256 public totalSlashed;
    uint256 public totalPaidOut;
    uint256 public totalSettlerPaid;
    bool internal _bookBound; // the named round book bound itself (bindBook): both lanes, one reward
}
