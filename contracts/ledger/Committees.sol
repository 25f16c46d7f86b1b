// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {ISwarmLedger} from "../ISwarmLedger.sol";
import {SeatDraw} from "../lib/SeatDraw.sol";
import {StakeCheckpoints} from "../lib/StakeCheckpoints.sol";
import {AGREE, DISPUTE, Tally, UNAVAILABLE} from "../lib/Tally.sol";
import {Staking} from "./Staking.sol";

/// @title Committees
/// @notice Submissions and the committees that check them: a batch's beacon, the seats it
/// draws, the votes of the drawn checkers, the verdict that credits the batch or disputes it,
/// and the appeal that draws a second, larger committee.
/// @dev A batch's committee is drawn from the hash of the block after its submission's
/// (unknown when it is sent, so its producer cannot pick the identity or the moment that draws
/// friendly checkers) and from its producer's family's stake as of the submission's block
/// (stake moved once the beacon may be known changes nothing). A vote counts once per seat, so
/// a holder of a share s of stake holds about s of a committee's seats, not the verdict.
abstract contract Committees is Staking {
    using StakeCheckpoints for StakeCheckpoints.Checkpoint[];
    using Tally for uint72;

    /// @inheritdoc ISwarmLedger
    function submit(uint64 round, bytes32 digest, uint32 rollouts, uint64 score, uint64 signal) external {
        uint64 current = currentRound();
        if (!_submitOpen(round, current)) revert RoundNotOpen(round, current);
        Node storage n = _nodes[msg.sender];
        _requireStaked(n);
        Submission storage s = _submissions[round][msg.sender];
        if (s.rollouts != 0) revert AlreadySubmitted(round, msg.sender);
        if (digest == bytes32(0)) revert ZeroDigest();
        if (rollouts == 0) revert ZeroRollouts();
        if (rollouts > MAX_ROLLOUTS) revert TooManyRollouts(rollouts, MAX_ROLLOUTS);
        uint256 maxScore = uint256(rollouts) * SCORE_SCALE;
        if (score > maxScore) revert ScoreOutOfRange(score, maxScore);
        if (signal > maxScore / 2) revert SignalOutOfRange(signal, maxScore / 2);

        s.digest = digest;
        s.rollouts = uint24(rollouts);
        s.score = uint40(score);
        s.signal = uint40(signal);
        s.snapshotBlock = uint40(block.number);
        s.unstakes = n.unstakes;
        n.unsettled += 1;
        emit Submitted(round, msg.sender, digest, rollouts, score, signal);
    }

    /// @inheritdoc ISwarmLedger
    function escalate(
        uint64 round,
        address node,
        address checker,
        bytes32 digest,
        uint32 rollouts,
        uint64 score,
        uint64 signal,
        uint64 snapshotBlock,
        uint88 beacon,
        EscalationVote calldata vote
    ) external {
        if (msg.sender != book || book == address(0)) revert NotTheBook(msg.sender, book);
        Submission storage s = _submissions[round][node];
        if (s.rollouts != 0) revert AlreadySubmitted(round, node);
        if (checker == node) revert SelfAttestation(node);
        uint256 active = _nodes[checker].active; // its vote, below, is judged: stake backs it
        if (active < minStake) revert StakeTooLow(active, minStake);
        // the checker holds a seat on the committee the record keeps (the root lane's)
        uint256 seats = _seats(beacon, round, node, checker, snapshotBlock, checkers);
        if (seats == 0) revert NotDrawn(round, node, checker);
        Node storage n = _nodes[node];
        // the book checked the signed batch against submit's ranges and the beacon (never 0)
        s.digest = digest;
        s.rollouts = uint24(rollouts);
        s.score = uint40(score);
        s.signal = uint40(signal);
        s.snapshotBlock = uint40(snapshotBlock);
        s.beacon = beacon;
        // s.unstakes stays 0: made before any unstake request, so withdraw waits for it
        if (n.unstakes != 0) n.backing += 1;
        n.unsettled += 1;
        emit Submitted(round, node, digest, rollouts, score, signal);
        emit Escalated(round, node, checker);
        // the checker's own vote comes with it, judged as any (a free escalation of an honest
        // batch would make its committee vote here for nothing): unavailable, or a dispute
        if (vote.unavailable) {
            _tally(s, round, node, checker, seats, 0, UNAVAILABLE);
            emit Unavailable(round, node, checker);
            return;
        }
        uint256 maxScore = uint256(rollouts) * SCORE_SCALE;
        if (vote.score > maxScore) revert ScoreOutOfRange(vote.score, maxScore);
        if (vote.signal > maxScore / 2) revert SignalOutOfRange(vote.signal, maxScore / 2);
        if (vote.signal == signal && _gap(vote.score, score) * BPS <= maxScore * agreeToleranceBps) {
            revert NotADispute(round, node, checker); // an agreeing checker signs off chain
        }
        _tally(s, round, node, checker, seats, 0, DISPUTE);
        emit Attested(round, node, checker, vote.score, vote.signal, false, vote.findings);
    }

    /// @inheritdoc ISwarmLedger
    function attest(uint64 round, address node, uint64 score, uint64 signal, uint16 findings) external {
        (Submission storage s, uint256 seats, uint256 shift) = _checkerVote(round, node);
        uint256 maxScore = uint256(s.rollouts) * SCORE_SCALE;
        if (score > maxScore) revert ScoreOutOfRange(score, maxScore);
        if (signal > maxScore / 2) revert SignalOutOfRange(signal, maxScore / 2);
        // |score - claimed| <= maxScore * tol / BPS, exactly (no rounding): scale both sides.
        bool agrees = signal == s.signal && _gap(score, s.score) * BPS <= maxScore * agreeToleranceBps;
        _tally(s, round, node, msg.sender, seats, shift, agrees ? AGREE : DISPUTE);
        emit Attested(round, node, msg.sender, score, signal, agrees, findings);
    }

    /// @inheritdoc ISwarmLedger
    function reportUnavailable(uint64 round, address node) external {
        (Submission storage s, uint256 seats, uint256 shift) = _checkerVote(round, node);
        _tally(s, round, node, msg.sender, seats, shift, UNAVAILABLE);
        emit Unavailable(round, node, msg.sender);
    }

    /// @inheritdoc ISwarmLedger
    function hasAttested(address attester, uint64 round, address node) external view returns (bool) {
        uint256 shift = _submissions[round][node].flags & APPEALED != 0 ? 2 : 0;
        return (_votes[attester][round][node] >> shift) & 3 != 0;
    }

    /// @inheritdoc ISwarmLedger
    function hasSubmitted(uint64 round, address node) external view returns (bool) {
        return _submissions[round][node].rollouts != 0;
    }

    /// @inheritdoc ISwarmLedger
    function voteOf(address voter, uint64 round, address node)
        external
        view
        returns (uint8 first, uint8 appealed, bool settled)
    {
        uint8 record = _votes[voter][round][node];
        return (record & 3, (record >> 2) & 3, record & VOTE_SETTLED != 0);
    }

    /// @dev The checks every checker's vote passes, for the committee voting now (the appeal's
    /// once appealed); returns the submission, the caller's seats on that committee (at least 1)
    /// and where its side goes in the caller's record (0: first committee, 2: appeal).
    function _checkerVote(uint64 round, address node)
        private
        returns (Submission storage s, uint256 seats, uint256 shift)
    {
        if (node == msg.sender) revert SelfAttestation(node);
        _requireStaked(_nodes[msg.sender]);
        s = _submissions[round][node];
        if (s.rollouts == 0) revert NoSubmission(round, node);
        uint64 current = currentRound();
        bool appealed = s.flags & APPEALED != 0;
        if (!_voteOpen(round, current, appealed)) revert ChallengeWindowClosed(round, current);
        shift = appealed ? 2 : 0;
        if ((_votes[msg.sender][round][node] >> shift) & 3 != 0) revert AlreadyAttested(round, node, msg.sender);
        uint256 beacon = _drawBeacon(s, round, node, appealed);
        seats = _seats(beacon, round, node, msg.sender, s.snapshotBlock, appealed ? appealCheckers : checkers);
        if (seats == 0) revert NotDrawn(round, node, msg.sender);
    }

    /// @dev Adds `voter`'s seats to `side` of the voting committee's tally, records its side,
    /// and moves the submission's credit if its verdict changed.
    function _tally(
        Submission storage s,
        uint64 round,
        address node,
        address voter,
        uint256 seats,
        uint256 shift,
        uint256 side
    ) private {
        bool wasCredited = _credited(s);
        if (shift == 0) s.votes = s.votes.add(seats, side, round, node);
        else s.appealVotes = s.appealVotes.add(seats, side, round, node);
        _votes[voter][round][node] |= uint8(side << shift);
        bool credited = _credited(s);
        if (credited != wasCredited) _moveCredit(round, node, s.signal, credited);
    }

    /// @dev Adds or removes a submission's signal from its round's credited total.
    function _moveCredit(uint64 round, address node, uint64 signal, bool credited) private {
        Round storage r = _rounds[round];
        if (credited) r.totalCredited += signal;
        else r.totalCredited -= signal;
        emit CreditChanged(round, node, credited, r.totalCredited);
    }

    function _gap(uint64 x, uint64 y) private pure returns (uint256) {
        return x > y ? x - y : y - x;
    }

    // ---------------------------------------------------------------------------------- verdict

    /// @dev Whether an appeal decides `s`: it was appealed and its committee reached a verdict
    /// (credited, or more seats disputing than agreeing). One that reached none leaves the
    /// first committee's verdict standing, whichever it was.
    function _appealDecides(Submission storage s) internal view returns (bool) {
        if (s.flags & APPEALED == 0) return false;
        uint72 t = s.appealVotes;
        return t.wins(quorum) || t.disputes();
    }

    /// @dev A submission earns once its deciding committee credits it: the appeal's once it
    /// reached a verdict, else the first's.
    function _credited(Submission storage s) internal view returns (bool) {
        return (_appealDecides(s) ? s.appealVotes : s.votes).wins(quorum);
    }

    /// @dev Disputed: more of the deciding committee's seats disputed it than agreed. An appeal
    /// decides when its committee reached a verdict (credited or disputed); one that reached
    /// none (too few votes, or a beacon nobody drew) leaves the first committee's standing, so
    /// that an appeal nobody votes on is no escape from a dispute. `byAppeal`: the appeal's
    /// committee disputed it (slashed twice when its producer had appealed).
    function _disputed(Submission storage s) internal view returns (bool disputed, bool byAppeal) {
        if (_appealDecides(s)) {
            disputed = s.appealVotes.disputes();
            return (disputed, disputed);
        }
        return (s.votes.disputes(), false);
    }

    // ------------------------------------------------------------------------------------ seats

    /// @inheritdoc ISwarmLedger
    function seatsOf(uint64 round, address node, address checker) public view returns (uint256) {
        return _seatsOf(round, node, checker, false);
    }

    /// @inheritdoc ISwarmLedger
    function appealSeatsOf(uint64 round, address node, address checker) external view returns (uint256) {
        return _seatsOf(round, node, checker, true);
    }

    /// @inheritdoc ISwarmLedger
    function isChecker(uint64 round, address node, address checker) external view returns (bool) {
        return seatsOf(round, node, checker) != 0;
    }

    function _seatsOf(uint64 round, address node, address checker, bool ofAppeal) private view returns (uint256) {
        Submission storage s = _submissions[round][node];
        Node storage a = _nodes[checker];
        if (checker == node || !a.registered || a.active < minStake) return 0;
        if (ofAppeal && s.appealBlock == 0) return 0;
        (uint256 beacon, bool ready,) = _beaconAt(ofAppeal ? s.appealBeacon : s.beacon, _beaconBlock(s, ofAppeal));
        if (!ready) return 0;
        return _seats(beacon, round, node, checker, s.snapshotBlock, ofAppeal ? appealCheckers : checkers);
    }

    /// @dev The seats `checker` draws with its stake and its family's as of `snapshot` (see
    /// seatsOf): none when it is of another family (it cannot run the batch's model) or its
    /// stake then was below minStake.
    function _seats(uint256 beacon, uint64 round, address node, address checker, uint256 snapshot, uint256 trials)
        private
        view
        returns (uint256)
    {
        uint256 family = _nodes[node].family;
        if (_nodes[checker].family != family) return 0;
        uint256 stake = _stakeHistory[checker].valueAt(snapshot);
        if (stake < minStake) return 0;
        uint256 total = _familyHistory[family].valueAt(snapshot);
        return SeatDraw.seats(beacon, round, node, checker, stake, total, trials);
    }

    // ---------------------------------------------------------------------------------- beacons

    /// @inheritdoc ISwarmLedger
    function beaconOf(uint64 round, address node)
        public
        view
        returns (uint256 beacon, uint64 beaconBlock, bool ready, bool drawn)
    {
        Submission storage s = _submissions[round][node];
        beaconBlock = _beaconBlock(s, false);
        (beacon, ready, drawn) = _beaconAt(s.beacon, beaconBlock);
    }

    /// @inheritdoc ISwarmLedger
    function drawBeacon(uint64 round, address node) external {
        Submission storage s = _submissions[round][node];
        if (s.rollouts == 0) revert NoSubmission(round, node);
        bool appealed = s.appealBlock != 0;
        if ((appealed ? s.appealBeacon : s.beacon) != 0) revert BeaconAlreadyDrawn(round, node);
        _drawBeacon(s, round, node, appealed);
    }

    /// @dev The block whose hash is the first (or the appeal's) beacon; 0 when there is none.
    function _beaconBlock(Submission storage s, bool ofAppeal) private view returns (uint64) {
        uint64 from = ofAppeal ? s.appealBlock : s.snapshotBlock;
        return from == 0 ? 0 : from + 1;
    }

    /// @dev A beacon: the stored one, else its block's hash while the EVM knows it.
    function _beaconAt(uint256 stored, uint64 beaconBlock)
        private
        view
        returns (uint256 beacon, bool ready, bool drawn)
    {
        if (stored != 0) return (stored, true, true);
        if (beaconBlock == 0 || block.number <= beaconBlock) return (0, false, false);
        beacon = SeatDraw.beaconFrom(blockhash(beaconBlock));
        ready = beacon != 0;
    }

    /// @dev Returns the submission's (or its appeal's) beacon, storing it on first use; reverts
    /// while it is not known, and for good once it lapsed (a re-drawn beacon would let its
    /// producer wait for a committee it likes).
    function _drawBeacon(Submission storage s, uint64 round, address node, bool ofAppeal)
        private
        returns (uint256 beacon)
    {
        uint64 beaconBlock = _beaconBlock(s, ofAppeal);
        bool ready;
        bool drawn;
        (beacon, ready, drawn) = _beaconAt(ofAppeal ? s.appealBeacon : s.beacon, beaconBlock);
        if (!ready) {
            if (block.number > beaconBlock + BLOCKHASH_WINDOW) revert BeaconLapsed(round, node, beaconBlock);
            revert BeaconNotReady(round, node, beaconBlock);
        }
        if (!drawn) {
            if (ofAppeal) s.appealBeacon = uint88(beacon);
            else s.beacon = uint88(beacon);
            emit BeaconDrawn(round, node, beacon, beaconBlock);
        }
    }

    // ---------------------------------------------------------------------------------- appeals

    /// @inheritdoc ISwarmLedger
    function appeal(uint64 round) external {
        Submission storage s = _submissions[round][msg.sender];
        if (s.rollouts == 0) revert NoSubmission(round, msg.sender);
        uint64 current = currentRound();
        if (!_appealOpen(round, current)) revert NotAppealable(round, current);
        if (s.appealBlock != 0) revert AlreadyAppealed(round, msg.sender);
        if (_credited(s)) revert AlreadyCredited(round, msg.sender);
        _drawBeacon(s, round, msg.sender, false); // the openings: a lapsed beacon cannot be checked
        s.appealBlock = uint40(block.number);
        s.flags |= APPEALED;
        emit Appealed(round, msg.sender, uint64(block.number) + 1, msg.sender);
    }

    /// @inheritdoc ISwarmLedger
    function appealVote(uint64 round, address node) external {
        Submission storage s = _submissions[round][node];
        if (s.rollouts == 0) revert NoSubmission(round, node);
        uint64 current = currentRound();
        if (!_appealOpen(round, current)) revert NotAppealable(round, current);
        if (s.appealBlock != 0) revert AlreadyAppealed(round, node);
        uint8 record = _votes[msg.sender][round][node];
        uint256 side = record & 3;
        uint72 first = s.votes;
        bool losing = first.wins(quorum) ? side == DISPUTE : side == AGREE && first.disputes();
        if (!losing) revert VoteNotLosing(round, node, msg.sender);
        _drawBeacon(s, round, node, false); // the openings: a lapsed beacon cannot be checked
        s.appealBlock = uint40(block.number);
        s.flags |= APPEALED | VOTER_APPEAL;
        _votes[msg.sender][round][node] = record | VOTE_APPELLANT;
        emit Appealed(round, node, uint64(block.number) + 1, msg.sender);
    }

    /// @inheritdoc ISwarmLedger
    function appealOf(uint64 round, address node) external view returns (AppealView memory info) {
        Submission storage s = _submissions[round][node];
        uint72 t = s.appealVotes;
        info.appealBlock = s.appealBlock;
        if (s.appealBlock == 0) return info;
        info.beaconBlock = _beaconBlock(s, true);
        (info.beacon, info.ready, info.drawn) = _beaconAt(s.appealBeacon, info.beaconBlock);
        info.agreeSeats = uint16(t.seatsIn(0));
        info.disputeSeats = uint16(t.seatsIn(1));
        info.unavailableSeats = uint16(t.seatsIn(2));
        info.agrees = uint16(t.count(0));
        info.disputes = uint16(t.count(1));
        info.unavailable = uint16(t.count(2));
    }
}
