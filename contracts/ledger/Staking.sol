// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {ISwarmLedger} from "../ISwarmLedger.sol";
import {StakeCheckpoints} from "../lib/StakeCheckpoints.sol";
import {LedgerState} from "./LedgerState.sol";

/// @title Staking
/// @notice Nodes and their stake: registration in a model family, adding, unbonding and
/// withdrawing stake, and the stake histories the committee draws read.
/// @dev A family is the content id of a base model's weights: a checker re-runs a batch's model,
/// so it must hold that exact base, and a batch's committee is drawn from its producer's family
/// alone. Families are fixed at deployment because a family anyone could open would be a
/// committee its opener owns: two addresses in a family of their own would credit each other's
/// batches.
abstract contract Staking is LedgerState {
    using StakeCheckpoints for StakeCheckpoints.Checkpoint[];

    /// @dev Fixes the families the ledger checks: 1 .. MAX_FAMILIES distinct, non-zero ids.
    constructor(bytes32[] memory families_) {
        if (families_.length == 0 || families_.length > MAX_FAMILIES) revert InvalidParameter("families");
        for (uint256 i; i < families_.length; ++i) {
            bytes32 f = families_[i];
            if (f == bytes32(0) || _familySlot[f] != 0) revert InvalidParameter("families");
            _families.push(f);
            _familySlot[f] = i + 1;
        }
    }

    /// @inheritdoc ISwarmLedger
    function register(string calldata metadata, bytes32 family) external payable {
        Node storage n = _nodes[msg.sender];
        if (n.registered) revert AlreadyRegistered(msg.sender);
        uint256 slot = _familySlot[family];
        if (slot == 0) revert UnknownFamily(family);
        if (msg.value < minStake) revert StakeTooLow(msg.value, minStake);
        if (msg.value > type(uint96).max) revert StakeTooHigh(msg.value);
        if (bytes(metadata).length > MAX_METADATA_BYTES) {
            revert MetadataTooLong(bytes(metadata).length, MAX_METADATA_BYTES);
        }
        n.registered = true;
        n.family = uint8(slot - 1);
        n.active = uint96(msg.value);
        n.metadata = metadata;
        _nodeList.push(msg.sender);
        _totalActive += uint128(msg.value);
        _familyActive[slot - 1] += msg.value;
        _recordStake(msg.sender, n);
        emit Registered(msg.sender, msg.value, metadata, family);
    }

    /// @inheritdoc ISwarmLedger
    function addStake() external payable {
        Node storage n = _nodes[msg.sender];
        if (!n.registered) revert NotRegistered(msg.sender);
        if (msg.value == 0) revert ZeroAmount();
        uint256 active = uint256(n.active) + msg.value;
        if (active > type(uint96).max) revert StakeTooHigh(active);
        n.active = uint96(active);
        _totalActive += uint128(msg.value);
        _familyActive[n.family] += msg.value;
        _recordStake(msg.sender, n);
        emit StakeAdded(msg.sender, msg.value, active);
    }

    /// @inheritdoc ISwarmLedger
    function requestUnstake(uint256 amount) external {
        Node storage n = _nodes[msg.sender];
        if (!n.registered) revert NotRegistered(msg.sender);
        if (amount == 0) revert ZeroAmount();
        if (amount > n.active) revert InsufficientActiveStake(amount, n.active);
        n.active -= uint96(amount);
        n.unbonding += uint96(amount);
        uint64 end = uint64(block.timestamp) + unbondingPeriod;
        n.unbondingEnd = end;
        n.unstakes += 1;
        n.backing = n.unsettled; // every unsettled submission was made with this stake active
        _totalActive -= uint128(amount);
        _familyActive[n.family] -= amount;
        _totalUnbonding += uint128(amount);
        _recordStake(msg.sender, n);
        emit UnstakeRequested(msg.sender, amount, n.unbonding, end);
    }

    /// @inheritdoc ISwarmLedger
    function withdraw() external {
        Node storage n = _nodes[msg.sender];
        uint256 amount = n.unbonding;
        if (amount == 0) revert NothingToWithdraw();
        if (block.timestamp < n.unbondingEnd) revert StillUnbonding(n.unbondingEnd);
        if (n.backing != 0) revert UnsettledSubmissions(msg.sender, n.backing);
        n.unbonding = 0;
        _totalUnbonding -= uint128(amount);
        emit Withdrawn(msg.sender, amount);
        _send(msg.sender, amount);
    }

    /// @inheritdoc ISwarmLedger
    function setMetadata(string calldata metadata) external {
        Node storage n = _nodes[msg.sender];
        if (!n.registered) revert NotRegistered(msg.sender);
        if (bytes(metadata).length > MAX_METADATA_BYTES) {
            revert MetadataTooLong(bytes(metadata).length, MAX_METADATA_BYTES);
        }
        n.metadata = metadata;
        emit MetadataSet(msg.sender, metadata);
    }

    /// @inheritdoc ISwarmLedger
    function stakeAt(address node, uint256 blockNumber) external view returns (uint256) {
        return _stakeHistory[node].valueAt(blockNumber);
    }

    /// @inheritdoc ISwarmLedger
    function familyStakeAt(bytes32 family, uint256 blockNumber) external view returns (uint256) {
        uint256 slot = _familySlot[family];
        return slot == 0 ? 0 : _familyHistory[slot - 1].valueAt(blockNumber);
    }

    /// @inheritdoc ISwarmLedger
    function totalStakeAt(uint256 blockNumber) external view returns (uint256) {
        return _totalHistory.valueAt(blockNumber);
    }

    /// @inheritdoc ISwarmLedger
    function families() external view returns (bytes32[] memory) {
        return _families;
    }

    /// @inheritdoc ISwarmLedger
    function nodeInfo(address node) external view returns (NodeView memory info) {
        Node storage n = _nodes[node];
        info = NodeView({
            registered: n.registered,
            activeStake: n.active,
            unbonding: n.unbonding,
            unbondingEnd: n.unbondingEnd,
            metadata: n.metadata,
            totalPaid: n.totalPaid,
            stakeBlock: _stakeHistory[node].lastChange(),
            unsettled: n.unsettled,
            backing: n.backing,
            family: n.registered ? _families[n.family] : bytes32(0)
        });
    }

    /// @inheritdoc ISwarmLedger
    function familyOf(address node) external view returns (bytes32) {
        Node storage n = _nodes[node];
        return n.registered ? _families[n.family] : bytes32(0);
    }

    /// @inheritdoc ISwarmLedger
    function nodeCount() external view returns (uint256) {
        return _nodeList.length;
    }

    /// @inheritdoc ISwarmLedger
    function nodesPage(uint256 offset, uint256 limit) external view returns (address[] memory page) {
        uint256 total = _nodeList.length;
        if (offset >= total) return new address[](0);
        uint256 end = offset + limit > total ? total : offset + limit;
        page = new address[](end - offset);
        for (uint256 i = offset; i < end; ++i) {
            page[i - offset] = _nodeList[i];
        }
    }

    /// @inheritdoc ISwarmLedger
    function totalStaked() external view returns (uint256) {
        return uint256(_totalActive) + _totalUnbonding;
    }

    /// @inheritdoc ISwarmLedger
    function stakeTotals() external view returns (uint256 active, uint256 unbonding) {
        return (_totalActive, _totalUnbonding);
    }

    /// @dev Submitting and voting need minStake of active stake; names why a caller has not.
    function _requireStaked(Node storage n) internal view {
        uint256 active = n.active;
        if (active < minStake) {
            if (!n.registered) revert NotRegistered(msg.sender);
            revert StakeTooLow(active, minStake);
        }
    }

    /// @dev Records the node's active stake, its family's and the total as of this block.
    function _recordStake(address node, Node storage n) internal {
        uint256 family = n.family;
        _stakeHistory[node].record(n.active);
        _familyHistory[family].record(_familyActive[family]);
        _totalHistory.record(_totalActive);
    }

    /// @dev Pays `amount` wei to `to`; called last, after every write (no reentrancy can see a
    /// half-made change).
    function _send(address to, uint256 amount) internal {
        (bool ok,) = to.call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }
}
