// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// @title SwarmLedger
/// @notice The public memory of a SAPO swarm: who staked, which rollout batch (by its sha256) each
/// node published in each round, the score it claimed, what the peers who re-verified the batch
/// attested, what was credited, slashed and paid. It is also the swarm's clock (rounds derive from
/// block time) and its bulletin board (nodes find each other's batches through its events).
/// @dev No owner, no admin function, no upgrade path: every parameter is fixed at deployment.
/// A batch of round r may be submitted until round r + submitRounds (slow hardware submits late
/// rather than never) and attested until round r + submitRounds + challengeRounds; after that its
/// credit is final. A submission's claimed score is credited while the stake of the peers who
/// disputed it does not outweigh the stake of those who agreed; a disputed submission is slashed
/// at settlement, and the round's reward is split pro rata.
contract SwarmLedger {
    // ------------------------------------------------------------------ constants and parameters

    /// @notice A verifier reward of 1.0 on one rollout, in score units.
    uint256 public constant SCORE_SCALE = 10_000;
    /// @notice The longest metadata string a node may publish, in bytes.
    uint256 public constant MAX_METADATA_BYTES = 1024;
    uint256 private constant BPS = 10_000;
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
    uint64 public immutable genesis;

    // ------------------------------------------------------------------------------------ storage
    //
    // Packed for the two hot paths, submit and attest, which touch as few slots as possible:
    // - submit reads the node's slot 0 (stake, uint96 wei: 7.9e10 ether) and writes nothing of
    //   the node: per-node counters (submissions, credited totals) are derivable from events and
    //   submissionOf, so audits read them there instead of every submit paying to keep them.
    // - Submission slot 1 holds the batch size, the claim and both attestation tallies. Tallies
    //   count stake in gwei (uint64: 1.8e10 ether) so that both fit beside the claim; a stake is
    //   counted at its whole gwei (minStake is at least 1 gwei).
    // - Round is one slot: the credited total and the number of submissions.

    struct Node {
        uint96 active;
        uint96 unbonding;
        uint64 unbondingEnd;
        // slot 1
        bool registered;
        uint128 totalPaid;
        // slot 2+
        string metadata;
    }

    struct Submission {
        bytes32 digest;
        // slot 1
        uint32 rollouts;
        uint64 claimed;
        uint64 agreeGwei;
        uint64 disputeGwei;
        uint16 attestations;
        bool settled;
        bool paid;
    }

    struct Round {
        uint96 totalCredited;
        uint32 submissions;
    }

    /// @notice A node as audits see it; stakes in wei, scores in SCORE_SCALE units.
    struct NodeView {
        bool registered;
        uint256 activeStake;
        uint256 unbonding;
        uint64 unbondingEnd;
        string metadata;
        uint256 totalPaid;
    }

    /// @notice A submission as audits see it; stakes in wei (counted at whole gwei).
    struct SubmissionView {
        bytes32 digest;
        uint32 rollouts;
        uint64 claimed;
        uint256 agreeStake;
        uint256 disputeStake;
        uint16 attestations;
        uint64 credited;
        bool settled;
        uint256 paid;
    }

    mapping(address => Node) private _nodes;
    mapping(uint64 => mapping(address => Submission)) private _submissions;
    mapping(uint64 => Round) private _rounds;
    mapping(address => mapping(uint64 => mapping(address => bool))) private _attested;
    address[] private _nodeList;

    uint128 private _totalActive;
    uint128 private _totalUnbonding;
    /// @notice Wei available to pay rewards.
    uint256 public rewardPool;
    /// @notice Wei ever added to the pool by `fund`.
    uint256 public totalFunded;
    /// @notice Wei ever moved from stake into the pool by slashing.
    uint256 public totalSlashed;
    /// @notice Wei ever paid out by `claim`.
    uint256 public totalPaidOut;

    // ------------------------------------------------------------------------------------- events

    event Registered(address indexed node, uint256 stake, string metadata);
    event StakeAdded(address indexed node, uint256 amount, uint256 activeStake);
    event UnstakeRequested(address indexed node, uint256 amount, uint256 unbonding, uint64 unbondingEnd);
    event Withdrawn(address indexed node, uint256 amount);
    event MetadataSet(address indexed node, string metadata);
    event Submitted(uint64 indexed round, address indexed node, bytes32 digest, uint32 rollouts, uint64 score);
    event Attested(
        uint64 indexed round, address indexed node, address indexed attester, uint64 score, bool agrees
    );
    event CreditChanged(uint64 indexed round, address indexed node, bool credited, uint256 roundTotalCredited);
    event Settled(uint64 indexed round, address indexed node, bool disputed, uint256 slashed);
    event Slashed(address indexed node, uint64 indexed round, uint256 amount);
    event Claimed(address indexed node, uint256 amount, uint64[] rounds);
    event Funded(address indexed from, uint256 amount);

    // ------------------------------------------------------------------------------------- errors

    error InvalidParameter(string name);
    error AlreadyRegistered(address node);
    error NotRegistered(address node);
    error StakeTooLow(uint256 stake, uint256 minStake);
    error StakeTooHigh(uint256 stake);
    error MetadataTooLong(uint256 length, uint256 max);
    error ZeroAmount();
    error InsufficientActiveStake(uint256 requested, uint256 active);
    error NothingToWithdraw();
    error StillUnbonding(uint64 until);
    error RoundNotOpen(uint64 round, uint64 current);
    error AlreadySubmitted(uint64 round, address node);
    error ZeroDigest();
    error ZeroRollouts();
    error ScoreOutOfRange(uint64 score, uint256 max);
    error SelfAttestation(address node);
    error NoSubmission(uint64 round, address node);
    error ChallengeWindowClosed(uint64 round, uint64 current);
    error AlreadyAttested(uint64 round, address node, address attester);
    error TooManyAttestations(uint64 round, address node);
    error RoundNotFinal(uint64 round, uint64 current);
    error AlreadySettled(uint64 round, address node);
    error AlreadyClaimed(uint64 round, address node);
    error NothingToClaim();
    error PoolInsufficient(uint256 needed, uint256 available);
    error TransferFailed(address to, uint256 amount);

    // -------------------------------------------------------------------------------- constructor

    /// @param roundLength_ Seconds per round (> 0).
    /// @param minStake_ Least active stake, in wei, to submit or attest (>= 1 gwei).
    /// @param unbondingPeriod_ Seconds between `requestUnstake` and `withdraw`.
    /// @param challengeRounds_ Rounds, after the submission window, during which a submission can
    /// be attested.
    /// @param submitRounds_ Rounds after a round during which its batches are still accepted (>= 1).
    /// @param rewardPerRound_ Wei split pro rata among a round's credited submissions.
    /// @param slashBps_ Share of a disputed node's stake moved to the reward pool at settlement.
    /// @param agreeToleranceBps_ Largest attested-vs-claimed gap that still agrees, in bps of the
    /// batch's maximum score.
    /// @param catalogDigest_ sha256 of the canonical task catalog nodes must draw tasks from.
    constructor(
        uint64 roundLength_,
        uint256 minStake_,
        uint64 unbondingPeriod_,
        uint64 challengeRounds_,
        uint64 submitRounds_,
        uint256 rewardPerRound_,
        uint16 slashBps_,
        uint16 agreeToleranceBps_,
        bytes32 catalogDigest_
    ) {
        if (roundLength_ == 0) revert InvalidParameter("roundLength");
        if (minStake_ < GWEI || minStake_ > type(uint96).max) revert InvalidParameter("minStake");
        if (challengeRounds_ == 0) revert InvalidParameter("challengeRounds");
        if (submitRounds_ == 0 || submitRounds_ > 10_000) revert InvalidParameter("submitRounds");
        if (slashBps_ > BPS) revert InvalidParameter("slashBps");
        if (agreeToleranceBps_ > BPS) revert InvalidParameter("agreeToleranceBps");
        if (catalogDigest_ == bytes32(0)) revert InvalidParameter("catalogDigest");
        // Stake that was active when a submission was made (as early as its round) must still be
        // here when it can be slashed: after the submission and challenge windows, plus a
        // settlement period as long as the challenge window.
        if (
            uint256(unbondingPeriod_)
                < (uint256(submitRounds_) + 2 * uint256(challengeRounds_) + 1) * roundLength_
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
        genesis = uint64(block.timestamp);
    }

    // -------------------------------------------------------------------------------------- clock

    /// @notice The round now: (block.timestamp - genesis) / roundLength.
    /// @return The current round number.
    function currentRound() public view returns (uint64) {
        return uint64((block.timestamp - genesis) / roundLength);
    }

    /// @notice The seed a node's tasks for a round are drawn from; nobody picks easy tasks and
    /// anyone can regenerate them.
    /// @param round The round.
    /// @param node The node.
    /// @return keccak256(abi.encode(chainid, this ledger, round, node)).
    function taskSeed(uint64 round, address node) external view returns (bytes32) {
        return keccak256(abi.encode(block.chainid, address(this), round, node));
    }

    // -------------------------------------------------------------------------------------- stake

    /// @notice Registers the caller as a node with msg.value as its stake.
    /// @param metadata A short JSON string: model, IPFS peer id and addresses, client version.
    function register(string calldata metadata) external payable {
        Node storage n = _nodes[msg.sender];
        if (n.registered) revert AlreadyRegistered(msg.sender);
        if (msg.value < minStake) revert StakeTooLow(msg.value, minStake);
        if (msg.value > type(uint96).max) revert StakeTooHigh(msg.value);
        if (bytes(metadata).length > MAX_METADATA_BYTES) {
            revert MetadataTooLong(bytes(metadata).length, MAX_METADATA_BYTES);
        }
        n.registered = true;
        n.active = uint96(msg.value);
        n.metadata = metadata;
        _nodeList.push(msg.sender);
        _totalActive += uint128(msg.value);
        emit Registered(msg.sender, msg.value, metadata);
    }

    /// @notice Adds msg.value to the caller's active stake.
    function addStake() external payable {
        Node storage n = _nodes[msg.sender];
        if (!n.registered) revert NotRegistered(msg.sender);
        if (msg.value == 0) revert ZeroAmount();
        uint256 active = uint256(n.active) + msg.value;
        if (active > type(uint96).max) revert StakeTooHigh(active);
        n.active = uint96(active);
        _totalActive += uint128(msg.value);
        emit StakeAdded(msg.sender, msg.value, active);
    }

    /// @notice Moves `amount` of active stake into unbonding; the whole unbonding amount frees at
    /// now + unbondingPeriod (the clock restarts). Unbonding stake can still be slashed.
    /// @param amount Wei to unbond.
    function requestUnstake(uint256 amount) external {
        Node storage n = _nodes[msg.sender];
        if (!n.registered) revert NotRegistered(msg.sender);
        if (amount == 0) revert ZeroAmount();
        if (amount > n.active) revert InsufficientActiveStake(amount, n.active);
        n.active -= uint96(amount);
        n.unbonding += uint96(amount);
        uint64 end = uint64(block.timestamp) + unbondingPeriod;
        n.unbondingEnd = end;
        _totalActive -= uint128(amount);
        _totalUnbonding += uint128(amount);
        emit UnstakeRequested(msg.sender, amount, n.unbonding, end);
    }

    /// @notice Pays out the caller's unbonding stake once its clock has run. The unbonding period
    /// outlasts a challenge window plus a settlement period, so stake that backed a submission
    /// can still be slashed if that submission ends disputed.
    function withdraw() external {
        Node storage n = _nodes[msg.sender];
        uint256 amount = n.unbonding;
        if (amount == 0) revert NothingToWithdraw();
        if (block.timestamp < n.unbondingEnd) revert StillUnbonding(n.unbondingEnd);
        n.unbonding = 0;
        _totalUnbonding -= uint128(amount);
        emit Withdrawn(msg.sender, amount);
        _send(msg.sender, amount);
    }

    /// @notice Replaces the caller's published metadata.
    /// @param metadata A short JSON string (at most MAX_METADATA_BYTES).
    function setMetadata(string calldata metadata) external {
        Node storage n = _nodes[msg.sender];
        if (!n.registered) revert NotRegistered(msg.sender);
        if (bytes(metadata).length > MAX_METADATA_BYTES) {
            revert MetadataTooLong(bytes(metadata).length, MAX_METADATA_BYTES);
        }
        n.metadata = metadata;
        emit MetadataSet(msg.sender, metadata);
    }

    // ---------------------------------------------------------------------------------- rollouts

    /// @notice Records the caller's rollout batch for a round: its sha256 (the CIDv1 of the batch
    /// is derived from it), its number of rollouts, and the summed verifier score it claims.
    /// @param round A round from currentRound() - submitRounds to currentRound().
    /// @param digest sha256 of the canonical batch bytes.
    /// @param rollouts Completions in the batch (questions x completions), > 0.
    /// @param score Sum of every rollout's verifier reward, at most rollouts * SCORE_SCALE.
    function submit(uint64 round, bytes32 digest, uint32 rollouts, uint64 score) external {
        uint64 current = currentRound();
        if (round > current || current - round > submitRounds) revert RoundNotOpen(round, current);
        Node storage n = _nodes[msg.sender];
        _requireStaked(n);
        Submission storage s = _submissions[round][msg.sender];
        if (s.rollouts != 0) revert AlreadySubmitted(round, msg.sender);
        if (digest == bytes32(0)) revert ZeroDigest();
        if (rollouts == 0) revert ZeroRollouts();
        uint256 maxScore = uint256(rollouts) * SCORE_SCALE;
        if (score > maxScore) revert ScoreOutOfRange(score, maxScore);

        s.digest = digest;
        s.rollouts = rollouts;
        s.claimed = score;
        Round storage r = _rounds[round];
        r.totalCredited += uint96(score);
        r.submissions += 1;
        emit Submitted(round, msg.sender, digest, rollouts, score);
    }

    /// @notice Reports the score the caller computed when it re-verified `node`'s batch. It agrees
    /// when within the tolerance of the claim; the caller's active stake joins that side's tally,
    /// which may move the submission's credit either way.
    /// @param round The submission's round; attestable while currentRound() <= round +
    /// submitRounds + challengeRounds.
    /// @param node The node whose batch was re-verified (not the caller).
    /// @param score The summed verifier score the caller computed, at most rollouts * SCORE_SCALE.
    function attest(uint64 round, address node, uint64 score) external {
        if (node == msg.sender) revert SelfAttestation(node);
        Node storage a = _nodes[msg.sender];
        _requireStaked(a);
        Submission storage s = _submissions[round][node];
        uint256 rollouts = s.rollouts;
        if (rollouts == 0) revert NoSubmission(round, node);
        uint64 current = currentRound();
        if (current > round + submitRounds + challengeRounds) {
            revert ChallengeWindowClosed(round, current);
        }
        uint256 maxScore = rollouts * SCORE_SCALE;
        if (score > maxScore) revert ScoreOutOfRange(score, maxScore);
        mapping(address => bool) storage seen = _attested[msg.sender][round];
        if (seen[node]) revert AlreadyAttested(round, node, msg.sender);
        if (s.attestations == type(uint16).max) revert TooManyAttestations(round, node);

        seen[node] = true;
        uint64 claimed = s.claimed;
        uint256 gap = score > claimed ? score - claimed : claimed - score;
        // |score - claimed| <= maxScore * tol / BPS, exactly (no rounding): scale both sides.
        bool agrees = gap * BPS <= maxScore * agreeToleranceBps;
        bool wasCredited = s.disputeGwei <= s.agreeGwei;
        uint64 weight = uint64(a.active / GWEI);
        if (agrees) s.agreeGwei += weight;
        else s.disputeGwei += weight;
        s.attestations += 1;
        bool credited = s.disputeGwei <= s.agreeGwei;
        if (credited != wasCredited) _moveCredit(round, node, claimed, credited);
        emit Attested(round, node, msg.sender, score, agrees);
    }

    /// @dev Adds or removes a submission's claim from its round's credited total.
    function _moveCredit(uint64 round, address node, uint64 claimed, bool credited) private {
        Round storage r = _rounds[round];
        if (credited) r.totalCredited += claimed;
        else r.totalCredited -= claimed;
        emit CreditChanged(round, node, credited, r.totalCredited);
    }

    /// @notice Closes a submission once its challenge window has passed; a disputed one loses
    /// slashBps of its node's stake (active first, then unbonding) to the reward pool.
    /// @param round The submission's round.
    /// @param node The submitting node.
    function settle(uint64 round, address node) external {
        Submission storage s = _submissions[round][node];
        if (s.rollouts == 0) revert NoSubmission(round, node);
        uint64 current = currentRound();
        if (current <= round + submitRounds + challengeRounds) revert RoundNotFinal(round, current);
        if (s.settled) revert AlreadySettled(round, node);

        s.settled = true;
        bool disputed = s.disputeGwei > s.agreeGwei;
        uint256 slashed;
        if (disputed) {
            Node storage n = _nodes[node];
            uint256 active = n.active;
            uint256 unbonding = n.unbonding;
            slashed = ((active + unbonding) * slashBps) / BPS;
            uint256 fromActive = slashed < active ? slashed : active;
            uint256 fromUnbonding = slashed - fromActive;
            n.active = uint96(active - fromActive);
            n.unbonding = uint96(unbonding - fromUnbonding);
            _totalActive -= uint128(fromActive);
            _totalUnbonding -= uint128(fromUnbonding);
            rewardPool += slashed;
            totalSlashed += slashed;
            emit Slashed(node, round, slashed);
        }
        emit Settled(round, node, disputed, slashed);
    }

    // ------------------------------------------------------------------------------------ rewards

    /// @notice Adds msg.value to the reward pool.
    function fund() external payable {
        if (msg.value == 0) revert ZeroAmount();
        rewardPool += msg.value;
        totalFunded += msg.value;
        emit Funded(msg.sender, msg.value);
    }

    /// @notice Pays the caller, in one transfer, its share of each listed round: rewardPerRound *
    /// credited / the round's total credited. Every round must be final, carry a submission of the
    /// caller and not be claimed yet; nothing is paid unless the pool covers the whole sum.
    /// @param roundList The rounds to claim.
    /// @return amount The wei paid.
    function claim(uint64[] calldata roundList) external returns (uint256 amount) {
        uint64 current = currentRound();
        for (uint256 i; i < roundList.length; ++i) {
            uint64 round = roundList[i];
            Submission storage s = _submissions[round][msg.sender];
            if (s.rollouts == 0) revert NoSubmission(round, msg.sender);
            if (current <= round + submitRounds + challengeRounds) revert RoundNotFinal(round, current);
            if (s.paid) revert AlreadyClaimed(round, msg.sender);
            s.paid = true;
            amount += _share(s, round);
        }
        if (amount == 0) revert NothingToClaim();
        if (amount > rewardPool) revert PoolInsufficient(amount, rewardPool);
        rewardPool -= amount;
        totalPaidOut += amount;
        _nodes[msg.sender].totalPaid += uint128(amount);
        emit Claimed(msg.sender, amount, roundList);
        _send(msg.sender, amount);
    }

    /// @notice What `claim` would pay `node` for the listed rounds, skipping rounds that are not
    /// final, have no submission of the node, or were claimed.
    /// @param node The node.
    /// @param roundList The rounds.
    /// @return amount Wei.
    function claimable(address node, uint64[] calldata roundList) external view returns (uint256 amount) {
        uint64 current = currentRound();
        for (uint256 i; i < roundList.length; ++i) {
            uint64 round = roundList[i];
            Submission storage s = _submissions[round][node];
            if (s.rollouts == 0 || s.paid || current <= round + submitRounds + challengeRounds) continue;
            amount += _share(s, round);
        }
    }

    // -------------------------------------------------------------------------------- audit views

    /// @notice A node's stake, metadata and payouts (its submissions and credit: Submitted events
    /// and submissionOf).
    /// @param node The node.
    /// @return info The node's record.
    function nodeInfo(address node) external view returns (NodeView memory info) {
        Node storage n = _nodes[node];
        info = NodeView({
            registered: n.registered,
            activeStake: n.active,
            unbonding: n.unbonding,
            unbondingEnd: n.unbondingEnd,
            metadata: n.metadata,
            totalPaid: n.totalPaid
        });
    }

    /// @notice One submission: digest, claim, tallies, credit, settlement and payout.
    /// @param round The round.
    /// @param node The node.
    /// @return info The submission (all zero when there is none).
    function submissionOf(uint64 round, address node) external view returns (SubmissionView memory info) {
        Submission storage s = _submissions[round][node];
        bool credited = s.disputeGwei <= s.agreeGwei;
        info = SubmissionView({
            digest: s.digest,
            rollouts: s.rollouts,
            claimed: s.claimed,
            agreeStake: uint256(s.agreeGwei) * GWEI,
            disputeStake: uint256(s.disputeGwei) * GWEI,
            attestations: s.attestations,
            credited: credited ? s.claimed : 0,
            settled: s.settled,
            paid: s.paid ? _share(s, round) : 0
        });
    }

    /// @notice A round's submission count and credited total, and whether its credit is final.
    /// @param round The round.
    /// @return submissions Number of submissions.
    /// @return totalCredited Sum of the credited claims.
    /// @return isFinal Whether currentRound() > round + submitRounds + challengeRounds.
    function roundInfo(uint64 round) external view returns (uint32 submissions, uint256 totalCredited, bool isFinal) {
        Round storage r = _rounds[round];
        return (r.submissions, r.totalCredited, currentRound() > round + submitRounds + challengeRounds);
    }

    /// @notice Whether `attester` attested `node`'s submission of `round`.
    /// @param attester The attester.
    /// @param round The round.
    /// @param node The node.
    /// @return True once attested.
    function hasAttested(address attester, uint64 round, address node) external view returns (bool) {
        return _attested[attester][round][node];
    }

    /// @notice The number of registered nodes.
    /// @return The count.
    function nodeCount() external view returns (uint256) {
        return _nodeList.length;
    }

    /// @notice Registered nodes in registration order, `limit` from `offset`.
    /// @param offset First index.
    /// @param limit Most addresses returned.
    /// @return page The addresses.
    function nodesPage(uint256 offset, uint256 limit) external view returns (address[] memory page) {
        uint256 total = _nodeList.length;
        if (offset >= total) return new address[](0);
        uint256 end = offset + limit > total ? total : offset + limit;
        page = new address[](end - offset);
        for (uint256 i = offset; i < end; ++i) {
            page[i - offset] = _nodeList[i];
        }
    }

    /// @notice All stake held: active plus unbonding, in wei.
    /// @return The sum.
    function totalStaked() external view returns (uint256) {
        return uint256(_totalActive) + _totalUnbonding;
    }

    /// @notice Active and unbonding stake held, separately, in wei.
    /// @return active Sum of active stake.
    /// @return unbonding Sum of unbonding stake.
    function stakeTotals() external view returns (uint256 active, uint256 unbonding) {
        return (_totalActive, _totalUnbonding);
    }

    // ---------------------------------------------------------------------------------- internals

    function _requireStaked(Node storage n) private view {
        uint256 active = n.active;
        if (active < minStake) {
            if (!n.registered) revert NotRegistered(msg.sender);
            revert StakeTooLow(active, minStake);
        }
    }

    function _share(Submission storage s, uint64 round) private view returns (uint256) {
        if (s.claimed == 0 || s.disputeGwei > s.agreeGwei) return 0;
        return (rewardPerRound * s.claimed) / _rounds[round].totalCredited;
    }

    function _send(address to, uint256 amount) private {
        (bool ok,) = to.call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }
}
