// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {IRoundTotals, ISwarmLedger} from "../ISwarmLedger.sol";
import {AGREE, DISPUTE, Tally} from "../lib/Tally.sol";
import {Committees} from "./Committees.sol";

/// @title Rewards
/// @notice What a final verdict pays and costs: settling a submission (its producer slashed when
/// disputed), judging the votes on it (losing voters slashed), the settler's cut, the reward
/// pool and the claims that split each round's reward pro rata to credited signal.
/// @dev Settlement needs nobody's goodwill: anyone may settle or judge, and its caller is paid
/// SETTLER_CUT_BPS of what it slashed from others. A disputed submission is slashed; an
/// unavailable one is not (the voter's network may be at fault).
abstract contract Rewards is Committees {
    using Tally for uint72;

    /// @inheritdoc ISwarmLedger
    function settle(uint64 round, address node) external {
        Submission storage s = _submissions[round][node];
        if (s.rollouts == 0) revert NoSubmission(round, node);
        uint64 current = currentRound();
        if (!_isFinal(round, current)) revert RoundNotFinal(round, current);
        if (s.flags & SETTLED != 0) revert AlreadySettled(round, node);
        uint256 slashed = _settle(s, round, node);
        if (msg.sender != node) _paySettler(msg.sender, round, node, slashed);
    }

    /// @inheritdoc ISwarmLedger
    function settleVotes(uint64 round, address node, address[] calldata voters) external {
        Submission storage s = _submissions[round][node];
        if (s.rollouts == 0) revert NoSubmission(round, node);
        uint64 current = currentRound();
        // open from _isFinal to challengeRounds after it; _finalAfter once (each checked sum
        // costs its gas again)
        uint64 fin = _finalAfter(round);
        if (current <= fin) revert RoundNotFinal(round, current);
        if (current > fin + challengeRounds) revert SettlementWindowClosed(round, current);
        (bool isDisputed,) = _disputed(s);
        bool credited = _credited(s);
        uint256 losing = credited ? DISPUTE : isDisputed ? AGREE : 0;
        // An appeal's votes are judged only when the appeal decided (credited or disputed the
        // batch); one that reached no verdict left the first committee's standing, and its
        // votes (too few to decide) are not judged against a verdict they had no part in.
        bool appealDecided = _appealDecides(s);
        uint256 cutFrom; // what the losing votes of others than the caller lost
        for (uint256 i; i < voters.length; ++i) {
            address voter = voters[i];
            uint8 record = _votes[voter][round][node];
            if (record == 0 || record & VOTE_SETTLED != 0) continue;
            _votes[voter][round][node] = record | VOTE_SETTLED;
            uint8 second = appealDecided ? (record >> 2) & 3 : 0;
            bool lost = losing != 0 && (record & 3 == losing || second == losing);
            uint256 bps = appealDecided && record & VOTE_APPELLANT != 0 ? 2 * uint256(slashBps) : slashBps;
            uint256 slashed = lost ? _slash(voter, round, bps > BPS ? BPS : bps) : 0;
            if (voter != msg.sender) cutFrom += slashed;
            emit VoteSettled(round, node, voter, lost, slashed);
        }
        _paySettler(msg.sender, round, node, cutFrom);
    }

    /// @inheritdoc ISwarmLedger
    function slashEquivocation(uint64 round, address node, address voter, address prover)
        external
        returns (uint256 slashed)
    {
        if (msg.sender != book) revert NotTheBook(msg.sender, book);
        slashed = _slash(voter, round, slashBps);
        _paySettler(prover, round, node, slashed);
    }

    /// @inheritdoc ISwarmLedger
    function bindBook() external {
        if (book != msg.sender) revert NotTheBook(msg.sender, book);
        _bookBound = true;
    }

    /// @inheritdoc ISwarmLedger
    function fund() external payable {
        if (msg.value == 0) revert ZeroAmount();
        rewardPool += msg.value;
        totalFunded += msg.value;
        emit Funded(msg.sender, msg.value);
    }

    /// @inheritdoc ISwarmLedger
    function claim(uint64[] calldata roundList) external returns (uint256 amount) {
        uint64 current = currentRound();
        for (uint256 i; i < roundList.length; ++i) {
            uint64 round = roundList[i];
            Submission storage s = _submissions[round][msg.sender];
            if (s.rollouts == 0) revert NoSubmission(round, msg.sender);
            (bool decided, uint256 other) = _bookTotal(round);
            if (!_isFinal(round, current) || !decided) revert RoundNotFinal(round, current);
            if (s.flags & PAID != 0) revert AlreadyClaimed(round, msg.sender);
            s.flags |= PAID;
            if (s.flags & SETTLED == 0) _settle(s, round, msg.sender);
            amount += _share(s, round, other);
        }
        if (amount == 0) revert NothingToClaim();
        if (amount > rewardPool) revert PoolInsufficient(amount, rewardPool);
        rewardPool -= amount;
        totalPaidOut += amount;
        _nodes[msg.sender].totalPaid += uint128(amount);
        emit Claimed(msg.sender, amount, roundList);
        _send(msg.sender, amount);
    }

    /// @inheritdoc ISwarmLedger
    function claimable(address node, uint64[] calldata roundList) external view returns (uint256 amount) {
        uint64 current = currentRound();
        for (uint256 i; i < roundList.length; ++i) {
            uint64 round = roundList[i];
            Submission storage s = _submissions[round][node];
            if (s.rollouts == 0 || s.flags & PAID != 0 || !_isFinal(round, current)) continue;
            (bool decided, uint256 other) = _bookTotal(round);
            if (decided) amount += _share(s, round, other);
        }
    }

    /// @inheritdoc ISwarmLedger
    function submissionOf(uint64 round, address node) external view returns (SubmissionView memory info) {
        Submission storage s = _submissions[round][node];
        uint72 t = s.votes;
        info = SubmissionView({
            digest: s.digest,
            rollouts: s.rollouts,
            score: s.score,
            signal: s.signal,
            agreeSeats: uint16(t.seatsIn(0)),
            disputeSeats: uint16(t.seatsIn(1)),
            unavailableSeats: uint16(t.seatsIn(2)),
            agrees: uint16(t.count(0)),
            disputes: uint16(t.count(1)),
            unavailable: uint16(t.count(2)),
            credited: _credited(s) ? s.signal : 0,
            settled: s.flags & SETTLED != 0,
            paid: s.flags & PAID != 0 ? _paidShare(s, round) : 0,
            snapshotBlock: s.snapshotBlock,
            appealBlock: s.appealBlock
        });
    }

    /// @inheritdoc ISwarmLedger
    function roundInfo(uint64 round) external view returns (uint256 totalCredited, bool isFinal) {
        return (_rounds[round].totalCredited, _isFinal(round, currentRound()));
    }

    /// @dev Marks a final submission settled and slashes its node if it is disputed; returns
    /// the wei slashed.
    function _settle(Submission storage s, uint64 round, address node) private returns (uint256 slashed) {
        s.flags |= SETTLED;
        Node storage n = _nodes[node];
        n.unsettled -= 1;
        if (s.unstakes < n.unstakes) n.backing -= 1; // made before the last unstake request
        (bool disputed, bool byAppeal) = _disputed(s);
        if (disputed) {
            uint256 bps = byAppeal && s.flags & VOTER_APPEAL == 0 ? 2 * uint256(slashBps) : slashBps;
            slashed = _slash(node, round, bps > BPS ? BPS : bps);
        }
        emit Settled(round, node, disputed, slashed);
    }

    /// @dev Pays `settler` SETTLER_CUT_BPS of `slashed` from the pool, last (after every write).
    function _paySettler(address settler, uint64 round, address node, uint256 slashed) private {
        uint256 cut = (slashed * SETTLER_CUT_BPS) / BPS;
        if (cut == 0) return;
        rewardPool -= cut;
        totalSettlerPaid += cut;
        emit SettlerPaid(settler, round, node, cut);
        _send(settler, cut);
    }

    /// @dev Moves `bps` of a node's stake, active first, then unbonding, to the reward pool.
    function _slash(address node, uint64 round, uint256 bps) private returns (uint256 slashed) {
        Node storage n = _nodes[node];
        uint256 active = n.active;
        uint256 unbonding = n.unbonding;
        slashed = ((active + unbonding) * bps) / BPS;
        uint256 fromActive = slashed < active ? slashed : active;
        uint256 fromUnbonding = slashed - fromActive;
        n.active = uint96(active - fromActive);
        n.unbonding = uint96(unbonding - fromUnbonding);
        _totalActive -= uint128(fromActive);
        _totalUnbonding -= uint128(fromUnbonding);
        if (fromActive != 0) {
            _familyActive[n.family] -= fromActive;
            _recordStake(node, n);
        }
        rewardPool += slashed;
        totalSlashed += slashed;
        emit Slashed(node, round, slashed);
    }

    /// @dev A credited submission's share of its round's reward, pro rata to its signal over the
    /// round's credited signal in both lanes (`other`: the round book's standing total), 0 when
    /// it is not credited or carries no signal. One reward a round: a batch that takes this lane
    /// when few others do is paid at the same rate as one in the book's lane, not the round's
    /// whole reward.
    function _share(Submission storage s, uint64 round, uint256 other) private view returns (uint256) {
        if (s.signal == 0 || !_credited(s)) return 0;
        return (rewardPerRound * s.signal) / (_rounds[round].totalCredited + other);
    }

    function _paidShare(Submission storage s, uint64 round) private view returns (uint256) {
        (, uint256 other) = _bookTotal(round); // a paid round was decided: it cannot change
        return _share(s, round, other);
    }

    /// @dev Whether the round book (if one runs) has decided `round`, and its standing total. A
    /// named book that has not bound itself (not deployed yet, or ever: its deployer's next
    /// transaction made something else) has no round: a book deployed later cannot post a root
    /// for a round this ledger already paid (its post window is long past by then).
    function _bookTotal(uint64 round) private view returns (bool decided, uint256 total) {
        if (book == address(0) || !_bookBound) return (true, 0);
        return IRoundTotals(book).standingTotal(round);
    }
}
