// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {IRoundBook} from "../../IRoundBook.sol";
import {ISwarmLedger} from "../../ISwarmLedger.sol";
import {BookHandler, IBook} from "./BookHandler.sol";
import {CheatsBase, FuzzSelector} from "./Cheats.sol";

/// @notice Stateful fuzzing of the root lane: forge calls BookHandler's actions in random
/// sequences (foundry.toml's runs x depth, its check interval) on a RoundBook deployed from its
/// committed artifact (or, with SAPO_ROUNDBOOK_ARTIFACT, a seeded fault's build:
/// scripts/mutate_roundbook.py) over a real SwarmLedger that names it, and checks (after every
/// 4th call and at each run's end: foundry.toml's check_interval) that the money of both
/// contracts is where the book's rules put it. Each invariant is a
/// rule in plain words; a failure names it with the values, and forge prints the shrunk
/// sequence. The ledger's own rules have their campaigns (LedgerInvariants.t.sol).
contract RoundBookInvariantsTest is CheatsBase {
    /// @dev The committed build of the book (optimized for its size, as deployed).
    string internal constant BOOK_ARTIFACT = "contracts/artifacts/RoundBook.json";

    IBook internal book;
    ISwarmLedger internal ledger;
    BookHandler internal handler;
    address internal rosterAt;

    function setUp() public {
        vm.warp(1_700_000_000);
        vm.roll(1_000);
        // the ledger names its book for good: the address this contract's next creation takes
        address bookAt = _createdBy(address(this), vm.getNonce(address(this)) + 1);
        ledger = ISwarmLedger(
            deployLedger(
                abi.encode(
                    uint64(1_000), // roundLength
                    uint256(1 ether), // minStake
                    uint64(8_000), // unbondingPeriod: longer than a round's windows
                    uint64(2), // challengeRounds
                    uint64(1), // submitRounds
                    uint256(1 ether), // rewardPerRound
                    uint16(1_000), // slashBps
                    uint16(50), // agreeToleranceBps
                    keccak256("catalog"),
                    uint16(2), // quorum
                    uint16(8), // checkers: six nodes, most batches find two seated checkers
                    uint64(2), // appealRounds
                    uint16(8), // appealCheckers
                    families(),
                    bookAt
                )
            )
        );
        address deployed = vm.deployCode(
            vm.envOr("SAPO_ROUNDBOOK_ARTIFACT", BOOK_ARTIFACT), abi.encode(address(ledger), 1 ether, 0.1 ether, 100)
        );
        require(deployed == bookAt, "the book was not created where the ledger names it");
        book = IBook(deployed);
        rosterAt = book.aggregators();
        uint256[6] memory keys = [uint256(0xA11CE), 0xB0B, 0xCA201, 0xD0D0, 0xE1E1, 0xF00D];
        handler = new BookHandler(book, keys);
        handler.seed();
        vm.createDir(".forge/metrics", true);
    }

    /// @dev The address `deployer` creates at `nonce` (CREATE; a contract's nonce is below 128 here).
    function _createdBy(address deployer, uint256 nonce) internal pure returns (address) {
        require(nonce > 0 && nonce < 0x80, "nonce outside the one-byte RLP case");
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xd6), bytes1(0x94), deployer, uint8(nonce))))));
    }

    function afterInvariant() public {
        vm.writeLine(".forge/metrics/paths.jsonl", handler.pathsLine("RoundBookInvariantsTest"));
    }

    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    function targetSelectors() public view returns (FuzzSelector[] memory targets) {
        bytes4[] memory actions = new bytes4[](26);
        actions[0] = BookHandler.warp.selector;
        actions[1] = BookHandler.enlist.selector;
        actions[2] = BookHandler.resign.selector;
        actions[3] = BookHandler.withdrawRosterBond.selector;
        actions[4] = BookHandler.drawAggregator.selector;
        actions[5] = BookHandler.post.selector;
        actions[6] = BookHandler.postVerdicts.selector;
        actions[7] = BookHandler.audit.selector;
        actions[8] = BookHandler.challenge.selector;
        actions[9] = BookHandler.answer.selector;
        actions[10] = BookHandler.claimUnanswered.selector;
        actions[11] = BookHandler.release.selector;
        actions[12] = BookHandler.fund.selector;
        actions[13] = BookHandler.claim.selector;
        actions[14] = BookHandler.claimFalsely.selector;
        actions[15] = BookHandler.releaseFalsely.selector;
        actions[16] = BookHandler.postFalsely.selector;
        actions[17] = BookHandler.proveUnpostedFalsely.selector;
        actions[18] = BookHandler.proveLeftOutFalsely.selector;
        actions[19] = BookHandler.proveHonestFalsely.selector;
        actions[20] = BookHandler.equivocate.selector;
        actions[21] = BookHandler.submitOnLedger.selector;
        actions[22] = BookHandler.attestOnLedger.selector;
        actions[23] = BookHandler.claimOnLedger.selector;
        actions[24] = BookHandler.escalateFalsely.selector;
        actions[25] = BookHandler.proveUncreditedFalsely.selector;
        targets = new FuzzSelector[](1);
        targets[0] = FuzzSelector(address(handler), actions);
    }

    function _eq(uint256 got, uint256 want, string memory rule) internal pure {
        if (got != want) {
            revert(string.concat(rule, " (contracts ", vm.toString(got), ", expected ", vm.toString(want), ")"));
        }
    }

    // ------------------------------------------------------------------------------ invariants

    /// The handler saw every call go as the rules say (each action judges its own calls).
    function invariant_handlerSawNoViolation() public view {
        if (handler.violationCount() != 0) revert(handler.firstViolation());
    }

    /// The book holds exactly its reward pool, the bonds of rounds neither released nor void, and
    /// the bonds of open data challenges: no wei stranded, none owed that is not there (every
    /// payee here takes its payments: nothing is owed); and its pool is what was funded and
    /// forfeited into it less what claims and aggregators' pay took.
    function invariant_bookHoldsItsPoolTheLiveBondsAndTheOpenChallenges() public view {
        _eq(book.owed(handler.STRANGER()), 0, "nothing owed to a payee that takes its payments");
        for (uint256 i; i < 6; ++i) {
            _eq(book.owed(handler.nodes(i)), 0, "nothing owed to a payee that takes its payments");
        }
        _eq(
            address(book).balance,
            book.rewardPool() + handler.heldBonds() + handler.openChallengeBonds(),
            "book balance = pool + live round bonds + open challenge bonds"
        );
        _eq(book.rewardPool(), handler.pool(), "pool = funded + forfeited roster bonds - claims - aggregators' pay");
    }

    /// The roster holds exactly its nodes' bonds, and they are what was enlisted less what was
    /// withdrawn or taken by a proof; its slots are the model's (a leaver's slot takes the last).
    function invariant_rosterHoldsItsBonds() public view {
        address[] memory slots = IRosterBonds(rosterAt).roster();
        address[] memory model = handler.slots();
        _eq(slots.length, model.length, "the roster's length = the model's");
        for (uint256 i; i < slots.length; ++i) {
            if (slots[i] != model[i]) revert(string.concat("the roster's slot ", vm.toString(i), " is not the model's"));
        }
        uint256 sum;
        for (uint256 i; i < 6; ++i) {
            address node = handler.nodes(i);
            uint256 bond = IRosterBonds(rosterAt).bondOf(node);
            _eq(bond, handler.bondHeld(node), "a node's roster bond = the model's");
            sum += bond;
        }
        _eq(rosterAt.balance, sum, "roster balance = the sum of its nodes' bonds");
        _eq(sum, handler.rosterBonds(), "roster bonds = enlisted - withdrawn - taken by proofs");
    }

    /// Half of each forfeited bond went to the ledger's pool, and each proven equivocation's
    /// slashed stake less its prover's cut; the ledger's claims took what the model paid them,
    /// and each round's credited signal on the ledger is the model's. Each node's stake is what
    /// it staked less what its equivocations took, and the ledger holds exactly stakes and pool.
    function invariant_theLedgersPoolStakesAndCreditsAreTheModels() public view {
        _eq(ledger.totalFunded(), handler.forfeited(), "ledger funded = the forfeited halves of void rounds' bonds");
        _eq(ledger.totalSlashed(), handler.slashed(), "ledger slashed = what proven equivocations took");
        _eq(ledger.totalSettlerPaid(), handler.proversCut(), "ledger's provers' pay = SETTLER_CUT_BPS of each slash");
        _eq(ledger.totalPaidOut(), handler.ledgerPaid(), "ledger paid out = what its claims took");
        _eq(
            ledger.rewardPool(),
            handler.ledgerPool(),
            "ledger pool = forfeited halves + slashed stake - provers' cut - claims"
        );
        uint64[] memory credited = handler.ledgerRounds();
        for (uint256 i; i < credited.length; ++i) {
            (uint256 total,) = ledger.roundInfo(credited[i]);
            _eq(total, handler.ledgerCredited(credited[i]), "a round's credited signal on the ledger = the model's");
        }
        uint256 staked;
        for (uint256 i; i < 6; ++i) {
            address node = handler.nodes(i);
            ISwarmLedger.NodeView memory info = ledger.nodeInfo(node);
            _eq(info.activeStake + info.unbonding, 2 ether - handler.slashedOf(node), "a node's stake = staked - slashed");
            staked += info.activeStake + info.unbonding;
        }
        _eq(address(ledger).balance, staked + ledger.rewardPool(), "ledger balance = stakes + pool");
    }

    /// Each producer's paid total and last claimed round are what its claims took as the rules
    /// price them (each claim's payment is checked as it is made: the credit's settled earnings,
    /// its share and its tail's, over both lanes' totals).
    function invariant_eachProducerIsPaidExactlyWhatItsClaimsTook() public view {
        for (uint256 i; i < 6; ++i) {
            address p = handler.nodes(i);
            (uint128 total, uint64 through) = book.paidOf(p);
            _eq(total, handler.paid(p), "a producer's paid total = what its claims took");
            _eq(through, handler.through(p), "a producer's last claimed round + 1 = its last claim's");
        }
    }

    /// Each round stands or falls as its lies and their proofs say: an honest round is never
    /// void, a proven lie always voids its round, a round is released at most once and never
    /// once void, and what stands for good is what the book says stands.
    function invariant_roundsStandOrFallAsTheirLiesAndProofsSay() public view {
        uint64[] memory played = handler.played();
        for (uint256 i; i < played.length; ++i) {
            uint64 r = played[i];
            (, uint8 subLie, uint8 verdictLie,,, bool voided, bool released, bool proven,,, uint128 total, uint32 open,,) =
                handler.rounds(r);
            IRoundBook.RoundView memory v = book.roundOf(r);
            bool void_ = v.submissionsVoided || v.verdictsVoided;
            string memory at = string.concat(" (round ", vm.toString(uint256(r)), ")");
            if (void_ != voided) revert(string.concat("a round void or standing against the model", at));
            if (subLie == 0 && verdictLie == 0 && void_) revert(string.concat("an honest round was voided", at));
            if (proven && !void_) revert(string.concat("a proven lie left its round standing", at));
            if (v.released != released) revert(string.concat("a round released against the model", at));
            _eq(v.openChallenges, open, string.concat("open challenges = those neither answered nor claimed", at));
            (bool decided, uint256 standing) = book.standingTotal(r);
            if (decided != (ledger.currentRound() >= handler.challengeEnd(r) + 2)) {
                revert(string.concat("a round decided before its challenges all closed, or never", at));
            }
            _eq(standing, handler.stands(r) ? total : 0, string.concat("a standing round's total", at));
        }
    }
}

interface IRosterBonds {
    function bondOf(address node) external view returns (uint256);
    function roster() external view returns (address[] memory);
}
