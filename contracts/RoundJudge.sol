// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {IRoundBook} from "./IRoundBook.sol";
import {ISwarmLedger} from "./ISwarmLedger.sol";
import {Messages} from "./lib/Messages.sol";
import {SeatDraw} from "./lib/SeatDraw.sol";

/// @title RoundJudge
/// @notice The round book's judge of a credit's votes (docs/scaling.md): whether the agreeing
/// votes a credit leaf holds are a committee's quorum by the ledger's rules. A contract of its
/// own, created by its round book (RoundBook.judge), so that the book's code stays under EIP-170
/// as it learns more rules; it holds nothing and changes nothing: the book asks it, as a view,
/// once it has checked the leaf's place and its submission, and voids the root itself.
contract RoundJudge {
    uint256 private constant BPS = 10_000;

    ISwarmLedger private immutable _ledger;
    bytes32 private immutable _separator; // the book's EIP-712 domain: its votes are signed under it
    uint256 private immutable _minStake;
    uint256 private immutable _quorum;
    uint256 private immutable _checkers;
    uint256 private immutable _toleranceBps;
    uint256 private immutable _scoreScale;

    /// @param ledger_ The ledger the book reads.
    /// @param separator_ The book's EIP-712 domain separator.
    constructor(address ledger_, bytes32 separator_) {
        _ledger = ISwarmLedger(ledger_);
        _separator = separator_;
        _minStake = _ledger.minStake();
        _quorum = _ledger.quorum();
        _checkers = _ledger.checkers();
        _toleranceBps = _ledger.agreeToleranceBps();
        _scoreScale = _ledger.SCORE_SCALE();
    }

    /// @notice Why `votes` do not credit `producer`'s submission (`digest`, `score`, `signal`,
    /// `rollouts`) of `round` ("" when they do): fewer than quorum, not sorted by voter
    /// (strictly: distinct voters), a vote its voter did not sign, a score that does not agree
    /// (the ledger's tolerance; the signal is the credit's own, so it agrees by construction),
    /// or a voter without a seat on the committee (the ledger's rule 4 with the round's beacon
    /// and stakes as of `snapshot`, the submission root's block).
    function votesLie(
        uint64 round,
        uint64 snapshot,
        uint256 beacon,
        address producer,
        bytes32 digest,
        uint64 score,
        uint64 signal,
        uint32 rollouts,
        IRoundBook.SignedVote[] calldata votes
    ) external view returns (string memory) {
        if (votes.length < _quorum) return "a credit with fewer votes than quorum";
        uint256 maxScore = uint256(rollouts) * _scoreScale;
        bytes32 family = _ledger.familyOf(producer);
        uint256 familyStake = _ledger.familyStakeAt(family, snapshot);
        address last;
        for (uint256 i; i < votes.length; ++i) {
            IRoundBook.SignedVote calldata v = votes[i];
            if (v.voter <= last) return "a credit's votes not sorted by voter";
            last = v.voter;
            bytes32 hash = Messages.signingHash(
                _separator,
                Messages.structHash(Messages.Vote(round, producer, digest, false, v.score, signal, v.findings))
            );
            if (Messages.signer(hash, v.signature) != v.voter) return "a vote its voter did not sign";
            if (_gap(v.score, score) * BPS > maxScore * _toleranceBps) return "a vote that does not agree";
            if (!_seated(round, snapshot, beacon, producer, v.voter, family, familyStake)) {
                return "a vote from a node without a seat";
            }
        }
        return "";
    }

    /// @notice The registered node that equivocated on `producer`'s batch of `round` by `first`
    /// and `second` (RoundBook.proveEquivocation says how), or the zero address when they show
    /// none.
    function equivocator(
        uint64 round,
        address producer,
        IRoundBook.CastVote calldata first,
        IRoundBook.CastVote calldata second
    ) external view returns (address) {
        bytes32 hash = _voteHash(round, producer, first);
        address voter = Messages.signer(hash, first.signature);
        if (voter == address(0) || _ledger.familyOf(voter) == bytes32(0)) return address(0);
        if (second.signature.length != 0) {
            bytes32 other = _voteHash(round, producer, second);
            return other != hash && Messages.signer(other, second.signature) == voter ? voter : address(0);
        }
        (uint8 onChain,,) = _ledger.voteOf(voter, round, producer);
        ISwarmLedger.SubmissionView memory s = _ledger.submissionOf(round, producer);
        // a vote on another batch than the ledger's record says nothing against the record's vote
        if (onChain == 0 || first.digest != s.digest) return address(0);
        uint256 side = first.unavailable
            ? 3
            : first.signal == s.signal && _gap(first.score, s.score) * BPS <= uint256(s.rollouts) * _scoreScale * _toleranceBps
                ? 1
                : 2;
        return side != onChain ? voter : address(0);
    }

    function _voteHash(uint64 round, address producer, IRoundBook.CastVote calldata v) private view returns (bytes32) {
        return Messages.signingHash(
            _separator,
            Messages.structHash(
                Messages.Vote(round, producer, v.digest, v.unavailable, v.score, v.signal, v.findings)
            )
        );
    }

    /// @dev Whether `voter` holds a seat on `producer`'s committee of `round`: the ledger's rule
    /// 4 with the round's beacon and stakes as of the submission root's block.
    function _seated(
        uint64 round,
        uint64 snapshot,
        uint256 beacon,
        address producer,
        address voter,
        bytes32 family,
        uint256 total
    ) private view returns (bool) {
        if (voter == producer || _ledger.familyOf(voter) != family) return false;
        uint256 stake = _ledger.stakeAt(voter, snapshot);
        if (stake < _minStake) return false;
        return SeatDraw.seats(beacon, round, producer, voter, stake, total, _checkers) != 0;
    }

    function _gap(uint64 a, uint64 b) private pure returns (uint256) {
        return a > b ? a - b : b - a;
    }
}
