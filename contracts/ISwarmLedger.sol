// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// @notice What a ledger reads of its round book: a round's credited total in the root lane, so
/// that both lanes split one reward a round (docs/scaling.md, "One reward over both lanes").
interface IRoundTotals {
    /// @return decided Whether the book's round can no longer change (its verdict root stands
    /// for good, or never will).
    /// @return total The signal its standing verdict root credits (0 until decided, and when it
    /// does not stand).
    function standingTotal(uint64 round) external view returns (bool decided, uint256 total);
}

/// @title ISwarmLedger
/// @notice What a SAPO swarm's ledger answers to: its events, errors, audit views and external
/// functions, documented here once (the modules implementing them say only how). The rules
/// behind them are in docs/credit.md. Stakes and payouts are in wei; scores and signals in
/// SCORE_SCALE units; votes in seats (a checker's vote counts once per seat it holds) and in
/// distinct checkers.
interface ISwarmLedger {
    // ------------------------------------------------------------------------------ audit views

    /// @notice A node as audits see it.
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

    /// @notice A checker's vote that comes with an escalation (escalate): unavailable, or a
    /// dispute with what the checker recomputed (as attest takes them).
    struct EscalationVote {
        bool unavailable;
        uint64 score;
        uint64 signal;
        uint16 findings;
    }

    /// @notice A submission as audits see it: its claims, the first committee's votes, credit
    /// (the deciding committee's), settlement and payout.
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
    /// beaconOf), and that committee's votes.
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

    // ----------------------------------------------------------------------------------- events

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
    /// @notice A batch of the round book's root lane that a drawn checker took to this lane
    /// (escalate): from here it is a submission of `round` like any other, also emitted as
    /// Submitted.
    event Escalated(uint64 indexed round, address indexed node, address indexed checker);
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

    // ----------------------------------------------------------------------------------- errors

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
    error NotTheBook(address caller, address book);
    error NotADispute(uint64 round, address node, address checker);

    // ------------------------------------------------------------------ constants and parameters

    /// @notice A verifier reward of 1.0 on one rollout, in score units.
    function SCORE_SCALE() external view returns (uint256);
    /// @notice The longest metadata string a node may publish, in bytes.
    function MAX_METADATA_BYTES() external view returns (uint256);
    /// @notice The most model families a ledger checks.
    function MAX_FAMILIES() external view returns (uint256);
    /// @notice The most rollouts one submission may hold: what the batch format holds at most
    /// (1,024 questions of 64 completions), so a claim no batch can back is refused at submit.
    function MAX_ROLLOUTS() external view returns (uint256);
    /// @notice Blocks the EVM keeps hashes of; a beacon not drawn within them lapses.
    function BLOCKHASH_WINDOW() external view returns (uint256);
    /// @notice The most seat trials per node (a vote's seats and the tallies fit their fields).
    function MAX_SEATS() external view returns (uint256);
    /// @notice The share of what a `settle` or `settleVotes` slashes that is paid to its caller,
    /// in basis points (none when the caller is the node slashed): settlement needs nobody's
    /// goodwill, since the party it pays is whoever sends it first.
    function SETTLER_CUT_BPS() external view returns (uint256);

