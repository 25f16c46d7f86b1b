// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {IRoundTotals, ISwarmLedger} from "./ISwarmLedger.sol";
import {Messages} from "./lib/Messages.sol";
import {SumTree} from "./lib/SumTree.sol";

/// @title IRoundBook
/// @notice The root lane of docs/scaling.md, first part: a bonded aggregator posts, per round,
/// the root of the producers' signed submissions and then the Merkle-sum root of the batches
/// their drawn committees agreed on; anyone holding the signed messages proves a lie in either
/// root, which voids it and pays the prover half the aggregator's bond (the other half goes to
/// the ledger's reward pool). Whoever cannot get a leaf of a root (the aggregator withholds its
/// data, or the tree is malformed so that no proof of it exists) challenges the aggregator to
/// post it on chain: unanswered by the end of the next round, the root is void as if a lie were
/// proven. A batch its committee disputes is escalated into the ledger's v4 lane (escalate).
/// A checker that signs two different votes on one batch, or votes on the ledger against a vote it
/// signed, is slashed there (RoundJudge.proveEquivocation). Not built yet (docs/scaling.md): the
/// aggregator's draw. Payouts: each credit carries its producer's earnings in the rounds
/// settled before it (Earnings), proven from one earlier leaf, so that a producer claims all it
/// earned with one proof, as often as it likes.
///
/// Windows, with the ledger's W (submitRounds) and C (challengeRounds), for a round r:
/// producers sign submissions in rounds r..r+W; the submission root is posted in r+W+1 (its
/// block is the stake snapshot, the hash of the block after it the round's beacon); checkers vote
/// until r+W+1+C; the verdict root is posted in r+W+C+2; either root may be proven false until
/// the end of r+W+2C+2, after which the aggregator may take its bond back.
interface IRoundBook is IRoundTotals {
    /// @notice One leaf of a submission root: a producer's signed submission. Leaves are sorted
    /// by producer, strictly (one submission per producer and round).
    struct SignedSubmission {
        address producer;
        Messages.Submission submission;
        bytes signature;
    }

    /// @notice One agreeing vote in a credit leaf: the voter's re-scored score and findings
    /// (its signal is the credit's), and its signature of the `Messages.Vote` they make.
    /// A credit's votes are sorted by voter, strictly.
    struct SignedVote {
        address voter;
        uint64 score;
        uint16 findings;
        bytes signature;
    }

    /// @notice A whole vote a checker signed (`Messages.Vote` of a round and producer, under this
    /// book's domain): what proveEquivocation is shown.
    struct CastVote {
        bytes32 digest;
        bool unavailable;
        uint64 score;
        uint64 signal;
        uint16 findings;
        bytes signature;
    }

    /// @notice One leaf of a verdict root: a batch its committee agreed on, the submission it
    /// credits (by its index in the submission root), and the agreeing votes. Its amount in the
    /// tree is `signal`. Leaves are sorted by `index`, strictly (a submission is credited once).
    /// Both roots are complete trees of depth ceil(log2 n) for their n leaves, padded with empty
    /// nodes: every proof is exactly that long.
    struct Credit {
        uint32 index;
        address producer;
        bytes32 digest;
        uint64 score;
        uint64 signal;
        bytes32 votes; // keccak256(abi.encode(SignedVote[]))
        Earnings earnings;
    }

    /// @notice What the producer of a credit has earned in the root lane, as of the rounds that
    /// are settled when its verdict root is posted (a round q is settled for round r when
    /// q <= r - lag(), lag() = C + 2: q's challenges are then all closed, and whether q stands is
    /// fixed). With share(q) = rewardPerRound * amount / total of the producer's credit in a
    /// standing round q, `settled` is the sum of share(q) over every standing q <= r - lag()
    /// (as the anchor's own leaf says it: a lie of earnings that stood unproven is carried on).
    /// It is proven from one earlier leaf: `anchor` is the last standing round <= r - lag() that
    /// credits the producer (NO_ROUND: none, and `settled` is 0), `anchorIndex` its credit's
    /// place in that round's tree, and `recent[k]` the place of the producer's credit in round
    /// anchor - 1 - k (k < lag() - 1; NO_INDEX: none), the rounds the anchor's own `settled`
    /// does not count yet. So settled = the anchor's settled + share(anchor) + the recent shares.
    struct Earnings {
        uint128 settled;
        uint64 anchor;
        uint32 anchorIndex;
        uint32[] recent;
    }

