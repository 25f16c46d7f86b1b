// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// @title SwarmLedger
/// @notice The public memory of a SAPO swarm: who staked, which rollout batch (by its sha256) each
/// node published in each round, the score it claimed, what the peers who re-verified the batch
/// attested, what was credited, slashed and paid. It is also the swarm's clock (rounds derive from
/// block time) and its bulletin board (nodes find each other's batches through its events).
/// @dev No owner, no admin function, no upgrade path: every parameter is fixed at deployment,
/// the model families it checks included. A family is the content id of a base model's weights:
/// a checker re-runs a batch's model, so it must hold that exact base. Each node registers in one
/// family for the life of its address, and a batch's committee is drawn from its producer's
/// family alone, each seat won with probability stake / the family's active stake. Families are
/// fixed at deployment because a family anyone could open would be a committee its opener owns:
/// two addresses in a family of their own would credit each other's batches. The stake rules hold
/// within each family; what a family needs to be safe is its own stake's arithmetic (docs/credit.md).
/// A batch of round r may be submitted until round r + submitRounds (slow hardware submits late
/// rather than never) and checked until round r + submitRounds + challengeRounds; after that its
/// credit is final. Who checks a batch is drawn from its own beacon (the hash of the block after
/// the one that holds the submission, unknown when it is sent, so a producer cannot pick the
/// identity or the moment that draws friendly checkers). Each staked node draws its seats on
/// the committee of a batch of its family: `checkers` independent trials, each won with
/// probability its stake / all active stake of the family, both as of the submission's block (a snapshot: stake moved once the beacon may
/// be known changes nothing), so a node holds Binomial(checkers, its share) seats, a committee
/// about `checkers` seats in all, and a vote counts once per seat. A holder of a share s of
/// stake thus holds about s of a committee's seats, not the verdict (a vote that weighed its
/// stake, by a node drawn with probability growing with its stake, counted stake twice). No evidence, no credit: a submission earns only once at least `quorum` distinct drawn
/// checkers agreed with it and their seats are at least those of the checkers who disputed it
/// plus those who could not fetch it. What it earns is its learning signal (the spread of
/// rewards within its groups, an integer every checker recomputes exactly, so agreement on it is
/// exact and the credited signal is what the agreeing checkers recomputed), not its score
/// (correct answers anyone can regenerate). A disputed submission is slashed at settlement; an
/// unavailable one is not (the voter's network may be at fault). The round's reward is split
/// pro rata to the credited signal.
contract SwarmLedger {
    // ------------------------------------------------------------------ constants and parameters

    /// @notice A verifier reward of 1.0 on one rollout, in score units.
    uint256 public constant SCORE_SCALE = 10_000;
    /// @notice The longest metadata string a node may publish, in bytes.
    uint256 public constant MAX_METADATA_BYTES = 1024;
    /// @notice The most model families a ledger checks.
    uint256 public constant MAX_FAMILIES = 255;
    /// @notice The most rollouts one submission may hold: what the batch format holds at most
    /// (1,024 questions of 64 completions), so a claim no batch can back is refused at submit.
    uint256 public constant MAX_ROLLOUTS = 65_536;
    /// @notice Blocks the EVM keeps hashes of; a beacon not drawn within them lapses.
    uint256 public constant BLOCKHASH_WINDOW = 256;
    /// @notice The most seat trials per node (a vote's seats and the tallies fit their fields).
    uint256 public constant MAX_SEATS = type(uint8).max;
    /// @notice The share of what a `settle` or `settleVotes` slashes that is paid to its caller,
    /// in basis points (none when the caller is the node slashed): settlement needs nobody's
    /// goodwill, since the party it pays is whoever sends it first.
    uint256 public constant SETTLER_CUT_BPS = 1_000;
    uint256 private constant BPS = 10_000;
    uint256 private constant GWEI = 1e9;
    uint8 private constant SETTLED = 1;
    uint8 private constant PAID = 2;
    uint8 private constant APPEALED = 4; // beside appealBlock: the hot checks read slot 1 only
    uint8 private constant VOTER_APPEAL = 8; // appealed by a voter, not by its producer
    // A vote's side, and a voter's record of a submission: the first committee's side in bits
    // 0-1, the appeal's in bits 2-3, VOTE_SETTLED once judged.
    uint256 private constant AGREE = 1;
    uint256 private constant DISPUTE = 2;
    uint256 private constant UNAVAILABLE = 3;
    uint8 private constant VOTE_SETTLED = 16;
    uint8 private constant VOTE_APPELLANT = 32; // this voter appealed the first verdict

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

    // ------------------------------------------------------------------------------------ storage
    //
    // Packed for the two hot paths, submit and attest, which touch as few slots as possible:
    // - submit reads the node's slot 0 (stake, uint96 wei: 7.9e10 ether) and writes nothing of
    //   the node: per-node counters (submissions, credited totals) are derivable from events and
    //   submissionOf, so audits read them there instead of every submit paying to keep them.
    // - Submission slot 1 holds all a submit writes besides the digest: the batch size, score,
    //   signal, its block (the stake snapshot; the beacon block is the next one) and the three
    //   vote tallies, in seats (uint16: at most 255 votes of 255 seats), with their counts.
    //   Slot 2 holds the drawn beacon.
    // - Stake history: one checkpoint (block, value) per block in which a node's active stake or
    //   the total changed, so the draw reads stake as of a submission's block. Stake moves
    //   rarely; a vote reads the last checkpoint first and binary-searches only past it.
    // - Round is one slot, the credited total, written only when credit moves: submit writes
    //   nothing of the round (a round's submissions are its Submitted events).

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

    // A committee's tally, packed in 72 bits (see _add): seats agreeing, disputing and
    // unavailable (16 bits each: at most 255 votes of 255 seats), then the three vote counts
    // (8 bits each).
    struct Submission {
        bytes32 digest;
        // slot 1
        uint24 rollouts;
        uint40 score;
        uint40 signal;
        uint72 votes; // the first committee's tally
        uint8 flags; // SETTLED | PAID | APPEALED
        uint40 snapshotBlock; // the submission's block: stake is read as of it
        uint32 unstakes; // its node's unstake requests before it (did its unbonding stake back it?)
        // slot 2
        uint88 beacon; // the beacon block's hash (truncated), once drawn; 0 before
        uint40 appealBlock; // the block of its producer's appeal; 0 when not appealed
        uint72 appealVotes; // the appeal committee's tally
        // slot 3
        uint88 appealBeacon; // the appeal's beacon, once drawn
    }

    struct Checkpoint {
        uint64 fromBlock;
        uint192 value;
    }

    struct Round {
        uint96 totalCredited;
    }

    /// @notice A node as audits see it; stakes in wei, scores in SCORE_SCALE units.
    struct NodeView {
        bool registered;
        uint256 activeStake;
        uint256 unbonding;
        uint64 unbondingEnd;
        string metadata;
        uint256 totalPaid;
        uint64 stakeBlock; // the block of the last change to its active stake
        uint32 unsettled; // its submissions not settled yet
        uint32 backing; // of those, the ones its unbonding stake backed: withdraw waits for them
        bytes32 family; // the base model it registered with (0 when not registered)
    }

    /// @notice A submission as audits see it; score and signal in SCORE_SCALE units; votes in
    /// seats (a checker's vote counts once per seat it holds) and in distinct checkers.
    struct SubmissionView {
        bytes32 digest;
        uint32 rollouts;
        uint64 score;
        uint64 signal;
        uint16 agreeSeats;
        uint16 disputeSeats;
        uint16 unavailableSeats;
        uint16 agrees;
        uint16 disputes;
        uint16 unavailable;
        uint64 credited;
        bool settled;
        uint256 paid;
        uint64 snapshotBlock; // the submission's block: its committee is drawn from stake then
        uint64 appealBlock; // the block of its producer's appeal (0: none); then its verdict and
        // credit are the appeal committee's (appealOf)
    }

    /// @notice A submission's appeal: its block, the beacon that draws its committee (as
    /// beaconOf), and that committee's votes, in seats and in distinct checkers.
    struct AppealView {
        uint64 appealBlock;
        uint256 beacon;
        uint64 beaconBlock;
        bool ready;
        bool drawn;
        uint16 agreeSeats;
        uint16 disputeSeats;
        uint16 unavailableSeats;
        uint16 agrees;
        uint16 disputes;
        uint16 unavailable;
    }

    mapping(address => Node) private _nodes;
    mapping(uint64 => mapping(address => Submission)) private _submissions;
    mapping(uint64 => Round) private _rounds;
    mapping(address => mapping(uint64 => mapping(address => uint8))) private _votes;
    address[] private _nodeList;
    mapping(address => Checkpoint[]) private _stakeHistory;
    Checkpoint[] private _totalHistory;
    bytes32[] private _families;
    mapping(bytes32 => uint256) private _familySlot; // index in _families + 1; 0: not a family
    mapping(uint256 => Checkpoint[]) private _familyHistory;
    mapping(uint256 => uint256) private _familyActive;

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
    /// @notice Wei ever paid from the pool to the callers of `settle` and `settleVotes`.
    uint256 public totalSettlerPaid;

    // ------------------------------------------------------------------------------------- events

    event Registered(address indexed node, uint256 stake, string metadata, bytes32 indexed family);
    event StakeAdded(address indexed node, uint256 amount, uint256 activeStake);
    event UnstakeRequested(address indexed node, uint256 amount, uint256 unbonding, uint64 unbondingEnd);
    event Withdrawn(address indexed node, uint256 amount);
    event MetadataSet(address indexed node, string metadata);
    event Submitted(
        uint64 indexed round, address indexed node, bytes32 digest, uint32 rollouts, uint64 score, uint64 signal
    );
    /// @param findings What the checker found, as bits its client documents (0: nothing wrong);
    /// recorded for audits, not interpreted here.
    event Attested(
        uint64 indexed round,
        address indexed node,
        address indexed attester,
        uint64 score,
        uint64 signal,
        bool agrees,
        uint16 findings
    );
    event Unavailable(uint64 indexed round, address indexed node, address indexed attester);
    /// @dev Also emitted for an appeal's beacon (its beaconBlock is the appeal's block + 1).
    event BeaconDrawn(uint64 indexed round, address indexed node, uint256 beacon, uint64 beaconBlock);
    event Appealed(uint64 indexed round, address indexed node, uint64 beaconBlock, address appellant);
    event VoteSettled(
        uint64 indexed round, address indexed node, address indexed voter, bool lost, uint256 slashed
    );
    event CreditChanged(uint64 indexed round, address indexed node, bool credited, uint256 roundTotalCredited);
    event Settled(uint64 indexed round, address indexed node, bool disputed, uint256 slashed);
    event Slashed(address indexed node, uint64 indexed round, uint256 amount);
    event Claimed(address indexed node, uint256 amount, uint64[] rounds);
    event Funded(address indexed from, uint256 amount);
    /// @dev The settler's cut of a settlement's or a judgment's slashes (SETTLER_CUT_BPS).
    event SettlerPaid(address indexed settler, uint64 indexed round, address indexed node, uint256 amount);

    // ------------------------------------------------------------------------------------- errors

    error InvalidParameter(string name);
    error AlreadyRegistered(address node);
    error UnknownFamily(bytes32 family);
    error NotRegistered(address node);
    error StakeTooLow(uint256 stake, uint256 minStake);
    error StakeTooHigh(uint256 stake);
    error MetadataTooLong(uint256 length, uint256 max);
    error ZeroAmount();
    error InsufficientActiveStake(uint256 requested, uint256 active);
    error NothingToWithdraw();
    error StillUnbonding(uint64 until);
    error UnsettledSubmissions(address node, uint32 count);
    error RoundNotOpen(uint64 round, uint64 current);
    error AlreadySubmitted(uint64 round, address node);
    error ZeroDigest();
    error ZeroRollouts();
    error ScoreOutOfRange(uint64 score, uint256 max);
    error SignalOutOfRange(uint64 signal, uint256 max);
    error TooManyRollouts(uint32 rollouts, uint256 max);
    error NotDrawn(uint64 round, address node, address checker);
    error BeaconNotReady(uint64 round, address node, uint64 beaconBlock);
    error BeaconLapsed(uint64 round, address node, uint64 beaconBlock);
    error BeaconAlreadyDrawn(uint64 round, address node);
    error SelfAttestation(address node);
    error NoSubmission(uint64 round, address node);
    error ChallengeWindowClosed(uint64 round, uint64 current);
    error AlreadyAttested(uint64 round, address node, address attester);
    error TooManyAttestations(uint64 round, address node);
    error RoundNotFinal(uint64 round, uint64 current);
    error NotAppealable(uint64 round, uint64 current);
    error AlreadyAppealed(uint64 round, address node);
    error AlreadyCredited(uint64 round, address node);
    error VoteNotLosing(uint64 round, address node, address voter);
    error SettlementWindowClosed(uint64 round, uint64 current);
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
        bytes32[] memory families_
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
        if (families_.length == 0 || families_.length > MAX_FAMILIES) revert InvalidParameter("families");
        for (uint256 i; i < families_.length; ++i) {
            bytes32 f = families_[i];
            if (f == bytes32(0) || _familySlot[f] != 0) revert InvalidParameter("families");
            _families.push(f);
            _familySlot[f] = i + 1;
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

    /// @notice Registers the caller as a node of model family `family` with msg.value as its
    /// stake. The family is fixed for the address's life: a node that runs another base registers
    /// another address (stake moved between families would pick the committees it sits on).
    /// @param metadata A short JSON string: model, IPFS peer id and addresses, client version.
    /// @param family The content id of the base model it runs: one of families().
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

    /// @notice Adds msg.value to the caller's active stake. Committees of submissions made before
    /// this block are drawn from the stake before it (stake added once a beacon may be known buys
    /// no seats).
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
        n.unstakes += 1;
        n.backing = n.unsettled; // every unsettled submission was made with this stake active
        _totalActive -= uint128(amount);
        _familyActive[n.family] -= amount;
        _totalUnbonding += uint128(amount);
        _recordStake(msg.sender, n);
        emit UnstakeRequested(msg.sender, amount, n.unbonding, end);
    }

    /// @notice Pays out the caller's unbonding stake once its clock has run and every submission
    /// it made before its last unstake request (those this stake backed) is settled: anyone may
    /// settle a final submission and `claim` settles what it claims, and the unbonding period
    /// outlasts their windows. A disputed node cannot take out the stake its slash is owed
    /// from; a node that goes on submitting with its remaining stake is not held up by those.
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
    /// is derived from it), its number of rollouts, the summed verifier score and the learning
    /// signal it claims. It earns nothing until its drawn checkers agree (see attest). The
    /// submission's beacon, which draws its checkers, is the hash of the next block.
    /// @param round A round from currentRound() - submitRounds to currentRound().
    /// @param digest sha256 of the canonical batch bytes.
    /// @param rollouts Completions in the batch (questions x completions), 1 .. MAX_ROLLOUTS.
    /// @param score Sum of every rollout's verifier reward, at most rollouts * SCORE_SCALE.
    /// @param signal The batch's learning signal (the client's documented rule), at most
    /// rollouts * SCORE_SCALE / 2 (a group of L completions carries at most L / 2 score units:
    /// half of them right): what the round's reward is split by.
    function submit(uint64 round, bytes32 digest, uint32 rollouts, uint64 score, uint64 signal) external {
        uint64 current = currentRound();
        if (round > current || current - round > submitRounds) revert RoundNotOpen(round, current);
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

    /// @notice Reports what the caller, a drawn checker of `node`'s batch, computed when it
    /// fetched and re-verified it. It agrees when the signal is exactly the claimed one (an
    /// integer every checker recomputes identically, so a claim above it, padded or inflated,
    /// is disputed however small the gap) and the score is within the tolerance of the claim;
    /// the caller's seats join that side's tally, which may move the submission's credit either
    /// way. Once the producer appealed, the votes are the appeal committee's (see appeal).
    /// @param round The submission's round; checkable while currentRound() <= round +
    /// submitRounds + challengeRounds, and once appealed until round + submitRounds +
    /// challengeRounds + appealRounds.
    /// @param node The node whose batch was re-verified (not the caller).
    /// @param score The summed verifier score the caller computed, at most rollouts * SCORE_SCALE.
    /// @param signal The learning signal the caller computed, at most rollouts * SCORE_SCALE / 2.
    /// @param findings What the caller found wrong (its client's bits; 0 when nothing), for audits.
    function attest(uint64 round, address node, uint64 score, uint64 signal, uint16 findings) external {
        (Submission storage s, uint256 seats, uint256 shift) = _checkerVote(round, node);
        uint256 maxScore = uint256(s.rollouts) * SCORE_SCALE;
        if (score > maxScore) revert ScoreOutOfRange(score, maxScore);
        if (signal > maxScore / 2) revert SignalOutOfRange(signal, maxScore / 2);
        // |score - claimed| <= maxScore * tol / BPS, exactly (no rounding): scale both sides.
        bool agrees = signal == s.signal && _gap(score, s.score) * BPS <= maxScore * agreeToleranceBps;
        _tally(s, round, node, seats, shift, agrees ? AGREE : DISPUTE);
        emit Attested(round, node, msg.sender, score, signal, agrees, findings);
    }

    /// @notice Records that the caller, a drawn checker of `node`'s batch, could not fetch it
    /// from the producer nor from any peer who attested it. Its seats count against credit
    /// (no evidence, no credit) but never slash, the producer nor the caller: the caller's own
    /// network may be at fault (the producer's recourse is its appeal).
    /// @param round The submission's round (same window as attest).
    /// @param node The producer.
    function reportUnavailable(uint64 round, address node) external {
        (Submission storage s, uint256 seats, uint256 shift) = _checkerVote(round, node);
        _tally(s, round, node, seats, shift, UNAVAILABLE);
        emit Unavailable(round, node, msg.sender);
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
        uint64 close = round + submitRounds + challengeRounds;
        if (current > (appealed ? close + appealRounds : close)) revert ChallengeWindowClosed(round, current);
        shift = appealed ? 2 : 0;
        if ((_votes[msg.sender][round][node] >> shift) & 3 != 0) revert AlreadyAttested(round, node, msg.sender);
        uint256 beacon = _drawBeacon(s, round, node, appealed);
        seats = _seats(beacon, round, node, msg.sender, s.snapshotBlock, appealed ? appealCheckers : checkers);
        if (seats == 0) revert NotDrawn(round, node, msg.sender);
    }

    /// @dev Adds the caller's seats to `side` of the voting committee's tally, records its side,
    /// and moves the submission's credit if its verdict changed.
    function _tally(Submission storage s, uint64 round, address node, uint256 seats, uint256 shift, uint256 side)
        private
    {
        bool wasCredited = _credited(s);
        if (shift == 0) s.votes = _add(s.votes, seats, side, round, node);
        else s.appealVotes = _add(s.appealVotes, seats, side, round, node);
        _votes[msg.sender][round][node] |= uint8(side << shift);
        bool credited = _credited(s);
        if (credited != wasCredited) _moveCredit(round, node, s.signal, credited);
    }

    /// @dev A tally plus one vote of `seats` on `side`: seats at bits 16 * (side - 1), the count
    /// at bits 48 + 8 * (side - 1) (at most 255 votes a side, so seats stay under 2^16).
    function _add(uint72 t, uint256 seats, uint256 side, uint64 round, address node) private pure returns (uint72) {
        uint256 i = side - 1;
        if (_count(t, i) == type(uint8).max) revert TooManyAttestations(round, node);
        return uint72(uint256(t) + (seats << (16 * i)) + (1 << (48 + 8 * i)));
    }

    /// @dev Seats of side index i (0 agree, 1 dispute, 2 unavailable) in a tally.
    function _seatsIn(uint72 t, uint256 i) private pure returns (uint256) {
        return (uint256(t) >> (16 * i)) & 0xffff;
    }

    /// @dev Votes of side index i in a tally.
    function _count(uint72 t, uint256 i) private pure returns (uint256) {
        return (uint256(t) >> (48 + 8 * i)) & 0xff;
    }

    /// @dev A tally's verdict for credit: `quorum` checkers agreed and their seats are at least
    /// those of the checkers who disputed plus those who could not fetch the batch.
    function _wins(uint72 t) private view returns (bool) {
        return _count(t, 0) >= quorum && _seatsIn(t, 0) >= _seatsIn(t, 1) + _seatsIn(t, 2);
    }

    /// @dev Whether an appeal decides `s`: it was appealed and its committee reached a verdict
    /// (credited, or more seats disputing than agreeing). One that reached none leaves the
    /// first committee's verdict standing, whichever it was.
    function _appealDecides(Submission storage s) private view returns (bool) {
        if (s.flags & APPEALED == 0) return false;
        uint72 t = s.appealVotes;
        return _wins(t) || _seatsIn(t, 1) > _seatsIn(t, 0);
    }

    /// @dev A submission earns once its deciding committee credits it: the appeal's once it
    /// reached a verdict, else the first's.
    function _credited(Submission storage s) private view returns (bool) {
        return _wins(_appealDecides(s) ? s.appealVotes : s.votes);
    }

    /// @dev Disputed: more of the deciding committee's seats disputed it than agreed. An appeal
    /// decides when its committee reached a verdict (credited or disputed); one that reached
    /// none (too few votes, or a beacon nobody drew) leaves the first committee's standing, so
    /// that an appeal nobody votes on is no escape from a dispute. `byAppeal`: the appeal's
    /// committee disputed it (slashed twice when its producer had appealed).
    function _disputed(Submission storage s) private view returns (bool disputed, bool byAppeal) {
        if (_appealDecides(s)) {
            uint72 t = s.appealVotes;
            disputed = _seatsIn(t, 1) > _seatsIn(t, 0);
            return (disputed, disputed);
        }
        uint72 first = s.votes;
        return (_seatsIn(first, 1) > _seatsIn(first, 0), false);
    }

    function _gap(uint64 x, uint64 y) private pure returns (uint256) {
        return x > y ? x - y : y - x;
    }

    /// @dev Adds or removes a submission's signal from its round's credited total.
    function _moveCredit(uint64 round, address node, uint64 signal, bool credited) private {
        Round storage r = _rounds[round];
        if (credited) r.totalCredited += signal;
        else r.totalCredited -= signal;
        emit CreditChanged(round, node, credited, r.totalCredited);
    }

    // ------------------------------------------------------------------------------- checkers

    /// @notice The seats `checker` holds on the committee of `node`'s submission of `round`; 0
    /// when it is not drawn. Anyone can recompute it: with S its active stake and T the active
    /// stake of the producer's family, both as of the submission's block (`stakeAt`,
    /// `familyStakeAt`), base =
    /// keccak256(abi.encode(beacon, round, node, checker)) and h_j = keccak256(abi.encode(base,
    /// j)) >> 128, it holds seat j (0 <= j < checkers) when h_j * T < S << 128, i.e. each seat
    /// with probability S / T. A node holds none when it is the producer, is not registered, is
    /// of another family, or its stake then or now is below minStake. 0 until the beacon is drawn.
    /// @param round The round.
    /// @param node The producer.
    /// @param checker The candidate checker.
    /// @return The number of seats (each one vote).
    function seatsOf(uint64 round, address node, address checker) public view returns (uint256) {
        return _seatsOf(round, node, checker, false);
    }

    /// @notice The seats `checker` holds on the committee of the appeal of `node`'s submission
    /// of `round`: as seatsOf, with the appeal's beacon (appealOf) and appealCheckers trials,
    /// from the same stake snapshot (the submission's block). 0 when not appealed.
    /// @param round The round.
    /// @param node The producer.
    /// @param checker The candidate checker.
    /// @return The number of seats (each one vote on the appeal).
    function appealSeatsOf(uint64 round, address node, address checker) external view returns (uint256) {
        return _seatsOf(round, node, checker, true);
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

    /// @notice Whether `checker` holds a seat on the committee of `node`'s submission of `round`
    /// (see seatsOf; the appeal's committee: appealSeatsOf).
    /// @param round The round.
    /// @param node The producer.
    /// @param checker The candidate checker.
    /// @return Whether it may attest or report the submission unavailable (window and double
    /// votes aside).
    function isChecker(uint64 round, address node, address checker) external view returns (bool) {
        return seatsOf(round, node, checker) != 0;
    }

    /// @notice A node's active stake at the end of block `blockNumber` (what the draws of that
    /// block's submissions read).
    /// @param node The node.
    /// @param blockNumber The block.
    /// @return Wei.
    function stakeAt(address node, uint256 blockNumber) external view returns (uint256) {
        return _at(_stakeHistory[node], blockNumber);
    }

    /// @notice The active stake of a family's nodes at the end of block `blockNumber`: what a
    /// draw of that block's submissions by the family's nodes divides by.
    /// @param family A family (0 when it is not one of families()).
    /// @param blockNumber The block.
    /// @return Wei.
    function familyStakeAt(bytes32 family, uint256 blockNumber) external view returns (uint256) {
        uint256 slot = _familySlot[family];
        return slot == 0 ? 0 : _at(_familyHistory[slot - 1], blockNumber);
    }

    /// @notice The model families this ledger checks, in the deployment's order.
    /// @return The content ids of their bases.
    function families() external view returns (bytes32[] memory) {
        return _families;
    }

    /// @notice All active stake at the end of block `blockNumber`.
    /// @param blockNumber The block.
    /// @return Wei.
    function totalStakeAt(uint256 blockNumber) external view returns (uint256) {
        return _at(_totalHistory, blockNumber);
    }

    /// @notice The beacon that draws the checkers of `node`'s submission of `round`: the hash of
    /// the block after the submission's. It is stored by the first vote or `drawBeacon`; one
    /// that nobody stored while the EVM still knew its block's hash (256 blocks) has lapsed for
    /// good: the submission can no longer be checked and earns nothing (a re-drawn beacon would
    /// hand its producer a new committee and new openings, chosen by waiting). It also draws
    /// which checkpoints the producer opens, for the first committee and an appeal's alike.
    /// @param round The round.
    /// @param node The producer.
    /// @return beacon The beacon (the block hash's low 88 bits; 0 while not ready).
    /// @return beaconBlock The block whose hash it is (0 when there is no submission).
    /// @return ready Whether the beacon is known (stored, or its block hash is available).
    /// @return drawn Whether it is stored (then it never lapses).
    function beaconOf(uint64 round, address node)
        public
        view
        returns (uint256 beacon, uint64 beaconBlock, bool ready, bool drawn)
    {
        Submission storage s = _submissions[round][node];
        beaconBlock = _beaconBlock(s, false);
        (beacon, ready, drawn) = _beaconAt(s.beacon, beaconBlock);
    }

    /// @notice Appeals the verdict on the caller's submission of `round` to a committee of
    /// appealCheckers seat trials per node, drawn afresh from the hash of the next block and the
    /// same stake snapshot; that committee's votes replace the first one's (its verdict is
    /// final, and judges the first committee's votes too). Open in the rounds after the
    /// challenge window but the last appeal round, to a submission not credited by then (its
    /// client files it when its own re-check of the batch agrees with its claim). A lost appeal
    /// (the appeal committee disputes it) slashes twice slashBps at settlement: appeals are not
    /// a free second draw for a bad batch. The openings stay those of the first beacon.
    /// @param round The round of the caller's submission.
    function appeal(uint64 round) external {
        Submission storage s = _submissions[round][msg.sender];
        if (s.rollouts == 0) revert NoSubmission(round, msg.sender);
        uint64 current = currentRound();
        uint64 close = round + submitRounds + challengeRounds;
        if (current <= close || current >= close + appealRounds) revert NotAppealable(round, current);
        if (s.appealBlock != 0) revert AlreadyAppealed(round, msg.sender);
        if (_credited(s)) revert AlreadyCredited(round, msg.sender);
        _drawBeacon(s, round, msg.sender, false); // the openings: a lapsed beacon cannot be checked
        s.appealBlock = uint40(block.number);
        s.flags |= APPEALED;
        emit Appealed(round, msg.sender, uint64(block.number) + 1, msg.sender);
    }

    /// @notice Appeals the first committee's verdict on `node`'s submission of `round` as a voter
    /// whose vote that verdict would judge lost: one that disputed a credited submission, or
    /// agreed with one more seats disputed. The appeal committee is drawn and decides as for a
    /// producer's appeal (`appeal`), in the same window, once per submission whoever files it;
    /// its verdict judges every vote, so a batch its producer's allies out-seated honest
    /// agreers on (a bait batch) is credited on appeal and the allies' disputes lose. A voter
    /// whose appeal loses (the appeal committee agrees with the first) loses twice slashBps for
    /// its vote at settleVotes; the producer of a batch a voter appealed is slashed at most
    /// slashBps (it did not ask for the second draw).
    /// @param round The submission's round.
    /// @param node The producer.
    function appealVote(uint64 round, address node) external {
        Submission storage s = _submissions[round][node];
        if (s.rollouts == 0) revert NoSubmission(round, node);
        uint64 current = currentRound();
        uint64 close = round + submitRounds + challengeRounds;
        if (current <= close || current >= close + appealRounds) revert NotAppealable(round, current);
        if (s.appealBlock != 0) revert AlreadyAppealed(round, node);
        uint8 record = _votes[msg.sender][round][node];
        uint256 side = record & 3;
        uint72 first = s.votes;
        bool losing = _wins(first) ? side == DISPUTE : side == AGREE && _seatsIn(first, 1) > _seatsIn(first, 0);
        if (!losing) revert VoteNotLosing(round, node, msg.sender);
        _drawBeacon(s, round, node, false); // the openings: a lapsed beacon cannot be checked
        s.appealBlock = uint40(block.number);
        s.flags |= APPEALED | VOTER_APPEAL;
        _votes[msg.sender][round][node] = record | VOTE_APPELLANT;
        emit Appealed(round, node, uint64(block.number) + 1, msg.sender);
    }

    /// @notice The appeal of `node`'s submission of `round`, its beacon and its committee's votes
    /// (all zero when not appealed).
    /// @param round The round.
    /// @param node The producer.
    /// @return info The appeal.
    function appealOf(uint64 round, address node) external view returns (AppealView memory info) {
        Submission storage s = _submissions[round][node];
        uint72 t = s.appealVotes;
        info.appealBlock = s.appealBlock;
        if (s.appealBlock == 0) return info;
        info.beaconBlock = _beaconBlock(s, true);
        (info.beacon, info.ready, info.drawn) = _beaconAt(s.appealBeacon, info.beaconBlock);
        info.agreeSeats = uint16(_seatsIn(t, 0));
        info.disputeSeats = uint16(_seatsIn(t, 1));
        info.unavailableSeats = uint16(_seatsIn(t, 2));
        info.agrees = uint16(_count(t, 0));
        info.disputes = uint16(_count(t, 1));
        info.unavailable = uint16(_count(t, 2));
    }

    /// @notice Stores the beacon of the committee voting now on a submission (the appeal's once
    /// appealed), so that it cannot lapse before its checkers vote. Anyone may call it once the
    /// beacon block is mined and while its hash is known; a producer's client calls it for its
    /// own submissions and appeals, a drawn checker's for the batches it is still fetching.
    /// @param round The round.
    /// @param node The producer.
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
        beacon = _beaconFrom(blockhash(beaconBlock));
        ready = beacon != 0;
    }

    /// @dev Returns the submission's (or its appeal's) beacon, storing it on first use; reverts
    /// while it is not known, and for good once it lapsed.
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

    /// @dev 88 bits of a block hash, never 0 for a real hash (0 means "not drawn").
    function _beaconFrom(bytes32 hash) private pure returns (uint256) {
        if (hash == bytes32(0)) return 0;
        uint256 b = uint256(hash) & type(uint88).max;
        return b == 0 ? 1 : b;
    }

    /// @dev The seats `checker` draws with its stake and the total as of `snapshot` (see seatsOf).
    function _seats(uint256 beacon, uint64 round, address node, address checker, uint256 snapshot, uint256 trials)
        private
        view
        returns (uint256 seats)
    {
        uint256 family = _nodes[node].family;
        if (_nodes[checker].family != family) return 0;
        uint256 stake = _at(_stakeHistory[checker], snapshot);
        if (stake < minStake) return 0;
        uint256 scaled = stake << 128;
        uint256 total = _at(_familyHistory[family], snapshot);
        bytes32 base = keccak256(abi.encode(beacon, round, node, checker));
        for (uint256 j; j < trials; ++j) {
            if ((uint256(keccak256(abi.encode(base, j))) >> 128) * total < scaled) ++seats;
        }
    }

    /// @dev Records the node's active stake, its family's and the total as of this block (one
    /// checkpoint per block: a later change in the same block overwrites it).
    function _recordStake(address node, Node storage n) private {
        uint256 family = n.family;
        _record(_stakeHistory[node], n.active);
        _record(_familyHistory[family], _familyActive[family]);
        _record(_totalHistory, _totalActive);
    }

    function _record(Checkpoint[] storage history, uint256 value) private {
        uint256 len = history.length;
        if (len != 0 && history[len - 1].fromBlock == block.number) {
            history[len - 1].value = uint192(value);
        } else {
            history.push(Checkpoint({fromBlock: uint64(block.number), value: uint192(value)}));
        }
    }

    /// @dev The value recorded last at or before `blockNumber` (0 before the first checkpoint).
    function _at(Checkpoint[] storage history, uint256 blockNumber) private view returns (uint256) {
        uint256 hi = history.length;
        if (hi == 0) return 0;
        Checkpoint storage last = history[hi - 1];
        if (last.fromBlock <= blockNumber) return last.value;
        uint256 lo;
        --hi; // the answer is before the last checkpoint: the first index past it is in [0, hi]
        while (lo < hi) {
            uint256 mid = (lo + hi) / 2;
            if (history[mid].fromBlock > blockNumber) hi = mid;
            else lo = mid + 1;
        }
        return lo == 0 ? 0 : history[lo - 1].value;
    }

    function _lastChange(Checkpoint[] storage history) private view returns (uint64) {
        uint256 len = history.length;
        return len == 0 ? 0 : history[len - 1].fromBlock;
    }

    /// @notice Closes a submission once its round is final (its challenge and appeal windows
    /// have passed); a disputed one (more of the deciding committee's seats disputed it than
    /// agreed) loses slashBps of its node's stake (active first, then unbonding) to the reward
    /// pool, twice that after its own lost appeal (its committee disputed it; an appeal whose
    /// committee reached no verdict leaves the first one's, and its slash, standing; a voter's
    /// appeal the committee upheld costs the producer slashBps only). Unavailable votes
    /// never slash. Its caller is paid SETTLER_CUT_BPS of the slash from the pool, unless it is
    /// the node itself.
    /// @param round The submission's round.
    /// @param node The submitting node.
    function settle(uint64 round, address node) external {
        Submission storage s = _submissions[round][node];
        if (s.rollouts == 0) revert NoSubmission(round, node);
        uint64 current = currentRound();
        if (current <= _finalAfter(round)) revert RoundNotFinal(round, current);
        if (s.flags & SETTLED != 0) revert AlreadySettled(round, node);
        uint256 slashed = _settle(s, round, node);
        if (msg.sender != node) _paySettler(round, node, slashed);
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

    /// @notice Judges the listed voters' votes on `node`'s submission of `round` by its final
    /// verdict: a vote that lost (a dispute of a credited submission, or an agreement with a
    /// disputed one, by the first committee or the appeal's) costs its voter slashBps of its
    /// stake (twice that when the voter appealed the first verdict, `appealVote`, and the appeal's
    /// committee decided against it), active first, then unbonding, moved to the reward pool. The appeal's votes are
    /// judged only when the appeal reached the verdict; when it reached none and the first
    /// committee's dispute stands, only the first committee's votes are. Unavailable votes, and
    /// every vote on a submission neither credited nor disputed, never lose. Open in the
    /// challengeRounds rounds after the round is final (unbonding outlasts them, so the stake
    /// that voted is still here); anyone may call it, each vote is judged once, and addresses
    /// that did not vote or were judged already are skipped. Its caller is paid SETTLER_CUT_BPS
    /// of what the others' losing votes lost, from the pool (its own losing vote pays nothing).
    /// @param round The submission's round.
    /// @param node The producer.
    /// @param voters The voters to judge (from its Attested and Unavailable events).
    function settleVotes(uint64 round, address node, address[] calldata voters) external {
        Submission storage s = _submissions[round][node];
        if (s.rollouts == 0) revert NoSubmission(round, node);
        uint64 current = currentRound();
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
        _paySettler(round, node, cutFrom);
    }

    /// @dev Pays the caller SETTLER_CUT_BPS of `slashed` from the pool, last (after every write).
    function _paySettler(uint64 round, address node, uint256 slashed) private {
        uint256 cut = (slashed * SETTLER_CUT_BPS) / BPS;
        if (cut == 0) return;
        rewardPool -= cut;
        totalSettlerPaid += cut;
        emit SettlerPaid(msg.sender, round, node, cut);
        _send(msg.sender, cut);
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

    /// @dev The last round in which a submission of `round` can still be voted on: its round is
    /// final after it.
    function _finalAfter(uint64 round) private view returns (uint64) {
        return round + submitRounds + challengeRounds + appealRounds;
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
    /// its credited signal / the round's total credited signal. Every round must be final, carry a submission of the
    /// caller and not be claimed yet; nothing is paid unless the pool covers the whole sum. Each
    /// listed submission not settled yet is settled first (slashed if disputed).
    /// @param roundList The rounds to claim.
    /// @return amount The wei paid.
    function claim(uint64[] calldata roundList) external returns (uint256 amount) {
        uint64 current = currentRound();
        for (uint256 i; i < roundList.length; ++i) {
            uint64 round = roundList[i];
            Submission storage s = _submissions[round][msg.sender];
            if (s.rollouts == 0) revert NoSubmission(round, msg.sender);
            if (current <= _finalAfter(round)) revert RoundNotFinal(round, current);
            if (s.flags & PAID != 0) revert AlreadyClaimed(round, msg.sender);
            s.flags |= PAID;
            if (s.flags & SETTLED == 0) _settle(s, round, msg.sender);
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
            if (s.rollouts == 0 || s.flags & PAID != 0 || current <= _finalAfter(round)) continue;
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
            totalPaid: n.totalPaid,
            stakeBlock: _lastChange(_stakeHistory[node]),
            unsettled: n.unsettled,
            backing: n.backing,
            family: n.registered ? _families[n.family] : bytes32(0)
        });
    }

    /// @notice One submission: digest, claims, the first committee's votes, credit (the appeal
    /// committee's verdict once appealed: appealOf), settlement and payout.
    /// @param round The round.
    /// @param node The node.
    /// @return info The submission (all zero when there is none).
    function submissionOf(uint64 round, address node) external view returns (SubmissionView memory info) {
        Submission storage s = _submissions[round][node];
        uint72 t = s.votes;
        info = SubmissionView({
            digest: s.digest,
            rollouts: s.rollouts,
            score: s.score,
            signal: s.signal,
            agreeSeats: uint16(_seatsIn(t, 0)),
            disputeSeats: uint16(_seatsIn(t, 1)),
            unavailableSeats: uint16(_seatsIn(t, 2)),
            agrees: uint16(_count(t, 0)),
            disputes: uint16(_count(t, 1)),
            unavailable: uint16(_count(t, 2)),
            credited: _credited(s) ? s.signal : 0,
            settled: s.flags & SETTLED != 0,
            paid: s.flags & PAID != 0 ? _share(s, round) : 0,
            snapshotBlock: s.snapshotBlock,
            appealBlock: s.appealBlock
        });
    }

    /// @notice A round's credited total, and whether its credit is final (its submissions are
    /// its Submitted events).
    /// @param round The round.
    /// @return totalCredited Sum of the credited signals.
    /// @return isFinal Whether currentRound() > round + submitRounds + challengeRounds +
    /// appealRounds.
    function roundInfo(uint64 round) external view returns (uint256 totalCredited, bool isFinal) {
        return (_rounds[round].totalCredited, currentRound() > _finalAfter(round));
    }

    /// @notice Whether `attester` voted on `node`'s submission of `round` (attested it or
    /// reported it unavailable) on the committee voting now: the appeal's once appealed.
    /// @param attester The attester.
    /// @param round The round.
    /// @param node The node.
    /// @return True once voted.
    function hasAttested(address attester, uint64 round, address node) external view returns (bool) {
        uint256 shift = _submissions[round][node].flags & APPEALED != 0 ? 2 : 0;
        return (_votes[attester][round][node] >> shift) & 3 != 0;
    }

    /// @notice How `voter` voted on `node`'s submission of `round`, on each committee: 0 not at
    /// all, 1 agreed, 2 disputed, 3 unavailable; and whether the vote was judged (settleVotes).
    /// @param voter The voter.
    /// @param round The round.
    /// @param node The producer.
    /// @return first Its vote on the first committee.
    /// @return appealed Its vote on the appeal's.
    /// @return settled Whether it was judged.
    function voteOf(address voter, uint64 round, address node)
        external
        view
        returns (uint8 first, uint8 appealed, bool settled)
    {
        uint8 record = _votes[voter][round][node];
        return (record & 3, (record >> 2) & 3, record & VOTE_SETTLED != 0);
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
        if (s.signal == 0 || !_credited(s)) return 0;
        return (rewardPerRound * s.signal) / _rounds[round].totalCredited;
    }

    function _send(address to, uint256 amount) private {
        (bool ok,) = to.call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }
}