    /// @notice Seconds per round.
    function roundLength() external view returns (uint64);
    /// @notice Least active stake, in wei, to submit or attest.
    function minStake() external view returns (uint256);
    /// @notice Seconds between `requestUnstake` and `withdraw`.
    function unbondingPeriod() external view returns (uint64);
    /// @notice Rounds, after the submission window, during which a submission can be attested.
    function challengeRounds() external view returns (uint64);
    /// @notice Rounds after a round during which its batches are still accepted.
    function submitRounds() external view returns (uint64);
    /// @notice Wei split pro rata to credited signal among a round's credited submissions.
    function rewardPerRound() external view returns (uint256);
    /// @notice Share of a disputed node's stake (and of a losing voter's) moved to the reward
    /// pool, in basis points.
    function slashBps() external view returns (uint16);
    /// @notice Largest attested-vs-claimed score gap that still agrees, in bps of the batch's
    /// maximum score (the signal must agree exactly).
    function agreeToleranceBps() external view returns (uint16);
    /// @notice sha256 of the canonical task catalog nodes draw tasks from.
    function catalogDigest() external view returns (bytes32);
    /// @notice Least number of distinct drawn checkers who must agree before a submission earns.
    function quorum() external view returns (uint16);
    /// @notice Seat trials per node and submission: the committee's expected seats.
    function checkers() external view returns (uint16);
    /// @notice Rounds after the challenge window in which an appeal is filed (all but the last)
    /// and voted on; a round is final after them.
    function appealRounds() external view returns (uint64);
    /// @notice Seat trials per node on an appeal's committee.
    function appealCheckers() external view returns (uint16);
    /// @notice The block timestamp of the deployment: round 0 starts then.
    function genesis() external view returns (uint64);
    /// @notice The round book (the root lane, docs/scaling.md) that alone may escalate a batch
    /// into this ledger, fixed at deployment; the zero address: none.
    function book() external view returns (address);
    /// @notice Called by the round book this ledger names, from its constructor: from then on a
    /// round is paid only once that book decided it, over both lanes' credited signal. A named
    /// address that holds anything else never binds, and the ledger pays as if it had no book.
    function bindBook() external;

    // ---------------------------------------------------------------------------------- clock

    /// @notice The round now: (block.timestamp - genesis) / roundLength.
    /// @return The current round number.
    function currentRound() external view returns (uint64);

    /// @notice The seed a node's tasks for a round are drawn from; nobody picks easy tasks and
    /// anyone can regenerate them.
    /// @param round The round.
    /// @param node The node.
    /// @return keccak256(abi.encode(chainid, this ledger, round, node)).
    function taskSeed(uint64 round, address node) external view returns (bytes32);

    // ---------------------------------------------------------------------------------- stake

    /// @notice Registers the caller as a node of model family `family` with msg.value as its
    /// stake. The family is fixed for the address's life: a node that runs another base registers
    /// another address (stake moved between families would pick the committees it sits on).
    /// @param metadata A short JSON string: model, IPFS peer id and addresses, client version.
    /// @param family The content id of the base model it runs: one of families().
    function register(string calldata metadata, bytes32 family) external payable;

    /// @notice Adds msg.value to the caller's active stake. Committees of submissions made before
    /// this block are drawn from the stake before it (stake added once a beacon may be known buys
    /// no seats).
    function addStake() external payable;

    /// @notice Moves `amount` of active stake into unbonding; the whole unbonding amount frees at
    /// now + unbondingPeriod (the clock restarts). Unbonding stake can still be slashed.
    /// @param amount Wei to unbond.
    function requestUnstake(uint256 amount) external;

    /// @notice Pays out the caller's unbonding stake once its clock has run and every submission
    /// it made before its last unstake request (those this stake backed) is settled: anyone may
    /// settle a final submission and `claim` settles what it claims, and the unbonding period
    /// outlasts their windows. A disputed node cannot take out the stake its slash is owed
    /// from; a node that goes on submitting with its remaining stake is not held up by those.
    function withdraw() external;

    /// @notice Replaces the caller's published metadata.
    /// @param metadata A short JSON string (at most MAX_METADATA_BYTES).
    function setMetadata(string calldata metadata) external;

    /// @notice A node's active stake at the end of block `blockNumber` (what the draws of that
    /// block's submissions read).
    /// @param node The node.
    /// @param blockNumber The block.
    /// @return Wei.
    function stakeAt(address node, uint256 blockNumber) external view returns (uint256);

    /// @notice The active stake of a family's nodes at the end of block `blockNumber`: what a
    /// draw of that block's submissions by the family's nodes divides by.
    /// @param family A family (0 when it is not one of families()).
    /// @param blockNumber The block.
    /// @return Wei.
    function familyStakeAt(bytes32 family, uint256 blockNumber) external view returns (uint256);