    /// @notice A credit leaf of some round's verdict root, shown with its place and proof.
    struct Shown {
        uint64 round;
        uint32 index;
        Credit credit;
        uint128 amount;
        SumTree.Node[] proof;
    }

    /// @notice A round's roots as audits see them.
    struct RoundView {
        address aggregator;
        uint64 postedBlock; // the submission root's block: the round's stake snapshot
        uint32 count; // submissions in the root
        bytes32 submissions;
        bytes32 verdicts; // 0 until posted
        uint32 credits; // leaves in the verdict root
        uint128 total; // credited signal in the verdict root
        uint256 beacon; // 0 until drawn
        bool submissionsVoided;
        bool verdictsVoided;
        bool released;
        uint32 openChallenges; // data challenges not answered yet: the bond waits for them
    }

    /// @notice A data challenge: who asked for which leaf, and until which round the aggregator
    /// may answer.
    struct DataChallenge {
        address challenger;
        uint64 answerBy;
        bool answered;
    }

    /// @param list the sha256 of the list's `sapo.list/1` index block: its CID is the CIDv1 (raw,
    /// sha2-256) of that digest, as a batch's is of the digest the ledger holds
    event SubmissionsPosted(uint64 indexed round, address indexed aggregator, bytes32 root, uint32 count, bytes32 list);
    event VerdictsPosted(uint64 indexed round, address indexed aggregator, bytes32 root, uint128 total, bytes32 list);
    event RoundBeaconDrawn(uint64 indexed round, uint256 beacon);
    /// @param what which lie was proven (see the prove* functions)
    event LieProven(uint64 indexed round, address indexed aggregator, address indexed prover, string what, uint256 paid);
    event BondReleased(uint64 indexed round, address indexed aggregator, uint256 amount, uint256 pay);
    /// @notice A payment its payee refused (its receive reverted): kept for it (withdrawOwed).
    event PaymentOwed(address indexed payee, uint256 amount);
    event DataChallenged(uint64 indexed round, bool verdictTree, uint32 index, address challenger, uint64 answerBy);
    /// @notice The challenged leaf, posted: `leaf` is its ABI encoding (a SignedSubmission, or a
    /// Credit with its amount and votes), the calldata anyone then proves a lie from.
    event DataAnswered(uint64 indexed round, bool verdictTree, uint32 index, bytes leaf);
    /// @notice `voter` signed two different votes on `producer`'s batch of `round` (or one its
    /// vote on the ledger contradicts); or, `voter` == `producer`, the producer signed two
    /// different submissions of the round (or one its batch on the ledger contradicts): the
    /// ledger slashed it `slashed` wei, and paid `prover` its settler's cut of it.
    event EquivocationProven(
        uint64 indexed round, address indexed producer, address indexed voter, address prover, uint256 slashed
    );
    event Funded(address indexed from, uint256 amount);
    /// @param total what the producer has been paid in all, with this claim
    event Claimed(address indexed producer, uint64 indexed round, uint256 amount, uint256 total);

