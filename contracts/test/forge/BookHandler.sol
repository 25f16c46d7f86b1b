// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {IRoundBook} from "../../IRoundBook.sol";
import {ISwarmLedger} from "../../ISwarmLedger.sol";
import {Messages} from "../../lib/Messages.sol";
import {SeatDraw} from "../../lib/SeatDraw.sol";
import {SumTree} from "../../lib/SumTree.sol";
import {CheatsBase} from "./Cheats.sol";

/// @dev The round book's roster (AggregatorDraw), as the handler calls it: declared here rather
/// than imported, so that forge compiles neither it nor the judge it imports (the book under
/// test is deployed from its committed artifact).
interface IAggregatorDraw {
    function enlist() external payable;
    function resign() external;
    function withdrawBond() external;
    function draw(uint64 round) external returns (address);
    function roster() external view returns (address[] memory);
    function proveUnposted(uint64 round, IRoundBook.SignedSubmission calldata leaf, bytes calldata receipt) external;
    function drawOf(uint64 round) external view returns (address aggregator, bool drawn, uint64 requested);
    function enlisted(address node) external view returns (bool);
    function bondOf(address node) external view returns (uint256);
    function heldUntil(address node) external view returns (uint64);
}

interface IBook is IRoundBook {
    function aggregators() external view returns (address);
    function judge() external view returns (address);
}

/// @dev The book's judge (RoundJudge): its proofs of two sides of one signer, declared here for
/// the reason IAggregatorDraw is.
interface IRoundJudge {
    function proveEquivocation(
        uint64 round,
        address producer,
        IRoundBook.CastVote calldata first,
        IRoundBook.CastVote calldata second
    ) external;
    function proveDoubleSubmission(
        uint64 round,
        IRoundBook.SignedSubmission calldata first,
        IRoundBook.SignedSubmission calldata second
    ) external;
    function proveUncredited(
        uint64 round,
        uint32 index,
        IRoundBook.SignedSubmission calldata leaf,
        SumTree.Node[] calldata proof,
        IRoundBook.SignedVote[] calldata votes,
        bytes[] calldata receipts,
        IRoundBook.Shown[] calldata around
    ) external;
}

