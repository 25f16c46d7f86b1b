// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {ISwarmLedger} from "../../ISwarmLedger.sol";
import {CheatsBase} from "./Cheats.sol";

/// @notice Drives a SwarmLedger through random sequences of every call a node, an auditor or a
/// funder makes, with several actors, and keeps its own model of what the ledger must hold.
///
/// Each action first bounds its fuzzed inputs so that most calls are valid (an actor that can act,
/// a round inside its window, a score near the claim), then asks the model whether the call must
/// succeed, makes it, and compares:
/// - the ledger refused and the model expected a refusal: the action reverts, so forge's metrics
///   table counts it under "Reverts" (calls - reverts = calls the ledger accepted);
/// - the ledger and the model disagree (an accepted call the model forbids, or a refused call the
///   model allows), or an accepted call moved money or credit differently from the model: the
///   action records a violation and returns, so that the invariant `the handler saw no
///   violation` fails with the message and forge prints the shrunk call sequence.
/// The model is written from the ledger's documented rules, not from its code.
contract LedgerHandler is CheatsBase {
    ISwarmLedger public immutable ledger;

    uint256 internal constant SCORE_SCALE = 10_000;
    uint256 internal constant MAX_ROLLOUTS = 65_536; // what a batch holds: 1,024 questions x 64
    uint256 internal constant BPS = 10_000;
    uint256 internal constant SETTLER_CUT = 1_000; // of what a settle or settleVotes call slashes
    uint256 internal constant FIRST_ACTOR = 0xA11CE00;
    uint256 internal constant N_ACTORS = 7; // five of FAMILY (as many as the single-family suites had), two of OTHER_FAMILY
    // a vote's side, and an actor's record of its votes on a submission: the first committee's
    // side in bits 0-1, the appeal's in bits 2-3, JUDGED once settleVotes judged it
    uint8 internal constant AGREE = 1;
    uint8 internal constant DISPUTE = 2;
    uint8 internal constant UNAVAILABLE = 3;
    uint8 internal constant JUDGED = 16;

    // the ledger's parameters, read once
    uint64 internal immutable L;
    uint256 internal immutable MIN_STAKE;
    uint64 internal immutable UNBONDING;
    uint64 internal immutable C;
    uint64 internal immutable S;
    uint256 internal immutable REWARD;
    uint256 internal immutable SLASH_BPS;
    uint256 internal immutable TOL_BPS;
    uint64 internal immutable GENESIS;
    uint256 internal immutable Q;
    uint256 internal immutable K;
    uint64 internal immutable APPEAL_ROUNDS;
    uint256 internal immutable APPEAL_K;

    address[N_ACTORS] public actors;

    // ------------------------------------------------------------------------------- the model

    struct Stake {
        bool registered;
        uint256 active;
        uint256 unbonding;
        uint256 unbondingEnd;
        uint256 lastUnstakeAt; // when the caller last moved stake into unbonding
        uint256 claimedTotal; // sum of what its successful claims returned
        uint256 stakeBlock; // the block of the last change to its active stake
        uint256 unsettled; // its submissions not settled yet
        uint256 backing; // of those, the ones made before its last unstake request: withdraw waits
        uint256 unstakes; // its accepted unstake requests
    }

    /// @notice One committee's votes on a submission: seats and distinct checkers per side.
    struct Tally {
        uint64 agreeSeats;
        uint64 disputeSeats;
        uint64 unavailableSeats;
        uint16 agrees;
        uint16 disputes;
        uint16 unavailable;
    }

    struct Sub {
        uint64 round;
        address node;
        uint32 rollouts;
        uint64 score;
        uint64 signal;
        uint256 submittedAt;
        uint256 snapshotBlock; // its block: its seats are drawn from the stakes as of it
        uint256 unstakes; // its node's unstake requests before it
        Tally votes; // the first committee's
        uint256 appealBlock; // the block of its appeal (its producer's or a voter's); 0: none
        Tally appealVotes; // the appeal committee's: once it reached a verdict, the verdict
        address appellant; // who appealed: the producer, or a voter its first verdict judged lost
        bool settled;
        bool paid;
        uint256 paidAmount;
    }

    mapping(address => Stake) public stakeOf;
    // the model's stake history: per node (and for the total) the value after each block in
    // which it changed, as the documented draw reads it
    mapping(address => uint256[]) internal _histBlocks;
    mapping(address => uint256[]) internal _histValues;
    address internal constant TOTAL = address(0x7074A1);
    Sub[] internal _subs;
    mapping(uint64 => mapping(address => uint256)) internal _subIndex; // index + 1
    // voter => round => producer => its record (sides and JUDGED, as above)
    mapping(address => mapping(uint64 => mapping(address => uint8))) public voteRecord;
    mapping(uint256 => address[]) internal _votersOf; // per submission index, each voter once
    mapping(uint64 => uint256) public creditedTotal; // the model's round total of credited signal
    // per submission: the block whose hash draws its checkers, and that hash's low 88 bits once a
    // vote drew it; and its appeal's (the block after the appeal's), once drawn
    mapping(uint64 => mapping(address => uint256)) public beaconBlockOf;
    mapping(uint64 => mapping(address => uint256)) public beaconOf;
    mapping(uint64 => mapping(address => uint256)) public appealBeaconOf;
    mapping(uint64 => uint256) public paidInRound;
    uint64[] internal _roundsWithSubs;
    mapping(uint64 => bool) internal _roundSeen;

    uint256 public pool;
    uint256 public funded;
    uint256 public slashed;
    uint256 public paidOut;
    uint256 public settlerPaid; // the settlers' cuts (SETTLER_CUT_BPS of what their calls slashed)

    string[] internal _violations;

    /// @notice How often a run reached the paths where rules bite (not only the happy path):
    /// read by the campaign's report so that a handler that avoids them is noticed.
    string[] internal _pathNames = [
        "disputedAttestations", // an attestation outside the tolerance
        "creditLost", // a submission's credit removed by disputing or unavailable seats
        "creditRegained", // and given back by agreeing seats
        "slashes", // a disputed submission settled with a slash
        "slashesIntoUnbonding", // a slash larger than the active stake
        "zeroShareClaims", // a claim that listed an uncredited or zero-signal round
        "fullUnstakes", // all active stake moved to unbonding
        "withdrawalsAfterSubmitting", // a withdrawal by a node that had submitted
        "ties", // agreeing seats equal to disputing + unavailable (credited: not outweighed)
        "quorumReached", // a submission credited by the vote that completed its quorum
        "unavailableVotes", // a drawn checker reported a batch unavailable
        "unavailableNotSlashed", // a settled submission with unavailable votes and no slash
        "finalWithoutQuorum", // a submission whose window closed with fewer than quorum agreements
        "beaconsLapsed", // a beacon nobody drew while the EVM knew its block's hash, refused for good
        "claimsSettling", // a claim that settled a submission it listed
        "appeals", // a producer appealed its submission, not credited, in its appeal window
        "appealsLapsed", // an appeal of a submission whose first beacon lapsed, refused (kept)
        "appealVotes", // a vote on an appeal's committee
        "secondVotes", // a checker of the first committee voted again on the appeal's
        "appealsOverturned", // an appeal's committee credited a batch its first committee outweighed
        "lostAppealsSlashedTwice", // an appealed submission settled disputed: twice slashBps
        "losingVotesSlashed", // settleVotes slashed a vote on the losing side of the final verdict
        "unavailableVotesSpared", // settleVotes judged an unavailable vote on a decided batch: kept
        "votesJudgedOnce", // settleVotes skipped a vote it had judged already
        "voteSettlementsClosed", // settleVotes after its window, refused (kept)
        "undecidedAppealVotesSpared", // settleVotes judged an appeal's vote when the appeal reached no verdict: kept
        "settlersPaid", // settle or settleVotes paid its caller a cut of others' slashes
        "voterAppeals", // a voter its first verdict judged lost appealed it (a bait batch's recourse)
        "lostVoterAppealsSlashedTwice" // settleVotes judged a voter's lost appeal: twice slashBps
    ];
    mapping(uint256 => uint256) internal _pathCount;

    uint256 internal constant DISPUTED = 0;
    uint256 internal constant CREDIT_LOST = 1;
    uint256 internal constant CREDIT_REGAINED = 2;
    uint256 internal constant SLASHES = 3;
    uint256 internal constant SLASHES_INTO_UNBONDING = 4;
    uint256 internal constant ZERO_SHARE_CLAIMS = 5;
    uint256 internal constant FULL_UNSTAKES = 6;
    uint256 internal constant WITHDRAWALS_AFTER_SUBMITTING = 7;
    uint256 internal constant TIES = 8;
    uint256 internal constant QUORUM_REACHED = 9;
    uint256 internal constant UNAVAILABLE_VOTES = 10;
    uint256 internal constant UNAVAILABLE_NOT_SLASHED = 11;
    uint256 internal constant FINAL_WITHOUT_QUORUM = 12;
    uint256 internal constant BEACONS_LAPSED = 13;
    uint256 internal constant CLAIMS_SETTLING = 14;
    uint256 internal constant APPEALS = 15;
    uint256 internal constant APPEALS_LAPSED = 16;
    uint256 internal constant APPEAL_VOTES = 17;
    uint256 internal constant SECOND_VOTES = 18;
    uint256 internal constant APPEALS_OVERTURNED = 19;
    uint256 internal constant LOST_APPEALS_SLASHED_TWICE = 20;
    uint256 internal constant LOSING_VOTES_SLASHED = 21;
    uint256 internal constant UNAVAILABLE_VOTES_SPARED = 22;
    uint256 internal constant VOTES_JUDGED_ONCE = 23;
    uint256 internal constant VOTE_SETTLEMENTS_CLOSED = 24;
    uint256 internal constant UNDECIDED_APPEAL_VOTES_SPARED = 25;
    uint256 internal constant SETTLERS_PAID = 26;
    uint256 internal constant VOTER_APPEALS = 27;
    uint256 internal constant LOST_VOTER_APPEALS_SLASHED_TWICE = 28;

    function _hit(uint256 path) internal {
        _pathCount[path] += 1;
    }

    /// @notice This run's hard paths as one JSON line (for .forge/metrics/paths.jsonl).
    function pathsLine(string memory suite) external view returns (string memory line) {
        line = string.concat("{\"suite\":\"", suite, "\"");
        for (uint256 i; i < _pathNames.length; ++i) {
            line = string.concat(line, ",\"", _pathNames[i], "\":", vm.toString(_pathCount[i]));
        }
        line = string.concat(line, "}");
    }

    /// @notice The block number the handler last rolled to. Read through _block() instead of
    /// `block.number`: after a vm.roll in the same call, via-IR code may reuse a block.number it
    /// read before the roll.
    uint256 public blockNow;

    function _roll(uint256 by) internal {
        blockNow = block.number + by; // read before this call's roll: each action rolls once
        vm.roll(blockNow);
    }

    /// @dev The block number now, in a call that rolled (_block()) or not (block.number).
    function _block() internal view returns (uint256) {
        return blockNow > block.number ? blockNow : block.number;
    }

    constructor(ISwarmLedger ledger_) {
        ledger = ledger_;
        blockNow = block.number;
        L = ledger_.roundLength();
        MIN_STAKE = ledger_.minStake();
        UNBONDING = ledger_.unbondingPeriod();
        C = ledger_.challengeRounds();
        S = ledger_.submitRounds();
        REWARD = ledger_.rewardPerRound();
        SLASH_BPS = ledger_.slashBps();
        require(ledger_.book() == BOOK, "the ledger names the suites' round book");
        TOL_BPS = ledger_.agreeToleranceBps();
        GENESIS = ledger_.genesis();
        Q = ledger_.quorum();
        K = ledger_.checkers();
        APPEAL_ROUNDS = ledger_.appealRounds();
        APPEAL_K = ledger_.appealCheckers();
        for (uint256 i; i < N_ACTORS; ++i) {
            actors[i] = address(uint160(FIRST_ACTOR + i));
            vm.label(actors[i], string.concat("actor", vm.toString(i)));
        }
    }

    /// @notice Registers the first `n` actors with minStake or twice it, then moves one round on
    /// (so that runs start with checkers, as a live swarm does; the others register as fuzzed).
    function seedNodes(uint256 n) external {
        for (uint256 i; i < n; ++i) {
            address a = actors[i];
            uint256 amount = (1 + (i % 2)) * MIN_STAKE;
            _fundActor(a, amount);
            vm.prank(a);
            ledger.register{value: amount}("{\"seed\":true}", familyOf(a));
            Stake storage st = stakeOf[a];
            st.registered = true;
            st.active = amount;
            _recordStake(a);
        }
        vm.warp(block.timestamp + L);
        _roll(5);
    }

    // ---------------------------------------------------------------------------- model views

    function subCount() external view returns (uint256) {
        return _subs.length;
    }

    function subAt(uint256 i) external view returns (Sub memory) {
        return _subs[i];
    }

    function roundsWithSubs() external view returns (uint64[] memory) {
        return _roundsWithSubs;
    }

    function violationCount() external view returns (uint256) {
        return _violations.length;
    }

    function firstViolation() external view returns (string memory) {
        return _violations.length == 0 ? "" : _violations[0];
    }

    /// @notice The committee whose votes decide `s`: the appeal's once appealed and its
    /// committee reached a verdict (credited it, or more of its seats disputed than agreed),
    /// else the first; whoever appealed, and whichever way the first committee went.
    function deciding(Sub memory s) public view returns (Tally memory) {
        return appealDecides(s) ? s.appealVotes : s.votes;
    }

    /// @notice Whether the appeal of `s` reached a verdict.
    function appealDecides(Sub memory s) public view returns (bool) {
        if (s.appealBlock == 0) return false;
        Tally memory t = s.appealVotes;
        return _wins(t) || t.disputeSeats > t.agreeSeats;
    }

    function _wins(Tally memory t) internal view returns (bool) {
        return t.agrees >= Q && uint256(t.agreeSeats) >= uint256(t.disputeSeats) + t.unavailableSeats;
    }

    /// @notice The rule: a submission earns once `quorum` drawn checkers of its deciding
    /// committee agreed and their seats are at least those of the checkers who disputed it plus
    /// those who could not fetch it.
    function credited(Sub memory s) public view returns (bool) {
        return _wins(deciding(s));
    }

    /// @notice Disputed (slashed at settlement, its agreeing voters lose): more of the deciding
    /// committee's seats disputed it than agreed; unavailable seats never count. An appeal whose
    /// committee reached no verdict (neither credited nor disputed it) leaves the first
    /// committee's standing: an appeal nobody votes on is no escape from a dispute.
    function disputed(Sub memory s) public view returns (bool) {
        Tally memory t = deciding(s);
        return t.disputeSeats > t.agreeSeats;
    }

    /// @notice The appeal's committee disputed it (slashed twice when its producer appealed).
    function disputedOnAppeal(Sub memory s) public view returns (bool) {
        return appealDecides(s) && s.appealVotes.disputeSeats > s.appealVotes.agreeSeats;
    }

    /// @dev The deciding (and voting) committee's tally of `s`, in storage.
    function _tallyNow(Sub storage s) internal view returns (Tally storage) {
        return s.appealBlock != 0 ? s.appealVotes : s.votes;
    }

    /// @notice A submission's beacon as the documented rule derives it: the low 88 bits of the
    /// hash of the block after the submission's (1 if they are 0), once that block is past.
    function beaconNow(uint64 round, address node) public view returns (uint256 beacon, bool ready) {
        return _beaconAt(beaconOf[round][node], beaconBlockOf[round][node]);
    }

    /// @notice The same for its appeal: the hash of the block after the appeal's.
    function appealBeaconNow(uint64 round, address node) public view returns (uint256 beacon, bool ready) {
        return _beaconAt(appealBeaconOf[round][node], appealBeaconBlock(round, node));
    }

    /// @notice The block whose hash draws the appeal's committee; 0 when not appealed.
    function appealBeaconBlock(uint64 round, address node) public view returns (uint256) {
        uint256 index = _subIndex[round][node];
        if (index == 0 || _subs[index - 1].appealBlock == 0) return 0;
        return _subs[index - 1].appealBlock + 1;
    }

    function _beaconAt(uint256 stored, uint256 beaconBlock) internal view returns (uint256 beacon, bool ready) {
        if (stored != 0) return (stored, true);
        if (beaconBlock == 0 || _block() <= beaconBlock) return (0, false);
        bytes32 h = blockhash(beaconBlock);
        if (h == bytes32(0)) return (0, false);
        beacon = uint256(h) & type(uint88).max;
        if (beacon == 0) beacon = 1;
        return (beacon, true);
    }

    /// @dev The beacon of the committee voting on `s` now (the appeal's once appealed): whether
    /// it is stored, its block, and its value and readiness.
    function _beaconOfVoting(Sub storage s)
        internal
        view
        returns (bool stored, uint256 beaconBlock, uint256 beacon, bool ready)
    {
        if (s.appealBlock != 0) {
            stored = appealBeaconOf[s.round][s.node] != 0;
            beaconBlock = s.appealBlock + 1;
            (beacon, ready) = appealBeaconNow(s.round, s.node);
        } else {
            stored = beaconOf[s.round][s.node] != 0;
            beaconBlock = beaconBlockOf[s.round][s.node];
            (beacon, ready) = beaconNow(s.round, s.node);
        }
    }

    function _storeVotingBeacon(Sub storage s, uint256 beacon) internal {
        if (s.appealBlock != 0) appealBeaconOf[s.round][s.node] = beacon;
        else beaconOf[s.round][s.node] = beacon;
    }

    function _totalActive() internal view returns (uint256 total) {
        for (uint256 i; i < N_ACTORS; ++i) {
            total += stakeOf[actors[i]].active;
        }
    }

    /// @notice The family an actor registers in: every third actor (2, 5, ...) runs OTHER_FAMILY,
    /// the rest FAMILY, so seeded runs start with checkers in FAMILY and one OTHER_FAMILY node
    /// whose batches wait for a second one.
    function familyOf(address a) public pure returns (bytes32) {
        uint256 i = uint160(a) - FIRST_ACTOR; // actors are FIRST_ACTOR + i
        return i >= N_ACTORS ? bytes32(0) : i % 3 == 2 ? OTHER_FAMILY : FAMILY;
    }

    /// @notice The key of a family's active stake in the model's histories (stakeAtModel).
    function familyKey(bytes32 family) public pure returns (address) {
        return address(uint160(uint256(keccak256(abi.encode("family stake", family)))));
    }

    function _familyActive(bytes32 family) internal view returns (uint256 total) {
        for (uint256 i; i < N_ACTORS; ++i) {
            if (familyOf(actors[i]) == family) total += stakeOf[actors[i]].active;
        }
    }

    /// @dev Checkpoints `a`'s active stake, its family's and the total as of this block (one per
    /// block).
    function _recordStake(address a) internal {
        _checkpoint(a, stakeOf[a].active);
        _checkpoint(familyKey(familyOf(a)), _familyActive(familyOf(a)));
        _checkpoint(TOTAL, _totalActive());
        stakeOf[a].stakeBlock = _block();
    }

    function _checkpoint(address who, uint256 value) internal {
        uint256[] storage blocks = _histBlocks[who];
        uint256 len = blocks.length;
        if (len != 0 && blocks[len - 1] == _block()) {
            _histValues[who][len - 1] = value;
        } else {
            blocks.push(_block());
            _histValues[who].push(value);
        }
    }

    /// @notice The model's stake of `who` (TOTAL: all active stake) after block `at`.
    function stakeAtModel(address who, uint256 blockNumber) public view returns (uint256) {
        uint256[] storage blocks = _histBlocks[who];
        for (uint256 i = blocks.length; i > 0; --i) {
            if (blocks[i - 1] <= blockNumber) return _histValues[who][i - 1];
        }
        return 0;
    }

    /// @notice The documented draw: a registered node of the producer's family other than the
    /// producer, holding minStake now and as of the submission's block, holds seat j of
    /// `checkers` when h_j * T < S << 128, with S its stake and T the family's active stake as
    /// of that block, base = keccak256(abi.encode(
    /// beacon, round, node, checker)) and h_j = keccak256(abi.encode(base, j)) >> 128.
    function seats(uint64 round, address node, address checker) public view returns (uint256) {
        return _draw(round, node, checker, false);
    }

    /// @notice The appeal's draw: the same rule with the appeal's beacon and `appealCheckers`
    /// trials, from the same snapshot (the submission's block); 0 when not appealed.
    function appealSeats(uint64 round, address node, address checker) public view returns (uint256) {
        return _draw(round, node, checker, true);
    }

    function _draw(uint64 round, address node, address checker, bool ofAppeal) internal view returns (uint256 held) {
        (uint256 beacon, bool ready) = ofAppeal ? appealBeaconNow(round, node) : beaconNow(round, node);
        uint256 index = _subIndex[round][node];
        if (!ready || index == 0 || checker == node || stakeOf[checker].active < MIN_STAKE) return 0;
        if (familyOf(checker) != familyOf(node)) return 0;
        uint256 snapshot = _subs[index - 1].snapshotBlock;
        uint256 stake = stakeAtModel(checker, snapshot);
        if (stake < MIN_STAKE) return 0;
        uint256 total = stakeAtModel(familyKey(familyOf(node)), snapshot);
        bytes32 base = keccak256(abi.encode(beacon, round, node, checker));
        uint256 trials = ofAppeal ? APPEAL_K : K;
        for (uint256 j; j < trials; ++j) {
            if ((uint256(keccak256(abi.encode(base, j))) >> 128) * total < stake << 128) ++held;
        }
    }

    /// @dev The seats `checker` holds on the committee voting on `s` now.
    function _seatsNow(Sub storage s, address checker) internal view returns (uint256) {
        return _draw(s.round, s.node, checker, s.appealBlock != 0);
    }

    // --------------------------------------------------------------------------------- helpers

    function _current() internal view returns (uint64) {
        return uint64((block.timestamp - GENESIS) / L);
    }

    /// @dev The last round of a submission's challenge window (its first committee votes until it).
    function _close(uint64 round) internal view returns (uint64) {
        return round + S + C;
    }

    /// @dev Final: its challenge and appeal windows have passed.
    function _final(uint64 round) internal view returns (bool) {
        return _current() > _close(round) + APPEAL_ROUNDS;
    }

    /// @dev Votes are open on `s`: until its challenge window closes, or once appealed until its
    /// appeal window closes.
    function _votingOpen(Sub storage s) internal view returns (bool) {
        return _current() <= _close(s.round) + (s.appealBlock != 0 ? APPEAL_ROUNDS : 0);
    }

    /// @dev In its appeal window: after its challenge window, before the last appeal round.
    function _inAppealWindow(Sub storage s) internal view returns (bool) {
        uint64 current = _current();
        return current > _close(s.round) && current < _close(s.round) + APPEAL_ROUNDS;
    }

    /// @dev Its votes can be judged: final, and for challengeRounds rounds after.
    function _inVoteSettlement(Sub storage s) internal view returns (bool) {
        return _final(s.round) && _current() <= _close(s.round) + APPEAL_ROUNDS + C;
    }

    /// @dev The end of the period in which a submission of `round`, or a vote on it, can still be
    /// slashed by the ledger's promise: its submission, challenge and appeal windows, then a
    /// settlement period as long as the challenge window (settleVotes' window).
    function _slashHorizon(uint64 round) internal view returns (uint256) {
        return GENESIS + uint256(round + S + 2 * C + APPEAL_ROUNDS + 1) * L;
    }

    /// @dev What settling a disputed submission slashes, in bps: twice slashBps after a lost
    /// appeal (its committee disputed it; at most all of it).
    function _settleBps(Sub storage s) internal view returns (uint256) {
        if (!disputedOnAppeal(s) || s.appellant != s.node) return SLASH_BPS;
        return 2 * SLASH_BPS > BPS ? BPS : 2 * SLASH_BPS;
    }
    function _actor(uint256 seed) internal view returns (address) {
        return actors[seed % N_ACTORS];
    }

    /// @dev The first actor from `seed` on that satisfies `want`, else the one at `seed`.
    function _actorWhere(uint256 seed, function (address) view returns (bool) want)
        internal
        view
        returns (address)
    {
        for (uint256 i; i < N_ACTORS; ++i) {
            address a = actors[(seed + i) % N_ACTORS];
            if (want(a)) return a;
        }
        return _actor(seed);
    }

    function _isUnregistered(address a) internal view returns (bool) {
        return !stakeOf[a].registered;
    }

    function _isRegistered(address a) internal view returns (bool) {
        return stakeOf[a].registered;
    }

    function _canAct(address a) internal view returns (bool) {
        return stakeOf[a].active >= MIN_STAKE;
    }

    uint64 internal _pickRound;

    function _canSubmit(address a) internal view returns (bool) {
        return _canAct(a) && _subIndex[_pickRound][a] == 0;
    }

    function _hasClaimable(address a) internal view returns (bool) {
        for (uint256 i; i < _subs.length; ++i) {
            Sub storage s = _subs[i];
            if (s.node == a && !s.paid && _final(s.round) && _share(s) > 0) return true;
        }
        return false;
    }

    address internal _pickNode;
    uint64 internal _pickSubRound;

    /// @dev Whether `a` may still vote on the picked submission: drawn on the committee voting
    /// now, with its stake, and not voted on that committee yet.
    function _canAttest(address a) internal view returns (bool) {
        Sub storage s = _subs[_subIndex[_pickSubRound][_pickNode] - 1];
        return a != _pickNode && _canAct(a) && _sideNow(s, a) == 0 && _seatsNow(s, a) != 0;
    }

    /// @dev `a`'s side on the committee voting on `s` now (0: none yet).
    function _sideNow(Sub storage s, address a) internal view returns (uint8) {
        uint8 record = voteRecord[a][s.round][s.node];
        return s.appealBlock != 0 ? (record >> 2) & 3 : record & 3;
    }

    function _isRegisteredNotUnbonding(address a) internal view returns (bool) {
        return stakeOf[a].registered && stakeOf[a].unbonding == 0;
    }

    function _canWithdraw(address a) internal view returns (bool) {
        return _canWithdrawButUnsettled(a) && stakeOf[a].backing == 0;
    }

    function _canWithdrawButUnsettled(address a) internal view returns (bool) {
        return stakeOf[a].unbonding > 0 && block.timestamp >= stakeOf[a].unbondingEnd;
    }

    function _violate(string memory what) internal {
        _violations.push(what);
    }

    /// @dev Called on every outcome: true when the handler should revert (an expected refusal).
    function _judge(string memory action, bool expectOk, bool ok, bytes memory reason) internal returns (bool) {
        if (ok && !expectOk) {
            _violate(string.concat(action, ": the ledger accepted a call its rules refuse"));
        } else if (!ok && expectOk) {
            _violate(string.concat(action, ": the ledger refused a valid call: ", _hex4(reason)));
        }
        return !ok && !expectOk;
    }

    error ExpectedRefusal();

    function _refused() internal pure {
        revert ExpectedRefusal();
    }

    /// @dev True one time in `n`, from a hash of the fuzzed `seed`: forge favours small and
    /// boundary values, so a plain `seed % n == 0` would be true far more often than 1/n.
    function _oneIn(uint256 seed, uint256 n, string memory tag) internal pure returns (bool) {
        return uint256(keccak256(abi.encode(seed, tag))) % n == 0;
    }

    /// @dev An amount in [lo, hi]: one time in four any amount, else minStake or twice it (when in
    /// range), so that nodes often hold equal stakes and attestations can tie (the rule for a tie
    /// is a rule too); odd amounts, once taken, stay in a node's stake for the rest of the run.
    function _roundStake(uint256 seed, uint256 lo, uint256 hi) internal view returns (uint256) {
        if (!_oneIn(seed, 4, "odd")) {
            uint256 whole = (1 + (seed >> 1) % 2) * MIN_STAKE;
            if (whole >= lo && whole <= hi) return whole;
            if (MIN_STAKE >= lo && MIN_STAKE <= hi) return MIN_STAKE;
        }
        return bound(seed, lo, hi);
    }

    function _fundActor(address a, uint256 amount) internal {
        vm.deal(a, a.balance + amount);
    }

    // ----------------------------------------------------------------------------------- stake

    function register(uint256 actorSeed, uint256 amount) external {
        address a = _actorWhere(actorSeed, _isUnregistered);
        amount = _roundStake(amount, MIN_STAKE - MIN_STAKE / 8, 8 * MIN_STAKE);
        bool expectOk = !stakeOf[a].registered && amount >= MIN_STAKE;
        _fundActor(a, amount);
        vm.prank(a);
        (bool ok, bytes memory reason) =
            address(ledger).call{value: amount}(abi.encodeCall(ISwarmLedger.register, ("{\"fuzz\":true}", familyOf(a))));
        if (_judge("register", expectOk, ok, reason)) _refused();
        if (ok) {
            Stake storage st = stakeOf[a];
            st.registered = true;
            st.active = amount;
            _recordStake(a);
        }
    }

    function addStake(uint256 actorSeed, uint256 amount) external {
        address a = _actorWhere(actorSeed, _isRegistered);
        amount = _roundStake(amount, 0, 4 * MIN_STAKE);
        bool expectOk = stakeOf[a].registered && amount > 0;
        _fundActor(a, amount);
        vm.prank(a);
        (bool ok, bytes memory reason) = address(ledger).call{value: amount}(abi.encodeCall(ISwarmLedger.addStake, ()));
        if (_judge("addStake", expectOk, ok, reason)) _refused();
        if (ok) {
            stakeOf[a].active += amount;
            _recordStake(a);
        }
    }

    function requestUnstake(uint256 actorSeed, uint256 amount) external {
        // prefer a node with nothing unbonding: a request restarts the clock of all of it, and a
        // handler that keeps restarting clocks would rarely reach a withdrawal
        address a = _actorWhere(actorSeed, _isRegisteredNotUnbonding);
        Stake storage st = stakeOf[a];
        // mostly a part of what is above the minimum (so the node can go on acting), one call in
        // eight all of it or more than it has
        if (st.active == 0) amount = bound(amount, 0, 1);
        else if (_oneIn(amount, 8, "all")) amount = bound(amount, st.active, st.active + 1);
        else amount = _roundStake(amount, 1, st.active > 2 * MIN_STAKE ? st.active - MIN_STAKE : st.active / 2 + 1);
        bool expectOk = st.registered && amount > 0 && amount <= st.active;
        vm.prank(a);
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(ISwarmLedger.requestUnstake, (amount)));
        if (_judge("requestUnstake", expectOk, ok, reason)) _refused();
        if (ok) {
            if (amount == st.active) _hit(FULL_UNSTAKES);
            st.active -= amount;
            st.unbonding += amount;
            st.unbondingEnd = block.timestamp + UNBONDING;
            st.lastUnstakeAt = block.timestamp;
            st.unstakes += 1;
            st.backing = st.unsettled;
            _recordStake(a);
        }
    }

    function withdraw(uint256 actorSeed) external {
        // one call in four, a node whose clock has run but whose submissions are not all settled
        address a = _oneIn(actorSeed, 4, "unsettled")
            ? _actorWhere(actorSeed, _canWithdrawButUnsettled)
            : _actorWhere(actorSeed, _canWithdraw);
        Stake storage st = stakeOf[a];
        bool expectOk = st.unbonding > 0 && block.timestamp >= st.unbondingEnd && st.backing == 0;
        uint256 before = a.balance;
        vm.prank(a);
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(ISwarmLedger.withdraw, ()));
        if (_judge("withdraw", expectOk, ok, reason)) _refused();
        if (!ok) return;
        if (a.balance - before != st.unbonding) _violate("withdraw: paid a different amount than the unbonding stake");
        bool submitted;
        // Stake that backed a submission, or drew the seats of a vote, may not leave before the
        // slashing horizon of that submission or vote (if it was moved to unbonding after the
        // submission, it was active as of its snapshot).
        for (uint256 i; i < _subs.length; ++i) {
            Sub storage s = _subs[i];
            if (s.node == a) submitted = true;
            if (s.submittedAt > st.lastUnstakeAt || block.timestamp >= _slashHorizon(s.round)) continue;
            if (s.node == a && !s.settled) {
                _violate("withdraw: stake that can still be slashed for an unsettled submission left the ledger");
            }
            uint8 record = voteRecord[a][s.round][s.node];
            if (record != 0 && record & JUDGED == 0) {
                _violate("withdraw: stake that can still be slashed for an unjudged vote left the ledger");
            }
        }
        if (submitted) _hit(WITHDRAWALS_AFTER_SUBMITTING);
        st.unbonding = 0;
    }

    function setMetadata(uint256 actorSeed, uint256 length) external {
        address a = _actorWhere(actorSeed, _isRegistered);
        length = bound(length, 0, 1040);
        bool expectOk = stakeOf[a].registered && length <= 1024;
        vm.prank(a);
        (bool ok, bytes memory reason) =
            address(ledger).call(abi.encodeCall(ISwarmLedger.setMetadata, (string(new bytes(length)))));
        if (_judge("setMetadata", expectOk, ok, reason)) _refused();
    }

    // -------------------------------------------------------------------------------- rollouts

    function submit(uint256 actorSeed, uint256 roundSeed, uint256 rollouts, uint256 claims) external {
        _roll(1); // each transaction its own block
        uint64 current = _current();
        uint64 round;
        uint256 pick = uint256(keccak256(abi.encode(roundSeed, "round"))) % 16;
        if (pick == 0) {
            round = current + 1; // the future
        } else if (pick == 1 && current > S) {
            round = current - S - 1; // just too late
        } else {
            uint64 back = uint64((roundSeed >> 8) % (S + 1));
            round = back > current ? 0 : current - back;
        }
        _pickRound = round;
        address a = _actorWhere(actorSeed, _canSubmit);
        // one call in 32 asks for more rollouts than a submission may hold
        rollouts = _oneIn(rollouts, 32, "huge") ? MAX_ROLLOUTS + 1 : bound(rollouts, 1, 64);
        uint256 maxScore = rollouts * SCORE_SCALE;
        // usually valid claims, at times one unit over the maximum; a signal of 0 at times (a batch
        // of all-equal groups: it can never earn)
        uint256 score = _oneIn(claims, 16, "score-over") ? maxScore + 1 : bound(claims >> 8, 0, maxScore);
        uint256 signal = _oneIn(claims, 16, "signal-over")
            ? maxScore / 2 + 1 // one unit over what L completions a group can carry (L / 2)
            : (_oneIn(claims, 8, "no-signal") ? 0 : bound(claims >> 128, 0, maxScore / 2));
        bytes32 digest = keccak256(abi.encode(a, round, roundSeed));
        bool inWindow = round <= current && current - round <= S;
        bool expectOk = _canAct(a) && inWindow && _subIndex[round][a] == 0 && rollouts <= MAX_ROLLOUTS
            && score <= maxScore && signal <= maxScore / 2;
        vm.prank(a);
        (bool ok, bytes memory reason) = address(ledger).call(
            abi.encodeCall(ISwarmLedger.submit, (round, digest, uint32(rollouts), uint64(score), uint64(signal)))
        );
        if (_judge("submit", expectOk, ok, reason)) _refused();
        if (!ok) return;
        Sub storage s = _subs.push();
        s.round = round;
        s.node = a;
        s.rollouts = uint32(rollouts);
        s.score = uint64(score);
        s.signal = uint64(signal);
        s.submittedAt = block.timestamp;
        s.snapshotBlock = _block();
        s.unstakes = stakeOf[a].unstakes;
        stakeOf[a].unsettled += 1;
        _subIndex[round][a] = _subs.length;
        // not credited yet: no evidence, no credit
        beaconBlockOf[round][a] = _block() + 1; // its own beacon: the next block's hash
        if (!_roundSeen[round]) {
            _roundSeen[round] = true;
            _roundsWithSubs.push(round);
        }
    }

    /// @dev Picks a submission from `seed` on, preferring a final unsettled one (`wantFinal`) or
    /// one open to votes.
    function _subWhere(uint256 seed, bool wantFinal) internal view returns (uint256 index, bool found) {
        uint256 n = _subs.length;
        if (n == 0) return (0, false);
        for (uint256 i; i < n; ++i) {
            uint256 j = (seed + i) % n;
            Sub storage s = _subs[j];
            if (wantFinal ? (_final(s.round) && !s.settled) : _votingOpen(s)) return (j, true);
        }
        return (seed % n, true);
    }

    /// @dev A voter for `s`: usually a drawn checker that has not voted; one call in sixteen the
    /// producer itself, one in eight any actor (often one the beacon did not draw).
    function _voter(Sub storage s, uint256 seed) internal returns (address) {
        _pickNode = s.node;
        _pickSubRound = s.round;
        if (_oneIn(seed, 16, "self")) return s.node;
        if (_oneIn(seed, 8, "anyone")) return _actor(seed >> 8);
        return _actorWhere(seed, _canAttest);
    }

    /// @dev Whether the rules let `a` vote on `s` now, on the committee voting now (a refusal
    /// reverts the handler's call too, so forge's metrics count refusals; the campaign's mutants
    /// show each refusal is made).
    function _mayVote(Sub storage s, address a) internal view returns (bool) {
        return a != s.node && stakeOf[a].active >= MIN_STAKE && _votingOpen(s) && _sideNow(s, a) == 0
            && _seatsNow(s, a) != 0;
    }

    /// @dev Picks, from `seed` on, a submission open to votes that some drawn checker has not
    /// voted on yet (most submissions soon have none: about `checkers` votes each), else any.
    function _subToVoteOn(uint256 seed) internal returns (uint256 index, bool found) {
        uint256 n = _subs.length;
        if (n == 0) return (0, false);
        for (uint256 i; i < n; ++i) {
            uint256 j = (seed + i) % n;
            Sub storage s = _subs[j];
            if (!_votingOpen(s)) continue;
            _pickNode = s.node;
            _pickSubRound = s.round;
            for (uint256 k; k < N_ACTORS; ++k) {
                if (_canAttest(actors[k])) return (j, true);
            }
        }
        return _subWhere(seed, false);
    }

    /// @dev After an accepted vote on `side`: the voting committee's beacon is drawn, the vote
    /// is recorded on its committee, credit moves by the rule.
    function _afterVote(Sub storage s, address a, uint8 side, bool wasCredited) internal {
        bool appealed = s.appealBlock != 0;
        (bool stored,, uint256 beacon,) = _beaconOfVoting(s);
        if (!stored) _storeVotingBeacon(s, beacon);
        uint8 record = voteRecord[a][s.round][s.node];
        if (record == 0) _votersOf[_subIndex[s.round][s.node] - 1].push(a);
        if (appealed) {
            _hit(APPEAL_VOTES);
            if (record & 3 != 0) _hit(SECOND_VOTES);
        }
        voteRecord[a][s.round][s.node] = record | (appealed ? side << 2 : side);
        Tally storage t = _tallyNow(s);
        bool nowCredited = credited(s);
        if (t.agrees >= Q && uint256(t.agreeSeats) == uint256(t.disputeSeats) + t.unavailableSeats) _hit(TIES);
        if (wasCredited && !nowCredited) {
            creditedTotal[s.round] -= s.signal;
            _hit(CREDIT_LOST);
        }
        if (!wasCredited && nowCredited) {
            creditedTotal[s.round] += s.signal;
            if (appealed && uint256(s.votes.disputeSeats) + s.votes.unavailableSeats > s.votes.agreeSeats) {
                _hit(APPEALS_OVERTURNED);
            }
            _hit(t.agrees == Q ? QUORUM_REACHED : CREDIT_REGAINED);
        }
    }

    function attest(uint256 attesterSeed, uint256 subSeed, uint256 scoreSeed) external {
        _roll(1); // each transaction its own block
        (uint256 i, bool found) = _subToVoteOn(subSeed);
        if (!found) _refused();
        Sub storage s = _subs[i];
        address a = _voter(s, attesterSeed);
        // one call in three disputes a credited submission, by the drawn checker whose seats tie
        // the vote or the most: credit is lost (or tied) as a dispute lands
        if (_oneIn(subSeed, 3, "dispute-credited")) {
            (uint256 j, bool hit) = _targetSub(subSeed, true);
            if (hit) {
                s = _subs[j];
                Tally storage c = _tallyNow(s);
                a = _bestVoter(s, c.agreeSeats - c.disputeSeats - c.unavailableSeats);
                scoreSeed = 3 + 6 * (scoreSeed / 6); // mode 3: the disputing edge
            }
        }
        uint256 maxScore = uint256(s.rollouts) * SCORE_SCALE;
        uint256 tolerance = (maxScore * TOL_BPS) / BPS;
        // one of the two claims (score or signal) is checked at an edge or anywhere; the other is
        // the claim itself
        bool onSignal = _oneIn(scoreSeed, 2, "which");
        uint256 claimed = onSignal ? s.signal : s.score;
        uint256 x;
        uint256 mode = scoreSeed % 6;
        if (mode == 0) x = claimed;
        else if (mode == 1) x = claimed + tolerance; // the agreeing edge, above
        else if (mode == 2) x = claimed >= tolerance ? claimed - tolerance : 0; // below
        else if (mode == 3) x = claimed + tolerance + 1; // the disputing edge
        else if (mode == 4) x = claimed > tolerance ? claimed - tolerance - 1 : maxScore;
        else x = bound(scoreSeed >> 8, 0, maxScore + maxScore / 32);
        // one call in three seeks a tie: a drawn checker whose seats equal the gap between
        // agreeing and disputing + unavailable seats votes with the smaller side
        Tally storage t = _tallyNow(s);
        uint256 against = uint256(t.disputeSeats) + t.unavailableSeats;
        if (_oneIn(scoreSeed, 3, "tie") && t.agreeSeats != against) {
            uint256 gapSeats = t.agreeSeats > against ? t.agreeSeats - against : against - t.agreeSeats;
            for (uint256 k; k < N_ACTORS; ++k) {
                address c = actors[(attesterSeed + k) % N_ACTORS];
                if (!_canAttest(c) || _seatsNow(s, c) != gapSeats) continue;
                if (against > t.agreeSeats) {
                    (a, x) = (c, claimed);
                } else if (claimed + tolerance + 1 <= maxScore) {
                    (a, x) = (c, claimed + tolerance + 1);
                } else if (claimed > tolerance) {
                    (a, x) = (c, claimed - tolerance - 1);
                }
                break;
            }
        }
        uint256 score = onSignal ? s.score : x;
        uint256 signal = onSignal ? x : s.signal;
        _vote(s, a, score, signal, uint16(mode));
    }

    /// @dev What most checkers do: fetch the batch, recompute exactly the claims, agree.
    /// Half the time it seeks a submission that lost its credit, so that credit is regained.
    function attestAgreeing(uint256 attesterSeed, uint256 subSeed) external {
        _roll(1);
        (uint256 i, bool found) = _subToVoteOn(subSeed);
        if (!found) _refused();
        Sub storage s = _subs[i];
        address a = _voter(s, attesterSeed);
        if (_oneIn(subSeed, 2, "lost")) {
            (uint256 j, bool hit) = _targetSub(subSeed, false);
            if (hit) {
                s = _subs[j];
                Tally storage t = _tallyNow(s);
                a = _bestVoter(s, uint256(t.disputeSeats) + t.unavailableSeats - t.agreeSeats);
            }
        }
        _vote(s, a, s.score, s.signal, 0);
    }

    /// @dev From `seed` on, an open submission with a drawn checker left that is credited
    /// (`wantCredited`) or that lost its credit (its quorum agreed, but it is outweighed), on
    /// the committee voting now.
    function _targetSub(uint256 seed, bool wantCredited) internal returns (uint256, bool) {
        uint256 n = _subs.length;
        for (uint256 k; k < n; ++k) {
            uint256 j = (seed + k) % n;
            Sub storage c = _subs[j];
            if (!_votingOpen(c)) continue;
            bool lost = _tallyNow(c).agrees >= Q && !credited(c);
            if (wantCredited ? !credited(c) : !lost) continue;
            _pickNode = c.node;
            _pickSubRound = c.round;
            for (uint256 t; t < N_ACTORS; ++t) {
                if (_canAttest(actors[t])) return (j, true);
            }
        }
        return (0, false);
    }

    /// @dev A drawn checker of `s` that may vote, whose seats are `gapSeats` if there is one
    /// (the vote ties), else the one with the most seats.
    function _bestVoter(Sub storage s, uint256 gapSeats) internal returns (address best) {
        _pickNode = s.node;
        _pickSubRound = s.round;
        uint256 most;
        for (uint256 t; t < N_ACTORS; ++t) {
            address c = actors[t];
            if (!_canAttest(c)) continue;
            uint256 held = _seatsNow(s, c);
            if (held == gapSeats) return c;
            if (best == address(0) || held > most) (best, most) = (c, held);
        }
    }

    function _vote(Sub storage s, address a, uint256 score, uint256 signal, uint16 findings) internal {
        uint256 maxScore = uint256(s.rollouts) * SCORE_SCALE;
        // the signal agrees exactly (every checker recomputes the same integer); the score within
        // the tolerance
        bool agrees = signal == s.signal && _gap(score, s.score) * BPS <= maxScore * TOL_BPS;
        Tally storage t = _tallyNow(s);
        bool expectOk = _mayVote(s, a) && score <= maxScore && signal <= maxScore / 2
            && (agrees ? t.agrees : t.disputes) < type(uint8).max;
        vm.prank(a);
        (bool ok, bytes memory reason) = address(ledger).call(
            abi.encodeCall(ISwarmLedger.attest, (s.round, s.node, uint64(score), uint64(signal), findings))
        );
        if (_judge("attest", expectOk, ok, reason)) _refused();
        if (!ok) return;
        bool wasCredited = credited(s);
        uint64 weight = uint64(_seatsNow(s, a));
        if (agrees) {
            t.agreeSeats += weight;
            t.agrees += 1;
        } else {
            t.disputeSeats += weight;
            t.disputes += 1;
            _hit(DISPUTED);
        }
        _afterVote(s, a, agrees ? AGREE : DISPUTE, wasCredited);
    }

    function _gap(uint256 x, uint256 y) internal pure returns (uint256) {
        return x > y ? x - y : y - x;
    }

    function reportUnavailable(uint256 voterSeed, uint256 subSeed) external {
        _roll(1);
        (uint256 i, bool found) = _subToVoteOn(subSeed);
        if (!found) _refused();
        Sub storage s = _subs[i];
        address a = _voter(s, voterSeed);
        // half the time a credited submission that a drawn checker can still vote on, by the
        // checker whose seats tie the vote (if any) or the most: credit is lost or tied
        if (_oneIn(subSeed, 2, "credited")) {
            (uint256 j, bool hit) = _targetSub(subSeed, true);
            if (hit) {
                s = _subs[j];
                Tally storage c = _tallyNow(s);
                a = _bestVoter(s, c.agreeSeats - c.disputeSeats - c.unavailableSeats);
            }
        }
        Tally storage t = _tallyNow(s);
        bool expectOk = _mayVote(s, a) && t.unavailable < type(uint8).max;
        vm.prank(a);
        (bool ok, bytes memory reason) =
            address(ledger).call(abi.encodeCall(ISwarmLedger.reportUnavailable, (s.round, s.node)));
        if (_judge("reportUnavailable", expectOk, ok, reason)) _refused();
        if (!ok) return;
        bool wasCredited = credited(s);
        t.unavailableSeats += uint64(_seatsNow(s, a));
        t.unavailable += 1;
        _hit(UNAVAILABLE_VOTES);
        _afterVote(s, a, UNAVAILABLE, wasCredited);
    }

    /// @dev Stores the beacon of the committee voting on a submission now (the appeal's once
    /// appealed); mostly one that is known and not stored yet, one call in three one that
    /// lapsed (refused), else any (not mined yet, or stored already: refused).
    function drawBeacon(uint256 subSeed) external {
        _roll(1);
        uint256 n = _subs.length;
        if (n == 0) _refused();
        Sub storage s = _subs[subSeed % n];
        bool wantLapsed = _oneIn(subSeed, 3, "lapsed-beacon");
        for (uint256 k; k < n; ++k) {
            Sub storage c = _subs[(subSeed + k) % n];
            (bool stored, uint256 bb,, bool known) = _beaconOfVoting(c);
            if (wantLapsed ? !stored && _block() > bb + 256 : known && !stored) {
                s = c;
                break;
            }
        }
        (bool wasStored, uint256 beaconBlock, uint256 beacon, bool ready) = _beaconOfVoting(s);
        bool lapsed = !wasStored && _block() > beaconBlock + 256;
        bool expectOk = ready && !wasStored;
        (bool ok, bytes memory reason) =
            address(ledger).call(abi.encodeCall(ISwarmLedger.drawBeacon, (s.round, s.node)));
        bool refused = _judge("drawBeacon", expectOk, ok, reason);
        if (refused && lapsed) {
            // kept (not reverted like other refusals) so the campaign counts the lapses it saw
            if (bytes4(reason) != ISwarmLedger.BeaconLapsed.selector) {
                _violate(string.concat("drawBeacon: a lapsed beacon refused with ", _hex4(reason)));
            }
            _hit(BEACONS_LAPSED);
            return;
        }
        if (refused) _refused();
        if (!ok) return;
        _storeVotingBeacon(s, beacon);
    }

    // ---------------------------------------------------------------------------------- appeals

    /// @dev A producer appeals the verdict on its submission: mostly one it may appeal (in its
    /// appeal window, not credited, not appealed, its first beacon known); one call in eight one
    /// in its window but credited, one in eight one appealed already, one in four whatever
    /// submission the seed picks (before or after its window, a lapsed first beacon): refused;
    /// one in sixteen by any actor (one without a submission in that round: NoSubmission; with
    /// one, it appeals its own).
    function appeal(uint256 subSeed, uint256 callerSeed) external {
        _roll(1);
        uint256 n = _subs.length;
        if (n == 0) _refused();
        Sub storage s = _subs[subSeed % n];
        uint256 kind = uint256(keccak256(abi.encode(subSeed, "appeal-kind"))) % 8;
        if (kind >= 2) {
            for (uint256 k; k < n; ++k) {
                Sub storage c = _subs[(subSeed + k) % n];
                (, bool known) = beaconNow(c.round, c.node);
                bool want = kind == 2
                    ? credited(c)
                    : kind == 3 ? c.appealBlock != 0 : known && c.appealBlock == 0 && !credited(c);
                if (want && _inAppealWindow(c)) {
                    s = c;
                    break;
                }
            }
        }
        uint64 round = s.round;
        address caller = _oneIn(callerSeed, 16, "stranger") ? _actor(callerSeed >> 8) : s.node;
        uint256 index = _subIndex[round][caller];
        bool expectOk;
        bool lapsed;
        if (index != 0) {
            s = _subs[index - 1]; // the caller's own submission of that round
            (, bool known) = beaconNow(round, caller);
            expectOk = _inAppealWindow(s) && s.appealBlock == 0 && !credited(s) && known;
            lapsed = _inAppealWindow(s) && s.appealBlock == 0 && !credited(s) && !known;
        }
        vm.prank(caller);
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(ISwarmLedger.appeal, (round)));
        bool refused = _judge("appeal", expectOk, ok, reason);
        if (refused && lapsed) {
            // kept, as drawBeacon's: a batch nobody could check cannot be appealed either (its
            // openings come from the first beacon, which no one may draw again)
            if (bytes4(reason) != ISwarmLedger.BeaconLapsed.selector) {
                _violate(string.concat("appeal: a lapsed first beacon refused with ", _hex4(reason)));
            }
            _hit(APPEALS_LAPSED);
            return;
        }
        if (refused) _refused();
        if (!ok) return;
        // the appeal stores the first beacon (the producer's openings) if nobody had
        if (beaconOf[round][caller] == 0) (beaconOf[round][caller],) = beaconNow(round, caller);
        s.appealBlock = _block(); // its committee: the next block's hash; not credited yet
        s.appellant = caller;
        _hit(APPEALS);
    }

    /// @dev A voter appeals the first verdict on a submission that would judge its vote lost (a
    /// dispute of a credited batch, an agreement with a disputed one): mostly such a voter of
    /// a submission in its appeal window, not appealed, its first beacon known (time moves on
    /// to the appeal round of one whose first window is still open, when none is in its appeal
    /// round now: that round is one of few); one call in four a voter of any submission, or any
    /// actor (a winning, unavailable or absent vote: VoteNotLosing; outside the window:
    /// NotAppealable; appealed already: AlreadyAppealed).
    function appealVote(uint256 subSeed, uint256 voterSeed) external {
        _roll(1);
        uint256 n = _subs.length;
        if (n == 0) _refused();
        uint256 i = subSeed % n;
        address voter = _actor(voterSeed);
        if (!_oneIn(subSeed, 4, "any-appeal-vote")) {
            bool found;
            (i, voter, found) = _losingVoter(subSeed, voterSeed, false, i, voter);
            if (!found) (i, voter, found) = _losingVoter(subSeed, voterSeed, true, i, voter);
        } else if (_votersOf[i].length != 0 && !_oneIn(voterSeed, 2, "stranger-appeal")) {
            voter = _votersOf[i][(voterSeed >> 8) % _votersOf[i].length];
        }
        _appealVote(_subs[i], voter);
    }

    /// @dev A submission (from `subSeed` on) not appealed, its first beacon known, and a voter of
    /// it (from `voterSeed` on) whose first vote its first verdict judges lost: in its appeal
    /// round now, or (`ahead`) with its first window still open, time then moved to the start of
    /// its appeal round. (i, voter, false) when there is none.
    function _losingVoter(uint256 subSeed, uint256 voterSeed, bool ahead, uint256 i, address voter)
        internal
        returns (uint256, address, bool)
    {
        uint256 n = _subs.length;
        for (uint256 k; k < n; ++k) {
            uint256 j = (subSeed + k) % n;
            Sub storage c = _subs[j];
            bool when = ahead ? _current() <= _close(c.round) : _inAppealWindow(c);
            if (!when || c.appealBlock != 0) continue;
            (, bool known) = beaconNow(c.round, c.node);
            if (!known) continue;
            address[] storage voters = _votersOf[j];
            for (uint256 v; v < voters.length; ++v) {
                address candidate = voters[(voterSeed + v) % voters.length];
                if (_firstVoteLoses(c, candidate)) {
                    if (ahead) vm.warp(GENESIS + (uint256(_close(c.round)) + 1) * L);
                    return (j, candidate, true);
                }
            }
        }
        return (i, voter, false);
    }

    function _appealVote(Sub storage s, address voter) internal {
        (, bool beaconKnown) = beaconNow(s.round, s.node);
        bool expectOk = _inAppealWindow(s) && s.appealBlock == 0 && _firstVoteLoses(s, voter) && beaconKnown;
        bool lapsed = _inAppealWindow(s) && s.appealBlock == 0 && _firstVoteLoses(s, voter) && !beaconKnown;
        vm.prank(voter);
        (bool ok, bytes memory reason) =
            address(ledger).call(abi.encodeCall(ISwarmLedger.appealVote, (s.round, s.node)));
        bool refused = _judge("appealVote", expectOk, ok, reason);
        if (refused && lapsed) {
            if (bytes4(reason) != ISwarmLedger.BeaconLapsed.selector) {
                _violate(string.concat("appealVote: a lapsed first beacon refused with ", _hex4(reason)));
            }
            _hit(APPEALS_LAPSED);
            return;
        }
        if (refused) _refused();
        if (!ok) return;
        if (beaconOf[s.round][s.node] == 0) (beaconOf[s.round][s.node],) = beaconNow(s.round, s.node);
        s.appealBlock = _block();
        s.appellant = voter;
        _hit(VOTER_APPEALS);
    }

    /// @dev Whether the first committee's verdict on `s` would judge `voter`'s first vote lost.
    function _firstVoteLoses(Sub storage s, address voter) internal view returns (bool) {
        uint8 side = voteRecord[voter][s.round][s.node] & 3;
        if (_wins(s.votes)) return side == DISPUTE;
        return side == AGREE && s.votes.disputeSeats > s.votes.agreeSeats;
    }

    /// @dev Judges votes on a submission by its final verdict: mostly one in its settlement
    /// window with a vote not judged yet, listing its voters from a seeded offset (at times one
    /// twice, or an actor that did not vote: skipped); one call in four any submission (not
    /// final yet, or its window closed: refused).
    function settleVotes(uint256 subSeed, uint256 listSeed) external {
        uint256 n = _subs.length;
        if (n == 0) _refused();
        uint256 i = subSeed % n;
        if (!_oneIn(subSeed, 4, "any-votes")) {
            for (uint256 k; k < n; ++k) {
                uint256 j = (subSeed + k) % n;
                if (_inVoteSettlement(_subs[j]) && _hasUnjudgedVote(j)) {
                    i = j;
                    break;
                }
            }
        }
        Sub storage s = _subs[i];
        address[] memory list = _voterList(i, listSeed);
        bool expectOk = _inVoteSettlement(s);
        bool closed = _final(s.round) && !expectOk;
        uint256 slashedBefore = ledger.totalSlashed();
        // one call in four by the first listed voter (its own losing vote pays it no cut)
        address caller = _oneIn(listSeed, 4, "self-judge") ? list[0] : address(this);
        uint256 balanceBefore = caller.balance;
        vm.prank(caller);
        (bool ok, bytes memory reason) =
            address(ledger).call(abi.encodeCall(ISwarmLedger.settleVotes, (s.round, s.node, list)));
        bool refused = _judge("settleVotes", expectOk, ok, reason);
        if (refused && closed) {
            // kept: a vote not judged in its window is never judged (its stake may have left)
            if (bytes4(reason) != ISwarmLedger.SettlementWindowClosed.selector) {
                _violate(string.concat("settleVotes: a closed window refused with ", _hex4(reason)));
            }
            _hit(VOTE_SETTLEMENTS_CLOSED);
            return;
        }
        if (refused) _refused();
        if (!ok) return;
        (uint256 total, uint256 byOthers) = _judgeVotes(s, list, caller);
        if (ledger.totalSlashed() - slashedBefore != total) {
            _violate("settleVotes: slashed a different amount than slashBps of each losing voter's stake");
        }
        _paySettler(caller, byOthers, balanceBefore, "settleVotes");
    }

    function _hasUnjudgedVote(uint256 i) internal view returns (bool) {
        Sub storage s = _subs[i];
        address[] storage voters = _votersOf[i];
        for (uint256 k; k < voters.length; ++k) {
            if (voteRecord[voters[k]][s.round][s.node] & JUDGED == 0) return true;
        }
        return false;
    }

    /// @dev One to six addresses: mostly the voters of submission `i` from a seeded offset (the
    /// list wraps, so a voter may be listed twice), one in six any actor.
    function _voterList(uint256 i, uint256 seed) internal view returns (address[] memory list) {
        address[] storage voters = _votersOf[i];
        list = new address[](1 + seed % 6);
        for (uint256 k; k < list.length; ++k) {
            uint256 pick = uint256(keccak256(abi.encode(seed, k)));
            list[k] = voters.length == 0 || pick % 6 == 0
                ? _actor(pick >> 8)
                : voters[((seed >> 8) + k) % voters.length];
        }
    }

    /// @dev The model after settleVotes judged `list` on `s`: each listed vote not judged yet is
    /// judged once; one on the losing side of the final verdict (a dispute of a credited batch,
    /// an agreement with a disputed one, on the first committee, or on the appeal's when the
    /// appeal decided) costs slashBps of its voter's stake; unavailable votes never lose, nor
    /// any vote on a batch neither credited nor disputed, nor an appeal's vote when the appeal
    /// reached no verdict. Returns the wei slashed, and of it what voters other than `caller`
    /// lost.
    function _judgeVotes(Sub storage s, address[] memory list, address caller)
        internal
        returns (uint256 total, uint256 byOthers)
    {
        bool isCredited = credited(s);
        uint8 losing = isCredited ? DISPUTE : disputed(s) ? AGREE : 0;
        bool appealDecided = appealDecides(s);
        for (uint256 k; k < list.length; ++k) {
            uint8 record = voteRecord[list[k]][s.round][s.node];
            if (record & JUDGED != 0) _hit(VOTES_JUDGED_ONCE);
            if (record == 0 || record & JUDGED != 0) continue;
            voteRecord[list[k]][s.round][s.node] = record | JUDGED;
            uint8 first = record & 3;
            uint8 second = (record >> 2) & 3;
            if (losing != 0 && second == losing && !appealDecided) _hit(UNDECIDED_APPEAL_VOTES_SPARED);
            if (losing != 0 && (first == losing || (appealDecided && second == losing))) {
                bool appellant = appealDecided && s.appellant == list[k]; // its appeal decided against it
                if (appellant) _hit(LOST_VOTER_APPEALS_SLASHED_TWICE);
                uint256 bps = appellant ? (2 * SLASH_BPS > BPS ? BPS : 2 * SLASH_BPS) : SLASH_BPS;
                uint256 cut = _slashStake(list[k], bps);
                total += cut;
                if (list[k] != caller) byOthers += cut;
                _hit(LOSING_VOTES_SLASHED);
            } else if (losing != 0 && (first == UNAVAILABLE || second == UNAVAILABLE)) {
                _hit(UNAVAILABLE_VOTES_SPARED);
            }
        }
    }

    /// @dev The model's slash: `bps` of `who`'s stake, active first, then unbonding, into the pool.
    function _slashStake(address who, uint256 bps) internal returns (uint256 cut) {
        Stake storage st = stakeOf[who];
        cut = ((st.active + st.unbonding) * bps) / BPS;
        if (cut > st.active) _hit(SLASHES_INTO_UNBONDING);
        uint256 fromActive = cut < st.active ? cut : st.active;
        st.active -= fromActive;
        st.unbonding -= cut - fromActive;
        if (fromActive != 0) _recordStake(who);
        pool += cut;
        slashed += cut;
    }

    /// @notice The round book has an actor slashed for an equivocation its judge found
    /// (slashEquivocation: slashBps of its stake, active then unbonding, into the pool; the
    /// prover, this handler, paid the settler's cut); one call in eight comes from someone else,
    /// whom the ledger must refuse. Three calls in four do nothing: equivocation is rare, and a
    /// slash at every eighteenth call left too little stake for the rare paths of appeals.
    function slashEquivocation(uint256 actorSeed, uint256 roundSeed) external {
        if (!_oneIn(actorSeed, 4, "equivocates")) _refused();
        address voter = _actor(actorSeed);
        bool byBook = !_oneIn(roundSeed, 8, "not-the-book");
        uint64 round = uint64(bound(roundSeed >> 8, 0, _current()));
        address node = _actor(roundSeed >> 72);
        Stake storage st = stakeOf[voter];
        uint256 slash = ((st.active + st.unbonding) * SLASH_BPS) / BPS;
        uint256 balanceBefore = address(this).balance;
        vm.prank(byBook ? BOOK : voter);
        (bool ok, bytes memory data) = address(ledger).call(
            abi.encodeCall(ISwarmLedger.slashEquivocation, (round, node, voter, address(this)))
        );
        if (_judge("slashEquivocation", byBook, ok, data)) _refused();
        if (!ok) return;
        if (abi.decode(data, (uint256)) != slash) {
            _violate("slashEquivocation: slashed other than slashBps of the voter's stake");
        }
        _slashStake(voter, SLASH_BPS);
        _paySettler(address(this), slash, balanceBefore, "slashEquivocation");
    }

    function settle(uint256 subSeed) external {
        (uint256 i, bool found) = _subWhere(subSeed, true);
        if (!found) _refused();
        Sub storage s = _subs[i];
        bool expectOk = _final(s.round) && !s.settled;
        uint256 slash = _slashOf(s);
        uint256 slashedBefore = ledger.totalSlashed();
        // one call in four by the producer itself (no cut), the others by a stranger (this)
        address caller = _oneIn(subSeed, 4, "self-settle") ? s.node : address(this);
        uint256 balanceBefore = caller.balance;
        vm.prank(caller);
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(ISwarmLedger.settle, (s.round, s.node)));
        if (_judge("settle", expectOk, ok, reason)) _refused();
        if (!ok) return;
        if (ledger.totalSlashed() - slashedBefore != slash) {
            _violate("settle: slashed a different amount than slashBps (twice after a lost appeal) of a disputed node's stake");
        }
        _settled(s);
        _paySettler(caller, caller == s.node ? 0 : slash, balanceBefore, "settle");
    }

    /// @dev The model of the settler's cut: SETTLER_CUT_BPS of `slashedByOthers` from the pool
    /// to `caller`, checked against what the ledger paid it.
    function _paySettler(address caller, uint256 slashedByOthers, uint256 balanceBefore, string memory call)
        internal
    {
        uint256 cut = (slashedByOthers * SETTLER_CUT) / BPS;
        pool -= cut;
        settlerPaid += cut;
        if (cut != 0) _hit(SETTLERS_PAID);
        if (caller.balance - balanceBefore != cut) {
            _violate(string.concat(call, ": paid its caller other than SETTLER_CUT_BPS of the others' slashes"));
        }
    }

    /// @dev What settling `s` slashes now: slashBps of its node's stake when more seats of its
    /// deciding committee disputed than agreed (unavailable votes never slash), twice that after
    /// a lost appeal; else 0.
    function _slashOf(Sub storage s) internal view returns (uint256) {
        Stake storage st = stakeOf[s.node];
        return disputed(s) ? ((st.active + st.unbonding) * _settleBps(s)) / BPS : 0;
    }

    /// @dev The model after the ledger settled `s` (by `settle`, or by a claim of it).
    function _settled(Sub storage s) internal {
        Stake storage st = stakeOf[s.node];
        bool lost = disputed(s);
        Tally storage t = _tallyNow(s);
        s.settled = true;
        st.unsettled -= 1;
        if (s.unstakes < st.unstakes) st.backing -= 1;
        if (lost) _hit(SLASHES);
        if (lost && disputedOnAppeal(s)) _hit(LOST_APPEALS_SLASHED_TWICE);
        if (!lost && t.unavailable > 0) _hit(UNAVAILABLE_NOT_SLASHED);
        if (t.agrees < Q) _hit(FINAL_WITHOUT_QUORUM);
        if (lost) _slashStake(s.node, _settleBps(s));
    }

    // --------------------------------------------------------------------------------- rewards

    function fund(uint256 amount) external {
        amount = bound(amount, 0, 3 * REWARD);
        bool expectOk = amount > 0;
        vm.deal(address(this), address(this).balance + amount);
        (bool ok, bytes memory reason) = address(ledger).call{value: amount}(abi.encodeCall(ISwarmLedger.fund, ()));
        if (_judge("fund", expectOk, ok, reason)) _refused();
        if (ok) {
            pool += amount;
            funded += amount;
        }
    }

    /// @notice What submission `i` is owed by the rules once final (0 unless credited).
    function shareOf(uint256 i) external view returns (uint256) {
        return _share(_subs[i]);
    }

    function _share(Sub storage s) internal view returns (uint256) {
        if (s.signal == 0 || !credited(s)) return 0;
        return (REWARD * s.signal) / creditedTotal[s.round];
    }

    /// @dev Claims up to four of an actor's final, unpaid rounds; one call in eight also lists a
    /// round that must make the whole claim fail (already paid, listed twice, not final, or none).
    function claim(uint256 actorSeed, uint256 countSeed, uint256 trapSeed) external {
        address a = _actorWhere(actorSeed, _hasClaimable);
        uint256 want = bound(countSeed, 1, 4);
        uint64[] memory list = new uint64[](want + 1);
        uint256[] memory picked = new uint256[](want + 1);
        uint256 n;
        uint256 amount;
        for (uint256 i; i < _subs.length && n < want; ++i) {
            Sub storage s = _subs[i];
            if (s.node == a && !s.paid && _final(s.round)) {
                picked[n] = i;
                list[n++] = s.round;
                amount += _share(s);
            }
        }
        bool valid = true;
        if (_oneIn(trapSeed, 8, "trap")) {
            uint256 kind = (trapSeed >> 8) % 3;
            uint64 trap;
            if (kind == 0 && n > 0) {
                trap = list[0]; // listed twice
            } else {
                trap = _current(); // not final (or none of the caller's)
                for (uint256 i; i < _subs.length; ++i) {
                    if (_subs[i].node == a && _subs[i].paid) trap = _subs[i].round; // already paid
                }
            }
            list[n++] = trap;
            valid = false;
        }
        assembly ("memory-safe") {
            mstore(list, n)
        }
        // the claim settles each listed submission not settled yet, first (a disputed one is
        // slashed into the pool it is paid from): the slashes, one after the other
        uint256 inlineSlashes;
        {
            uint256 act = stakeOf[a].active;
            uint256 unb = stakeOf[a].unbonding;
            for (uint256 k; k < n && valid; ++k) {
                Sub storage s = _subs[picked[k]];
                if (s.settled || !disputed(s)) continue;
                uint256 cut = ((act + unb) * _settleBps(s)) / BPS;
                uint256 fromActive = cut < act ? cut : act;
                (act, unb) = (act - fromActive, unb - (cut - fromActive));
                inlineSlashes += cut;
            }
        }
        bool expectOk = valid && amount > 0 && amount <= pool + inlineSlashes;
        uint256 before = a.balance;
        vm.prank(a);
        (bool ok, bytes memory data) = address(ledger).call(abi.encodeCall(ISwarmLedger.claim, (list)));
        if (_judge("claim", expectOk, ok, data)) _refused();
        if (!ok) return;
        uint256 got = abi.decode(data, (uint256));
        if (got != amount) _violate("claim: paid a different amount than the rounds' pro-rata shares");
        if (a.balance - before != got) _violate("claim: transferred a different amount than it returned");
        for (uint256 k; k < n; ++k) {
            Sub storage s = _subs[picked[k]];
            if (!s.settled) {
                _settled(s);
                _hit(CLAIMS_SETTLING);
            }
            if (s.paid) _violate("claim: a submission was paid twice");
            s.paid = true;
            s.paidAmount = _share(s);
            if (s.paidAmount == 0) _hit(ZERO_SHARE_CLAIMS);
            paidInRound[s.round] += s.paidAmount;
        }
        stakeOf[a].claimedTotal += got;
        pool -= got;
        paidOut += got;
    }

    // ------------------------------------------------------------------------------------ time

    /// @dev Moves the clock by up to two rounds, or, one call in eight, by up to eight rounds so
    /// that unbonding and settlement windows pass within a run.
    function warp(uint256 seconds_) external {
        uint256 maxStep = _oneIn(seconds_, 8, "long") ? 8 * uint256(L) : 2 * uint256(L);
        uint256 step = bound(seconds_ >> 3, 1, maxStep);
        vm.warp(block.timestamp + step);
        // one call in sixteen, a quiet chain: 300 blocks pass, so that a beacon nobody drew yet
        // leaves the EVM's 256-block window and lapses
        _roll(2 + step / 12 + (_oneIn(seconds_, 16, "quiet") ? 300 : 0));
    }

    receive() external payable {}
}