    error NotARegisteredNode(address who);
    error NotTheDrawnAggregator(address who, uint64 round);
    // AggregatorDraw's (the book's roster of aggregators)
    error AlreadyEnlisted(address node);
    error NotEnlisted(address node);
    error DrawNotOpen(uint64 round, uint64 current);
    error StillEnlisted(address node);
    error BondHeld(address node, uint64 untilRound);
    error WrongBond(uint256 sent, uint256 bond);
    error NotInPostWindow(uint64 round, uint64 current);
    error AlreadyPosted(uint64 round);
    error NotTheAggregator(address who, address aggregator);
    error NoSuchRoot(uint64 round);
    error ChallengeWindowClosed(uint64 round, uint64 current);
    error ChallengeWindowOpen(uint64 round, uint64 current);
    error BeaconNotReady(uint64 round);
    error BeaconLapsed(uint64 round);
    error NotInRoot(uint64 round);
    error NoLie(string what);
    error EmptyRoot();
    error BondForfeited(uint64 round);
    error WrongChallengeBond(uint256 sent, uint256 bond);
    error AlreadyChallenged(uint64 round, bool verdictTree, uint32 index);
    error NoSuchChallenge(uint64 round, bool verdictTree, uint32 index);
    error AnswerWindowClosed(uint64 round, uint64 answerBy, uint64 current);
    error AnswerWindowOpen(uint64 round, uint64 answerBy, uint64 current);
    error ChallengesOpen(uint64 round, uint32 open);
    error NothingOwed(address who);
    error PaymentRefused(address who);
    error NotSettled(uint64 round, uint64 current);
    error NotTheProducer(address who, address producer);
    error ClaimTooSoon(uint64 round, uint64 lastClaimed);
    error BadTail(uint64 round);
    error NothingToClaim(address producer);
    error PoolInsufficient(uint256 amount, uint256 pool);
    error ZeroAmount();
    error NotTheLedgersBook(address named);
    error AppealsOutlastTheBook(uint64 appealRounds, uint64 challengeRounds);
    error PostPayAboveTheReward(uint256 postPayBps);
    error AlreadyProven(uint64 round, address producer, address voter);
    error NotTheJudge(address caller);
    error EscalationClosed(uint64 round, uint64 current);
    error ForgedSubmission(uint64 round, address producer);
    /// @dev The ledger's, which escalate passes on (declared here so that the book's ABI decodes
    /// them): the caller holds no seat on the batch's committee, the ledger holds the producer's
    /// batch of the round already, or the caller is its producer.
    error NotDrawn(uint64 round, address node, address checker);
    error AlreadySubmitted(uint64 round, address node);
    error SelfAttestation(address node);
    error NotADispute(uint64 round, address node, address checker);
    error ScoreOutOfRange(uint64 score, uint256 max);
    error SignalOutOfRange(uint64 signal, uint256 max);
    error StakeTooLow(uint256 stake, uint256 minStake);

    /// @notice The ledger whose nodes, stakes and parameters this book reads.
    function ledger() external view returns (address);
    /// @notice The wei an aggregator bonds per round it posts.
    function bond() external view returns (uint256);
    /// @notice The wei a data challenge bonds: the aggregator's if it answers (its gas), the
    /// challenger's back if it does not.
    function challengeBond() external view returns (uint256);
    /// @notice The aggregator's pay at a round's release, in basis points (at most 10,000) of
    /// the round's reward, times its verdict root's share of the round's credited signal.
    function postPayBps() external view returns (uint256);

    /// @notice Posts round `round`'s submission root (`count` signed submissions, sorted by
    /// producer; `list` the digest of their list's index on IPFS), bonding `bond()` wei. Only the round's
    /// drawn aggregator (AggregatorDraw), only in round + W + 1, once per round.
    function postSubmissions(uint64 round, bytes32 root, uint32 count, bytes32 list) external payable;
    /// @notice Stores the round's beacon, the hash of the block after its submission root's;
    /// anyone may call it once that block is mined, within the EVM's 256-block window.
    function drawBeacon(uint64 round) external;
    /// @notice Posts the verdict root (a Merkle-sum tree of `credits` Credit leaves, `total`
    /// their signal; `list` the digest of their list's index on IPFS), by the round's aggregator,
    /// in round + W + C + 2, with the beacon drawn. A round in which no batch reached its quorum
    /// posts 0 credits, a total of 0 and keccak256("sapo.no-credits") as its root (no leaf hashes
    /// to it, and no leaf of it can be challenged): an aggregator must post a verdict root.
    function postVerdicts(uint64 round, bytes32 root, uint32 credits, uint128 total, bytes32 list) external;

    /// @notice Asks the aggregator to post leaf `index` of the submission root (or, with
    /// `verdictTree`, of the verdict root) on chain by the end of the next round, bonding
    /// `challengeBond()`; while the challenge window is open.
    function challengeData(uint64 round, bool verdictTree, uint32 index) external payable;
    /// @notice The aggregator's answer: the submission leaf at `index` with its proof.
    function answerSubmission(
        uint64 round,
        uint32 index,
        SignedSubmission calldata leaf,
        SumTree.Node[] calldata proof
    ) external;
    /// @notice The aggregator's answer: the credit leaf at `index`, its amount, proof and votes.
    function answerCredit(
        uint64 round,
        uint32 index,
        Credit calldata credit,
        uint128 amount,
        SumTree.Node[] calldata proof,
        SignedVote[] calldata votes
    ) external;
    /// @notice The answer for a position past the root's leaf count: the empty node is there.
    function answerEmpty(uint64 round, bool verdictTree, uint32 index, SumTree.Node[] calldata proof) external;
    /// @notice Once a challenge's answer window has passed unanswered: the challenged root is
    /// void, the challenger gets its bond back and half the aggregator's, the pool the rest.
    function claimUnanswered(uint64 round, bool verdictTree, uint32 index) external;