    /// @notice All active stake at the end of block `blockNumber`.
    /// @param blockNumber The block.
    /// @return Wei.
    function totalStakeAt(uint256 blockNumber) external view returns (uint256);

    /// @notice The model families this ledger checks, in the deployment's order.
    /// @return The content ids of their bases.
    function families() external view returns (bytes32[] memory);

    /// @notice A node's stake, metadata and payouts (its submissions and credit: Submitted events
    /// and submissionOf).
    /// @param node The node.
    /// @return info The node's record.
    function nodeInfo(address node) external view returns (NodeView memory info);

    /// @notice The model family a node registered with, never zero for a registered node (0 when
    /// not registered): what another contract (the round book) reads of a node, for a few
    /// thousand gas, where nodeInfo would also copy its metadata (up to MAX_METADATA_BYTES).
    /// @param node The node.
    /// @return The content id of its family's base, or 0.
    function familyOf(address node) external view returns (bytes32);

    /// @notice The number of registered nodes.
    /// @return The count.
    function nodeCount() external view returns (uint256);

    /// @notice Registered nodes in registration order, `limit` from `offset`.
    /// @param offset First index.
    /// @param limit Most addresses returned.
    /// @return page The addresses.
    function nodesPage(uint256 offset, uint256 limit) external view returns (address[] memory page);

    /// @notice All stake held: active plus unbonding, in wei.
    /// @return The sum.
    function totalStaked() external view returns (uint256);

    /// @notice Active and unbonding stake held, separately, in wei.
    /// @return active Sum of active stake.
    /// @return unbonding Sum of unbonding stake.
    function stakeTotals() external view returns (uint256 active, uint256 unbonding);

    // ------------------------------------------------------------------- submissions and votes

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
    function submit(uint64 round, bytes32 digest, uint32 rollouts, uint64 score, uint64 signal) external;

