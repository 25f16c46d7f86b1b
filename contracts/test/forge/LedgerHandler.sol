// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {SwarmLedger} from "../../SwarmLedger.sol";
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
    SwarmLedger public immutable ledger;

    uint256 internal constant SCORE_SCALE = 10_000;
    uint256 internal constant BPS = 10_000;
    uint256 internal constant GWEI = 1e9;
    uint256 internal constant N_ACTORS = 5;

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

    address[N_ACTORS] public actors;

    // ------------------------------------------------------------------------------- the model

    struct Stake {
        bool registered;
        uint256 active;
        uint256 unbonding;
        uint256 unbondingEnd;
        uint256 lastUnstakeAt; // when the caller last moved stake into unbonding
        uint256 claimedTotal; // sum of what its successful claims returned
    }

    struct Sub {
        uint64 round;
        address node;
        uint32 rollouts;
        uint64 claimed;
        uint256 submittedAt;
        uint64 agreeGwei;
        uint64 disputeGwei;
        uint16 attestations;
        bool settled;
        bool paid;
        uint256 paidAmount;
    }

    mapping(address => Stake) public stakeOf;
    Sub[] internal _subs;
    mapping(uint64 => mapping(address => uint256)) internal _subIndex; // index + 1
    mapping(address => mapping(uint64 => mapping(address => bool))) internal _attested;
    mapping(uint64 => uint256) public creditedTotal; // the model's round total of credited claims
    mapping(uint64 => uint256) public paidInRound;
    uint64[] internal _roundsWithSubs;
    mapping(uint64 => bool) internal _roundSeen;

    uint256 public pool;
    uint256 public funded;
    uint256 public slashed;
    uint256 public paidOut;

    string[] internal _violations;

    /// @notice How often a run reached the paths where rules bite (not only the happy path):
    /// read by the campaign's report so that a handler that avoids them is noticed.
    struct Paths {
        uint256 disputedAttestations; // an attestation outside the tolerance
        uint256 creditLost; // a submission's credit removed by disputing stake
        uint256 creditRegained; // and given back by agreeing stake
        uint256 slashes; // a disputed submission settled with a slash
        uint256 slashesIntoUnbonding; // a slash larger than the active stake
        uint256 zeroShareClaims; // a claim that listed a disputed or zero-score round
        uint256 fullUnstakes; // all active stake moved to unbonding
        uint256 withdrawalsAfterSubmitting; // a withdrawal by a node that had submitted
        uint256 ties; // agreeing and disputing stake equal (credited: not outweighed)
    }

    Paths public paths;

    constructor(SwarmLedger ledger_) {
        ledger = ledger_;
        L = ledger_.roundLength();
        MIN_STAKE = ledger_.minStake();
        UNBONDING = ledger_.unbondingPeriod();
        C = ledger_.challengeRounds();
        S = ledger_.submitRounds();
        REWARD = ledger_.rewardPerRound();
        SLASH_BPS = ledger_.slashBps();
        TOL_BPS = ledger_.agreeToleranceBps();
        GENESIS = ledger_.genesis();
        for (uint256 i; i < N_ACTORS; ++i) {
            actors[i] = address(uint160(0xA11CE00 + i));
            vm.label(actors[i], string.concat("actor", vm.toString(i)));
        }
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

    function credited(Sub memory s) public pure returns (bool) {
        return s.disputeGwei <= s.agreeGwei;
    }

    // --------------------------------------------------------------------------------- helpers

    function _current() internal view returns (uint64) {
        return uint64((block.timestamp - GENESIS) / L);
    }

    function _final(uint64 round) internal view returns (bool) {
        return _current() > round + S + C;
    }

    /// @dev The end of the period in which a submission of `round` can still be slashed by the
    /// ledger's promise: its submission and challenge windows, then a settlement period as long
    /// as the challenge window.
    function _slashHorizon(uint64 round) internal view returns (uint256) {
        return GENESIS + uint256(round + S + 2 * C + 1) * L;
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

    function _canAttest(address a) internal view returns (bool) {
        return a != _pickNode && _canAct(a) && !_attested[a][_pickSubRound][_pickNode];
    }

    function _isRegisteredNotUnbonding(address a) internal view returns (bool) {
        return stakeOf[a].registered && stakeOf[a].unbonding == 0;
    }

    function _canWithdraw(address a) internal view returns (bool) {
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

    function _hex4(bytes memory reason) internal pure returns (string memory) {
        if (reason.length < 4) return "no reason";
        bytes memory out = new bytes(10);
        bytes16 digits = "0123456789abcdef";
        out[0] = "0";
        out[1] = "x";
        for (uint256 i; i < 4; ++i) {
            out[2 + 2 * i] = digits[uint8(reason[i]) >> 4];
            out[3 + 2 * i] = digits[uint8(reason[i]) & 0xf];
        }
        return string(out);
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
            address(ledger).call{value: amount}(abi.encodeCall(SwarmLedger.register, ("{\"fuzz\":true}")));
        if (_judge("register", expectOk, ok, reason)) _refused();
        if (ok) {
            Stake storage st = stakeOf[a];
            st.registered = true;
            st.active = amount;
        }
    }

    function addStake(uint256 actorSeed, uint256 amount) external {
        address a = _actorWhere(actorSeed, _isRegistered);
        amount = _roundStake(amount, 0, 4 * MIN_STAKE);
        bool expectOk = stakeOf[a].registered && amount > 0;
        _fundActor(a, amount);
        vm.prank(a);
        (bool ok, bytes memory reason) = address(ledger).call{value: amount}(abi.encodeCall(SwarmLedger.addStake, ()));
        if (_judge("addStake", expectOk, ok, reason)) _refused();
        if (ok) stakeOf[a].active += amount;
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
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(SwarmLedger.requestUnstake, (amount)));
        if (_judge("requestUnstake", expectOk, ok, reason)) _refused();
        if (ok) {
            if (amount == st.active) paths.fullUnstakes += 1;
            st.active -= amount;
            st.unbonding += amount;
            st.unbondingEnd = block.timestamp + UNBONDING;
            st.lastUnstakeAt = block.timestamp;
        }
    }

    function withdraw(uint256 actorSeed) external {
        address a = _actorWhere(actorSeed, _canWithdraw);
        Stake storage st = stakeOf[a];
        bool expectOk = st.unbonding > 0 && block.timestamp >= st.unbondingEnd;
        uint256 before = a.balance;
        vm.prank(a);
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(SwarmLedger.withdraw, ()));
        if (_judge("withdraw", expectOk, ok, reason)) _refused();
        if (!ok) return;
        if (a.balance - before != st.unbonding) _violate("withdraw: paid a different amount than the unbonding stake");
        bool submitted;
        // Stake that backed a submission may not leave before that submission's slashing horizon
        // (if it was moved to unbonding after the submission, it was active when it was made).
        for (uint256 i; i < _subs.length; ++i) {
            Sub storage s = _subs[i];
            if (s.node == a) submitted = true;
            if (s.node != a || s.settled || s.submittedAt > st.lastUnstakeAt) continue;
            if (block.timestamp < _slashHorizon(s.round)) {
                _violate("withdraw: stake that can still be slashed for an unsettled submission left the ledger");
            }
        }
        if (submitted) paths.withdrawalsAfterSubmitting += 1;
        st.unbonding = 0;
    }

    function setMetadata(uint256 actorSeed, uint256 length) external {
        address a = _actorWhere(actorSeed, _isRegistered);
        length = bound(length, 0, 1040);
        bool expectOk = stakeOf[a].registered && length <= 1024;
        vm.prank(a);
        (bool ok, bytes memory reason) =
            address(ledger).call(abi.encodeCall(SwarmLedger.setMetadata, (string(new bytes(length)))));
        if (_judge("setMetadata", expectOk, ok, reason)) _refused();
    }

    // -------------------------------------------------------------------------------- rollouts

    function submit(uint256 actorSeed, uint256 roundSeed, uint256 rollouts, uint256 score) external {
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
        rollouts = bound(rollouts, 1, 64);
        uint256 maxScore = rollouts * SCORE_SCALE;
        // usually a valid score, at times one unit over the maximum
        score = _oneIn(score, 16, "over") ? maxScore + 1 : bound(score, 0, maxScore);
        bytes32 digest = keccak256(abi.encode(a, round, roundSeed));
        bool inWindow = round <= current && current - round <= S;
        bool expectOk = _canAct(a) && inWindow && _subIndex[round][a] == 0 && score <= maxScore;
        vm.prank(a);
        (bool ok, bytes memory reason) = address(ledger).call(
            abi.encodeCall(SwarmLedger.submit, (round, digest, uint32(rollouts), uint64(score)))
        );
        if (_judge("submit", expectOk, ok, reason)) _refused();
        if (!ok) return;
        _subs.push(
            Sub({
                round: round,
                node: a,
                rollouts: uint32(rollouts),
                claimed: uint64(score),
                submittedAt: block.timestamp,
                agreeGwei: 0,
                disputeGwei: 0,
                attestations: 0,
                settled: false,
                paid: false,
                paidAmount: 0
            })
        );
        _subIndex[round][a] = _subs.length;
        creditedTotal[round] += score;
        if (!_roundSeen[round]) {
            _roundSeen[round] = true;
            _roundsWithSubs.push(round);
        }
    }

    /// @dev Picks a submission from `seed` on, preferring one whose window `want` accepts.
    function _subWhere(uint256 seed, bool wantFinal) internal view returns (uint256 index, bool found) {
        uint256 n = _subs.length;
        if (n == 0) return (0, false);
        for (uint256 i; i < n; ++i) {
            uint256 j = (seed + i) % n;
            Sub storage s = _subs[j];
            if (wantFinal ? (_final(s.round) && !s.settled) : !_final(s.round)) return (j, true);
        }
        return (seed % n, true);
    }

    function attest(uint256 attesterSeed, uint256 subSeed, uint256 scoreSeed) external {
        (uint256 i, bool found) = _subWhere(subSeed, false);
        if (!found) _refused();
        Sub storage s = _subs[i];
        _pickNode = s.node;
        _pickSubRound = s.round;
        // one call in sixteen lets the node attest its own batch, which must be refused
        address a = _oneIn(attesterSeed, 16, "self") ? s.node : _actorWhere(attesterSeed, _canAttest);
        uint256 maxScore = uint256(s.rollouts) * SCORE_SCALE;
        uint256 tolerance = (maxScore * TOL_BPS) / BPS;
        uint256 score;
        uint256 mode = scoreSeed % 6;
        uint256 claimed = s.claimed;
        if (mode == 0) score = claimed;
        else if (mode == 1) score = claimed + tolerance; // the agreeing edge, above
        else if (mode == 2) score = claimed >= tolerance ? claimed - tolerance : 0; // below
        else if (mode == 3) score = claimed + tolerance + 1; // the disputing edge
        else if (mode == 4) score = claimed > tolerance ? claimed - tolerance - 1 : maxScore;
        else score = bound(scoreSeed >> 8, 0, maxScore + maxScore / 32);
        // one call in three seeks a tie: an attester whose stake equals the gap between the two
        // sides votes with the smaller side
        if (_oneIn(scoreSeed, 3, "tie") && s.agreeGwei != s.disputeGwei) {
            uint64 gapGwei = s.agreeGwei > s.disputeGwei ? s.agreeGwei - s.disputeGwei : s.disputeGwei - s.agreeGwei;
            for (uint256 k; k < N_ACTORS; ++k) {
                address t = actors[(attesterSeed + k) % N_ACTORS];
                if (!_canAttest(t) || stakeOf[t].active / GWEI != gapGwei) continue;
                if (s.disputeGwei > s.agreeGwei) {
                    (a, score) = (t, claimed);
                } else if (claimed + tolerance + 1 <= maxScore) {
                    (a, score) = (t, claimed + tolerance + 1);
                } else if (claimed > tolerance) {
                    (a, score) = (t, claimed - tolerance - 1);
                }
                break;
            }
        }
        bool inRange = score <= maxScore;
        bool expectOk = a != s.node && _canAct(a) && !_final(s.round) && !_attested[a][s.round][s.node]
            && inRange && s.attestations < type(uint16).max;
        uint256 gap = score > claimed ? score - claimed : claimed - score;
        bool agrees = gap * BPS <= maxScore * TOL_BPS;
        vm.prank(a);
        (bool ok, bytes memory reason) =
            address(ledger).call(abi.encodeCall(SwarmLedger.attest, (s.round, s.node, uint64(score))));
        if (_judge("attest", expectOk, ok, reason)) _refused();
        if (!ok) return;
        _attested[a][s.round][s.node] = true;
        bool wasCredited = credited(s);
        uint64 weight = uint64(stakeOf[a].active / GWEI);
        if (agrees) {
            s.agreeGwei += weight;
        } else {
            s.disputeGwei += weight;
            paths.disputedAttestations += 1;
        }
        s.attestations += 1;
        bool nowCredited = credited(s);
        if (s.agreeGwei == s.disputeGwei && s.agreeGwei > 0) paths.ties += 1;
        if (wasCredited && !nowCredited) {
            creditedTotal[s.round] -= s.claimed;
            paths.creditLost += 1;
        }
        if (!wasCredited && nowCredited) {
            creditedTotal[s.round] += s.claimed;
            paths.creditRegained += 1;
        }
    }

    function settle(uint256 subSeed) external {
        (uint256 i, bool found) = _subWhere(subSeed, true);
        if (!found) _refused();
        Sub storage s = _subs[i];
        bool expectOk = _final(s.round) && !s.settled;
        Stake storage st = stakeOf[s.node];
        bool disputed = !credited(s);
        uint256 slash = disputed ? ((st.active + st.unbonding) * SLASH_BPS) / BPS : 0;
        uint256 slashedBefore = ledger.totalSlashed();
        (bool ok, bytes memory reason) = address(ledger).call(abi.encodeCall(SwarmLedger.settle, (s.round, s.node)));
        if (_judge("settle", expectOk, ok, reason)) _refused();
        if (!ok) return;
        s.settled = true;
        if (ledger.totalSlashed() - slashedBefore != slash) {
            _violate("settle: slashed a different amount than slashBps of the node's stake");
        }
        if (disputed) paths.slashes += 1;
        if (slash > st.active) paths.slashesIntoUnbonding += 1;
        uint256 fromActive = slash < st.active ? slash : st.active;
        st.active -= fromActive;
        st.unbonding -= slash - fromActive;
        pool += slash;
        slashed += slash;
    }

    // --------------------------------------------------------------------------------- rewards

    function fund(uint256 amount) external {
        amount = bound(amount, 0, 3 * REWARD);
        bool expectOk = amount > 0;
        vm.deal(address(this), address(this).balance + amount);
        (bool ok, bytes memory reason) = address(ledger).call{value: amount}(abi.encodeCall(SwarmLedger.fund, ()));
        if (_judge("fund", expectOk, ok, reason)) _refused();
        if (ok) {
            pool += amount;
            funded += amount;
        }
    }

    function _share(Sub storage s) internal view returns (uint256) {
        if (s.claimed == 0 || !credited(s)) return 0;
        return (REWARD * s.claimed) / creditedTotal[s.round];
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
        bool expectOk = valid && amount > 0 && amount <= pool;
        uint256 before = a.balance;
        vm.prank(a);
        (bool ok, bytes memory data) = address(ledger).call(abi.encodeCall(SwarmLedger.claim, (list)));
        if (_judge("claim", expectOk, ok, data)) _refused();
        if (!ok) return;
        uint256 got = abi.decode(data, (uint256));
        if (got != amount) _violate("claim: paid a different amount than the rounds' pro-rata shares");
        if (a.balance - before != got) _violate("claim: transferred a different amount than it returned");
        for (uint256 k; k < n; ++k) {
            Sub storage s = _subs[picked[k]];
            if (s.paid) _violate("claim: a submission was paid twice");
            s.paid = true;
            s.paidAmount = _share(s);
            if (s.paidAmount == 0) paths.zeroShareClaims += 1;
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
        vm.roll(block.number + 1 + step / 12);
    }

    receive() external payable {}
}