    /// @notice Takes the batch at `index` of the round's submission root to the ledger's v4 lane
    /// (ISwarmLedger.escalate), where it is judged, appealed and slashed by the ledger's rules:
    /// what a checker drawn on its committee (by the book's draw) does when it disputes the batch
    /// or cannot fetch it, with that vote (`vote`: unavailable, or a dispute with what it
    /// recomputed), which the ledger records and judges as any. Open from the submission root's
    /// beacon until the round before voteClose (the ledger's own vote close for the round); `leaf` must be
    /// a valid submission (a forged one is a lie of the root: proveForgedSubmission). The book
    /// then credits no batch of its producer in the round ("a credit the v4 lane holds"). Without
    /// it a forger in the root lane would risk nothing: its batch would only go uncredited.
    function escalate(
        uint64 round,
        uint32 index,
        SignedSubmission calldata leaf,
        SumTree.Node[] calldata proof,
        ISwarmLedger.EscalationVote calldata vote
    ) external;

    /// @notice Proves that the submission at `index` of the root is not its producer's: its
    /// signature recovers to someone else (or nobody), or the producer is no registered node.
    function proveForgedSubmission(uint64 round, uint32 index, SignedSubmission calldata leaf, SumTree.Node[] calldata proof)
        external;
    /// @notice Proves two neighbouring leaves out of order (a producer twice, or unsorted).
    function proveUnsorted(
        uint64 round,
        uint32 index,
        SignedSubmission calldata first,
        SumTree.Node[] calldata firstProof,
        SignedSubmission calldata second,
        SumTree.Node[] calldata secondProof
    ) external;
    /// @notice Proves that the submission root leaves out a submission its aggregator gave a
    /// receipt for (`receipt`: its signature of `Messages.Receipt` over the submission's signing
    /// hash): `leaf` is that signed submission, valid and of a producer that did not submit the
    /// round in the v4 lane, and it would sit at `index`, between the leaves `below` (at index - 1;
    /// ignored when index is 0) and `above` (at index; ignored when index is the leaf count),
    /// whose producers sort strictly below and above its producer. An aggregator that receipted a
    /// submission must post it: the producer learns it was left out only after v4's submit window
    /// closed.
    function proveLeftOut(
        uint64 round,
        SignedSubmission calldata leaf,
        bytes calldata receipt,
        uint32 index,
        SignedSubmission calldata below,
        SumTree.Node[] calldata belowProof,
        SignedSubmission calldata above,
        SumTree.Node[] calldata aboveProof
    ) external;
    /// @notice Proves a credit leaf false: its amount in the tree is not its signal, it does not
    /// match the submission at its index, its votes (whose hash the leaf holds) are fewer than
    /// quorum or not sorted by voter, or one of them is not its voter's agreeing vote on that
    /// submission or its voter holds no seat on the batch's committee.
    function proveBadCredit(
        uint64 round,
        uint32 leafIndex,
        Credit calldata credit,
        uint128 amount,
        SumTree.Node[] calldata creditProof,
        SignedSubmission calldata submission,
        SumTree.Node[] calldata submissionProof,
        SignedVote[] calldata votes
    ) external;
    /// @notice Proves two neighbouring credits out of order (one submission credited twice, or
    /// unsorted).
    function proveCreditsUnsorted(
        uint64 round,
        uint32 index,
        Credit calldata first,
        uint128 firstAmount,
        SumTree.Node[] calldata firstProof,
        Credit calldata second,
        uint128 secondAmount,
        SumTree.Node[] calldata secondProof
    ) external;
    /// @notice Proves a node of the verdict tree whose children's sums do not add up to the sum
    /// its parent committed to (`node.sum`); `height` 0 is a leaf's height, for which `left`
    /// holds the leaf's data hash and `right` is unused: a leaf whose sum is not its signal.
    function proveBadSum(
        uint64 round,
        uint256 height,
        uint256 index,
        SumTree.Node calldata node,
        SumTree.Node[] calldata proof,
        SumTree.Node calldata left,
        SumTree.Node calldata right
    ) external;

