// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {IRoundBook} from "./IRoundBook.sol";
import {ISwarmLedger} from "./ISwarmLedger.sol";
import {Messages} from "./lib/Messages.sol";
import {SeatDraw} from "./lib/SeatDraw.sol";
import {SumTree} from "./lib/SumTree.sol";

/// @title RoundJudge
/// @notice The round book's judge (docs/scaling.md): whether the agreeing votes a credit leaf
/// holds are a committee's quorum by the ledger's rules (votesLie), and whether a submission leaf
/// is its producer's and in range (forged), which the book asks as views once it has checked the
/// leaf's place, voiding the root itself; and where two proofs go that the book had no room
/// for: a checker's equivocation (proveEquivocation: the book has the ledger slash it), a
/// producer's double submission (proveDoubleSubmission: the same) and a batch
/// left uncredited although the aggregator receipted a quorum of its votes (proveUncredited:
/// the book voids the verdict root). A contract of its own, created by its round book
/// (RoundBook.judge), so that the book's code stays under EIP-170 as it learns more rules; it
/// holds nothing, and only it may call the book's two hooks.
contract RoundJudge {
    uint256 private constant BPS = 10_000;

    ISwarmLedger private immutable _ledger;
    IRoundBook private immutable _book; // the book that created it
    bytes32 private immutable _separator; // the book's EIP-712 domain: its votes are signed under it
    uint256 private immutable _minStake;
    uint256 private immutable _quorum;
    uint256 private immutable _checkers;
    uint256 private immutable _toleranceBps;
    uint256 private immutable _scoreScale;
    uint256 private immutable _maxRollouts;

    /// @param ledger_ The ledger the book reads.
    /// @param separator_ The book's EIP-712 domain separator.
    constructor(address ledger_, bytes32 separator_) {
        _ledger = ISwarmLedger(ledger_);
        _book = IRoundBook(msg.sender);
        _separator = separator_;
        _minStake = _ledger.minStake();
        _quorum = _ledger.quorum();
        _checkers = _ledger.checkers();
        _toleranceBps = _ledger.agreeToleranceBps();
        _scoreScale = _ledger.SCORE_SCALE();
        _maxRollouts = _ledger.MAX_ROLLOUTS();
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
    ) public view returns (string memory) {
        if (votes.length < _quorum) return "a credit with fewer votes than quorum";
        uint256 maxScore = uint256(rollouts) * _scoreScale;
        bytes32 family = _ledger.familyOf(producer);
        uint256 familyStake = _ledger.familyStakeAt(family, snapshot);
        address last;
        for (uint256 i; i < votes.length; ++i) {
            IRoundBook.SignedVote calldata v = votes[i];
            if (v.voter <= last) return "a credit's votes not sorted by voter";
            last = v.voter;
            bytes32 hash = _agreementHash(round, producer, digest, signal, v);
            if (Messages.signer(hash, v.signature) != v.voter) return "a vote its voter did not sign";
            if (_gap(v.score, score) * BPS > maxScore * _toleranceBps) return "a vote that does not agree";
            if (!_seated(round, snapshot, beacon, producer, v.voter, family, familyStake)) {
                return "a vote from a node without a seat";
            }
        }
        return "";
    }

    /// @notice Proves that the verdict root leaves uncredited a batch a quorum agreed on, as
    /// the aggregator's own receipts show: `leaf` is the signed submission at `index` of the
    /// submission root (valid, of a producer that holds no batch of the round in the v4 lane),
    /// `votes` a quorum of its seated checkers' agreeing votes (as a credit's: sorted by voter),
    /// `receipts` the aggregator's receipt of each (its signature of `Messages.Receipt` over the
    /// vote's signing hash), and `around` the credit leaves the batch would sit between: the one
    /// just below its index and the one just above, at consecutive places (one, at the first or
    /// last place, when the batch would sort before or after every credit; none when the round
    /// credits nothing). An aggregator that receipted a vote must count it: the checker learns it
    /// was dropped only after its escalation window closed. The book voids the verdict root
    /// (RoundBook.voidVerdicts) and pays the caller half the bond.
    function proveUncredited(
        uint64 round,
        uint32 index,
        IRoundBook.SignedSubmission calldata leaf,
        SumTree.Node[] calldata proof,
        IRoundBook.SignedVote[] calldata votes,
        bytes[] calldata receipts,
        IRoundBook.Shown[] calldata around
    ) external {
        IRoundBook.RoundView memory r = _book.roundOf(round);
        if (r.verdicts == bytes32(0)) revert IRoundBook.NoSuchRoot(round);
        SumTree.Node memory node = SumTree.leaf(keccak256(abi.encode(leaf)), 0);
        if (index >= r.count || !SumTree.reaches(node, index, proof, 0, r.count, r.submissions, 0)) {
            revert IRoundBook.NotInRoot(round);
        }
        if (bytes(forged(round, leaf)).length != 0) revert IRoundBook.NoLie("a forged submission");
        // a batch the ledger holds (escalated, or submitted there too) is the v4 lane's to pay
        if (_ledger.hasSubmitted(round, leaf.producer)) revert IRoundBook.NoLie("a batch of the v4 lane");
        _uncredited(r, round, index, around);
        Messages.Submission calldata s = leaf.submission;
        string memory why =
            votesLie(round, r.postedBlock, r.beacon, leaf.producer, s.digest, s.score, s.signal, s.rollouts, votes);
        if (bytes(why).length == 0 && !receipted(round, leaf.producer, s.digest, s.signal, votes, receipts, r.aggregator)) {
            why = "a vote the aggregator gave no receipt of";
        }
        if (bytes(why).length != 0) revert IRoundBook.NoLie(why);
        _book.voidVerdicts(round, "a receipted quorum left uncredited", msg.sender);
    }

    /// @dev Reverts unless `around` shows that no credit of the verdict root `r` is of the
    /// submission at `index`: the credits sort strictly by submission, so the leaves at two
    /// consecutive places whose submissions sort below and above it, or the first leaf when it
    /// sorts above it, or the last when it sorts below it, or none in a round that credits
    /// nothing.
    function _uncredited(IRoundBook.RoundView memory r, uint64 round, uint32 index, IRoundBook.Shown[] calldata around)
        private
        pure
    {
        uint256 n = around.length;
        for (uint256 i; i < n; ++i) {
            IRoundBook.Shown calldata c = around[i];
            SumTree.Node memory node = SumTree.leaf(keccak256(abi.encode(c.credit)), c.amount);
            if (c.round != round || c.index >= r.credits || !SumTree.reaches(node, c.index, c.proof, 0, r.credits, r.verdicts, r.total)) {
                revert IRoundBook.NotInRoot(round);
            }
        }
        bool absent;
        if (n == 0) {
            absent = r.credits == 0;
        } else if (n == 1) {
            IRoundBook.Shown calldata only = around[0];
            absent = (only.index == 0 && only.credit.index > index)
                || (only.index + 1 == r.credits && only.credit.index < index);
        } else if (n == 2) {
            absent = around[1].index == around[0].index + 1 && around[0].credit.index < index
                && index < around[1].credit.index;
        }
        if (!absent) revert IRoundBook.NoLie("the batch may be credited");
    }

    /// @notice Why a submission leaf is not a submission the ledger's submit would take from its
    /// producer ("" when it is): a signature that is not its producer's, another round, a
    /// producer the ledger does not know, or a range submit refuses.
    function forged(uint64 round, IRoundBook.SignedSubmission calldata leaf) public view returns (string memory) {
        Messages.Submission calldata s = leaf.submission;
        bytes32 hash = Messages.signingHash(_separator, Messages.structHash(s));
        if (Messages.signer(hash, leaf.signature) != leaf.producer || leaf.producer == address(0)) {
            return "a submission its producer did not sign";
        }
        if (s.round != round) return "a submission of another round";
        if (_ledger.familyOf(leaf.producer) == bytes32(0)) return "a submission of no registered node";
        uint256 maxScore = uint256(s.rollouts) * _scoreScale;
        if (s.rollouts == 0 || s.rollouts > _maxRollouts || s.score > maxScore || s.signal > maxScore / 2) {
            return "a submission out of range";
        }
        return "";
    }

    /// @notice Whether `aggregator` signed a receipt (`receipts[i]`, of `Messages.Receipt` over
    /// the vote's signing hash and its voter) of each agreeing vote in `votes` on `producer`'s
    /// batch (`digest`, `signal`) of `round`.
    function receipted(
        uint64 round,
        address producer,
        bytes32 digest,
        uint64 signal,
        IRoundBook.SignedVote[] calldata votes,
        bytes[] calldata receipts,
        address aggregator
    ) public view returns (bool) {
        if (receipts.length != votes.length) return false;
        for (uint256 i; i < votes.length; ++i) {
            IRoundBook.SignedVote calldata v = votes[i];
            bytes32 hash = _agreementHash(round, producer, digest, signal, v);
            bytes32 receipt = Messages.signingHash(_separator, Messages.receiptHash(hash, v.voter));
            if (Messages.signer(receipt, receipts[i]) != aggregator) return false;
        }
        return true;
    }

    /// @notice Proves that one checker equivocated on `producer`'s batch of `round`: `first` and
    /// `second` are two different votes its key signed on it; or, `second.signature` empty,
    /// `first` is a vote whose side (unavailable; agreeing with the ledger's record of the batch
    /// as attest judges; or disputing it) is not the side of its own first vote on the ledger's
    /// record of the batch (an escalated batch, or one of the v4 lane). Its signer must be a
    /// registered node. The book then has the ledger slash it slashBps of its stake and pay the
    /// caller SETTLER_CUT_BPS of that (RoundBook.slashEquivocation: once per checker and batch,
    /// until the round's challenge window ends). Proven here, not in the book, for the book's
    /// size: two whole votes' decoding cost it 1 KB.
    function proveEquivocation(
        uint64 round,
        address producer,
        IRoundBook.CastVote calldata first,
        IRoundBook.CastVote calldata second
    ) external {
        address voter = equivocator(round, producer, first, second);
        if (voter == address(0)) revert IRoundBook.NoLie("no two sides of one checker");
        _book.slashEquivocation(round, producer, voter, msg.sender);
    }

    /// @notice Proves that a producer signed two different submissions of `round`: `first` and
    /// `second`, or, `second.signature` empty, `first` and the batch the ledger holds of it for
    /// the round (submitted there: an honest producer whose submission the root lane did not
    /// take submits the same one there). The book then has the ledger slash it slashBps of its
    /// stake and pay the caller SETTLER_CUT_BPS of that, as a checker's equivocation (once per
    /// producer and round, until the round's challenge window ends; EquivocationProven names
    /// the producer as its voter). What it defeats: a producer that shows one batch to the root
    /// lane and another to the ledger, or two to the aggregator, makes checkers fetch, prove and
    /// judge a batch it never stands behind.
    function proveDoubleSubmission(
        uint64 round,
        IRoundBook.SignedSubmission calldata first,
        IRoundBook.SignedSubmission calldata second
    ) external {
        address producer = doubleSubmitter(round, first, second);
        if (producer == address(0)) revert IRoundBook.NoLie("no two submissions of one producer");
        _book.slashEquivocation(round, producer, producer, msg.sender);
    }

    /// @notice The registered producer that signed `first` and a different `second` of `round`
    /// (proveDoubleSubmission says how), or the zero address when they show none.
    function doubleSubmitter(
        uint64 round,
        IRoundBook.SignedSubmission calldata first,
        IRoundBook.SignedSubmission calldata second
    ) public view returns (address) {
        Messages.Submission calldata a = first.submission;
        bytes32 hash = Messages.signingHash(_separator, Messages.structHash(a));
        address producer = Messages.signer(hash, first.signature);
        if (a.round != round || producer == address(0) || _ledger.familyOf(producer) == bytes32(0)) {
            return address(0);
        }
        if (second.signature.length != 0) {
            Messages.Submission calldata b = second.submission;
            bytes32 other = Messages.signingHash(_separator, Messages.structHash(b));
            bool two = b.round == round && other != hash && Messages.signer(other, second.signature) == producer;
            return two ? producer : address(0);
        }
        ISwarmLedger.SubmissionView memory s = _ledger.submissionOf(round, producer);
        if (s.rollouts == 0) return address(0);
        bool same = s.digest == a.digest && s.rollouts == a.rollouts && s.score == a.score && s.signal == a.signal;
        return same ? address(0) : producer;
    }

    /// @notice The registered node that equivocated on `producer`'s batch of `round` by `first`
    /// and `second` (proveEquivocation says how), or the zero address when they show none.
    function equivocator(
        uint64 round,
        address producer,
        IRoundBook.CastVote calldata first,
        IRoundBook.CastVote calldata second
    ) public view returns (address) {
        bytes32 hash = _voteHash(round, producer, first);
        address voter = Messages.signer(hash, first.signature);
        // a producer holds no seat on its own batch: its "votes" on it are no checker's (and
        // (round, producer, producer) is the key of its double submission)
        if (voter == address(0) || voter == producer || _ledger.familyOf(voter) == bytes32(0)) {
            return address(0);
        }
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

    /// @dev The signing hash of `v`, an agreeing vote on `producer`'s batch (`digest`, `signal`).
    function _agreementHash(
        uint64 round,
        address producer,
        bytes32 digest,
        uint64 signal,
        IRoundBook.SignedVote calldata v
    ) private view returns (bytes32) {
        return Messages.signingHash(
            _separator,
            Messages.structHash(Messages.Vote(round, producer, digest, false, v.score, signal, v.findings))
        );
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
