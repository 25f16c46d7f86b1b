// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {IRoundBook} from "./IRoundBook.sol";
import {ISwarmLedger} from "./ISwarmLedger.sol";
import {Messages} from "./lib/Messages.sol";
import {SeatDraw} from "./lib/SeatDraw.sol";
import {SumTree} from "./lib/SumTree.sol";
import {AggregatorDraw} from "./AggregatorDraw.sol";
import {RoundJudge} from "./RoundJudge.sol";

/// @title RoundBook
/// @notice The root lane's book of rounds (IRoundBook documents every function; docs/scaling.md
/// the design and what is not built yet). It reads the ledger's nodes, stakes as of a block, and
/// parameters; it holds the aggregators' bonds and pays a proven lie's half to its prover and
/// half into the ledger's reward pool.
contract RoundBook is IRoundBook {
    uint256 private constant BLOCKHASH_WINDOW = 256;
    uint64 private constant NO_ROUND = type(uint64).max;
    uint32 private constant NO_INDEX = type(uint32).max;
    /// @dev The verdict root of a round in which no batch reached its quorum (no leaf hashes to it)
    bytes32 private constant NO_CREDITS = keccak256("sapo.no-credits");
    /// @inheritdoc IRoundBook
    uint256 public immutable postPayBps;

    struct Paid {
        uint128 total;
        uint64 through; // the round of the last claim, plus one (0: none)
    }

    struct Round {
        address aggregator;
        uint64 postedBlock;
        uint32 count;
        bytes32 submissions;
        bytes32 verdicts;
        uint128 total;
        uint88 beacon;
        bool submissionsVoided;
        bool verdictsVoided;
        bool released;
        uint32 credits;
        uint32 openChallenges;
    }

    ISwarmLedger private immutable _ledger;
    uint256 public immutable bond;
    uint256 public immutable challengeBond;
    uint64 private immutable _submitRounds;
    uint64 private immutable _challengeRounds;
    /// @notice The contract that judges a credit's votes, a submission's signature and ranges,
    /// an equivocation and an uncredited quorum for this book (created by it).
    RoundJudge public immutable judge;
    /// @notice The roster of aggregators and each round's draw of the one that may post (created
    /// by it).
    AggregatorDraw public immutable aggregators;
    uint256 private immutable _rewardPerRound;
    bytes32 private immutable _separator;
    uint256 public rewardPool;
    mapping(address producer => Paid) private _paid;

    mapping(uint64 round => Round) private _rounds;
    mapping(bytes32 key => DataChallenge) private _challenges; // key: (round, tree, index)
    mapping(address payee => uint256 wei_) public owed;
    mapping(bytes32 key => bool) private _equivocations; // key: (round, producer, voter)

    constructor(address ledger_, uint256 bond_, uint256 challengeBond_, uint256 postPayBps_) {
        _ledger = ISwarmLedger(ledger_);
        bond = bond_;
        challengeBond = challengeBond_;
        // no more than the round's reward (`sapo aggregate run` logs it before it enlists)
        if (postPayBps_ > 10_000) revert PostPayAboveTheReward(postPayBps_);
        postPayBps = postPayBps_;
        _submitRounds = _ledger.submitRounds();
        _challengeRounds = _ledger.challengeRounds();
        _rewardPerRound = _ledger.rewardPerRound();
        // a share of round q folds the ledger's total of q, which must be final whenever it is
        // read: the ledger's round is final after q+W+C+A; the earliest read is the aggregator's
        // pay at q's release, from q+W+2C+3, so A <= C+2 (then also for the earnings of the round
        // q is settled for, posted in q+W+2C+4; docs/scaling.md, "One reward over both lanes")
        uint64 appeals = _ledger.appealRounds();
        if (appeals > _challengeRounds + 2) revert AppealsOutlastTheBook(appeals, _challengeRounds);
        _separator = Messages.domainSeparator(address(this));
        judge = new RoundJudge(ledger_, _separator);
        aggregators = new AggregatorDraw(ledger_, address(judge), _separator, bond_);
        // the ledger escalates only its own book's batches: without that the root lane could not
        // slash a forger (docs/scaling.md), so no book runs beside a ledger that does not name it
        address named = _ledger.book();
        if (named != address(this)) revert NotTheLedgersBook(named);
        _ledger.bindBook(); // the ledger pays its rounds over both lanes from now on
    }

    function ledger() external view returns (address) {
        return address(_ledger);
    }

    // ---------------------------------------------------------------------------------- windows

    function windows(uint64 round)
        external
        view
        returns (uint64 post, uint64 votesClose, uint64 verdicts, uint64 challengesEnd)
    {
        return (postRound(round), voteClose(round), verdictRound(round), challengeEnd(round));
    }

    function postRound(uint64 round) private view returns (uint64) {
        return round + _submitRounds + 1;
    }

    function voteClose(uint64 round) private view returns (uint64) {
        return postRound(round) + _challengeRounds;
    }

    function verdictRound(uint64 round) private view returns (uint64) {
        return voteClose(round) + 1;
    }

    function challengeEnd(uint64 round) private view returns (uint64) {
        return verdictRound(round) + _challengeRounds;
    }

    // ---------------------------------------------------------------------------------- posting

    function postSubmissions(uint64 round, bytes32 root, uint32 count, bytes32 list) external payable {
        uint64 current = _ledger.currentRound();
        if (current != postRound(round)) revert NotInPostWindow(round, current);
        if (msg.value != bond) revert WrongBond(msg.value, bond);
        // only the round's drawn aggregator: its receipts bind the one root there can be
        if (aggregators.draw(round) != msg.sender) revert NotTheDrawnAggregator(msg.sender, round);
        if (count == 0 || root == bytes32(0)) revert EmptyRoot();
        Round storage r = _rounds[round];
        if (r.aggregator != address(0)) revert AlreadyPosted(round);
        r.aggregator = msg.sender;
        r.postedBlock = uint64(block.number);
        r.count = count;
        r.submissions = root;
        emit SubmissionsPosted(round, msg.sender, root, count, list);
    }

    function drawBeacon(uint64 round) public {
        Round storage r = _posted(round);
        if (r.beacon != 0) return;
        uint256 beaconBlock = uint256(r.postedBlock) + 1;
        if (block.number <= beaconBlock) revert BeaconNotReady(round);
        uint256 beacon = SeatDraw.beaconFrom(blockhash(beaconBlock));
        if (beacon == 0 || block.number - beaconBlock > BLOCKHASH_WINDOW) revert BeaconLapsed(round);
        r.beacon = uint88(beacon);
        emit RoundBeaconDrawn(round, beacon);
    }

    function postVerdicts(uint64 round, bytes32 root, uint32 credits, uint128 total, bytes32 list) external {
        Round storage r = _posted(round);
        if (msg.sender != r.aggregator) revert NotTheAggregator(msg.sender, r.aggregator);
        uint64 current = _ledger.currentRound();
        if (current != verdictRound(round)) revert NotInPostWindow(round, current);
        if (r.verdicts != bytes32(0)) revert AlreadyPosted(round);
        if (root == bytes32(0) || (credits == 0 && (root != NO_CREDITS || total != 0))) revert EmptyRoot();
        drawBeacon(round);
        r.verdicts = root;
        r.credits = credits;
        r.total = total;
        emit VerdictsPosted(round, msg.sender, root, total, list);
    }

    // ------------------------------------------------------------------------------ escalation

    function escalate(
        uint64 round,
        uint32 index,
        SignedSubmission calldata leaf,
        SumTree.Node[] calldata proof,
        ISwarmLedger.EscalationVote calldata vote
    ) external {
        Round storage r = _posted(round);
        uint64 current = _ledger.currentRound();
        if (current >= voteClose(round)) revert EscalationClosed(round, current);
        _checkSubmission(r, round, index, leaf, proof);
        if (bytes(_forged(round, leaf)).length != 0) revert ForgedSubmission(round, leaf.producer);
        drawBeacon(round);
        // the ledger checks the caller's seat, by its own draw with this round's beacon and
        // snapshot, and records the caller's vote
        Messages.Submission calldata s = leaf.submission;
        _ledger.escalate(
            round, leaf.producer, msg.sender, s.digest, s.rollouts, s.score, s.signal, r.postedBlock, r.beacon, vote
        );
    }

    // ---------------------------------------------------------------------------------- proofs

    function voidVerdicts(uint64 round, string calldata lie, address prover) external {
        if (msg.sender != address(judge)) revert NotTheJudge(msg.sender);
        _void(_withVerdicts(round), round, false, lie, prover);
    }

    function slashEquivocation(uint64 round, address producer, address voter, address prover) external {
        if (msg.sender != address(judge)) revert NotTheJudge(msg.sender);
        _posted(round);
        uint64 current = _ledger.currentRound();
        if (current > challengeEnd(round)) revert ChallengeWindowClosed(round, current);
        bytes32 key = keccak256(abi.encode(round, producer, voter));
        if (_equivocations[key]) revert AlreadyProven(round, producer, voter);
        _equivocations[key] = true;
        uint256 slashed = _ledger.slashEquivocation(round, producer, voter, prover);
        emit EquivocationProven(round, producer, voter, prover, slashed);
    }

    function proveForgedSubmission(
        uint64 round,
        uint32 index,
        SignedSubmission calldata leaf,
        SumTree.Node[] calldata proof
    ) external {
        Round storage r = _challengeable(round);
        _checkSubmission(r, round, index, leaf, proof);
        string memory lie = _forged(round, leaf);
        if (bytes(lie).length == 0) revert NoLie("the submission is its producer's");
        _void(r, round, true, lie, msg.sender);
    }

    function proveUnsorted(
        uint64 round,
        uint32 index,
        SignedSubmission calldata first,
        SumTree.Node[] calldata firstProof,
        SignedSubmission calldata second,
        SumTree.Node[] calldata secondProof
    ) external {
        Round storage r = _challengeable(round);
        _checkSubmission(r, round, index, first, firstProof);
        _checkSubmission(r, round, index + 1, second, secondProof);
        if (first.producer < second.producer) revert NoLie("the two submissions are in order");
        _void(r, round, true, "submissions out of order", msg.sender);
    }

    function proveLeftOut(
        uint64 round,
        SignedSubmission calldata leaf,
        bytes calldata receipt,
        uint32 index,
        SignedSubmission calldata below,
        SumTree.Node[] calldata belowProof,
        SignedSubmission calldata above,
        SumTree.Node[] calldata aboveProof
    ) external {
        Round storage r = _challengeable(round);
        bytes32 held = Messages.signingHash(_separator, Messages.structHash(leaf.submission));
        bytes32 receiptHash = Messages.receiptHash(held, leaf.producer);
        if (Messages.signer(Messages.signingHash(_separator, receiptHash), receipt) != r.aggregator) {
            revert NoLie("not the aggregator's receipt");
        }
        if (bytes(_forged(round, leaf)).length != 0 || _ledger.hasSubmitted(round, leaf.producer)) {
            revert NoLie("a submission the root may leave out");
        }
        if (index > 0) {
            _checkSubmission(r, round, index - 1, below, belowProof);
            if (below.producer >= leaf.producer) revert NoLie("not its place");
        }
        if (index < r.count) {
            _checkSubmission(r, round, index, above, aboveProof);
            if (above.producer <= leaf.producer) revert NoLie("not its place");
        }
        _void(r, round, true, "a receipted submission left out", msg.sender);
    }

    function proveBadCredit(
        uint64 round,
        uint32 leafIndex,
        Credit calldata credit,
        uint128 amount,
        SumTree.Node[] calldata creditProof,
        SignedSubmission calldata submission,
        SumTree.Node[] calldata submissionProof,
        SignedVote[] calldata votes
    ) external {
        Round storage r = _withVerdicts(round);
        _inVerdicts(r, round, _creditLeaf(credit, amount), leafIndex, creditProof, 0);
        if (keccak256(abi.encode(votes)) != credit.votes) revert NotInRoot(round);
        string memory lie = amount != credit.signal
            ? "a credit's amount is not its signal"
            : credit.index >= r.count ? "a credit of no submission" : "";
        if (bytes(lie).length == 0) {
            _checkSubmission(r, round, credit.index, submission, submissionProof);
            lie = _creditLie(round, r, credit, submission, votes);
        }
        if (bytes(lie).length == 0) revert NoLie("the credit holds");
        _void(r, round, false, lie, msg.sender);
    }

    function proveCreditsUnsorted(
        uint64 round,
        uint32 index,
        Credit calldata first,
        uint128 firstAmount,
        SumTree.Node[] calldata firstProof,
        Credit calldata second,
        uint128 secondAmount,
        SumTree.Node[] calldata secondProof
    ) external {
        Round storage r = _withVerdicts(round);
        if (index + 1 >= r.credits) revert NotInRoot(round);
        _inVerdicts(r, round, _creditLeaf(first, firstAmount), index, firstProof, 0);
        _inVerdicts(r, round, _creditLeaf(second, secondAmount), index + 1, secondProof, 0);
        if (first.index < second.index) revert NoLie("the two credits are in order");
        _void(r, round, false, "credits out of order", msg.sender);
    }

    function proveBadSum(
        uint64 round,
        uint256 height,
        uint256 index,
        SumTree.Node calldata node,
        SumTree.Node[] calldata proof,
        SumTree.Node calldata left,
        SumTree.Node calldata right
    ) external {
        Round storage r = _withVerdicts(round);
        _inVerdicts(r, round, node, index, proof, height);
        bool lie;
        if (height == 0) {
            // a leaf: `left` is its (data hash, amount); the sum its parent committed is node.sum
            if (SumTree.leaf(left.hash, left.sum).hash != node.hash) revert NotInRoot(round);
            lie = left.sum != node.sum;
        } else {
            if (SumTree.parentHash(left, right) != node.hash) revert NotInRoot(round);
            lie = uint256(left.sum) + uint256(right.sum) != node.sum;
        }
        if (!lie) revert NoLie("the sums add up");
        _void(r, round, false, "a sum that is not its children's", msg.sender);
    }

    function proveBadEarnings(
        uint64 round,
        uint32 leafIndex,
        Credit calldata credit,
        uint128 amount,
        SumTree.Node[] calldata proof,
        Shown[] calldata shown
    ) external {
        Round storage r = _withVerdicts(round);
        _inVerdicts(r, round, _creditLeaf(credit, amount), leafIndex, proof, 0);
        string memory lie = _earningsLie(round, credit, shown);
        if (bytes(lie).length == 0) revert NoLie("the earnings hold");
        _void(r, round, false, lie, msg.sender);
    }

    function proveSkippedCredit(
        uint64 round,
        uint32 leafIndex,
        Credit calldata credit,
        uint128 amount,
        SumTree.Node[] calldata proof,
        Shown calldata skipped
    ) external {
        Round storage r = _withVerdicts(round);
        _inVerdicts(r, round, _creditLeaf(credit, amount), leafIndex, proof, 0);
        _shown(skipped);
        uint64 q = skipped.round;
        uint64 lag_ = lag();
        if (skipped.credit.producer != credit.producer || round < lag_ || q > round - lag_ || !_standing(q)) {
            revert NoLie("not a settled credit of the producer");
        }
        Earnings calldata e = credit.earnings;
        bool left = e.anchor == NO_ROUND || q > e.anchor
            || (q < e.anchor && e.anchor - q < lag_ && e.recent.length == lag_ - 1 && e.recent[e.anchor - 1 - q] == NO_INDEX);
        if (!left) revert NoLie("the earnings count it");
        _void(r, round, false, "earnings that skip a credit", msg.sender);
    }

    // ---------------------------------------------------------------------------------- payouts

    function lag() public view returns (uint64) {
        return _challengeRounds + 2;
    }

    function standingTotal(uint64 round) external view returns (bool decided, uint256 total) {
        return (_ledger.currentRound() >= challengeEnd(round) + 2, _standing(round) ? _rounds[round].total : 0);
    }

    function fund() external payable {
        if (msg.value == 0) revert ZeroAmount();
        rewardPool += msg.value;
        emit Funded(msg.sender, msg.value);
    }

    function paidOf(address producer) external view returns (uint128 total, uint64 through) {
        Paid storage p = _paid[producer];
        return (p.total, p.through);
    }

    function claim(
        uint64 round,
        uint32 leafIndex,
        Credit calldata credit,
        uint128 amount,
        SumTree.Node[] calldata proof,
        Shown[] calldata tail
    ) external returns (uint256 paid) {
        Round storage r = _posted(round);
        uint64 current = _ledger.currentRound();
        if (current < challengeEnd(round) + 2 || !_standing(round)) revert NotSettled(round, current);
        _inVerdicts(r, round, _creditLeaf(credit, amount), leafIndex, proof, 0);
        address producer = credit.producer;
        if (msg.sender != producer) revert NotTheProducer(msg.sender, producer);
        Paid storage p = _paid[producer];
        uint64 lag_ = lag();
        if (p.through != 0 && round < p.through - 1 + lag_) revert ClaimTooSoon(round, p.through - 1);
        uint256 due = uint256(credit.earnings.settled) + _share(round, amount);
        uint256 next = round >= lag_ ? round - lag_ + 1 : 0; // the first round the tail may name
        for (uint256 i; i < tail.length; ++i) {
            Shown calldata t = tail[i];
            if (t.round < next || t.round >= round || t.credit.producer != producer || !_standing(t.round)) {
                revert BadTail(t.round);
            }
            _shown(t);
            due += _share(t.round, t.amount);
            next = uint256(t.round) + 1;
        }
        if (due <= p.total) revert NothingToClaim(producer);
        paid = due - p.total;
        if (paid > rewardPool) revert PoolInsufficient(paid, rewardPool);
        rewardPool -= paid;
        p.total = uint128(due);
        p.through = round + 1;
        emit Claimed(producer, round, paid, due);
        _pay(producer, paid);
    }

    /// @dev Why a credit's earnings are false ("" when they hold).
    function _earningsLie(uint64 round, Credit calldata credit, Shown[] calldata shown)
        private
        view
        returns (string memory)
    {
        Earnings calldata e = credit.earnings;
        if (e.anchor == NO_ROUND) {
            return e.settled != 0 || e.recent.length != 0 ? "earnings with no anchor" : "";
        }
        uint64 lag_ = lag();
        if (e.recent.length != lag_ - 1) return "earnings of the wrong shape";
        if (round < lag_ || e.anchor > round - lag_ || !_standing(e.anchor)) {
            return "an anchor that is not a settled round";
        }
        if (e.anchorIndex >= _rounds[e.anchor].credits) return "an anchor past its round's credits";
        for (uint256 k; k < e.recent.length; ++k) {
            uint32 index = e.recent[k];
            if (index == NO_INDEX) continue;
            if (e.anchor < k + 1) return "a recent credit before the first round";
            uint64 q = e.anchor - 1 - uint64(k);
            if (!_standing(q)) return "a recent credit in a round that does not stand";
            if (index >= _rounds[q].credits) return "a recent credit past its round's credits";
        }
        // the shown leaves: the anchor's, then each recent credit's
        Shown calldata a = shown[0];
        if (a.round != e.anchor || a.index != e.anchorIndex) revert NotInRoot(a.round);
        _shown(a);
        if (a.credit.producer != credit.producer) return "an anchor that is not the producer's credit";
        uint256 sum = uint256(a.credit.earnings.settled) + _share(e.anchor, a.amount);
        uint256 j = 1;
        for (uint256 k; k < e.recent.length; ++k) {
            if (e.recent[k] == NO_INDEX) continue;
            Shown calldata s = shown[j++];
            if (s.round != e.anchor - 1 - uint64(k) || s.index != e.recent[k]) revert NotInRoot(s.round);
            _shown(s);
            if (s.credit.producer != credit.producer) return "a recent credit that is not the producer's";
            sum += _share(s.round, s.amount);
        }
        if (j != shown.length) revert NotInRoot(round);
        return sum != e.settled ? "earnings that do not add up" : "";
    }

    /// @dev Whether round q's verdict root stands for good: posted, not void, every challenge of
    /// it answered, and its challenge window closed two rounds ago (an unanswered challenge
    /// opened last can be claimed by then: nothing about q can change after).
    function _standing(uint64 q) private view returns (bool) {
        Round storage r = _rounds[q];
        return r.verdicts != bytes32(0) && !r.submissionsVoided && !r.verdictsVoided && r.openChallenges == 0
            && _ledger.currentRound() >= challengeEnd(q) + 2;
    }

    /// @dev A credit's share of round q's one reward: over the signal both lanes credited in q
    /// (the ledger's total is final whenever a share of q is asked: see the constructor).
    function _share(uint64 q, uint256 amount) private view returns (uint256) {
        (uint256 other,) = _ledger.roundInfo(q);
        uint256 total = _rounds[q].total + other;
        return total == 0 ? 0 : (_rewardPerRound * amount) / total;
    }

    function _creditLeaf(Credit calldata credit, uint128 amount) private pure returns (SumTree.Node memory) {
        return SumTree.leaf(keccak256(abi.encode(credit)), amount);
    }

    /// @dev Reverts unless `s` is a credit leaf of its round's verdict root at its place.
    function _shown(Shown calldata s) private view {
        Round storage q = _rounds[s.round];
        if (s.index >= q.credits) revert NotInRoot(s.round);
        _inVerdicts(q, s.round, _creditLeaf(s.credit, s.amount), s.index, s.proof, 0);
    }

    // ---------------------------------------------------------------------------- data challenges

    function challengeData(uint64 round, bool verdictTree, uint32 index) external payable {
        Round storage r = _challengeable(round);
        if (msg.value != challengeBond) revert WrongChallengeBond(msg.value, challengeBond);
        // any position of the tree: a leaf past the count must be shown empty (answerEmpty)
        if (
            verdictTree
                ? (r.verdicts == bytes32(0) || r.credits == 0 || index >> SumTree.depth(r.credits) != 0)
                : index >> SumTree.depth(r.count) != 0
        ) {
            revert NotInRoot(round);
        }
        DataChallenge storage c = _challenges[_key(round, verdictTree, index)];
        if (c.challenger != address(0)) revert AlreadyChallenged(round, verdictTree, index);
        uint64 answerBy = _ledger.currentRound() + 1;
        c.challenger = msg.sender;
        c.answerBy = answerBy;
        r.openChallenges += 1;
        emit DataChallenged(round, verdictTree, index, msg.sender, answerBy);
    }

    function answerSubmission(
        uint64 round,
        uint32 index,
        SignedSubmission calldata leaf,
        SumTree.Node[] calldata proof
    ) external {
        Round storage r = _posted(round);
        _checkSubmission(r, round, index, leaf, proof);
        _answered(r, round, false, index, abi.encode(leaf));
    }

    function answerCredit(
        uint64 round,
        uint32 index,
        Credit calldata credit,
        uint128 amount,
        SumTree.Node[] calldata proof,
        SignedVote[] calldata votes
    ) external {
        Round storage r = _posted(round);
        if (index >= r.credits) revert NotInRoot(round);
        _inVerdicts(r, round, _creditLeaf(credit, amount), index, proof, 0);
        if (keccak256(abi.encode(votes)) != credit.votes) revert NotInRoot(round);
        _answered(r, round, true, index, abi.encode(credit, amount, votes));
    }

    function answerEmpty(uint64 round, bool verdictTree, uint32 index, SumTree.Node[] calldata proof) external {
        Round storage r = _posted(round);
        SumTree.Node memory empty;
        if (verdictTree) {
            if (index < r.credits) revert NotInRoot(round);
            _inVerdicts(r, round, empty, index, proof, 0);
        } else {
            if (index < r.count) revert NotInRoot(round);
            _inSubmissions(r, round, empty, index, proof);
        }
        _answered(r, round, verdictTree, index, "");
    }

    function claimUnanswered(uint64 round, bool verdictTree, uint32 index) external {
        Round storage r = _posted(round);
        DataChallenge storage c = _open(round, verdictTree, index);
        uint64 current = _ledger.currentRound();
        if (current <= c.answerBy) revert AnswerWindowOpen(round, c.answerBy, current);
        c.answered = true;
        r.openChallenges -= 1;
        address challenger = c.challenger;
        // a root already void for a lie proven meanwhile has no bond left: the challenger gets
        // its own back
        if (!r.submissionsVoided && !r.verdictsVoided) _void(r, round, !verdictTree, "data withheld", challenger);
        _pay(challenger, challengeBond);
    }

    function _open(uint64 round, bool verdictTree, uint32 index) private view returns (DataChallenge storage c) {
        c = _challenges[_key(round, verdictTree, index)];
        if (c.challenger == address(0) || c.answered) revert NoSuchChallenge(round, verdictTree, index);
    }

    /// @dev Closes the challenge of a leaf just shown on chain; its bond pays whoever showed it.
    function _answered(Round storage r, uint64 round, bool verdictTree, uint32 index, bytes memory leaf) private {
        DataChallenge storage c = _open(round, verdictTree, index);
        uint64 current = _ledger.currentRound();
        if (current > c.answerBy) revert AnswerWindowClosed(round, c.answerBy, current);
        c.answered = true;
        r.openChallenges -= 1;
        emit DataAnswered(round, verdictTree, index, leaf);
        _pay(msg.sender, challengeBond);
    }

    function _key(uint64 round, bool verdictTree, uint32 index) private pure returns (bytes32) {
        return keccak256(abi.encode(round, verdictTree, index));
    }

    /// @dev Pays `to`; a payee that refuses it (a contract whose receive reverts) is owed it
    /// instead and takes it with withdrawOwed, so that no payee can block a proof, an answer or
    /// a challenge's close.
    function _pay(address to, uint256 amount) private {
        (bool ok,) = to.call{value: amount}("");
        if (!ok) {
            owed[to] += amount;
            emit PaymentOwed(to, amount);
        }
    }

    function withdrawOwed() external {
        uint256 amount = owed[msg.sender];
        if (amount == 0) revert NothingOwed(msg.sender);
        owed[msg.sender] = 0;
        (bool ok,) = msg.sender.call{value: amount}("");
        if (!ok) revert PaymentRefused(msg.sender);
    }

    // ---------------------------------------------------------------------------------- release

    function release(uint64 round) external {
        Round storage r = _posted(round);
        if (r.submissionsVoided || r.verdictsVoided) revert BondForfeited(round);
        if (r.released) revert NoSuchRoot(round);
        uint64 current = _ledger.currentRound();
        if (current <= challengeEnd(round)) revert ChallengeWindowOpen(round, current);
        if (r.openChallenges != 0) revert ChallengesOpen(round, r.openChallenges);
        // an aggregator that never posted its verdict root took the round from its producers
        if (r.verdicts == bytes32(0)) return _void(r, round, false, "no verdict root", msg.sender);
        // the aggregator alone takes its bond and pay back, when it likes: nobody can release
        // its round while the pool is short to cut its pay
        if (msg.sender != r.aggregator) revert NotTheAggregator(msg.sender, r.aggregator);
        r.released = true;
        // its pay: postPayBps of the round's reward, scaled by the share of the round's signal
        // its root credits (an aggregator that receipts nothing, and leaves every batch to the
        // ledger, earns nothing), as far as the pool holds it
        uint256 pay = (_share(round, r.total) * postPayBps) / 10_000;
        if (pay > rewardPool) pay = rewardPool;
        rewardPool -= pay;
        emit BondReleased(round, r.aggregator, bond, pay);
        _pay(r.aggregator, bond + pay);
    }

    function roundOf(uint64 round) external view returns (RoundView memory) {
        Round storage r = _rounds[round];
        return RoundView(
            r.aggregator,
            r.postedBlock,
            r.count,
            r.submissions,
            r.verdicts,
            r.credits,
            r.total,
            r.beacon,
            r.submissionsVoided,
            r.verdictsVoided,
            r.released,
            r.openChallenges
        );
    }

    // -------------------------------------------------------------------------------- internals

    function _posted(uint64 round) private view returns (Round storage r) {
        r = _rounds[round];
        if (r.aggregator == address(0)) revert NoSuchRoot(round);
    }

    function _challengeable(uint64 round) private view returns (Round storage r) {
        r = _posted(round);
        uint64 current = _ledger.currentRound();
        if (current > challengeEnd(round)) revert ChallengeWindowClosed(round, current);
        // one proven lie takes the round's bond; what else is false in it changes nothing more
        if (r.submissionsVoided || r.verdictsVoided) revert NoSuchRoot(round);
    }

    function _withVerdicts(uint64 round) private view returns (Round storage r) {
        r = _challengeable(round);
        if (r.verdicts == bytes32(0)) revert NoSuchRoot(round);
    }

    function _checkIn(SumTree.Node memory found, bytes32 root, uint128 total, uint64 round) private pure {
        if (found.hash != root || found.sum != total) revert NotInRoot(round);
    }

    function _checkSubmission(
        Round storage r,
        uint64 round,
        uint32 index,
        SignedSubmission calldata leaf,
        SumTree.Node[] calldata proof
    ) private view {
        if (index >= r.count) revert NotInRoot(round);
        _inSubmissions(r, round, SumTree.leaf(keccak256(abi.encode(leaf)), 0), index, proof);
    }

    /// @dev Reverts unless `node` at (`height`, `index`) of the verdict root reaches it through
    /// `proof`, which is as long as the tree of `credits` leaves is deep: no leaf hides below it.
    function _inVerdicts(
        Round storage r,
        uint64 round,
        SumTree.Node memory node,
        uint256 index,
        SumTree.Node[] calldata proof,
        uint256 height
    ) private view {
        if (proof.length + height != SumTree.depth(r.credits)) revert NotInRoot(round);
        _checkIn(SumTree.rootOf(node, index, proof), r.verdicts, r.total, round);
    }

    function _inSubmissions(
        Round storage r,
        uint64 round,
        SumTree.Node memory node,
        uint256 index,
        SumTree.Node[] calldata proof
    ) private view {
        if (proof.length != SumTree.depth(r.count)) revert NotInRoot(round);
        _checkIn(SumTree.rootOf(node, index, proof), r.submissions, 0, round);
    }

    /// @dev Why a submission leaf is not a submission the ledger's submit would take from its
    /// producer ("" when it is): the judge's word (RoundJudge.forged).
    function _forged(uint64 round, SignedSubmission calldata leaf) private view returns (string memory) {
        return judge.forged(round, leaf);
    }

    /// @dev Why a credit leaf is false against its submission and votes ("" when it holds).
    function _creditLie(
        uint64 round,
        Round storage r,
        Credit calldata credit,
        SignedSubmission calldata sub,
        SignedVote[] calldata votes
    ) private view returns (string memory) {
        // a round of a producer is paid by one lane: v4's submit window closed before the
        // submission root was posted, so the aggregator knew
        if (_ledger.hasSubmitted(round, credit.producer)) return "a credit the v4 lane holds";
        Messages.Submission calldata s = sub.submission;
        if (
            credit.producer != sub.producer || credit.digest != s.digest || credit.score != s.score
                || credit.signal != s.signal
        ) return "a credit that is not its submission's";
        if (bytes(_forged(round, sub)).length != 0) return "a credit of a forged submission";
        // the votes: the judge's (a contract of the book's own, for the book's size)
        return judge.votesLie(
            round, r.postedBlock, r.beacon, credit.producer, credit.digest, credit.score, credit.signal, s.rollouts, votes
        );
    }

    /// @dev Voids the submission root (and so the round) or the verdict root, and pays the bond:
    /// half to `prover`, half into the ledger's reward pool.
    function _void(Round storage r, uint64 round, bool submissions, string memory lie, address prover) private {
        if (submissions) r.submissionsVoided = true;
        else r.verdictsVoided = true;
        uint256 half = bond / 2;
        emit LieProven(round, r.aggregator, prover, lie, half);
        _ledger.fund{value: bond - half}();
        _pay(prover, half);
    }
}