    /// @notice Proves a credit's earnings false: malformed, an anchor or recent round that is not
    /// settled and standing or holds no credit of the producer at that place, or a sum that is
    /// not the anchor's settled plus the shares of the anchor and the recent credits. `shown`
    /// holds the anchor's leaf, then each recent credit's (in the order of `recent`), each with
    /// its proof; a lie that needs none of them may leave it empty.
    function proveBadEarnings(
        uint64 round,
        uint32 leafIndex,
        Credit calldata credit,
        uint128 amount,
        SumTree.Node[] calldata proof,
        Shown[] calldata shown
    ) external;
    /// @notice Proves that a credit's earnings leave out a credit of its producer: `skipped`, in a
    /// standing round settled for this one, later than the anchor, or one of the anchor's recent
    /// rounds named as holding none.
    function proveSkippedCredit(
        uint64 round,
        uint32 leafIndex,
        Credit calldata credit,
        uint128 amount,
        SumTree.Node[] calldata proof,
        Shown calldata skipped
    ) external;

    /// @notice Has the ledger slash `voter`, whom this book's judge found equivocating on
    /// `producer`'s batch of `round` (RoundJudge.proveEquivocation), or `producer` (== `voter`)
    /// found submitting twice (proveDoubleSubmission), and pay `prover`: once per signer and
    /// batch, until the round's challenge window ends (stake that gave a seat outlasts it: the
    /// ledger's unbonding period is longer).
    function slashEquivocation(uint64 round, address producer, address voter, address prover) external;

    /// @notice Voids `round`'s verdict root for `lie`, which this book's judge proved
    /// (RoundJudge.proveUncredited, the only caller), and pays `prover` half the bond, as any
    /// proven lie.
    function voidVerdicts(uint64 round, string calldata lie, address prover) external;

    /// @notice The rounds between a round and the rounds settled for it: C + 2.
    function lag() external view returns (uint64);
    // standingTotal (IRoundTotals): decided once the round's challenge window closed two rounds
    // ago; the ledger pays its own batches of the round only then, at the rate both lanes share.

    /// @notice Adds to the pool the root lane's rewards are paid from.
    function fund() external payable;
    function rewardPool() external view returns (uint256);
    /// @notice What `producer` has been paid in all, and the round of its last claim plus one
    /// (0: it never claimed).
    function paidOf(address producer) external view returns (uint128 total, uint64 through);
    /// @notice Pays the producer of a credit in a standing round (its challenge window closed two
    /// rounds ago and no challenge of it is open) what it has earned and not been paid: the
    /// credit's settled earnings, its own share (rewardPerRound * its amount / the round's
    /// credited total over both lanes: this book's and the ledger's `roundInfo`, final by then),
    /// and the shares of `tail`, its other credits in
    /// the rounds after those settled for this one (round - lag() < q < round, increasing,
    /// each standing). A producer claims from a round at least lag() after its last claim's, so
    /// that the settled earnings it claims from count everything paid before. Only the producer
    /// claims (a payment it refuses is owed to it: withdrawOwed).
    function claim(
        uint64 round,
        uint32 leafIndex,
        Credit calldata credit,
        uint128 amount,
        SumTree.Node[] calldata proof,
        Shown[] calldata tail
    ) external returns (uint256 paid);

    /// @notice Pays the aggregator (its only caller then) its bond back once the round's
    /// challenge window has passed, no lie was proven and every data challenge was answered,
    /// with its pay from the reward pool (as far as the pool holds it: the aggregator may wait
    /// for a funding): postPayBps of the round's reward times the round's credited signal in
    /// its verdict root over the signal both lanes credited in the round. The pay comes on top
    /// of the producers' shares: the pool pays a round up to postPayBps more than its reward.
    /// Called for a round whose aggregator posted no verdict root (it took the round from its
    /// producers), it voids the round instead: half the bond to the caller, half to the
    /// ledger's pool ("no verdict root").
    function release(uint64 round) external;

    function roundOf(uint64 round) external view returns (RoundView memory);
    /// @notice What a payee that refused a payment is owed.
    function owed(address payee) external view returns (uint256);
    /// @notice Takes what the caller is owed.
    function withdrawOwed() external;
    /// @notice The round's windows (see the title's note): the round its submission root is
    /// posted in, the last round its votes are taken (escalation closes the round before), the
    /// round its verdict root is posted in, and the last round a lie in either root is proven.
    function windows(uint64 round)
        external
        view
        returns (uint64 post, uint64 votesClose, uint64 verdicts, uint64 challengesEnd);
}