/// @notice Drives a RoundBook (and the SwarmLedger it reads) through random sequences of whole
/// root-lane rounds, the way the nodes and aggregators of docs/scaling.md play them, and keeps
/// the model the invariants (RoundBookInvariants.t.sol) compare the contracts against.
///
/// - Six nodes, staked alike in one family, sign their submissions each round; the round's
///   aggregator, drawn from the roster (each draw predicted from the model's roster), posts
///   their root with its bond, then, C + 1 rounds later, the verdict root of the batches a
///   quorum of their seated checkers agreed on (each vote signed by its checker's key, the seats
///   recomputed with the ledger's SeatDraw and the beacon the model predicts), each credit
///   carrying its producer's earnings in the settled rounds before.
/// - A submission root lies one time in three: a forged submission (a wrong key, or an
///   outsider's), withheld data, a receipted submission left out, or one never posted (no root
///   at all). A verdict root lies about half the time: a credit under quorum, with a vote its
///   voter did not sign or from an unseated voter, an amount that is not its signal, a
///   submission credited twice, a parent's sum that is not its children's, earnings that do
///   not add up or skip a credit, a credit of a batch the v4 lane holds, a batch whose
///   quorum's votes the aggregator receipted left uncredited (proven to the judge with the
///   votes and receipts its producer holds), or no verdict root. An auditor (`audit`) proves the lie when the fuzzer calls it
///   in time; a lie left unproven past its window stands, as the book says.
/// - A stranger challenges leaves of any root; the aggregators' services answer every challenge
///   they can before time moves on (`warp`), a withholding one none of its submission tree's
///   (and too late, once its window passed), and the challenger claims the bond.
/// - Producers claim what their standing credits earned, with the tail of credits the claimed
///   leaf does not count; aggregators release their bonds; anyone funds the pool; nodes enlist,
///   resign and take their roster bond back.
/// - Attackers send what the rules refuse (the *Falsely actions): claims, releases, posts, calls
///   of the judge's hooks, proofs of a left-out or unposted submission, proofs of lies against
///   honest roots, proofs of an uncredited quorum (receipts another key signed, a credited
///   batch shown above two credits, a v4 batch), escalations (a batch not in the root, a forged
///   leaf, in the book's last vote round); each must be refused with its error (its selector)
///   and move nothing.
/// - Registered nodes sign two different votes on one batch (the judge asks no seat of an
///   equivocation), producers two submissions of one round; a stranger proves it through the
///   judge and the signer is slashed once, in the window (`equivocate`); proofs that show no
///   two sides are refused.
/// - The v4 lane beside the book: nodes submit batches on the ledger itself (force inclusion),
///   seated checkers agree with them there, and producers claim them there once both lanes
///   decided the round; the book's verdict root must not credit such a batch (a lie, proven,
///   when it does), an aggregator may leave it out of its root, and a signed vote or
///   submission that contradicts the ledger's record of it is slashed (one that keeps its word
///   is refused).
///
/// Every call's outcome is predicted: an action that breaks a rule of the book (a call refused
/// that the rules allow, one accepted that they refuse, or a payment other than the rules say)
/// records a violation, which the invariant `the handler saw no violation` reports with forge's
/// shrunk sequence. An action with nothing to do reverts (forge counts it refused). Not played
/// here: an escalation the rules allow (tests/chain/test_escalation.py runs it on anvil; the
/// escalations they refuse are played, escalateFalsely), payees that refuse payment, and the ledger's disputes, appeals and
/// settlement (the ledger's own campaigns play those).
contract BookHandler is CheatsBase {
    uint64 internal constant NO_ROUND = type(uint64).max;
    uint32 internal constant NO_INDEX = type(uint32).max;
    bytes32 internal constant NO_CREDITS = keccak256("sapo.no-credits");
    uint256 internal constant NODES = 6;
    uint256 internal constant SCALE = 10_000; // the ledger's SCORE_SCALE
    uint256 internal constant BPS = 10_000;
    uint256 internal constant MAX_VOTES = 4; // the votes a credit carries, at most
    /// @dev Who challenges, audits, funds and releases rounds left without a verdict root: an
    /// account with no code (its payments go through).
    address public constant STRANGER = address(0x5757);

    // the lies of a round: of its submission root, then of its verdict root
    uint8 internal constant FORGED = 1;
    uint8 internal constant WITHHELD = 2;
    uint8 internal constant UNPOSTED = 3;
    uint8 internal constant LEFT_OUT = 4;
    uint8 internal constant UNDER_QUORUM = 1;
    uint8 internal constant INFLATED = 2;
    uint8 internal constant EARNINGS = 3;
    uint8 internal constant NO_VERDICTS = 4;
    uint8 internal constant BAD_SIGNATURE = 5;
    uint8 internal constant UNSEATED = 6;
    uint8 internal constant CREDITED_TWICE = 7;
    uint8 internal constant BAD_SUM = 8;
    uint8 internal constant SKIPPED = 9;
    uint8 internal constant V4_CREDITED = 10;
    uint8 internal constant DROPPED = 11;

    IBook public immutable book;
    ISwarmLedger public immutable ledger;
    IAggregatorDraw public immutable roster;
    IRoundJudge public immutable judge;
    bytes32 internal immutable SEPARATOR;
    uint64 internal immutable W;
    uint64 internal immutable C;
    uint64 internal immutable LAG;
    uint64 internal immutable L;
    uint256 internal immutable BOND;
    uint256 internal immutable CHALLENGE_BOND;
    uint256 internal immutable REWARD;
    uint256 internal immutable POST_PAY_BPS;
    uint256 internal immutable QUORUM;
    uint256 internal immutable CHECKERS;
    uint256 internal immutable MIN_STAKE;
    uint256 internal immutable SLASH_BPS;
    uint256 internal immutable SETTLER_CUT_BPS;
    uint64 internal immutable APPEAL_ROUNDS;
    uint64 internal immutable TOLERANCE; // the score gap a vote on an 8-rollout batch agrees within

    /// @notice The nodes, sorted by address (a submission root's order), and their keys.
    address[NODES] public nodes;
    uint256[NODES] internal _keys;

    /// @dev A round as the handler played it.
    struct Round {
        address aggregator;
        uint8 subLie;
        uint8 verdictLie;
        bool posted;
        bool verdicts;
        bool voided;
        bool released;
        bool lieProven;
        uint32 count;
        uint32 credits;
        uint128 total;
        uint32 open; // data challenges not answered or claimed
        uint32 lieIndex; // the submission leaf that carries the lie
        uint32 creditLie; // the credit leaf that carries the lie
    }

    struct Challenge {
        uint64 round;
        bool verdictTree;
        uint32 index;
        uint64 answerBy;
        bool closed;
    }

    mapping(uint64 round => Round) public rounds;
    uint64[] internal _played; // rounds with a submission root, increasing
    uint64[] internal _unposted; // rounds whose aggregator receipted a submission and posted nothing
    mapping(uint64 round => bytes[]) internal _subs; // abi.encode(SignedSubmission), by index
    mapping(uint64 round => bytes[]) internal _credits; // abi.encode(Credit), by index
    mapping(uint64 round => uint128[]) internal _amounts;
    mapping(uint64 round => bytes[]) internal _votes; // abi.encode(SignedVote[])
    mapping(uint64 round => mapping(address producer => uint32)) internal _creditOf; // index + 1
    mapping(uint64 round => bytes) internal _receipt; // the receipt of the unposted or left-out submission
    mapping(uint64 round => bytes) internal _leftOut; // abi.encode(SignedSubmission) receipted, not posted
    mapping(uint64 round => uint64) internal _skipped; // the standing round a SKIPPED credit's earnings leave out
    mapping(uint64 round => uint64) internal _postedBlock; // the block the submission root was posted in
    mapping(uint64 round => uint256) internal _beacons; // each round's beacon, once drawn
    Challenge[] internal _challenges;
    mapping(bytes32 key => bool) internal _challenged;

    // ------------------------------------------------------------------ the model's money
    /// @notice The book's reward pool as the rules move it.
    uint256 public pool;
    /// @notice The bonds of rounds posted and neither released nor void.
    uint256 public heldBonds;
    /// @notice The bonds of data challenges not answered or claimed.
    uint256 public openChallengeBonds;
    /// @notice What the book put into the ledger's pool: the forfeited halves of bonds.
    uint256 public forfeited;
    /// @notice The roster's bonds (AggregatorDraw holds them).
    uint256 public rosterBonds;
    mapping(address producer => uint256) public paid;
    /// @notice What equivocations took from the ledger's stakes: in all, each node's, and the
    /// provers' cut of it (the rest went into the ledger's pool).
    uint256 public slashed;
    uint256 public proversCut;
    mapping(address node => uint256) public slashedOf;
    mapping(bytes32 key => bool) internal _equivocationProven; // (round, producer, signer)

    // ------------------------------------------------------------------ the v4 lane beside the book
    /// @dev A batch its producer submitted on the ledger itself (force inclusion), as the model
    /// keeps it: its claim, its block (the stake snapshot; the next block's hash its beacon), its
    /// agreeing voters, whether the ledger stored its beacon, and whether its share was paid.
    struct LedgerBatch {
        uint64 score;
        uint64 signal;
        uint64 madeIn;
        uint8 agrees;
        bool paid;
        uint256 beacon; // stored by its first vote (0 before)
    }

    struct BatchKey {
        uint64 round;
        address node;
    }

    mapping(uint64 round => mapping(address node => LedgerBatch)) internal _ledgerBatches;
    mapping(uint64 round => mapping(address node => mapping(address voter => bool))) internal _ledgerVoted;
    BatchKey[] internal _ledgerKeys;
    /// @notice The signal the ledger credits in each round, and what its claims paid.
    mapping(uint64 round => uint256) public ledgerCredited;
    uint256 public ledgerPaid;
    mapping(uint64 round => bytes) internal _v4Out; // a v4 batch receipted and left out of the root
    mapping(uint64 round => bytes) internal _v4Receipt;
    /// @dev A verdict root's dropped batch: its submission's index and its quorum's votes (the
    /// aggregator receipted each), abi-encoded.
    mapping(uint64 round => bytes) internal _dropped;
    mapping(address producer => uint64) public through; // the round of its last claim + 1

    /// @dev The roster as its rules keep it: each slot's node and the block it enlisted or moved
    /// into the slot in; and, per round, the block of its draw's request and the roster's length then.
    address[] internal _slots;
    uint64[] internal _since;
    mapping(uint64 round => uint64) internal _requestedAt;
    /// @notice The roster bond each node holds, and the last round a proof of a round drawn to
    /// it may come in (its bond is held until then), as the model says.
    mapping(address node => uint256) public bondHeld;
    mapping(address node => uint64) public heldUntil;
    mapping(uint64 round => uint32) internal _countAt;

    uint256 public blockNow;
    uint256 public timeNow;
    string[] internal _violations;

    // ------------------------------------------------------------------ paths the runs reach
    string[] internal _pathNames;
    mapping(uint256 => uint256) internal _pathCount;
    uint256 internal constant HONEST_ROUNDS = 0;
    uint256 internal constant FORGED_PROVEN = 1;
    uint256 internal constant WITHHELD_VOIDED = 2;
    uint256 internal constant UNPOSTED_PROVEN = 3;
    uint256 internal constant UNDER_QUORUM_PROVEN = 4;
    uint256 internal constant INFLATED_PROVEN = 5;
    uint256 internal constant EARNINGS_PROVEN = 6;
    uint256 internal constant NO_VERDICTS_VOIDED = 7;
    uint256 internal constant LIES_STOOD = 8;
    uint256 internal constant ANSWERED = 9;
    uint256 internal constant ANSWERED_EMPTY = 10;
    uint256 internal constant RELEASED_WITH_PAY = 11;
    uint256 internal constant CLAIMS = 12;
    uint256 internal constant CLAIMS_WITH_TAIL = 13;
    uint256 internal constant CLAIMS_WITH_EARNINGS = 14;
    uint256 internal constant POOL_SHORT = 15;
    uint256 internal constant CREDITS_WITH_ANCHOR = 16;
    uint256 internal constant DRAWN_NOBODY = 17;
    uint256 internal constant BONDS_WITHDRAWN = 18;
    uint256 internal constant CHALLENGES_ON_VOID = 19;
    uint256 internal constant FALSE_CLAIMS_REFUSED = 20;
    uint256 internal constant RELEASED_SHORT = 21;
    uint256 internal constant BAD_SIGNATURE_PROVEN = 22;
    uint256 internal constant UNSEATED_PROVEN = 23;
    uint256 internal constant CREDITED_TWICE_PROVEN = 24;
    uint256 internal constant FALSE_RELEASES_REFUSED = 25;
    uint256 internal constant FALSE_POSTS_REFUSED = 26;
    uint256 internal constant FALSE_UNPOSTED_REFUSED = 27;
    uint256 internal constant LATE_ANSWERS_REFUSED = 28;
    uint256 internal constant DRAWS_PREDICTED = 29;
    uint256 internal constant LEFT_OUT_PROVEN = 30;
    uint256 internal constant FALSE_LEFT_OUT_REFUSED = 31;
    uint256 internal constant CLAIMS_RACING_CHALLENGES = 32;
    uint256 internal constant BAD_SUM_PROVEN = 33;
    uint256 internal constant SKIPPED_PROVEN = 34;
    uint256 internal constant ROSTER_REFUSALS = 35;
    uint256 internal constant HONEST_PROOFS_REFUSED = 36;
    uint256 internal constant EQUIVOCATIONS_SLASHED = 37;
    uint256 internal constant DOUBLE_SUBMISSIONS_SLASHED = 38;
    uint256 internal constant EQUIVOCATIONS_REPEATED_REFUSED = 39;
    uint256 internal constant LATE_EQUIVOCATIONS_REFUSED = 40;
    uint256 internal constant FALSE_EQUIVOCATIONS_REFUSED = 41;
    uint256 internal constant LEDGER_BATCHES = 42;
    uint256 internal constant LEDGER_CREDITS = 43;
    uint256 internal constant LEDGER_CLAIMS = 44;
    uint256 internal constant LEDGER_CLAIMS_UNDECIDED = 45;
    uint256 internal constant ROUNDS_PAID_BY_BOTH_LANES = 46;
    uint256 internal constant V4_CREDIT_PROVEN = 47;
    uint256 internal constant V4_LEFT_OUT_REFUSED = 48;
    uint256 internal constant RECORDS_CONTRADICTED = 49;
    uint256 internal constant NOT_IN_ROOT_ESCALATIONS_REFUSED = 50;
    uint256 internal constant DROPPED_PROVEN = 51;
    uint256 internal constant FALSE_UNCREDITED_REFUSED = 52;
    uint256 internal constant FORGED_ESCALATIONS_REFUSED = 53;
    uint256 internal constant LATE_ESCALATIONS_REFUSED = 54;

    constructor(IBook book_, uint256[NODES] memory keys) {
        book = book_;
        ledger = ISwarmLedger(book_.ledger());
        roster = IAggregatorDraw(book_.aggregators());
        judge = IRoundJudge(book_.judge());
        SEPARATOR = Messages.domainSeparator(address(book_));
        W = ledger.submitRounds();
        C = ledger.challengeRounds();
        LAG = book_.lag();
        L = ledger.roundLength();
        BOND = book_.bond();
        CHALLENGE_BOND = book_.challengeBond();
        REWARD = ledger.rewardPerRound();
        POST_PAY_BPS = book_.postPayBps();
        QUORUM = ledger.quorum();
        CHECKERS = ledger.checkers();
        MIN_STAKE = ledger.minStake();
        SLASH_BPS = ledger.slashBps();
        SETTLER_CUT_BPS = ledger.SETTLER_CUT_BPS();
        APPEAL_ROUNDS = ledger.appealRounds();
        TOLERANCE = uint64((8 * SCALE * ledger.agreeToleranceBps()) / BPS);
        blockNow = block.number;
        timeNow = block.timestamp;
        // sorted by address: insertion sort of six
        for (uint256 i; i < NODES; ++i) {
            uint256 key = keys[i];
            address a = vm.addr(key);
            uint256 j = i;
            while (j > 0 && nodes[j - 1] > a) {
                nodes[j] = nodes[j - 1];
                _keys[j] = _keys[j - 1];
                --j;
            }
            nodes[j] = a;
            _keys[j] = key;
        }
        string[55] memory names = [
            "honestRounds",
            "forgedProven",
            "withheldVoided",
            "unpostedProven",
            "underQuorumProven",
            "inflatedProven",
            "earningsProven",
            "noVerdictsVoided",
            "liesStood",
            "challengesAnswered",
            "answeredEmpty",
            "releasedWithPay",
            "claims",
            "claimsWithTail",
            "claimsWithEarnings",
            "poolShort",
            "creditsWithAnchor",
            "drawnNobody",
            "rosterBondsWithdrawn",
            "challengesOfVoidRounds",
            "falseClaimsRefused",
            "releasedShortOfPay",
            "badSignatureProven",
            "unseatedProven",
            "creditedTwiceProven",
            "falseReleasesRefused",
            "falsePostsRefused",
            "falseUnpostedProofsRefused",
            "lateAnswersRefused",
            "drawsPredicted",
            "leftOutProven",
            "falseLeftOutProofsRefused",
            "claimsRacingChallenges",
            "badSumProven",
            "skippedCreditProven",
            "rosterRefusals",
            "falseProofsOfHonestRootsRefused",
            "equivocationsSlashed",
            "doubleSubmissionsSlashed",
            "equivocationsProvenAgainRefused",
            "lateEquivocationsRefused",
            "falseEquivocationsRefused",
            "ledgerBatches",
            "ledgerCredits",
            "ledgerClaims",
            "ledgerClaimsBeforeTheBookDecides",
            "roundsPaidByBothLanes",
            "v4CreditProven",
            "v4LeftOutProofsRefused",
            "ledgerRecordsContradicted",
            "escalationsNotInRootRefused",
            "droppedQuorumProven",
            "falseUncreditedProofsRefused",
            "forgedEscalationsRefused",
            "lateEscalationsRefused"
        ];
        for (uint256 i; i < names.length; ++i) {
            _pathNames.push(names[i]);
        }
    }

    /// @notice Registers the six nodes (2 x minStake each) and enlists the first two.
    function seed() external {
        for (uint256 i; i < NODES; ++i) {
            vm.deal(nodes[i], 100 ether);
            vm.prank(nodes[i]);
            ledger.register{value: 2 * MIN_STAKE}("{\"book-fuzz\":true}", FAMILY);
        }
        for (uint256 i; i < 2; ++i) {
            vm.prank(nodes[i]);
            roster.enlist{value: BOND}();
            rosterBonds += BOND;
            bondHeld[nodes[i]] = BOND;
            _rosterAdd(nodes[i]);
        }
        _roll(1);
    }

    // ======================================================================== actions: time

    /// @notice Time moves on one to three rounds. Before each round ends, the aggregators'
    /// services answer every open data challenge of their rounds and post the roots due in it,
    /// as they do within the round (whether they lie is the seed's, as in post and postVerdicts).
    function warp(uint256 seed_) external {
        uint256 rounds_ = 1 + seed_ % 3;
        for (uint256 k; k < rounds_; ++k) {
            _answerAll();
            uint256 duty = uint256(keccak256(abi.encode(seed_, k, "duties")));
            _post(duty);
            _postVerdicts(duty >> 1);
            timeNow += L;
            vm.warp(timeNow);
            _roll(3);
        }
    }

    // ======================================================================== actions: roster

    /// @notice A node enlists with what its bond lacks (one already enlisted is refused).
    function enlist(uint256 seed_) external {
        address node = nodes[seed_ % NODES];
        bool already = _onRoster(node);
        uint256 due = already ? BOND : BOND - bondHeld[node];
        vm.deal(node, node.balance + due);
        vm.prank(node);
        (bool ok, bytes memory reason) = address(roster).call{value: due}(abi.encodeCall(IAggregatorDraw.enlist, ()));
        if (already) return _refusedAs("enlist (enlisted already)", ok, reason, IRoundBook.AlreadyEnlisted.selector);
        _expect("enlist", ok, reason);
        rosterBonds += due;
        bondHeld[node] = BOND;
        _rosterAdd(node);
        _roll(1);
    }

    /// @notice A node leaves the roster (one not on it is refused).
    function resign(uint256 seed_) external {
        address node = nodes[seed_ % NODES];
        vm.prank(node);
        (bool ok, bytes memory reason) = address(roster).call(abi.encodeCall(IAggregatorDraw.resign, ()));
        if (!_onRoster(node)) return _refusedAs("resign (not enlisted)", ok, reason, IRoundBook.NotEnlisted.selector);
        _expect("resign", ok, reason);
        _rosterRemove(node);
        _roll(1);
    }

    /// @notice A node takes its roster bond back: refused while it is enlisted, when it holds
    /// none, and until the proof window of the last round drawn to it has closed.
    function withdrawRosterBond(uint256 seed_) external {
        address node = nodes[seed_ % NODES];
        uint256 amount = bondHeld[node];
        uint256 before = node.balance;
        vm.prank(node);
        (bool ok, bytes memory reason) = address(roster).call(abi.encodeCall(IAggregatorDraw.withdrawBond, ()));
        if (_onRoster(node)) return _refusedAs("withdrawBond (enlisted)", ok, reason, IRoundBook.StillEnlisted.selector);
        if (amount == 0) return _refusedAs("withdrawBond (no bond)", ok, reason, IRoundBook.NothingOwed.selector);
        if (ledger.currentRound() <= heldUntil[node]) {
            return _refusedAs("withdrawBond (held for a proof)", ok, reason, IRoundBook.BondHeld.selector);
        }
        _expect("withdrawBond", ok, reason);
        _paidExactly("withdrawBond", node, before, amount);
        rosterBonds -= amount;
        bondHeld[node] = 0;
        _hit(BONDS_WITHDRAWN);
    }

    function _onRoster(address node) internal view returns (bool) {
        for (uint256 i; i < _slots.length; ++i) {
            if (_slots[i] == node) return true;
        }
        return false;
    }

    /// @dev A call the rules refuse: it must be refused with `refusal`.
    function _refusedAs(string memory what, bool ok, bytes memory reason, bytes4 refusal) internal {
        if (ok || bytes4(reason) != refusal) {
            return _violate(string.concat(what, ": not refused as the rules say: ", ok ? "taken" : _hex4(reason)));
        }
        _hit(ROSTER_REFUSALS);
    }

    /// @notice Requests the draw of the aggregator of this round or the next, or, once requested,
    /// draws it (anyone may): the roster may change between the two calls, and the draw must
    /// count only who was enlisted at the request. Also one call in eight, a request too far
    /// ahead, which the roster must refuse.
    function drawAggregator(uint256 seed_) external {
        uint64 current = ledger.currentRound();
        if (seed_ % 8 == 7) {
            uint64 far = current + 2 + uint64((seed_ >> 8) % 4);
            (bool ok, bytes memory reason) = address(roster).call(abi.encodeCall(IAggregatorDraw.draw, (far)));
            if (ok || bytes4(reason) != IRoundBook.DrawNotOpen.selector) {
                return _violate("draw: a request more than a round ahead was not refused");
            }
            return _hit(FALSE_POSTS_REFUSED);
        }
        uint64 round = current + uint64(seed_ % 2);
        (, bool drawn, uint64 requested) = roster.drawOf(round);
        if (drawn) _nothing();
        if (requested == 0 || blockNow - requested > 256) _request(round);
        else _reveal(round);
    }

    // ======================================================================== actions: a round

    /// @notice The drawn aggregator of the round whose post round this is posts its producers'
    /// signed submissions (drawing it first if nobody did), honestly or with a lie of its root.
    function post(uint256 seed_) external {
        if (!_post(seed_)) _nothing();
    }

    function _post(uint256 seed_) internal returns (bool) {
        uint64 current = ledger.currentRound();
        if (current < W + 1) return false;
        uint64 r = current - W - 1;
        Round storage g = rounds[r];
        if (g.posted || g.subLie == UNPOSTED) return false;
        (address aggregator, bool drawn,) = roster.drawOf(r);
        if (!drawn) {
            aggregator = _draw(r);
            if (aggregator == address(0)) return true; // drawn with nobody: its producers use the ledger
        }
        if (aggregator == address(0)) return false;
        IRoundBook.SignedSubmission[] memory subs = _signSubmissions(r, seed_);
        if ((seed_ >> 96) % 2 == 0) {
            // it receipted a producer's batch the v4 lane holds, and leaves it out (the book
            // credits none of it): not a lie, and its producer's proof of it is refused
            for (uint256 i; i < subs.length; ++i) {
                if (_ledgerBatches[r][subs[i].producer].madeIn == 0) continue;
                _v4Out[r] = abi.encode(subs[i]);
                _v4Receipt[r] = _sig(_keyOf(aggregator), _receiptHash(subs[i]));
                subs = _without(subs, i);
                break;
            }
        }
        uint8 lie = uint8((seed_ >> 64) % 12); // 4..7 a lie, else honest
        g.aggregator = aggregator;
        if (lie == 4) {
            g.subLie = FORGED;
            g.lieIndex = uint32((seed_ >> 72) % subs.length);
            IRoundBook.SignedSubmission memory f = subs[g.lieIndex];
            if ((seed_ >> 80) % 2 == 0) {
                // signed with the next node's key: a submission its producer never signed
                f.signature = _sig(_keys[(_indexOf(f.producer) + 1) % NODES], _submissionHash(f.submission));
            } else {
                // an outsider's, signed with its own key: a submission of no registered node
                uint256 key = uint256(keccak256(abi.encode("outsider", r)));
                f.producer = vm.addr(key);
                f.signature = _sig(key, _submissionHash(f.submission));
                g.lieIndex = _sortByProducer(subs, g.lieIndex);
            }
        } else if (lie == 7) {
            // it receipts one producer's submission and leaves it out of the root (one the v4
            // lane does not hold: leaving that out is no lie)
            uint256 out = (seed_ >> 72) % subs.length;
            for (uint256 k; k < subs.length && _ledgerBatches[r][subs[out].producer].madeIn != 0; ++k) {
                out = (out + 1) % subs.length;
            }
            if (_ledgerBatches[r][subs[out].producer].madeIn == 0) {
                g.subLie = LEFT_OUT;
                _leftOut[r] = abi.encode(subs[out]);
                _receipt[r] = _sig(_keyOf(aggregator), _receiptHash(subs[out]));
                subs = _without(subs, out);
            }
        } else if (lie == 5) {
            g.subLie = WITHHELD;
        } else if (lie == 6) {
            // it receipts the first producer's submission, and posts no root
            g.subLie = UNPOSTED;
            _subs[r].push(abi.encode(subs[0]));
            _receipt[r] = _sig(_keyOf(aggregator), _receiptHash(subs[0]));
            _unposted.push(r);
            return true;
        }
        SumTree.Node[] memory leaves = new SumTree.Node[](subs.length);
        for (uint256 i; i < subs.length; ++i) {
            _subs[r].push(abi.encode(subs[i]));
            leaves[i] = _submissionNode(subs[i]);
        }
        (, SumTree.Node memory root) = _proof(leaves, 0);
        vm.deal(aggregator, aggregator.balance + BOND);
        vm.prank(aggregator);
        (bool ok, bytes memory reason) = address(book).call{value: BOND}(
            abi.encodeCall(IRoundBook.postSubmissions, (r, root.hash, uint32(subs.length), keccak256(abi.encode(r))))
        );
        _expect("postSubmissions", ok, reason);
        g.posted = true;
        g.count = uint32(subs.length);
        _postedBlock[r] = uint64(blockNow);
        heldBonds += BOND;
        _played.push(r);
        if (g.subLie == 0) _hit(HONEST_ROUNDS);
        _roll(1);
        return true;
    }

    /// @notice The aggregator posts the verdict root of the round whose verdict round this is:
    /// every batch a quorum of its seated checkers signed agreeing votes on, honestly or with a
    /// lie of the root (or none at all).
    function postVerdicts(uint256 seed_) external {
        if (!_postVerdicts(seed_)) _nothing();
    }

    function _postVerdicts(uint256 seed_) internal returns (bool) {
        uint64 current = ledger.currentRound();
        if (current < W + C + 2) return false;
        uint64 r = current - W - C - 2;
        Round storage g = rounds[r];
        if (!g.posted || g.verdicts || g.voided || g.verdictLie == NO_VERDICTS) return false;
        uint8 lie = uint8(seed_ % 26); // 6..15 a lie, else honest
        if (lie == 15) {
            g.verdictLie = NO_VERDICTS;
            return true;
        }
        // the seats of the round's committees: stakes as of the root's block, the beacon the hash
        // of the block after it (postVerdicts draws it: the model predicts it)
        IRoundBook.RoundView memory v = _snapshot(r);
        uint8[9] memory lies =
            [UNDER_QUORUM, INFLATED, EARNINGS, BAD_SIGNATURE, UNSEATED, CREDITED_TWICE, BAD_SUM, SKIPPED, V4_CREDITED];
        uint8 verdictLie = lie >= 6 && lie < 15 ? lies[lie - 6] : 0;
        if (verdictLie == 0 && (seed_ >> 16) % 8 == 0) verdictLie = V4_CREDITED; // (rare otherwise)
        if (verdictLie == 0 && (seed_ >> 16) % 8 == 1) verdictLie = DROPPED;
        (IRoundBook.Credit[] memory credits, uint128[] memory amounts, bytes[] memory votes) =
            _verdicts(r, v, verdictLie == V4_CREDITED);
        if (verdictLie == V4_CREDITED) {
            // a credit of a batch the v4 lane holds (one round paid by both lanes)
            uint256 j;
            while (j < credits.length && _ledgerBatches[r][credits[j].producer].madeIn == 0) ++j;
            if (j == credits.length) verdictLie = 0; // none to credit: the honest root
            else g.creditLie = uint32(j);
        }
        if (credits.length == 0) verdictLie = 0;
        if (verdictLie == UNSEATED && !_unseatedVote(r, v, credits[0], votes)) verdictLie = 0;
        if (verdictLie == CREDITED_TWICE) (credits, amounts, votes) = _creditedTwice(credits, amounts, votes);
        if (verdictLie == BAD_SUM && credits.length < 2) verdictLie = 0; // a parent's sum: two leaves at least
        if (verdictLie == DROPPED) {
            // it receipted a quorum's votes on a batch and leaves the batch uncredited
            uint256 j = (seed_ >> 24) % credits.length;
            _dropped[r] = abi.encode(credits[j].index, votes[j]);
            (credits, amounts, votes) = _withoutCredit(credits, amounts, votes, j);
        }
        if (verdictLie == SKIPPED && !_skipOne(r, g, credits)) verdictLie = 0;
        // (half the lies of earnings skip a credit, where one can be skipped: it takes a producer
        // with two standing credits among the settled rounds, which only longer runs have)
        if (verdictLie == EARNINGS && (seed_ >> 8) % 2 == 0 && _skipOne(r, g, credits)) verdictLie = SKIPPED;
        if (verdictLie == UNDER_QUORUM) {
            IRoundBook.SignedVote[] memory all = abi.decode(votes[0], (IRoundBook.SignedVote[]));
            IRoundBook.SignedVote[] memory few = new IRoundBook.SignedVote[](QUORUM - 1);
            for (uint256 k; k < few.length; ++k) {
                few[k] = all[k];
            }
            votes[0] = abi.encode(few);
            credits[0].votes = keccak256(votes[0]);
        } else if (verdictLie == INFLATED) {
            amounts[0] += 1;
        } else if (verdictLie == EARNINGS) {
            // on a credit whose earnings have an anchor, where there is one (the sum is checked)
            uint256 at;
            while (at + 1 < credits.length && credits[at].earnings.anchor == NO_ROUND) ++at;
            credits[at].earnings.settled += 1;
            g.creditLie = uint32(at);
        } else if (verdictLie == BAD_SIGNATURE) {
            // the first vote's signature made by another node's key
            IRoundBook.SignedVote[] memory signed = abi.decode(votes[0], (IRoundBook.SignedVote[]));
            signed[0].signature = _sig(_keys[(_indexOf(signed[0].voter) + 1) % NODES], keccak256("not the vote"));
            votes[0] = abi.encode(signed);
            credits[0].votes = keccak256(votes[0]);
        }
        g.verdictLie = verdictLie;
        uint128 total;
        bytes32 root = NO_CREDITS;
        if (credits.length != 0) {
            SumTree.Node[] memory leaves = new SumTree.Node[](credits.length);
            for (uint256 i; i < credits.length; ++i) {
                total += amounts[i];
                leaves[i] = SumTree.leaf(keccak256(abi.encode(credits[i])), amounts[i]);
                _credits[r].push(abi.encode(credits[i]));
                _amounts[r].push(amounts[i]);
                _votes[r].push(votes[i]);
                // (under a BAD_SUM root the first two leaves reach no root: never claimable)
                if (verdictLie != BAD_SUM || i >= 2) _creditOf[r][credits[i].producer] = uint32(i + 1);
                if (credits[i].earnings.anchor != NO_ROUND) _hit(CREDITS_WITH_ANCHOR);
            }
            (, SumTree.Node memory top) = _proofOf(leaves, 0, verdictLie == BAD_SUM);
            root = top.hash;
            total = top.sum; // (a BAD_SUM root's is one more than its leaves')
        }
        vm.prank(g.aggregator);
        (bool ok, bytes memory reason) = address(book).call(
            abi.encodeCall(IRoundBook.postVerdicts, (r, root, uint32(credits.length), total, keccak256(abi.encode(r, "v"))))
        );
        _expect("postVerdicts", ok, reason);
        _checkSnapshot(r);
        g.verdicts = true;
        g.credits = uint32(credits.length);
        g.total = total;
        return true;
    }

    /// @notice An auditor proves the lie of a round it finds, in its window: each proof voids the
    /// root and pays the auditor half the bond and the ledger's pool the rest.
    function audit(uint256 seed_) external {
        uint64 current = ledger.currentRound();
        // a receipted submission never posted: proven on the roster, from its bond
        for (uint256 i; i < _unposted.length; ++i) {
            uint64 r = _unposted[(i + seed_) % _unposted.length];
            Round storage g = rounds[r];
            if (g.lieProven || current <= r + W + 1 || current > r + W + 1 + C) continue;
            return _proveUnposted(r, g);
        }
        for (uint256 i; i < _played.length; ++i) {
            uint64 r = _played[(i + seed_) % _played.length];
            Round storage g = rounds[r];
            if (g.voided || g.lieProven || current > _challengeEnd(r)) continue;
            if (g.subLie == FORGED) return _proveForged(r, g);
            if (g.subLie == LEFT_OUT) return _proveLeftOut(r, g);
            if (g.subLie == WITHHELD && !_challenged[_key(r, false, 0)]) return _challenge(r, false, 0);
            if (
                g.verdicts
                    && (g.verdictLie == UNDER_QUORUM || g.verdictLie == INFLATED || g.verdictLie == BAD_SIGNATURE
                        || g.verdictLie == UNSEATED || g.verdictLie == V4_CREDITED)
            ) return _proveBadCredit(r, g);
            if (g.verdicts && g.verdictLie == CREDITED_TWICE) return _proveCreditedTwice(r, g);
            if (g.verdicts && g.verdictLie == DROPPED) return _proveDropped(r, g);
            if (g.verdicts && g.verdictLie == BAD_SUM) return _proveBadSum(r, g);
            if (g.verdicts && g.verdictLie == SKIPPED) return _proveSkipped(r, g);
            if (g.verdicts && g.verdictLie == EARNINGS) return _proveBadEarnings(r, g);
        }
        // a round left without a verdict root, past its window: anyone voids it
        for (uint256 i; i < _played.length; ++i) {
            uint64 r = _played[(i + seed_) % _played.length];
            Round storage g = rounds[r];
            if (!g.voided && !g.verdicts && current > _challengeEnd(r) && g.open == 0) return _release(r, STRANGER);
        }
        _nothing();
    }

    /// @notice A stranger challenges a leaf (or an empty place past the leaves) of a root.
    function challenge(uint256 seed_) external {
        if (_played.length == 0) _nothing();
        uint64 r = _played[seed_ % _played.length];
        Round storage g = rounds[r];
        if (ledger.currentRound() > _challengeEnd(r)) _nothing();
        bool verdictTree = (seed_ >> 8) % 2 == 1 && g.verdicts && g.credits != 0;
        uint256 width = uint256(1) << SumTree.depth(verdictTree ? g.credits : g.count);
        uint32 index = uint32((seed_ >> 16) % width);
        if (_challenged[_key(r, verdictTree, index)]) _nothing();
        _challenge(r, verdictTree, index);
    }

    /// @notice The aggregators answer the open challenges they answer (all but a withholding
    /// one's of its submission tree).
    function answer(uint256) external {
        if (_answerAll() == 0) _nothing();
    }

    /// @notice The challenger of a leaf nobody showed in time takes its bond back and half the
    /// aggregator's (the root is void), or only its own when the root was void already.
    function claimUnanswered(uint256 seed_) external {
        uint64 current = ledger.currentRound();
        for (uint256 i; i < _challenges.length; ++i) {
            Challenge storage c = _challenges[(i + seed_) % _challenges.length];
            if (c.closed || current <= c.answerBy) continue;
            Round storage g = rounds[c.round];
            if (g.subLie == WITHHELD && !c.verdictTree) {
                // the withholding aggregator answers now, with the leaf it kept: too late
                vm.prank(g.aggregator);
                (bool late, bytes memory why) = address(book).call(_answerCall(c));
                if (late || bytes4(why) != IRoundBook.AnswerWindowClosed.selector) {
                    return _violate(string.concat("answer: a late answer was not refused: ", late ? "taken" : _hex4(why)));
                }
                _hit(LATE_ANSWERS_REFUSED);
            }
            if (g.verdicts && g.credits != 0 && !g.voided && current >= _challengeEnd(c.round) + 2) {
                // a producer races the challenger: a round with a challenge open does not stand
                IRoundBook.Credit memory credit = abi.decode(_credits[c.round][0], (IRoundBook.Credit));
                vm.prank(credit.producer);
                (bool paid_, bytes memory no) = address(book).call(
                    abi.encodeCall(
                        IRoundBook.claim,
                        (c.round, 0, credit, _amounts[c.round][0], _creditProof(c.round, 0), _tail(credit.producer, c.round))
                    )
                );
                if (paid_ || bytes4(no) != IRoundBook.NotSettled.selector) {
                    return _violate("claim: a credit of a round with a challenge open was not refused as NotSettled");
                }
                _hit(CLAIMS_RACING_CHALLENGES);
            }
            bool voids = !g.voided;
            uint256 before = STRANGER.balance;
            vm.prank(STRANGER);
            (bool ok, bytes memory reason) = address(book).call(
                abi.encodeCall(IRoundBook.claimUnanswered, (c.round, c.verdictTree, c.index))
            );
            _expect("claimUnanswered", ok, reason);
            c.closed = true;
            g.open -= 1;
            openChallengeBonds -= CHALLENGE_BOND;
            _paidExactly("claimUnanswered", STRANGER, before, CHALLENGE_BOND + (voids ? BOND / 2 : 0));
            if (voids) {
                _forfeit(g);
                if (!_answerable(g, c)) {
                    g.lieProven = true;
                    _hit(WITHHELD_VOIDED);
                } else {
                    _violate("claimUnanswered: a root voided although its aggregator answers what it is asked");
                }
            }
            return;
        }
        _nothing();
    }

    /// @notice An aggregator takes its bond back, with its pay, once its round's window closed.
    function release(uint256 seed_) external {
        uint64 current = ledger.currentRound();
        for (uint256 i; i < _played.length; ++i) {
            uint64 r = _played[(i + seed_) % _played.length];
            Round storage g = rounds[r];
            if (g.verdicts && !g.voided && !g.released && current > _challengeEnd(r) && g.open == 0) {
                return _release(r, g.aggregator);
            }
        }
        _nothing();
    }

    /// @notice Anyone adds to the root lane's reward pool: up to 1 ether a call, one call in two
    /// (about half what the rounds pay out, so that claims and an aggregator's pay meet a short
    /// pool too).
    function fund(uint256 amount) external {
        if (uint256(keccak256(abi.encode(amount, "fund"))) % 2 == 0) _nothing();
        amount = bound(amount, 1, 1 ether);
        vm.deal(STRANGER, STRANGER.balance + amount);
        vm.prank(STRANGER);
        (bool ok, bytes memory reason) = address(book).call{value: amount}(abi.encodeCall(IRoundBook.fund, ()));
        _expect("fund", ok, reason);
        pool += amount;
    }

    /// @notice A producer claims what it earned: from its latest standing credit it may claim
    /// from, with the tail of its credits that credit's earnings do not count yet.
    function claim(uint256 seed_) external {
        address p = nodes[seed_ % NODES];
        (uint64 r, uint32 index) = _claimable(p);
        if (index == 0) _nothing();
        index -= 1;
        IRoundBook.Credit memory credit = abi.decode(_credits[r][index], (IRoundBook.Credit));
        uint128 amount = _amounts[r][index];
        IRoundBook.Shown[] memory tail = _tail(p, r);
        // what the rules pay: the credit's settled earnings (as its standing leaf says them: a
        // lie of earnings nobody proved in time is paid, and carried on), its share and its tail's
        uint256 due = credit.earnings.settled + _share(r, amount);
        for (uint256 i; i < tail.length; ++i) {
            due += _share(tail[i].round, tail[i].amount);
        }
        uint256 expected = due > paid[p] ? due - paid[p] : 0;
        uint256 before = p.balance;
        vm.prank(p);
        (bool ok, bytes memory reason) = address(book).call(
            abi.encodeCall(IRoundBook.claim, (r, index, credit, amount, _creditProof(r, index), tail))
        );
        // (a violation is recorded and kept: only a refusal as predicted reverts the action)
        if (expected == 0) {
            if (ok || bytes4(reason) != IRoundBook.NothingToClaim.selector) {
                return _violate("claim: a claim of nothing new was not refused as NothingToClaim");
            }
            _nothing();
        }
        if (expected > pool) {
            if (ok || bytes4(reason) != IRoundBook.PoolInsufficient.selector) {
                return _violate("claim: a claim beyond the pool was not refused as PoolInsufficient");
            }
            _hit(POOL_SHORT);
            return;
        }
        _expect("claim", ok, reason);
        _paidExactly("claim", p, before, expected);
        paid[p] = due;
        pool -= expected;
        through[p] = r + 1;
        _hit(CLAIMS);
        if (tail.length != 0) _hit(CLAIMS_WITH_TAIL);
        if (credit.earnings.settled != 0) _hit(CLAIMS_WITH_EARNINGS);
    }

    /// @notice A claim the rules refuse, each an attack on the payouts: a stranger claims a
    /// producer's credit (it would push back the producer's next claim), a producer claims again
    /// too soon after its last claim (the rounds that claim paid, paid again), a tail names a
    /// credit twice (its share paid twice), a credit of a round that does not stand yet, or a
    /// credit of a void round. Each must be refused with its error, and move nothing.
    function claimFalsely(uint256 seed_) external {
        uint256 how = seed_ % 5;
        address p = nodes[(seed_ >> 8) % NODES];
        address sender = p;
        uint64 r;
        uint32 at;
        IRoundBook.Shown[] memory tail;
        bytes4 refusal;
        if (how == 0 || how == 2) {
            (r, at) = _claimable(p);
            if (at == 0) _nothing();
            tail = _tail(p, r);
            if (how == 0) {
                sender = nodes[((seed_ >> 8) + 1) % NODES];
                refusal = IRoundBook.NotTheProducer.selector;
            } else {
                if (tail.length == 0) _nothing();
                IRoundBook.Shown[] memory twice = new IRoundBook.Shown[](tail.length + 1);
                for (uint256 i; i < tail.length; ++i) {
                    twice[i] = tail[i];
                }
                twice[tail.length] = tail[tail.length - 1];
                tail = twice;
                refusal = IRoundBook.BadTail.selector;
            }
        } else {
            // a credit of p in a round it may not claim from: too soon after its last claim, or
            // in a round that does not stand (not yet, or void)
            for (uint256 i = _played.length; i > 0 && at == 0; --i) {
                uint64 q = _played[i - 1];
                uint32 index = _creditOf[q][p];
                if (index == 0) continue;
                bool standing = _stands(q);
                bool soon = standing && through[p] != 0 && q < through[p] - 1 + LAG;
                if ((how == 1 && soon) || (how == 3 && !standing && !rounds[q].voided) || (how == 4 && rounds[q].voided)) {
                    (r, at) = (q, index);
                }
            }
            if (at == 0) _nothing();
            tail = _tail(p, r);
            refusal = how == 1 ? IRoundBook.ClaimTooSoon.selector : IRoundBook.NotSettled.selector;
        }
        IRoundBook.Credit memory credit = abi.decode(_credits[r][at - 1], (IRoundBook.Credit));
        (uint128 paidBefore, uint64 throughBefore) = book.paidOf(p);
        uint256 poolBefore = book.rewardPool();
        vm.prank(sender);
        (bool ok, bytes memory reason) = address(book).call(
            abi.encodeCall(IRoundBook.claim, (r, at - 1, credit, _amounts[r][at - 1], _creditProof(r, at - 1), tail))
        );
        if (ok || bytes4(reason) != refusal) {
            string[5] memory what = [
                "a stranger's claim of a producer's credit",
                "a claim too soon after the last",
                "a claim whose tail names a credit twice",
                "a claim of a round that does not stand yet",
                "a claim of a void round"
            ];
            return _violate(string.concat("claimFalsely: ", what[how], " was not refused: ", ok ? "paid" : _hex4(reason)));
        }
        (uint128 paidAfter, uint64 throughAfter) = book.paidOf(p);
        if (paidAfter != paidBefore || throughAfter != throughBefore || book.rewardPool() != poolBefore) {
            return _violate("claimFalsely: a refused claim moved money");
        }
        _hit(FALSE_CLAIMS_REFUSED);
    }

    /// @notice A release the rules refuse: a stranger's of an aggregator's round (it would choose
    /// when the pool is short and cut the aggregator's pay), one while a data challenge is open,
    /// a second one, one before the challenge window closed, one of a void round.
    function releaseFalsely(uint256 seed_) external {
        uint256 how = seed_ % 5;
        uint64 current = ledger.currentRound();
        for (uint256 i; i < _played.length; ++i) {
            uint64 r = _played[(i + (seed_ >> 8)) % _played.length];
            Round storage g = rounds[r];
            bool closed = current > _challengeEnd(r);
            bool live = !g.voided && !g.released;
            address caller = g.aggregator;
            bytes4 refusal;
            if (how == 0 && live && g.verdicts && closed && g.open == 0) {
                (caller, refusal) = (STRANGER, IRoundBook.NotTheAggregator.selector);
            } else if (how == 1 && live && closed && g.open != 0) {
                refusal = IRoundBook.ChallengesOpen.selector;
            } else if (how == 2 && g.released) {
                refusal = IRoundBook.NoSuchRoot.selector;
            } else if (how == 3 && live && !closed) {
                refusal = IRoundBook.ChallengeWindowOpen.selector;
            } else if (how == 4 && g.voided) {
                refusal = IRoundBook.BondForfeited.selector;
            } else {
                continue;
            }
            uint256 held = address(book).balance;
            vm.prank(caller);
            (bool ok, bytes memory reason) = address(book).call(abi.encodeCall(IRoundBook.release, (r)));
            if (ok || bytes4(reason) != refusal || address(book).balance != held) {
                string[5] memory what = [
                    "a stranger's release of an aggregator's round",
                    "a release with a data challenge open",
                    "a second release",
                    "a release before the challenge window closed",
                    "a release of a void round"
                ];
                return _violate(string.concat("releaseFalsely: ", what[how], " was not refused: ", ok ? "paid" : _hex4(reason)));
            }
            return _hit(FALSE_RELEASES_REFUSED);
        }
        _nothing();
    }

    /// @notice A post or a hook call the rules refuse: a submission root by a node that is not
    /// the round's drawn aggregator (a rival's root, first, leaving out who the drawn one
    /// receipted), a verdict root of no credit under another hash (one that credits, posted as
    /// none), and a stranger calling the hooks only the book's judge may call (voiding a verdict
    /// root, slashing a checker).
    function postFalsely(uint256 seed_) external {
        uint256 how = seed_ % 5;
        if (how == 4) {
            // a stranger binds the ledger to the book it names (only the book may)
            vm.prank(STRANGER);
            (bool bound, bytes memory why) = address(ledger).call(abi.encodeCall(ISwarmLedger.bindBook, ()));
            if (bound || bytes4(why) != ISwarmLedger.NotTheBook.selector) {
                return _violate(string.concat("postFalsely: a stranger binding the ledger's book was not refused: ", bound ? "taken" : _hex4(why)));
            }
            return _hit(FALSE_POSTS_REFUSED);
        }
        uint64 current = ledger.currentRound();
        address caller = STRANGER;
        bytes memory call_;
        bytes4 refusal = IRoundBook.NotTheJudge.selector;
        if (how == 0) {
            if (current < W + 1) _nothing();
            uint64 r = current - W - 1;
            (address aggregator, bool drawn,) = roster.drawOf(r);
            if (!drawn || rounds[r].posted) _nothing();
            caller = nodes[(seed_ >> 8) % NODES];
            if (caller == aggregator) caller = nodes[((seed_ >> 8) + 1) % NODES];
            call_ = abi.encodeCall(IRoundBook.postSubmissions, (r, keccak256(abi.encode("a rival root", r)), 1, bytes32(0)));
            refusal = IRoundBook.NotTheDrawnAggregator.selector;
        } else if (how == 1) {
            if (current < W + C + 2) _nothing();
            uint64 r = current - W - C - 2;
            Round storage g = rounds[r];
            if (!g.posted || g.verdicts) _nothing();
            caller = g.aggregator;
            call_ = abi.encodeCall(IRoundBook.postVerdicts, (r, keccak256(abi.encode("credits", r)), 0, 0, bytes32(0)));
            refusal = IRoundBook.EmptyRoot.selector;
        } else {
            if (_played.length == 0) _nothing();
            uint64 r = _played[(seed_ >> 8) % _played.length];
            call_ = how == 2
                ? abi.encodeCall(IRoundBook.voidVerdicts, (r, "a lie no judge found", STRANGER))
                : abi.encodeCall(IRoundBook.slashEquivocation, (r, nodes[0], nodes[1], STRANGER));
        }
        uint256 held = address(book).balance;
        uint256 funded = ledger.totalFunded();
        vm.deal(caller, caller.balance + BOND);
        vm.prank(caller);
        (bool ok, bytes memory reason) = address(book).call{value: how == 0 ? BOND : 0}(call_);
        if (ok || bytes4(reason) != refusal || address(book).balance != held || ledger.totalFunded() != funded) {
            string[4] memory what = [
                "a submission root posted by a node not drawn",
                "a verdict root of no credit under another hash",
                "a stranger voiding a verdict root",
                "a stranger slashing a checker"
            ];
            return _violate(string.concat("postFalsely: ", what[how], " was not refused: ", ok ? "taken" : _hex4(reason)));
        }
        _hit(FALSE_POSTS_REFUSED);
    }

    /// @notice A proof of an unposted round the rules refuse: the proof of a proven round sent
    /// again (once its aggregator enlisted anew, its new bond), a receipt another key signed,
    /// and a round its aggregator did post.
    function proveUnpostedFalsely(uint256 seed_) external {
        uint256 how = seed_ % 3;
        uint64 current = ledger.currentRound();
        uint64 r;
        bool found;
        if (how == 2) {
            for (uint256 i; i < _played.length && !found; ++i) {
                uint64 q = _played[(i + (seed_ >> 8)) % _played.length];
                if (current > q + W + 1 && current <= q + W + 1 + C) (r, found) = (q, true);
            }
        } else {
            for (uint256 i; i < _unposted.length && !found; ++i) {
                uint64 q = _unposted[(i + (seed_ >> 8)) % _unposted.length];
                bool window = current > q + W + 1 && current <= q + W + 1 + C;
                if (window && rounds[q].lieProven == (how == 0)) (r, found) = (q, true);
            }
        }
        if (!found) _nothing();
        Round storage g = rounds[r];
        if (how == 0 && !_onRoster(g.aggregator)) {
            // its service restarts and enlists anew, with a new bond: a replay must not take it
            uint256 due = BOND - bondHeld[g.aggregator];
            vm.deal(g.aggregator, g.aggregator.balance + due);
            vm.prank(g.aggregator);
            roster.enlist{value: due}();
            rosterBonds += due;
            bondHeld[g.aggregator] = BOND;
            _rosterAdd(g.aggregator);
        }
        IRoundBook.SignedSubmission memory leaf = abi.decode(_subs[r][0], (IRoundBook.SignedSubmission));
        bytes memory receipt = how == 0
            ? _receipt[r]
            : _sig(how == 1 ? _keys[(_indexOf(g.aggregator) + 1) % NODES] : _keyOf(g.aggregator), _receiptHash(leaf));
        uint256 held = address(roster).balance;
        vm.prank(STRANGER);
        (bool ok, bytes memory reason) =
            address(roster).call(abi.encodeCall(IAggregatorDraw.proveUnposted, (r, leaf, receipt)));
        if (ok || bytes4(reason) != IRoundBook.NoLie.selector || address(roster).balance != held) {
            string[3] memory what = [
                "a proof of an unposted round sent again",
                "a receipt another key signed",
                "a proof against a round its aggregator posted"
            ];
            return _violate(
                string.concat("proveUnpostedFalsely: ", what[how], " was not refused: ", ok ? "paid" : _hex4(reason))
            );
        }
        _hit(FALSE_UNPOSTED_REFUSED);
    }

    /// @notice A proof of a lie against an honest round, which the rules refuse (an over-strict
    /// rule would void an honest aggregator's root and take its bond): its leaf forged, two
    /// leaves unsorted, a credit false, two credits unsorted, a parent's sum, a credit's
    /// earnings.
    function proveHonestFalsely(uint256 seed_) external {
        uint256 how = seed_ % 6;
        uint64 current = ledger.currentRound();
        for (uint256 i; i < _played.length; ++i) {
            uint64 r = _played[(i + (seed_ >> 8)) % _played.length];
            Round storage g = rounds[r];
            if (g.subLie != 0 || g.verdictLie != 0 || g.voided || current > _challengeEnd(r)) continue;
            // (built by an external call of this handler: inlined, its locals overflow the stack)
            bytes memory call_ = this.honestProof(r, how, seed_ >> 16);
            if (call_.length == 0) continue;
            uint256 held = address(book).balance;
            vm.prank(STRANGER);
            (bool ok, bytes memory reason) = address(book).call(call_);
            IRoundBook.RoundView memory v = book.roundOf(r);
            bool voided = v.submissionsVoided || v.verdictsVoided;
            if (ok || bytes4(reason) != IRoundBook.NoLie.selector || address(book).balance != held || voided) {
                return _honestNotRefused(how, ok, reason);
            }
            return _hit(HONEST_PROOFS_REFUSED);
        }
        _nothing();
    }

    function _badCreditCall(uint64 r, uint32 j, IRoundBook.Credit memory c) internal view returns (bytes memory) {
        return abi.encodeCall(
            IRoundBook.proveBadCredit,
            (
                r,
                j,
                c,
                _amounts[r][j],
                _creditProof(r, j),
                _subAt(r, c.index),
                _submissionProof(r, c.index),
                abi.decode(_votes[r][j], (IRoundBook.SignedVote[]))
            )
        );
    }

    function _honestNotRefused(uint256 how, bool ok, bytes memory reason) internal {
        string[6] memory what = [
            "a forged submission",
            "submissions out of order",
            "a false credit",
            "credits out of order",
            "a sum that is not its children's",
            "earnings that do not add up"
        ];
        _violate(
            string.concat(
                "proveHonestFalsely: ", what[how], " shown in an honest round was not refused: ", ok ? "voided" : _hex4(reason)
            )
        );
    }

    /// @notice The call of proveHonestFalsely's proof `how` against round r's honest roots
    /// ("" when the round has no such leaves).
    function honestProof(uint64 r, uint256 how, uint256 pick) external view returns (bytes memory) {
        Round storage g = rounds[r];
        if (how == 0) {
            uint32 i = uint32(pick % g.count);
            return abi.encodeCall(IRoundBook.proveForgedSubmission, (r, i, _subAt(r, i), _submissionProof(r, i)));
        }
        if (how == 1) {
            if (g.count < 2) return "";
            uint32 i = uint32(pick % (g.count - 1));
            return abi.encodeCall(
                IRoundBook.proveUnsorted, (r, i, _subAt(r, i), _submissionProof(r, i), _subAt(r, i + 1), _submissionProof(r, i + 1))
            );
        }
        return _honestCreditProof(r, g, how, pick);
    }

    function _honestCreditProof(uint64 r, Round storage g, uint256 how, uint256 pick) internal view returns (bytes memory) {
        uint32 n = g.credits;
        if (!g.verdicts || n == 0 || (how >= 3 && how <= 4 && n < 2)) return "";
        uint32 j = uint32(pick % (how == 3 ? n - 1 : n));
        IRoundBook.Credit memory c = abi.decode(_credits[r][j], (IRoundBook.Credit));
        if (how == 2) return _badCreditCall(r, j, c);
        if (how == 3) {
            return abi.encodeCall(
                IRoundBook.proveCreditsUnsorted,
                (
                    r,
                    j,
                    c,
                    _amounts[r][j],
                    _creditProof(r, j),
                    abi.decode(_credits[r][j + 1], (IRoundBook.Credit)),
                    _amounts[r][j + 1],
                    _creditProof(r, j + 1)
                )
            );
        }
        if (how == 4) {
            SumTree.Node[] memory path = _creditProof(r, 0);
            SumTree.Node memory left = SumTree.leaf(keccak256(_credits[r][0]), _amounts[r][0]);
            SumTree.Node[] memory above = new SumTree.Node[](path.length - 1);
            for (uint256 k; k < above.length; ++k) {
                above[k] = path[k + 1];
            }
            return abi.encodeCall(IRoundBook.proveBadSum, (r, 1, 0, SumTree.parent(left, path[0]), above, left, path[0]));
        }
        if (c.earnings.anchor == NO_ROUND) return "";
        return abi.encodeCall(
            IRoundBook.proveBadEarnings, (r, j, c, _amounts[r][j], _creditProof(r, j), _earningsShown(c.earnings))
        );
    }

    // ======================================================================== actions: two sides

    /// @notice A signer shows two sides, or a prover shows what is none. Two different votes one
    /// checker signed on a batch of a posted round, or two different submissions one producer
    /// signed of a round, proven by a stranger: in the round's challenge window the signer is
    /// slashed slashBps of its stake, once per (round, batch, signer), and the prover paid
    /// SETTLER_CUT_BPS of that, the rest going into the ledger's pool; shown again, refused
    /// AlreadyProven; past the window, ChallengeWindowClosed (the stake that gave the seat may be
    /// gone). What shows no equivocation is refused NoLie, in or out of the window: one vote
    /// shown twice, a producer's two votes on its own batch (it holds no seat there), a second
    /// vote another node signed, one submission shown twice, a second submission another node
    /// signed, and a producer's submission of the next round shown against this round's.
    /// Against the ledger's record (the v4 lane's batch of a round the book posted): a signed
    /// vote of the other side than its signer's vote there, or a signed submission other than
    /// the batch its producer submitted there (its score), is slashed the same way; one that
    /// keeps its word (the same side; the batch it forced in) is refused NoLie.
    function equivocate(uint256 seed_) external {
        if (_played.length == 0) _nothing();
        uint64 r = _played[seed_ % _played.length];
        uint256 how = (seed_ >> 8) % 12;
        if (how >= 8) return _againstTheRecord(seed_, how);
        uint256 p = (seed_ >> 16) % NODES;
        uint256 v = (p + 1 + (seed_ >> 24) % (NODES - 1)) % NODES; // another node than p
        uint64 score = uint64((1 + (seed_ >> 32) % 8) * SCALE);
        bytes memory call_;
        address signer; // the one a true proof slashes (zero: none is shown)
        if (how < 4) {
            // votes on p's batch of r; how 2: the producer's own, on its own batch
            uint256 k = how == 2 ? p : v;
            IRoundBook.CastVote memory first = _castVote(r, p, _keys[k], false, score);
            IRoundBook.CastVote memory second = how == 1 ? first : _castVote(r, p, _keys[k], (seed_ >> 40) % 2 == 0, score + 1);
            if (how == 3) second = _castVote(r, p, _keys[(v + 1) % NODES == p ? (v + 2) % NODES : (v + 1) % NODES], false, score + 1);
            if (how == 0) signer = nodes[v];
            call_ = abi.encodeCall(IRoundJudge.proveEquivocation, (r, nodes[p], first, second));
        } else {
            // submissions of r by p; how 7: its submission of r + 1 first
            IRoundBook.SignedSubmission memory first = _signedSubmission(how == 7 ? r + 1 : r, p, _keys[p], score);
            IRoundBook.SignedSubmission memory second = how == 5 ? first : _signedSubmission(r, p, _keys[p], score + 1);
            if (how == 6) second = _signedSubmission(r, p, _keys[v], score + 1);
            if (how == 4) signer = nodes[p];
            call_ = abi.encodeCall(IRoundJudge.proveDoubleSubmission, (r, first, second));
        }
        _prove(r, nodes[p], signer, how, call_);
    }

    /// @dev equivocate's proofs against the ledger's record: how 8 a kept vote, 9 a vote of the
    /// other side, 10 the batch forced in, 11 another score than the ledger's.
    function _againstTheRecord(uint256 seed_, uint256 how) internal {
        for (uint256 i; i < _ledgerKeys.length; ++i) {
            BatchKey memory k = _ledgerKeys[(i + (seed_ >> 16)) % _ledgerKeys.length];
            if (!rounds[k.round].posted) continue; // (a proof needs the book's round)
            LedgerBatch storage b = _ledgerBatches[k.round][k.node];
            bytes32 digest = keccak256(abi.encode("batch", k.round, k.node));
            if (how >= 10) {
                Messages.Submission memory m = Messages.Submission(k.round, digest, 8, b.score + (how == 11 ? 1 : 0), b.signal);
                IRoundBook.SignedSubmission memory first = IRoundBook.SignedSubmission(k.node, m, _sig(_keyOf(k.node), _submissionHash(m)));
                IRoundBook.SignedSubmission memory none;
                bytes memory call_ = abi.encodeCall(IRoundJudge.proveDoubleSubmission, (k.round, first, none));
                return _prove(k.round, k.node, how == 11 ? k.node : address(0), how, call_);
            }
            for (uint256 j; j < NODES; ++j) {
                address voter = nodes[(j + (seed_ >> 24)) % NODES];
                if (!_ledgerVoted[k.round][k.node][voter]) continue;
                // its vote there agreed: the same side (the claimed score, or one at the edge of
                // the tolerance), or a dispute (another signal, or a score just past the edge)
                bool edge = (seed_ >> 32) % 2 == 0;
                uint64 signal = b.signal + (how == 9 && !edge ? 1 : 0);
                uint64 score = b.score + (edge ? (how == 9 ? TOLERANCE + 1 : TOLERANCE) : 0);
                bytes32 hash = Messages.signingHash(
                    SEPARATOR, Messages.structHash(Messages.Vote(k.round, k.node, digest, false, score, signal, 0))
                );
                IRoundBook.CastVote memory first = IRoundBook.CastVote(digest, false, score, signal, 0, _sig(_keyOf(voter), hash));
                IRoundBook.CastVote memory none;
                bytes memory call_ = abi.encodeCall(IRoundJudge.proveEquivocation, (k.round, k.node, first, none));
                return _prove(k.round, k.node, how == 9 ? voter : address(0), how, call_);
            }
        }
        _nothing();
    }

    /// @dev Sends a proof of two sides of `signer` on `producer`'s batch of round r (none shown:
    /// signer zero) and judges the outcome as the rules say.
    function _prove(uint64 r, address producer, address signer, uint256 how, bytes memory call_) internal {
        if (signer == address(0)) return _refusedNoLie(how, call_);
        bytes32 key = keccak256(abi.encode(r, producer, signer));
        bytes4 refusal;
        if (ledger.currentRound() > _challengeEnd(r)) refusal = IRoundBook.ChallengeWindowClosed.selector;
        else if (_equivocationProven[key]) refusal = IRoundBook.AlreadyProven.selector;
        uint256 stake = _stakeOf(signer);
        uint256 balance = STRANGER.balance;
        uint256 ledgerPool = ledger.rewardPool();
        vm.prank(STRANGER);
        (bool ok, bytes memory reason) = address(judge).call(call_);
        if (refusal != bytes4(0)) {
            if (ok || bytes4(reason) != refusal || STRANGER.balance != balance) {
                return _violate(
                    string.concat(
                        "equivocate: a proof ",
                        refusal == IRoundBook.AlreadyProven.selector ? "shown again" : "after the window",
                        " was not refused as the rules say: ",
                        ok ? "slashed" : _hex4(reason)
                    )
                );
            }
            return _hit(refusal == IRoundBook.AlreadyProven.selector ? EQUIVOCATIONS_REPEATED_REFUSED : LATE_EQUIVOCATIONS_REFUSED);
        }
        _expect("equivocate", ok, reason);
        if (!ok) return;
        _equivocationProven[key] = true;
        uint256 taken = (stake * SLASH_BPS) / BPS;
        uint256 cut = (taken * SETTLER_CUT_BPS) / BPS;
        _paidExactly("equivocate", STRANGER, balance, cut);
        if (ledger.nodeInfo(signer).activeStake != stake - taken) {
            _violate("equivocate: the signer's stake did not lose slashBps of it");
        }
        if (ledger.rewardPool() != ledgerPool + taken - cut) {
            _violate("equivocate: the ledger's pool did not get the slashed stake less the prover's cut");
        }
        slashed += taken;
        proversCut += cut;
        slashedOf[signer] += taken;
        _hit(how >= 8 ? RECORDS_CONTRADICTED : how == 0 ? EQUIVOCATIONS_SLASHED : DOUBLE_SUBMISSIONS_SLASHED);
    }

    function _refusedNoLie(uint256 how, bytes memory call_) internal {
        vm.prank(STRANGER);
        (bool ok, bytes memory reason) = address(judge).call(call_);
        if (ok || bytes4(reason) != IRoundBook.NoLie.selector) {
            string[12] memory what = [
                "",
                "one vote shown twice",
                "a producer's two votes on its own batch",
                "a second vote another node signed",
                "",
                "one submission shown twice",
                "a second submission another node signed",
                "a submission of the next round",
                "a signed vote of the side its signer took on the ledger",
                "",
                "the batch its producer forced in on the ledger",
                ""
            ];
            return _violate(
                string.concat("equivocate: ", what[how], " was not refused as no equivocation: ", ok ? "slashed" : _hex4(reason))
            );
        }
        _hit(FALSE_EQUIVOCATIONS_REFUSED);
    }

    /// @dev A vote on producer p's batch of round r (its digest, as _signSubmissions makes it),
    /// signed with `key`.
    function _castVote(uint64 r, uint256 p, uint256 key, bool unavailable, uint64 score)
        internal
        view
        returns (IRoundBook.CastVote memory vote)
    {
        bytes32 digest = keccak256(abi.encode("batch", r, nodes[p]));
        uint64 signal = uint64(SCALE / 10);
        bytes32 hash = Messages.signingHash(
            SEPARATOR, Messages.structHash(Messages.Vote(r, nodes[p], digest, unavailable, score, signal, 0))
        );
        vote = IRoundBook.CastVote(digest, unavailable, score, signal, 0, _sig(key, hash));
    }

    /// @dev A submission of round r in producer p's name, signed with `key`.
    function _signedSubmission(uint64 r, uint256 p, uint256 key, uint64 score)
        internal
        view
        returns (IRoundBook.SignedSubmission memory)
    {
        Messages.Submission memory m = Messages.Submission({
            round: r,
            digest: keccak256(abi.encode("batch", r, nodes[p])),
            rollouts: 8,
            score: score,
            signal: uint64(SCALE / 10)
        });
        return IRoundBook.SignedSubmission(nodes[p], m, _sig(key, _submissionHash(m)));
    }

    /// @notice An escalation the book refuses, each with its error, the ledger left as it was
    /// (no record of the batch): a batch not in the submission root (its producer's other
    /// signed batch, shown at its place: any batch would go to the v4 lane, not the one its
    /// committee was drawn for), a forged leaf of the root (a registered producer framed in the
    /// v4 lane), and a batch of the root in the book's last vote round (the ledger's committee
    /// could no longer vote on it). Each is sent by a checker the book's draw seats on the batch,
    /// with a dispute in range, so that the book's rule is what refuses it (the ledger's own
    /// refusals of an escalation, and an outsider's forged leaf, are not played here).
    function escalateFalsely(uint256 seed_) external {
        uint256 how = seed_ % 3;
        uint64 current = ledger.currentRound();
        // a forged leaf in its escalation window is rare (a forged root's two rounds): taken
        // whenever there is one, one call in two
        if ((seed_ >> 100) % 2 == 0) {
            for (uint256 i; i < _played.length; ++i) {
                uint64 q = _played[i];
                if (rounds[q].subLie == FORGED && current < q + W + 1 + C && current > q + W) how = 1;
            }
        }
        for (uint256 i; i < _played.length; ++i) {
            uint64 r = _played[(i + (seed_ >> 8)) % _played.length];
            Round storage g = rounds[r];
            uint64 close = r + W + 1 + C; // the book's voteClose
            if (how == 2 ? current != close : current >= close) continue;
            if (how == 1 && g.subLie != FORGED) continue;
            uint32 index = uint32(how == 1 ? g.lieIndex : (seed_ >> 16) % g.count);
            if (how != 1 && g.subLie == FORGED && index == g.lieIndex) continue;
            IRoundBook.SignedSubmission memory leaf = _subAt(r, index);
            if (!_isNode(leaf.producer) || _ledgerBatches[r][leaf.producer].madeIn != 0) continue;
            SumTree.Node[] memory proof = _submissionProof(r, index);
            if (how == 0) {
                // the producer's other batch of the round, signed by it (its score in range): not
                // the root's leaf
                leaf.submission.score = leaf.submission.score == 8 * SCALE ? uint64(8 * SCALE - 1) : leaf.submission.score + 1;
                leaf.signature = _sig(_keyOf(leaf.producer), _submissionHash(leaf.submission));
            }
            address checker = _seatedOn(r, leaf.producer);
            if (checker == address(0)) continue;
            Messages.Submission memory m = leaf.submission;
            ISwarmLedger.EscalationVote memory vote = ISwarmLedger.EscalationVote(false, m.score, m.signal + 1, 0);
            vm.prank(checker);
            (bool ok, bytes memory reason) =
                address(book).call(abi.encodeCall(IRoundBook.escalate, (r, index, leaf, proof, vote)));
            bytes4[3] memory refusals =
                [IRoundBook.NotInRoot.selector, IRoundBook.ForgedSubmission.selector, IRoundBook.EscalationClosed.selector];
            if (ok || bytes4(reason) != refusals[how]) {
                string[3] memory what = ["a batch not in the root", "a forged leaf", "a batch in the book's last vote round"];
                return _violate(
                    string.concat("escalateFalsely: the escalation of ", what[how], " was not refused: ", ok ? "taken" : _hex4(reason))
                );
            }
            return _hit(how == 0 ? NOT_IN_ROOT_ESCALATIONS_REFUSED : how == 1 ? FORGED_ESCALATIONS_REFUSED : LATE_ESCALATIONS_REFUSED);
        }
        _nothing();
    }

    /// @dev A node the book's draw seats on `producer`'s committee of round r (stakes as of the
    /// root's block, the next block's hash), or the zero address.
    function _seatedOn(uint64 r, address producer) internal view returns (address) {
        IRoundBook.RoundView memory v = _snapshot(r);
        uint256 familyStake = ledger.familyStakeAt(FAMILY, v.postedBlock);
        for (uint256 j; j < NODES; ++j) {
            address voter = nodes[j];
            uint256 stake = ledger.stakeAt(voter, v.postedBlock);
            if (voter == producer || stake < MIN_STAKE || _stakeOf(voter) < MIN_STAKE) continue;
            if (SeatDraw.seats(v.beacon, r, producer, voter, stake, familyStake, CHECKERS) != 0) return voter;
        }
        return address(0);
    }

    /// @dev A node's stake as the model keeps it: what it registered with, less its slashes (no
    /// node unbonds here).
    function _stakeOf(address node) internal view returns (uint256) {
        return 2 * MIN_STAKE - slashedOf[node];
    }

    function _isNode(address a) internal view returns (bool) {
        for (uint256 i; i < NODES; ++i) {
            if (nodes[i] == a) return true;
        }
        return false;
    }

    /// @dev `credits` (and their amounts and votes) without the j-th.
    function _withoutCredit(IRoundBook.Credit[] memory credits, uint128[] memory amounts, bytes[] memory votes, uint256 j)
        internal
        pure
        returns (IRoundBook.Credit[] memory c, uint128[] memory a, bytes[] memory v)
    {
        c = new IRoundBook.Credit[](credits.length - 1);
        a = new uint128[](c.length);
        v = new bytes[](c.length);
        for (uint256 k; k < c.length; ++k) {
            uint256 from = k < j ? k : k + 1;
            (c[k], a[k], v[k]) = (credits[from], amounts[from], votes[from]);
        }
    }

    /// @dev The dropped batch is proven to the judge (by the auditor, with what its producer
    /// holds): its leaf, its quorum's votes, the aggregator's receipts of them, and the credit
    /// leaves it would sit between.
    function _proveDropped(uint64 r, Round storage g) internal {
        (uint32 index, bytes memory encoded) = abi.decode(_dropped[r], (uint32, bytes));
        IRoundBook.SignedVote[] memory votes = abi.decode(encoded, (IRoundBook.SignedVote[]));
        bytes memory call_ = _uncreditedCall(r, index, votes, _keyOf(g.aggregator), _around(r, g, index));
        _provenBy(address(judge), r, g, call_, DROPPED_PROVEN);
    }

    function _uncreditedCall(
        uint64 r,
        uint32 index,
        IRoundBook.SignedVote[] memory votes,
        uint256 receiptKey,
        IRoundBook.Shown[] memory around
    ) internal view returns (bytes memory) {
        IRoundBook.SignedSubmission memory leaf = _subAt(r, index);
        bytes[] memory receipts = new bytes[](votes.length);
        for (uint256 i; i < votes.length; ++i) {
            bytes32 hash = Messages.signingHash(
                SEPARATOR,
                Messages.structHash(
                    Messages.Vote(r, leaf.producer, leaf.submission.digest, false, votes[i].score, leaf.submission.signal, votes[i].findings)
                )
            );
            receipts[i] = _sig(receiptKey, Messages.signingHash(SEPARATOR, Messages.receiptHash(hash, votes[i].voter)));
        }
        return abi.encodeCall(
            IRoundJudge.proveUncredited, (r, index, leaf, _submissionProof(r, index), votes, receipts, around)
        );
    }

    /// @dev The credit leaves of round r a batch at submission `index` would sit between (the
    /// one below and the one above; one at either end; none when the round credits nothing).
    function _around(uint64 r, Round storage g, uint32 index) internal view returns (IRoundBook.Shown[] memory around) {
        uint32 k;
        while (k < g.credits && abi.decode(_credits[r][k], (IRoundBook.Credit)).index < index) ++k;
        if (g.credits == 0) return new IRoundBook.Shown[](0);
        if (k == 0 || k == g.credits) {
            around = new IRoundBook.Shown[](1);
            around[0] = _shownAt(r, k == 0 ? 0 : k - 1);
            return around;
        }
        around = new IRoundBook.Shown[](2);
        (around[0], around[1]) = (_shownAt(r, k - 1), _shownAt(r, k));
    }

    /// @notice A proof of an uncredited quorum the rules refuse: receipts another key signed
    /// (of a dropped batch's quorum: the aggregator never received those votes), a credited
    /// batch shown between two credit leaves both below it, and a batch the v4 lane holds (its
    /// quorum receipted: the book credits none of it).
    function proveUncreditedFalsely(uint256 seed_) external {
        uint256 how = seed_ % 3;
        uint64 current = ledger.currentRound();
        for (uint256 i; i < _played.length; ++i) {
            uint64 r = _played[(i + (seed_ >> 8)) % _played.length];
            Round storage g = rounds[r];
            if (!g.verdicts || g.voided || current > _challengeEnd(r) || g.verdictLie == BAD_SUM) continue;
            bytes memory call_ = this.uncreditedProof(r, how, seed_ >> 16);
            if (call_.length == 0) continue;
            vm.prank(STRANGER);
            (bool ok, bytes memory reason) = address(judge).call(call_);
            if (ok || bytes4(reason) != IRoundBook.NoLie.selector) {
                string[3] memory what = ["receipts another key signed", "two credit leaves below the batch", "a batch the v4 lane holds"];
                return _violate(
                    string.concat("proveUncreditedFalsely: ", what[how], " was not refused: ", ok ? "voided" : _hex4(reason))
                );
            }
            return _hit(FALSE_UNCREDITED_REFUSED);
        }
        _nothing();
    }

    /// @notice The call of proveUncreditedFalsely's proof `how` in round r ("" when the round
    /// has none).
    function uncreditedProof(uint64 r, uint256 how, uint256 pick) external view returns (bytes memory) {
        Round storage g = rounds[r];
        uint256 aggregatorKey = _keyOf(g.aggregator);
        if (how == 0) {
            if (g.verdictLie != DROPPED) return "";
            (uint32 index, bytes memory encoded) = abi.decode(_dropped[r], (uint32, bytes));
            IRoundBook.SignedVote[] memory votes = abi.decode(encoded, (IRoundBook.SignedVote[]));
            uint256 other = _keys[(_indexOf(g.aggregator) + 1) % NODES];
            return _uncreditedCall(r, index, votes, other, _around(r, g, index));
        }
        if (how == 1) {
            // a credited batch (leaf k >= 2) shown above two consecutive credit leaves below it
            if (g.credits < 3 || g.verdictLie == CREDITED_TWICE) return "";
            uint32 k = uint32(2 + pick % (g.credits - 2));
            IRoundBook.Credit memory c = abi.decode(_credits[r][k], (IRoundBook.Credit));
            IRoundBook.Shown[] memory below = new IRoundBook.Shown[](2);
            (below[0], below[1]) = (_shownAt(r, k - 2), _shownAt(r, k - 1));
            IRoundBook.SignedVote[] memory votes = abi.decode(_votes[r][k], (IRoundBook.SignedVote[]));
            return _uncreditedCall(r, c.index, votes, aggregatorKey, below);
        }
        // a batch of the root the v4 lane holds, with a quorum's receipted votes
        IRoundBook.RoundView memory v = _snapshot(r);
        for (uint32 index; index < g.count; ++index) {
            IRoundBook.SignedSubmission memory s = _subAt(r, index);
            if (!_isNode(s.producer) || _ledgerBatches[r][s.producer].madeIn == 0) continue;
            if (g.subLie == FORGED && index == g.lieIndex) continue;
            IRoundBook.SignedVote[] memory votes = _signVotes(r, s, v, ledger.familyStakeAt(FAMILY, v.postedBlock));
            if (votes.length < QUORUM) continue;
            if (_creditOf[r][s.producer] != 0) return ""; // (a V4_CREDITED lie credits it)
            return _uncreditedCall(r, index, votes, aggregatorKey, _around(r, g, index));
        }
        return "";
    }

    // ======================================================================== actions: the v4 lane

    /// @notice A node submits its batch of an open round on the ledger itself (the v4 lane: a
    /// force inclusion): the book may not credit it (its verdict root's lie when it does), its
    /// producer may not prove it left out of the submission root, and it is voted on, credited
    /// and claimed on the ledger, each lane's credits paid over both lanes' credited signal.
    function submitOnLedger(uint256 seed_) external {
        if ((seed_ >> 128) % 3 != 0) _nothing(); // one call in three: most batches go to the book
        uint64 current = ledger.currentRound();
        uint64 back = uint64((seed_ >> 8) % (W + 1));
        if (current < back) _nothing();
        uint64 r = current - back;
        address p = nodes[seed_ % NODES];
        // (a node slashed below minStake is refused StakeTooLow: the ledger's campaigns)
        if (_ledgerBatches[r][p].madeIn != 0 || _stakeOf(p) < MIN_STAKE) _nothing();
        uint256 s = uint256(keccak256(abi.encode(seed_, "ledger")));
        uint64 score = uint64((1 + s % 8) * SCALE);
        uint64 signal = uint64(SCALE / 10 + (s >> 8) % (3 * SCALE));
        vm.prank(p);
        (bool ok, bytes memory reason) = address(ledger).call(
            abi.encodeCall(ISwarmLedger.submit, (r, keccak256(abi.encode("batch", r, p)), 8, score, signal))
        );
        _expect("submit on the ledger", ok, reason);
        if (!ok) return;
        _ledgerBatches[r][p] = LedgerBatch(score, signal, uint64(blockNow), 0, false, 0);
        _ledgerKeys.push(BatchKey(r, p));
        _hit(LEDGER_BATCHES);
        _roll(1);
    }

    /// @notice A node agrees with a ledger batch in its committee's window: seated by the
    /// ledger's draw (the model's: SeatDraw over stakes as of the batch's block, the next
    /// block's hash, kept once the first vote stored it), it is taken, and the QUORUM-th
    /// distinct voter credits the batch; not seated, it is refused NotDrawn.
    function attestOnLedger(uint256 seed_) external {
        // one of the batches whose committee votes now (a list in the order they were made)
        uint64 current = ledger.currentRound();
        uint256 open;
        for (uint256 i; i < _ledgerKeys.length; ++i) {
            if (_ledgerKeys[i].round + W + C >= current) ++open;
        }
        if (open == 0) _nothing();
        BatchKey memory k;
        uint256 pick = seed_ % open;
        for (uint256 i; i < _ledgerKeys.length; ++i) {
            if (_ledgerKeys[i].round + W + C < current) continue;
            k = _ledgerKeys[i];
            if (pick == 0) break;
            --pick;
        }
        LedgerBatch storage b = _ledgerBatches[k.round][k.node];
        if (blockNow <= b.madeIn + 1) _nothing();
        // (a beacon nobody stored lapses with its block's hash: the ledger's campaigns play it)
        if (b.beacon == 0 && blockNow > b.madeIn + 200) _nothing();
        address v = nodes[(seed_ >> 8) % NODES];
        if (v == k.node || _ledgerVoted[k.round][k.node][v] || _stakeOf(v) < MIN_STAKE) _nothing();
        uint256 beacon = b.beacon != 0 ? b.beacon : SeatDraw.beaconFrom(blockhash(b.madeIn + 1));
        uint256 seats = SeatDraw.seats(
            beacon,
            k.round,
            k.node,
            v,
            ledger.stakeAt(v, b.madeIn),
            ledger.familyStakeAt(FAMILY, b.madeIn),
            CHECKERS
        );
        vm.prank(v);
        (bool ok, bytes memory reason) =
            address(ledger).call(abi.encodeCall(ISwarmLedger.attest, (k.round, k.node, b.score, b.signal, 0)));
        if (seats == 0 || ledger.stakeAt(v, b.madeIn) < MIN_STAKE) {
            if (ok || bytes4(reason) != ISwarmLedger.NotDrawn.selector) {
                _violate(string.concat("attestOnLedger: a vote with no seat was not refused NotDrawn: ", ok ? "taken" : _hex4(reason)));
            }
            return;
        }
        _expect("attest on the ledger", ok, reason);
        if (!ok) return;
        _ledgerVoted[k.round][k.node][v] = true;
        b.beacon = beacon; // stored by the first vote
        if (++b.agrees == QUORUM) { // (the QUORUM-th distinct voter credits it)
            ledgerCredited[k.round] += b.signal;
            _hit(LEDGER_CREDITS);
        }
    }

    /// @notice A producer claims its ledger batch's share: refused RoundNotFinal until the
    /// ledger's round is final and the book has decided it (its standing total fixed); then its
    /// signal's share of the round's reward over both lanes' credited signal, NothingToClaim for
    /// a batch not credited, PoolInsufficient beyond the ledger's pool, AlreadyClaimed once paid.
    function claimOnLedger(uint256 seed_) external {
        if (_ledgerKeys.length == 0) _nothing();
        uint256 at = seed_ % _ledgerKeys.length;
        if ((seed_ >> 128) % 4 != 0) {
            // mostly a credited batch not paid yet whose round both lanes decided, where there is one
            uint64 current_ = ledger.currentRound();
            for (uint256 i; i < _ledgerKeys.length; ++i) {
                BatchKey memory c = _ledgerKeys[(at + i) % _ledgerKeys.length];
                LedgerBatch storage cb = _ledgerBatches[c.round][c.node];
                if (cb.agrees >= QUORUM && !cb.paid && current_ >= _challengeEnd(c.round) + 2) {
                    at = (at + i) % _ledgerKeys.length;
                    break;
                }
            }
        }
        BatchKey memory k = _ledgerKeys[at];
        LedgerBatch storage b = _ledgerBatches[k.round][k.node];
        uint64 current = ledger.currentRound();
        uint256 other = _stands(k.round) ? rounds[k.round].total : 0;
        uint256 amount;
        bytes4 refusal;
        if (current <= k.round + W + C + APPEAL_ROUNDS || current < _challengeEnd(k.round) + 2) {
            refusal = ISwarmLedger.RoundNotFinal.selector;
        } else if (b.paid) {
            refusal = ISwarmLedger.AlreadyClaimed.selector;
        } else {
            if (b.agrees >= QUORUM) amount = (REWARD * b.signal) / (ledgerCredited[k.round] + other);
            if (amount == 0) refusal = ISwarmLedger.NothingToClaim.selector;
            else if (amount > ledgerPool()) refusal = ISwarmLedger.PoolInsufficient.selector;
        }
        uint64[] memory list = new uint64[](1);
        list[0] = k.round;
        uint256 before = k.node.balance;
        vm.prank(k.node);
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(ISwarmLedger.claim, (list)));
        if (refusal != bytes4(0)) {
            if (ok || bytes4(reason) != refusal) {
                return _violate(
                    string.concat("claimOnLedger: not refused as the rules say (", _hex4(abi.encodePacked(refusal)), "): ", ok ? "paid" : _hex4(reason))
                );
            }
            if (refusal == ISwarmLedger.RoundNotFinal.selector && current > k.round + W + C + APPEAL_ROUNDS) {
                _hit(LEDGER_CLAIMS_UNDECIDED); // final on the ledger, not decided by the book yet
            }
            return;
        }
        _expect("claim on the ledger", ok, reason);
        _paidExactly("claim on the ledger", k.node, before, amount);
        b.paid = true;
        ledgerPaid += amount;
        _hit(LEDGER_CLAIMS);
        if (other != 0) _hit(ROUNDS_PAID_BY_BOTH_LANES);
    }

    /// @notice The ledger's pool as the rules move it: the forfeited halves and the slashed
    /// stake, less the provers' cut and what the ledger's claims paid.
    function ledgerPool() public view returns (uint256) {
        return forfeited + slashed - proversCut - ledgerPaid;
    }

    /// @notice The rounds with a batch on the ledger (one entry per batch).
    function ledgerRounds() external view returns (uint64[] memory list) {
        list = new uint64[](_ledgerKeys.length);
        for (uint256 i; i < list.length; ++i) {
            list[i] = _ledgerKeys[i].round;
        }
    }

    // ======================================================================== reads for invariants

    function violationCount() external view returns (uint256) {
        return _violations.length;
    }

    function firstViolation() external view returns (string memory) {
        return _violations.length == 0 ? "" : _violations[0];
    }

    function played() external view returns (uint64[] memory) {
        return _played;
    }

    /// @notice The last round a lie in round `r`'s roots may be proven in.
    function challengeEnd(uint64 r) external view returns (uint64) {
        return _challengeEnd(r);
    }

    /// @notice Whether round `r` stands for good, as the model says.
    function stands(uint64 r) external view returns (bool) {
        return _stands(r);
    }

    /// @notice This run's count of each path, as a JSON line (scripts/fuzz_ledger.py sums them).
    function pathsLine(string memory suite) external view returns (string memory line) {
        line = string.concat("{\"suite\":\"", suite, "\"");
        for (uint256 i; i < _pathNames.length; ++i) {
            line = string.concat(line, ",\"", _pathNames[i], "\":", vm.toString(_pathCount[i]));
        }
        line = string.concat(line, "}");
    }

    // ======================================================================== the plays

    function _draw(uint64 round) internal returns (address aggregator) {
        (, bool drawn, uint64 requested) = roster.drawOf(round);
        if (drawn) _nothing();
        if (requested == 0 || blockNow - requested > 256) _request(round);
        return _reveal(round);
    }

    function _request(uint64 round) internal {
        (bool ok, bytes memory reason) = address(roster).call(abi.encodeCall(IAggregatorDraw.draw, (round)));
        _expect("draw (request)", ok, reason);
        _requestedAt[round] = uint64(blockNow);
        _countAt[round] = uint32(_slots.length);
        _roll(1);
    }

    /// @dev Draws a requested round and checks the aggregator is the one the rules draw: slot
    /// keccak(hash, round, try) of the roster's length at the request, its node enlisted there by
    /// the request's block, four tries, else nobody.
    function _reveal(uint64 round) internal returns (address) {
        uint64 requested = _requestedAt[round];
        bytes32 seed_ = blockhash(requested);
        address want;
        for (uint256 t; t < 4 && _countAt[round] != 0; ++t) {
            uint256 slot = uint256(keccak256(abi.encode(seed_, round, t))) % _countAt[round];
            if (slot >= _slots.length) continue;
            if (_since[slot] <= requested) {
                want = _slots[slot];
                break;
            }
        }
        (bool ok, bytes memory reason) = address(roster).call(abi.encodeCall(IAggregatorDraw.draw, (round)));
        _expect("draw", ok, reason);
        (address a, bool done,) = roster.drawOf(round);
        if (!done) _violate("draw: a request whose block hash is known did not draw");
        if (a != want) {
            _violate(string.concat("draw: drew ", vm.toString(a), ", the rules draw ", vm.toString(want)));
            return a;
        }
        if (a == address(0)) _hit(DRAWN_NOBODY);
        // its bond is held until the proof window of this round closes
        uint64 proofsEnd = round + W + 1 + C;
        if (a != address(0) && heldUntil[a] < proofsEnd) heldUntil[a] = proofsEnd;
        _hit(DRAWS_PREDICTED);
        return a;
    }

    function _rosterAdd(address node) internal {
        _slots.push(node);
        _since.push(uint64(blockNow));
    }

    /// @dev The last slot's node moves into the leaver's slot, as enlisted now.
    function _rosterRemove(address node) internal {
        if (_slots.length == 0) return;
        uint256 last = _slots.length - 1;
        for (uint256 slot; slot <= last; ++slot) {
            if (_slots[slot] != node) continue;
            if (slot != last) {
                _slots[slot] = _slots[last];
                _since[slot] = uint64(blockNow);
            }
            _slots.pop();
            _since.pop();
            return;
        }
    }

    /// @notice The roster as the handler's model keeps it.
    function slots() external view returns (address[] memory) {
        return _slots;
    }

    function _signSubmissions(uint64 r, uint256 seed_) internal view returns (IRoundBook.SignedSubmission[] memory subs) {
        subs = new IRoundBook.SignedSubmission[](NODES);
        for (uint256 i; i < NODES; ++i) {
            uint256 s = uint256(keccak256(abi.encode(seed_, i)));
            Messages.Submission memory m = Messages.Submission({
                round: r,
                digest: keccak256(abi.encode("batch", r, nodes[i])),
                rollouts: 8,
                score: uint64((1 + s % 8) * SCALE),
                signal: uint64(SCALE / 10 + (s >> 8) % (3 * SCALE))
            });
            LedgerBatch storage b = _ledgerBatches[r][nodes[i]];
            if (b.madeIn != 0) (m.score, m.signal) = (b.score, b.signal); // the batch it forced in
            subs[i] = IRoundBook.SignedSubmission(nodes[i], m, _sig(_keys[i], _submissionHash(m)));
        }
    }

    /// @dev The credits of round r's honest verdict root: each valid submission with a quorum of
    /// seated checkers, their agreeing votes (at most MAX_VOTES, sorted by voter), its earnings.
    function _verdicts(uint64 r, IRoundBook.RoundView memory v, bool withV4)
        internal
        view
        returns (IRoundBook.Credit[] memory credits, uint128[] memory amounts, bytes[] memory votes)
    {
        bytes[] storage subs = _subs[r];
        credits = new IRoundBook.Credit[](subs.length);
        amounts = new uint128[](subs.length);
        votes = new bytes[](subs.length);
        uint256 n;
        uint256 familyStake = ledger.familyStakeAt(FAMILY, v.postedBlock);
        for (uint256 i; i < subs.length; ++i) {
            if (rounds[r].subLie == FORGED && i == rounds[r].lieIndex) continue; // nobody agrees with a forgery
            IRoundBook.SignedSubmission memory s = abi.decode(subs[i], (IRoundBook.SignedSubmission));
            // a batch the v4 lane holds is paid there: the book credits none of it
            if (!withV4 && _ledgerBatches[r][s.producer].madeIn != 0) continue;
            IRoundBook.SignedVote[] memory signed = _signVotes(r, s, v, familyStake);
            if (signed.length < QUORUM) continue;
            votes[n] = abi.encode(signed);
            credits[n] = IRoundBook.Credit({
                index: uint32(i),
                producer: s.producer,
                digest: s.submission.digest,
                score: s.submission.score,
                signal: s.submission.signal,
                votes: keccak256(votes[n]),
                earnings: _earnings(s.producer, r)
            });
            amounts[n] = s.submission.signal;
            ++n;
        }
        assembly ("memory-safe") {
            mstore(credits, n)
            mstore(amounts, n)
            mstore(votes, n)
        }
    }

    /// @dev Replaces the first credit's first vote with one of a node of the family that holds no
    /// seat on the batch (signed with its own key), the votes kept sorted; false when every
    /// other node holds a seat.
    function _unseatedVote(
        uint64 r,
        IRoundBook.RoundView memory v,
        IRoundBook.Credit memory credit,
        bytes[] memory votes
    ) internal view returns (bool) {
        uint256 familyStake = ledger.familyStakeAt(FAMILY, v.postedBlock);
        IRoundBook.SignedVote[] memory signed = abi.decode(votes[0], (IRoundBook.SignedVote[]));
        for (uint256 j; j < NODES; ++j) {
            address voter = nodes[j];
            if (voter == credit.producer) continue;
            uint256 stake = ledger.stakeAt(voter, v.postedBlock);
            if (SeatDraw.seats(v.beacon, r, credit.producer, voter, stake, familyStake, CHECKERS) != 0) continue;
            bytes32 hash = Messages.signingHash(
                SEPARATOR,
                Messages.structHash(Messages.Vote(r, credit.producer, credit.digest, false, credit.score, credit.signal, 0))
            );
            signed[0] = IRoundBook.SignedVote(voter, credit.score, 0, _sig(_keys[j], hash));
            // sorted by voter again (insertion of the new first)
            for (uint256 k = 1; k < signed.length && signed[k - 1].voter > signed[k].voter; ++k) {
                (signed[k - 1], signed[k]) = (signed[k], signed[k - 1]);
            }
            votes[0] = abi.encode(signed);
            credit.votes = keccak256(votes[0]);
            return true;
        }
        return false;
    }

    /// @dev The credits with the first one twice (a submission credited twice: two neighbours
    /// out of order).
    function _creditedTwice(IRoundBook.Credit[] memory credits, uint128[] memory amounts, bytes[] memory votes)
        internal
        pure
        returns (IRoundBook.Credit[] memory c, uint128[] memory a, bytes[] memory v)
    {
        c = new IRoundBook.Credit[](credits.length + 1);
        a = new uint128[](credits.length + 1);
        v = new bytes[](credits.length + 1);
        for (uint256 i; i < c.length; ++i) {
            uint256 from = i == 0 ? 0 : i - 1;
            (c[i], a[i], v[i]) = (credits[from], amounts[from], votes[from]);
        }
    }

    /// @dev Round r's stake snapshot (the root's block) and beacon (the hash of the block after
    /// it), as the rules make them.
    function _snapshot(uint64 r) internal view returns (IRoundBook.RoundView memory v) {
        v.postedBlock = _postedBlock[r];
        // the model's, once postVerdicts drew it (the EVM forgets a block's hash 256 blocks on)
        v.beacon = _beacons[r] != 0 ? _beacons[r] : SeatDraw.beaconFrom(blockhash(v.postedBlock + 1));
    }

    function _checkSnapshot(uint64 r) internal {
        IRoundBook.RoundView memory want = _snapshot(r);
        IRoundBook.RoundView memory drawn = book.roundOf(r);
        if (drawn.beacon != want.beacon || drawn.postedBlock != want.postedBlock) {
            _violate("postVerdicts: the round's beacon or stake snapshot is not the rules' (the hash of the block after the root's)");
        }
        _beacons[r] = want.beacon;
    }

    function _signVotes(
        uint64 r,
        IRoundBook.SignedSubmission memory s,
        IRoundBook.RoundView memory v,
        uint256 familyStake
    ) internal view returns (IRoundBook.SignedVote[] memory signed) {
        signed = new IRoundBook.SignedVote[](MAX_VOTES);
        uint256 n;
        for (uint256 j; j < NODES && n < MAX_VOTES; ++j) {
            address voter = nodes[j];
            if (voter == s.producer) continue;
            uint256 stake = ledger.stakeAt(voter, v.postedBlock);
            if (stake < MIN_STAKE) continue;
            if (SeatDraw.seats(v.beacon, r, s.producer, voter, stake, familyStake, CHECKERS) == 0) continue;
            bytes32 hash = Messages.signingHash(
                SEPARATOR,
                Messages.structHash(
                    Messages.Vote(r, s.producer, s.submission.digest, false, s.submission.score, s.submission.signal, 0)
                )
            );
            signed[n++] = IRoundBook.SignedVote(voter, s.submission.score, 0, _sig(_keys[j], hash));
        }
        assembly ("memory-safe") {
            mstore(signed, n)
        }
    }

    /// @dev The producer's earnings as of the rounds settled for round r (those <= r - LAG,
    /// whose standing is fixed by r's verdict round), by the book's rule (the client's
    /// EarningsBook): its last standing credit among them is the anchor, and settled is the
    /// anchor leaf's own settled, the anchor's share and the shares of its recent credits (the
    /// sum of its standing shares, unless a lie of earnings stood in an anchor before: standing
    /// leaves are final, and carried on).
    function _earnings(address p, uint64 r) internal view returns (IRoundBook.Earnings memory e) {
        e.anchor = NO_ROUND;
        e.recent = new uint32[](0);
        if (r < LAG) return e;
        for (uint256 i; i < _played.length && _played[i] <= r - LAG; ++i) {
            uint64 q = _played[i];
            uint32 index = _creditOf[q][p];
            if (index == 0 || !_stands(q)) continue;
            e.anchor = q;
            e.anchorIndex = index - 1;
        }
        if (e.anchor == NO_ROUND) return e;
        IRoundBook.Credit memory anchor = abi.decode(_credits[e.anchor][e.anchorIndex], (IRoundBook.Credit));
        uint256 settled = anchor.earnings.settled + _share(e.anchor, _amounts[e.anchor][e.anchorIndex]);
        e.recent = new uint32[](LAG - 1);
        for (uint256 k; k < LAG - 1; ++k) {
            e.recent[k] = NO_INDEX;
            if (e.anchor < k + 1) continue;
            uint64 q = e.anchor - 1 - uint64(k);
            uint32 index = _creditOf[q][p];
            if (index == 0 || !_stands(q)) continue;
            e.recent[k] = index - 1;
            settled += _share(q, _amounts[q][index - 1]);
        }
        e.settled = uint128(settled);
    }

    function _proveUnposted(uint64 r, Round storage g) internal {
        IRoundBook.SignedSubmission memory leaf = abi.decode(_subs[r][0], (IRoundBook.SignedSubmission));
        uint256 bond = bondHeld[g.aggregator];
        uint256 before = STRANGER.balance;
        uint256 poolBefore = book.rewardPool();
        vm.prank(STRANGER);
        (bool ok, bytes memory reason) =
            address(roster).call(abi.encodeCall(IAggregatorDraw.proveUnposted, (r, leaf, _receipt[r])));
        if (bond == 0) {
            // its roster bond went to an earlier round's proof (and it has not enlisted anew):
            // nothing is left to take, and the round stays unproven
            return _refusedAs("proveUnposted (its bond spent)", ok, reason, IRoundBook.NoLie.selector);
        }
        g.lieProven = true;
        bondHeld[g.aggregator] = 0;
        _expect("proveUnposted", ok, reason);
        _paidExactly("proveUnposted", STRANGER, before, bond / 2);
        if (book.rewardPool() != poolBefore + bond - bond / 2) {
            _violate("proveUnposted: the book's pool did not get the other half of the roster bond");
        }
        if (roster.enlisted(g.aggregator)) _violate("proveUnposted: the aggregator stayed on the roster");
        _rosterRemove(g.aggregator);
        pool += bond - bond / 2;
        rosterBonds -= bond;
        _hit(UNPOSTED_PROVEN);
    }

    /// @dev The left-out producer proves it: its signed submission, the aggregator's receipt, and
    /// the two posted leaves it sorts between.
    function _proveLeftOut(uint64 r, Round storage g) internal {
        IRoundBook.SignedSubmission memory leaf = abi.decode(_leftOut[r], (IRoundBook.SignedSubmission));
        uint32 index;
        while (index < g.count && _subAt(r, index).producer < leaf.producer) ++index;
        _proven(r, g, _leftOutCall(r, leaf, _receipt[r], index), LEFT_OUT_PROVEN);
    }

    function _leftOutCall(uint64 r, IRoundBook.SignedSubmission memory leaf, bytes memory receipt, uint32 index)
        internal
        view
        returns (bytes memory)
    {
        uint32 count = rounds[r].count;
        IRoundBook.SignedSubmission memory below = index > 0 ? _subAt(r, index - 1) : leaf;
        IRoundBook.SignedSubmission memory above = index < count ? _subAt(r, index) : leaf;
        SumTree.Node[] memory none;
        return abi.encodeCall(
            IRoundBook.proveLeftOut,
            (
                r,
                leaf,
                receipt,
                index,
                below,
                index > 0 ? _submissionProof(r, index - 1) : none,
                above,
                index < count ? _submissionProof(r, index) : none
            )
        );
    }

    /// @notice A proof of a left-out submission the rules refuse: a kept submission shown with a
    /// neighbour that is itself (below, or above: not its place), a receipt its producer signed
    /// itself, and a receipt of another round's submission.
    function proveLeftOutFalsely(uint256 seed_) external {
        uint256 how = seed_ % 5;
        uint64 current = ledger.currentRound();
        for (uint256 i; i < _played.length; ++i) {
            uint64 r = _played[(i + (seed_ >> 8)) % _played.length];
            Round storage g = rounds[r];
            if (g.voided || current > _challengeEnd(r) || g.count == 0) continue;
            if ((how == 2 || how == 3) && g.subLie != LEFT_OUT) continue;
            if (how == 4 && _v4Out[r].length == 0) continue;
            IRoundBook.SignedSubmission memory leaf;
            bytes memory receipt;
            uint32 index;
            if (how == 4) {
                // a batch the v4 lane holds, receipted and left out: the book credits none of it
                leaf = abi.decode(_v4Out[r], (IRoundBook.SignedSubmission));
                receipt = _v4Receipt[r];
                while (index < g.count && _subAt(r, index).producer < leaf.producer) ++index;
            } else if (how < 2) {
                // a kept leaf, receipted, claimed at the place after it (below: itself) or at its own (above: itself)
                uint32 at = uint32((seed_ >> 16) % g.count);
                leaf = _subAt(r, at);
                receipt = _sig(_keyOf(g.aggregator), _receiptHash(leaf));
                index = how == 0 ? at + 1 : at;
            } else {
                if (how == 2) {
                    leaf = abi.decode(_leftOut[r], (IRoundBook.SignedSubmission));
                    if (leaf.producer == g.aggregator) continue; // its own receipt is the aggregator's
                    receipt = _sig(_keyOf(leaf.producer), _receiptHash(leaf)); // its own
                } else {
                    // the left-out producer's submission of an earlier round, receipted by this
                    // round's aggregator: its place is free, its round is not this one
                    address out = abi.decode(_leftOut[r], (IRoundBook.SignedSubmission)).producer;
                    bool found;
                    for (uint256 k; k < _played.length && _played[k] < r && !found; ++k) {
                        uint64 q = _played[k];
                        for (uint256 j; j < rounds[q].count && !found; ++j) {
                            leaf = _subAt(q, j);
                            found = leaf.producer == out && rounds[q].subLie != FORGED;
                        }
                    }
                    if (!found) continue;
                    receipt = _sig(_keyOf(g.aggregator), _receiptHash(leaf));
                }
                while (index < g.count && _subAt(r, index).producer < leaf.producer) ++index;
            }
            uint256 held = address(book).balance;
            vm.prank(STRANGER);
            (bool ok, bytes memory reason) = address(book).call(_leftOutCall(r, leaf, receipt, index));
            if (ok || bytes4(reason) != IRoundBook.NoLie.selector || address(book).balance != held) {
                string[5] memory what = [
                    "a kept submission shown left out above itself",
                    "a kept submission shown left out below itself",
                    "a receipt its producer signed",
                    "a receipt of another round's submission",
                    "a batch the v4 lane holds"
                ];
                return _violate(
                    string.concat("proveLeftOutFalsely: ", what[how], " was not refused: ", ok ? "paid" : _hex4(reason))
                );
            }
            return _hit(how == 4 ? V4_LEFT_OUT_REFUSED : FALSE_LEFT_OUT_REFUSED);
        }
        _nothing();
    }

    /// @dev `subs` without its i-th.
    function _without(IRoundBook.SignedSubmission[] memory subs, uint256 i)
        internal
        pure
        returns (IRoundBook.SignedSubmission[] memory kept)
    {
        kept = new IRoundBook.SignedSubmission[](subs.length - 1);
        for (uint256 k; k < kept.length; ++k) {
            kept[k] = subs[k < i ? k : k + 1];
        }
    }

    function _subAt(uint64 r, uint256 index) internal view returns (IRoundBook.SignedSubmission memory) {
        return abi.decode(_subs[r][index], (IRoundBook.SignedSubmission));
    }

    /// @dev Sorts the submissions by producer (insertion sort); returns where `tracked` went.
    function _sortByProducer(IRoundBook.SignedSubmission[] memory subs, uint32 tracked) internal pure returns (uint32) {
        for (uint256 i = 1; i < subs.length; ++i) {
            for (uint256 j = i; j > 0 && subs[j - 1].producer > subs[j].producer; --j) {
                (subs[j - 1], subs[j]) = (subs[j], subs[j - 1]);
                if (tracked == j) tracked = uint32(j - 1);
                else if (tracked == j - 1) tracked = uint32(j);
            }
        }
        return tracked;
    }

    function _proveForged(uint64 r, Round storage g) internal {
        IRoundBook.SignedSubmission memory leaf = abi.decode(_subs[r][g.lieIndex], (IRoundBook.SignedSubmission));
        _proven(
            r,
            g,
            abi.encodeCall(IRoundBook.proveForgedSubmission, (r, g.lieIndex, leaf, _submissionProof(r, g.lieIndex))),
            FORGED_PROVEN
        );
    }

    function _proveBadCredit(uint64 r, Round storage g) internal {
        uint32 j = g.creditLie; // (0 but for a v4 batch's credit)
        IRoundBook.Credit memory credit = abi.decode(_credits[r][j], (IRoundBook.Credit));
        IRoundBook.SignedSubmission memory sub = abi.decode(_subs[r][credit.index], (IRoundBook.SignedSubmission));
        bytes memory call_ = abi.encodeCall(
            IRoundBook.proveBadCredit,
            (
                r,
                j,
                credit,
                _amounts[r][j],
                _creditProof(r, j),
                sub,
                _submissionProof(r, credit.index),
                abi.decode(_votes[r][j], (IRoundBook.SignedVote[]))
            )
        );
        uint8 lie = g.verdictLie;
        uint256 path = lie == UNDER_QUORUM
            ? UNDER_QUORUM_PROVEN
            : lie == INFLATED ? INFLATED_PROVEN : lie == BAD_SIGNATURE ? BAD_SIGNATURE_PROVEN : UNSEATED_PROVEN;
        _proven(r, g, call_, lie == V4_CREDITED ? V4_CREDIT_PROVEN : path);
    }

    /// @dev Shows the first parent of leaves, whose sum is one more than its children's.
    function _proveBadSum(uint64 r, Round storage g) internal {
        SumTree.Node[] memory path = _creditProof(r, 0);
        SumTree.Node memory left = SumTree.leaf(keccak256(_credits[r][0]), _amounts[r][0]);
        SumTree.Node memory right = path[0];
        SumTree.Node memory node = SumTree.Node(SumTree.parentHash(left, right), left.sum + right.sum + 1);
        SumTree.Node[] memory above = new SumTree.Node[](path.length - 1);
        for (uint256 i; i < above.length; ++i) {
            above[i] = path[i + 1];
        }
        _proven(r, g, abi.encodeCall(IRoundBook.proveBadSum, (r, 1, 0, node, above, left, right)), BAD_SUM_PROVEN);
    }

    /// @dev Shows the standing credit the lying earnings leave out.
    function _proveSkipped(uint64 r, Round storage g) internal {
        uint32 at = g.creditLie;
        IRoundBook.Credit memory credit = abi.decode(_credits[r][at], (IRoundBook.Credit));
        uint64 q = _skipped[r];
        IRoundBook.Shown memory skipped = _shownAt(q, _creditOf[q][credit.producer] - 1);
        _proven(
            r,
            g,
            abi.encodeCall(IRoundBook.proveSkippedCredit, (r, at, credit, _amounts[r][at], _creditProof(r, at), skipped)),
            SKIPPED_PROVEN
        );
    }

    /// @dev Makes the earnings of a credit whose producer has two standing credits or more among
    /// the rounds settled for r skip the last: anchored on the one before (its earnings as of a
    /// round LAG after it), they add up and leave the last out. False when no credit has two.
    function _skipOne(uint64 r, Round storage g, IRoundBook.Credit[] memory credits) internal returns (bool) {
        for (uint256 i; i < credits.length; ++i) {
            uint64 anchor = credits[i].earnings.anchor;
            if (anchor == NO_ROUND || anchor == 0) continue;
            IRoundBook.Earnings memory skipping = _earnings(credits[i].producer, anchor - 1 + LAG);
            if (skipping.anchor == NO_ROUND) continue;
            _skipped[r] = anchor;
            credits[i].earnings = skipping;
            g.creditLie = uint32(i);
            return true;
        }
        return false;
    }

    function _proveCreditedTwice(uint64 r, Round storage g) internal {
        bytes memory call_ = abi.encodeCall(
            IRoundBook.proveCreditsUnsorted,
            (
                r,
                0,
                abi.decode(_credits[r][0], (IRoundBook.Credit)),
                _amounts[r][0],
                _creditProof(r, 0),
                abi.decode(_credits[r][1], (IRoundBook.Credit)),
                _amounts[r][1],
                _creditProof(r, 1)
            )
        );
        _proven(r, g, call_, CREDITED_TWICE_PROVEN);
    }

    function _proveBadEarnings(uint64 r, Round storage g) internal {
        uint32 at = g.creditLie;
        IRoundBook.Credit memory credit = abi.decode(_credits[r][at], (IRoundBook.Credit));
        IRoundBook.Shown[] memory shown = _earningsShown(credit.earnings);
        _proven(
            r,
            g,
            abi.encodeCall(IRoundBook.proveBadEarnings, (r, at, credit, _amounts[r][at], _creditProof(r, at), shown)),
            EARNINGS_PROVEN
        );
    }

    /// @dev The leaves earnings are shown with: the anchor's, then each recent credit's.
    function _earningsShown(IRoundBook.Earnings memory e) internal view returns (IRoundBook.Shown[] memory shown) {
        if (e.anchor != NO_ROUND) {
            uint256 n = 1;
            for (uint256 k; k < e.recent.length; ++k) {
                if (e.recent[k] != NO_INDEX) ++n;
            }
            shown = new IRoundBook.Shown[](n);
            shown[0] = _shownAt(e.anchor, e.anchorIndex);
            n = 1;
            for (uint256 k; k < e.recent.length; ++k) {
                if (e.recent[k] != NO_INDEX) shown[n++] = _shownAt(e.anchor - 1 - uint64(k), e.recent[k]);
            }
        }
    }

    /// @dev Sends a proof of round r's lie as the auditor: it must void the round and pay the
    /// auditor half the bond, the ledger's pool the rest.
    function _proven(uint64 r, Round storage g, bytes memory call_, uint256 path) internal {
        _provenBy(address(book), r, g, call_, path);
    }

    /// @dev _proven, the proof sent to `to` (the book, or its judge).
    function _provenBy(address to, uint64 r, Round storage g, bytes memory call_, uint256 path) internal {
        uint256 before = STRANGER.balance;
        uint256 ledgerFunded = ledger.totalFunded();
        vm.prank(STRANGER);
        (bool ok, bytes memory reason) = to.call(call_);
        _expect("prove", ok, reason);
        _paidExactly("prove", STRANGER, before, BOND / 2);
        if (ledger.totalFunded() != ledgerFunded + BOND - BOND / 2) {
            _violate("prove: the ledger's pool did not get the other half of the bond");
        }
        g.lieProven = true;
        _forfeit(g);
        _hit(path);
        IRoundBook.RoundView memory v = book.roundOf(r);
        if (!v.submissionsVoided && !v.verdictsVoided) _violate("prove: a proven lie left its root standing");
    }

    function _challenge(uint64 r, bool verdictTree, uint32 index) internal {
        vm.deal(STRANGER, STRANGER.balance + CHALLENGE_BOND);
        vm.prank(STRANGER);
        (bool ok, bytes memory reason) = address(book).call{value: CHALLENGE_BOND}(
            abi.encodeCall(IRoundBook.challengeData, (r, verdictTree, index))
        );
        Round storage g = rounds[r];
        if (g.voided) {
            // one proven lie takes the round's bond: a void root is not challenged
            if (ok || bytes4(reason) != IRoundBook.NoSuchRoot.selector) {
                return _violate("challengeData: a void root's leaf was challenged");
            }
            return _hit(CHALLENGES_ON_VOID);
        }
        _expect("challengeData", ok, reason);
        _challenged[_key(r, verdictTree, index)] = true;
        _challenges.push(Challenge(r, verdictTree, index, ledger.currentRound() + 1, false));
        g.open += 1;
        openChallengeBonds += CHALLENGE_BOND;
    }

    /// @dev Every open challenge the aggregators answer, answered; returns how many.
    function _answerAll() internal returns (uint256 answered) {
        uint64 current = ledger.currentRound();
        for (uint256 i; i < _challenges.length; ++i) {
            Challenge storage c = _challenges[i];
            if (c.closed || current > c.answerBy) continue;
            Round storage g = rounds[c.round];
            if (!_answerable(g, c)) continue;
            bool empty = c.index >= (c.verdictTree ? g.credits : g.count);
            bytes memory call_ = _answerCall(c);
            uint256 before = g.aggregator.balance;
            vm.prank(g.aggregator);
            (bool ok, bytes memory reason) = address(book).call(call_);
            _expect("answer", ok, reason);
            _paidExactly("answer", g.aggregator, before, CHALLENGE_BOND);
            c.closed = true;
            g.open -= 1;
            openChallengeBonds -= CHALLENGE_BOND;
            ++answered;
            _hit(ANSWERED);
            if (empty) _hit(ANSWERED_EMPTY);
        }
    }

    /// @dev Whether the aggregator can show the challenged leaf: not a withholding one's
    /// submission, nor a leaf below a BAD_SUM root's false parent (no proof of it reaches the root).
    function _answerable(Round storage g, Challenge storage c) internal view returns (bool) {
        if (g.subLie == WITHHELD && !c.verdictTree) return false;
        return !(g.verdictLie == BAD_SUM && c.verdictTree && c.index < 2);
    }

    /// @dev The aggregator's answer to challenge `c`: the leaf with its proof, or the empty node.
    function _answerCall(Challenge storage c) internal view returns (bytes memory call_) {
        Round storage g = rounds[c.round];
        uint256 n = c.verdictTree ? g.credits : g.count;
        {
            if (c.index >= n) {
                SumTree.Node[] memory proof = c.verdictTree ? _creditProof(c.round, c.index) : _submissionProof(c.round, c.index);
                call_ = abi.encodeCall(IRoundBook.answerEmpty, (c.round, c.verdictTree, c.index, proof));
            } else if (c.verdictTree) {
                call_ = abi.encodeCall(
                    IRoundBook.answerCredit,
                    (
                        c.round,
                        c.index,
                        abi.decode(_credits[c.round][c.index], (IRoundBook.Credit)),
                        _amounts[c.round][c.index],
                        _creditProof(c.round, c.index),
                        abi.decode(_votes[c.round][c.index], (IRoundBook.SignedVote[]))
                    )
                );
            } else {
                call_ = abi.encodeCall(
                    IRoundBook.answerSubmission,
                    (
                        c.round,
                        c.index,
                        abi.decode(_subs[c.round][c.index], (IRoundBook.SignedSubmission)),
                        _submissionProof(c.round, c.index)
                    )
                );
            }
        }
    }

    /// @dev `caller` releases round r: its aggregator takes the bond and its pay; anyone voids a
    /// round its aggregator left without a verdict root.
    function _release(uint64 r, address caller) internal {
        Round storage g = rounds[r];
        uint256 before = caller.balance;
        uint256 pay;
        bool short;
        if (g.verdicts) {
            pay = (_share(r, g.total) * POST_PAY_BPS) / 10_000;
            if (pay > pool) (pay, short) = (pool, true);
        }
        vm.prank(caller);
        (bool ok, bytes memory reason) = address(book).call(abi.encodeCall(IRoundBook.release, (r)));
        _expect("release", ok, reason);
        if (!g.verdicts) {
            // chosen (NO_VERDICTS), or its verdict round passed with no call of postVerdicts: an
            // aggregator that went offline forfeits as one that chose to
            g.verdictLie = NO_VERDICTS;
            _paidExactly("release (no verdict root)", caller, before, BOND / 2);
            g.lieProven = true;
            _forfeit(g);
            _hit(NO_VERDICTS_VOIDED);
            return;
        }
        _paidExactly("release", caller, before, BOND + pay);
        pool -= pay;
        heldBonds -= BOND;
        g.released = true;
        if (pay != 0) _hit(RELEASED_WITH_PAY);
        if (short) _hit(RELEASED_SHORT);
        if ((g.subLie != 0 || g.verdictLie != 0) && !g.lieProven) _hit(LIES_STOOD);
    }

    function _forfeit(Round storage g) internal {
        g.voided = true;
        heldBonds -= BOND;
        forfeited += BOND - BOND / 2;
    }

    // ======================================================================== claims

    /// @dev The producer's latest credit in a standing round it may claim from now (at least LAG
    /// after its last claim's round), as (round, index + 1); index + 1 == 0: none.
    function _claimable(address p) internal view returns (uint64 r, uint32 index) {
        for (uint256 i = _played.length; i > 0; --i) {
            uint64 q = _played[i - 1];
            uint32 at = _creditOf[q][p];
            if (at == 0 || !_stands(q)) continue;
            if (through[p] != 0 && q < through[p] - 1 + LAG) return (0, 0);
            return (q, at);
        }
    }

    /// @dev The producer's credits in standing rounds after those settled for r, before r.
    function _tail(address p, uint64 r) internal view returns (IRoundBook.Shown[] memory tail) {
        tail = new IRoundBook.Shown[](LAG);
        uint256 n;
        for (uint256 i; i < _played.length && _played[i] < r; ++i) {
            uint64 q = _played[i];
            if (q + LAG <= r) continue;
            uint32 at = _creditOf[q][p];
            if (at != 0 && _stands(q)) tail[n++] = _shownAt(q, at - 1);
        }
        assembly ("memory-safe") {
            mstore(tail, n)
        }
    }

    function _stands(uint64 q) internal view returns (bool) {
        Round storage g = rounds[q];
        return g.verdicts && !g.voided && g.open == 0 && ledger.currentRound() >= _challengeEnd(q) + 2;
    }

    function _share(uint64 q, uint256 amount) internal view returns (uint256) {
        uint256 total = rounds[q].total + ledgerCredited[q]; // both lanes' credited signal
        return total == 0 ? 0 : (REWARD * amount) / total;
    }

    function _challengeEnd(uint64 r) internal view returns (uint64) {
        return r + W + 2 * C + 2;
    }

    // ======================================================================== trees and signatures

    function _shownAt(uint64 q, uint32 index) internal view returns (IRoundBook.Shown memory) {
        return IRoundBook.Shown(
            q, index, abi.decode(_credits[q][index], (IRoundBook.Credit)), _amounts[q][index], _creditProof(q, index)
        );
    }

    function _submissionNode(IRoundBook.SignedSubmission memory s) internal pure returns (SumTree.Node memory) {
        return SumTree.leaf(keccak256(abi.encode(s)), 0);
    }

    function _submissionProof(uint64 r, uint256 index) internal view returns (SumTree.Node[] memory proof) {
        bytes[] storage subs = _subs[r];
        SumTree.Node[] memory leaves = new SumTree.Node[](subs.length);
        for (uint256 i; i < subs.length; ++i) {
            leaves[i] = _submissionNode(abi.decode(subs[i], (IRoundBook.SignedSubmission)));
        }
        (proof,) = _proof(leaves, index);
    }

    function _creditProof(uint64 r, uint256 index) internal view returns (SumTree.Node[] memory proof) {
        bytes[] storage credits = _credits[r];
        SumTree.Node[] memory leaves = new SumTree.Node[](credits.length);
        for (uint256 i; i < credits.length; ++i) {
            leaves[i] = SumTree.leaf(keccak256(credits[i]), _amounts[r][i]);
        }
        (proof,) = _proofOf(leaves, index, rounds[r].verdictLie == BAD_SUM);
    }

    /// @dev The proof of the node at `index` of the complete tree over `leaves` (padded with
    /// empty nodes to 2^depth), and the tree's root.
    function _proof(SumTree.Node[] memory leaves, uint256 index)
        internal
        pure
        returns (SumTree.Node[] memory proof, SumTree.Node memory root)
    {
        return _proofOf(leaves, index, false);
    }

    /// @dev As _proof; with `bump`, the first parent of leaves commits to one more than its
    /// children's sums (a BAD_SUM root), and every node above it carries the extra unit.
    function _proofOf(SumTree.Node[] memory leaves, uint256 index, bool bump)
        internal
        pure
        returns (SumTree.Node[] memory proof, SumTree.Node memory root)
    {
        uint256 depth = SumTree.depth(leaves.length);
        SumTree.Node[] memory level = new SumTree.Node[](uint256(1) << depth);
        for (uint256 i; i < level.length; ++i) {
            level[i] = i < leaves.length ? leaves[i] : SumTree.Node(bytes32(0), 0);
        }
        proof = new SumTree.Node[](depth);
        for (uint256 h; h < depth; ++h) {
            proof[h] = level[index ^ 1];
            SumTree.Node[] memory up = new SumTree.Node[](level.length / 2);
            for (uint256 i; i < up.length; ++i) {
                up[i] = SumTree.parent(level[2 * i], level[2 * i + 1]);
            }
            if (bump && h == 0) up[0].sum += 1;
            level = up;
            index >>= 1;
        }
        root = level[0];
    }

    function _submissionHash(Messages.Submission memory m) internal view returns (bytes32) {
        return Messages.signingHash(SEPARATOR, Messages.structHash(m));
    }

    function _receiptHash(IRoundBook.SignedSubmission memory s) internal view returns (bytes32) {
        return Messages.signingHash(SEPARATOR, Messages.receiptHash(_submissionHash(s.submission), s.producer));
    }

    function _sig(uint256 key, bytes32 hash) internal pure returns (bytes memory) {
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(key, hash);
        return abi.encodePacked(r, s, v);
    }

    function _keyOf(address node) internal view returns (uint256) {
        return _keys[_indexOf(node)];
    }

    function _indexOf(address node) internal view returns (uint256) {
        for (uint256 i; i < NODES; ++i) {
            if (nodes[i] == node) return i;
        }
        revert("not a node");
    }

    function _key(uint64 r, bool verdictTree, uint32 index) internal pure returns (bytes32) {
        return keccak256(abi.encode(r, verdictTree, index));
    }

    // ======================================================================== bookkeeping

    /// @dev Mines `by` blocks, each with a hash (the draw and the beacon read them).
    function _roll(uint256 by) internal {
        uint256 from = blockNow;
        blockNow += by;
        vm.roll(blockNow);
        for (uint256 b = from; b < blockNow; ++b) {
            vm.setBlockhash(b, keccak256(abi.encode("block", b)));
        }
    }

    function _hit(uint256 path) internal {
        _pathCount[path] += 1;
    }

    function _violate(string memory what) internal {
        _violations.push(what);
    }

    /// @dev A call the rules allow must go through.
    function _expect(string memory action, bool ok, bytes memory reason) internal {
        if (!ok) _violate(string.concat(action, ": the book refused a call its rules allow: ", _hex4(reason)));
    }

    function _paidExactly(string memory action, address to, uint256 before, uint256 amount) internal {
        if (to.balance != before + amount) {
            string memory got = to.balance < before ? "less than nothing" : vm.toString(to.balance - before);
            _violate(string.concat(action, ": paid ", got, " wei, the rules say ", vm.toString(amount)));
        }
    }

    error NothingToDo();

    /// @dev An action with nothing to do in this state: forge counts the call refused.
    function _nothing() internal pure {
        revert NothingToDo();
    }

    receive() external payable {}
}