    /// @notice Opens a submission of `round` for `node` from a batch it signed in the round book's
    /// root lane, which `checker`, drawn on its committee there, disputes or could not fetch
    /// (the book checked the signature, the batch's place in the round's submission root and the
    /// window; this checks the seat). The book alone may call it. The record keeps the root
    /// lane's committee: its stake snapshot is the block of the round's submission root and its
    /// beacon the round's; from here it is voted on, appealed, settled and slashed by this ledger's
    /// rules, in `round`'s windows, and the book credits no batch this ledger holds. It is backed
    /// by all its producer's stake, unbonding included (withdraw waits for its settlement), since
    /// the producer signed it before any unstake request this ledger could date. The checker's
    /// `vote` is recorded with it, as its attest or reportUnavailable would be, and judged the
    /// same way (a dispute must not agree: an agreeing checker signs off chain): an escalation
    /// of an honest batch costs its checker the lost vote's slash.
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
    ) external;

    /// @notice Slashes `voter` slashBps of its stake (active first, then unbonding) into the
    /// reward pool for signing two different votes on `node`'s batch of `round`, or a vote its
    /// own vote here contradicts, and pays `prover` SETTLER_CUT_BPS of it. The round book alone
    /// may call it, once it judged the two messages and that this equivocation was not
    /// slashed before.
    /// @param round The batch's round.
    /// @param node The batch's producer.
    /// @param voter The node that signed both.
    /// @param prover Who proved it (paid its cut).
    /// @return slashed The wei slashed.
    function slashEquivocation(uint64 round, address node, address voter, address prover)
        external
        returns (uint256 slashed);

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
    function attest(uint64 round, address node, uint64 score, uint64 signal, uint16 findings) external;

    /// @notice Records that the caller, a drawn checker of `node`'s batch, could not fetch it
    /// from the producer nor from any peer who attested it. Its seats count against credit
    /// (no evidence, no credit) but never slash, the producer nor the caller: the caller's own
    /// network may be at fault (the producer's recourse is its appeal).
    /// @param round The submission's round (same window as attest).
    /// @param node The producer.
    function reportUnavailable(uint64 round, address node) external;

    /// @notice Whether `attester` voted on `node`'s submission of `round` (attested it or
    /// reported it unavailable) on the committee voting now: the appeal's once appealed.
    /// @param attester The attester.
    /// @param round The round.
    /// @param node The node.
    /// @return True once voted.
    function hasAttested(address attester, uint64 round, address node) external view returns (bool);

    /// @notice Whether `node` submitted a batch of `round` here (the v4 lane). The round book
    /// credits no such batch: a round of a producer is paid by one lane only.
    /// @param round The round.
    /// @param node The producer.
    /// @return Whether its submission exists.
    function hasSubmitted(uint64 round, address node) external view returns (bool);

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
        returns (uint8 first, uint8 appealed, bool settled);

    // ----------------------------------------------------------------------------- committees

    /// @notice The seats `checker` holds on the committee of `node`'s submission of `round`; 0
    /// when it is not drawn. Anyone can recompute it: with S its active stake and T the active
    /// stake of the producer's family, both as of the submission's block (`stakeAt`,
    /// `familyStakeAt`), base = keccak256(abi.encode(beacon, round, node, checker)) and h_j =
    /// keccak256(abi.encode(base, j)) >> 128, it holds seat j (0 <= j < checkers) when h_j * T <
    /// S << 128, i.e. each seat with probability S / T (lib/SeatDraw.sol). A node holds none when
    /// it is the producer, is not registered, is of another family, or its stake then or now is
    /// below minStake. 0 until the beacon is drawn.
    /// @param round The round.
    /// @param node The producer.
    /// @param checker The candidate checker.
    /// @return The number of seats (each one vote).
    function seatsOf(uint64 round, address node, address checker) external view returns (uint256);

    /// @notice The seats `checker` holds on the committee of the appeal of `node`'s submission
    /// of `round`: as seatsOf, with the appeal's beacon (appealOf) and appealCheckers trials,
    /// from the same stake snapshot (the submission's block). 0 when not appealed.
    /// @param round The round.
    /// @param node The producer.
    /// @param checker The candidate checker.
    /// @return The number of seats (each one vote on the appeal).
    function appealSeatsOf(uint64 round, address node, address checker) external view returns (uint256);

    /// @notice Whether `checker` holds a seat on the committee of `node`'s submission of `round`
    /// (see seatsOf; the appeal's committee: appealSeatsOf).
    /// @param round The round.
    /// @param node The producer.
    /// @param checker The candidate checker.
    /// @return Whether it may attest or report the submission unavailable (window and double
    /// votes aside).
    function isChecker(uint64 round, address node, address checker) external view returns (bool);

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
        external
        view
        returns (uint256 beacon, uint64 beaconBlock, bool ready, bool drawn);

    /// @notice Stores the beacon of the committee voting now on a submission (the appeal's once
    /// appealed), so that it cannot lapse before its checkers vote. Anyone may call it once the
    /// beacon block is mined and while its hash is known; a producer's client calls it for its
    /// own submissions and appeals, a drawn checker's for the batches it is still fetching.
    /// @param round The round.
    /// @param node The producer.
    function drawBeacon(uint64 round, address node) external;

    // -------------------------------------------------------------------------------- appeals

    /// @notice Appeals the verdict on the caller's submission of `round` to a committee of
    /// appealCheckers seat trials per node, drawn afresh from the hash of the next block and the
    /// same stake snapshot; that committee's votes replace the first one's (its verdict is
    /// final, and judges the first committee's votes too). Open in the rounds after the
    /// challenge window but the last appeal round, to a submission not credited by then (its
    /// client files it when its own re-check of the batch agrees with its claim). A lost appeal
    /// (the appeal committee disputes it) slashes twice slashBps at settlement: appeals are not
    /// a free second draw for a bad batch. The openings stay those of the first beacon.
    /// @param round The round of the caller's submission.
    function appeal(uint64 round) external;

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
    function appealVote(uint64 round, address node) external;

    /// @notice The appeal of `node`'s submission of `round`, its beacon and its committee's votes
    /// (all zero when not appealed).
    /// @param round The round.
    /// @param node The producer.
    /// @return info The appeal.
    function appealOf(uint64 round, address node) external view returns (AppealView memory info);

    // ----------------------------------------------------------------------------- settlement

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
    function settle(uint64 round, address node) external;

    /// @notice Judges the listed voters' votes on `node`'s submission of `round` by its final
    /// verdict: a vote that lost (a dispute of a credited submission, or an agreement with a
    /// disputed one, by the first committee or the appeal's) costs its voter slashBps of its
    /// stake (twice that when the voter appealed the first verdict, `appealVote`, and the
    /// appeal's committee decided against it), active first, then unbonding, moved to the reward
    /// pool. The appeal's votes are judged only when the appeal reached the verdict; when it
    /// reached none and the first committee's dispute stands, only the first committee's votes
    /// are. Unavailable votes, and every vote on a submission neither credited nor disputed,
    /// never lose. Open in the challengeRounds rounds after the round is final (unbonding
    /// outlasts them, so the stake that voted is still here); anyone may call it, each vote is
    /// judged once, and addresses that did not vote or were judged already are skipped. Its
    /// caller is paid SETTLER_CUT_BPS of what the others' losing votes lost, from the pool (its
    /// own losing vote pays nothing).
    /// @param round The submission's round.
    /// @param node The producer.
    /// @param voters The voters to judge (from its Attested and Unavailable events).
    function settleVotes(uint64 round, address node, address[] calldata voters) external;

    // -------------------------------------------------------------------------------- rewards

    /// @notice Wei available to pay rewards.
    function rewardPool() external view returns (uint256);
    /// @notice Wei ever added to the pool by `fund`.
    function totalFunded() external view returns (uint256);
    /// @notice Wei ever moved from stake into the pool by slashing.
    function totalSlashed() external view returns (uint256);
    /// @notice Wei ever paid out by `claim`.
    function totalPaidOut() external view returns (uint256);
    /// @notice Wei ever paid from the pool to the callers of `settle` and `settleVotes`.
    function totalSettlerPaid() external view returns (uint256);

    /// @notice Adds msg.value to the reward pool.
    function fund() external payable;

    /// @notice Pays the caller, in one transfer, its share of each listed round: rewardPerRound *
    /// its credited signal / the round's total credited signal over both lanes (this ledger's
    /// and, where a round book runs, the book's standing total of the round: one reward a round,
    /// whichever lane a batch took). Every round must be final (and decided by the book, where
    /// one runs), carry a submission of the caller and not be claimed yet; nothing is paid unless
    /// the pool covers the whole sum. Each listed submission not settled yet is settled first
    /// (slashed if disputed).
    /// @param roundList The rounds to claim.
    /// @return amount The wei paid.
    function claim(uint64[] calldata roundList) external returns (uint256 amount);

    /// @notice What `claim` would pay `node` for the listed rounds, skipping rounds that are not
    /// final, have no submission of the node, or were claimed.
    /// @param node The node.
    /// @param roundList The rounds.
    /// @return amount Wei.
    function claimable(address node, uint64[] calldata roundList) external view returns (uint256 amount);

    /// @notice One submission: digest, claims, the first committee's votes, credit (the appeal
    /// committee's verdict once appealed: appealOf), settlement and payout.
    /// @param round The round.
    /// @param node The node.
    /// @return info The submission (all zero when there is none).
    function submissionOf(uint64 round, address node) external view returns (SubmissionView memory info);

    /// @notice A round's credited total, and whether its credit is final (its submissions are
    /// its Submitted events).
    /// @param round The round.
    /// @return totalCredited Sum of the credited signals.
    /// @return isFinal Whether currentRound() > round + submitRounds + challengeRounds +
    /// appealRounds.
    function roundInfo(uint64 round) external view returns (uint256 totalCredited, bool isFinal);
}
