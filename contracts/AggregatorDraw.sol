// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {IRoundBook} from "./IRoundBook.sol";
import {ISwarmLedger} from "./ISwarmLedger.sol";
import {Messages} from "./lib/Messages.sol";
import {RoundJudge} from "./RoundJudge.sol";

/// @title AggregatorDraw
/// @notice Who may post a round's submission root in the round book (docs/scaling.md, "The
/// aggregator's draw"): registered nodes enlist as aggregators; each round's aggregator is drawn
/// from the enlisted, one slot of the roster by a block hash nobody knew when the roster was
/// fixed, before the round's producers send. Only it may post the round's root, so a receipt it
/// signed binds the only root there can be: a rival cannot post first with a root that leaves
/// everyone out, and a producer knows, while the ledger's submit window is still open, whose
/// receipt to wait for. Created by its round book (RoundBook.aggregators); its errors are the
/// book's (IRoundBook), so that a client decodes both alike.
///
/// A draw is two calls of `draw(round)`, by anyone (an enlisted aggregator's service makes both,
/// in the round before): the first, at most one round ahead, fixes the roster as it stands (its
/// length, and only nodes enlisted by that block count) and the block whose hash draws; the
/// second, in a later block while that hash is known, draws. A slot gone since the request (the
/// roster shrank), or whose node enlisted or moved there after the request or is no longer
/// registered, is passed over for another slot (TRIES in all); a round whose tries all fall on
/// such slots, or whose request lapsed and was not made again before its post, has no
/// aggregator: its producers submit on the ledger.
///
/// An enlisted node holds the book's bond here for as long as it is on the roster and until the
/// proof window of the last round drawn to it closes (the C rounds after that round's post
/// round). A drawn aggregator that receipted a submission of its round and posted no root in the
/// post round stranded that producer (its ledger window had closed, and with no root no
/// `proveLeftOut` can reach it): anyone holding the signed submission and the receipt proves it
/// (`proveUnposted`), the node's bond goes half to the prover and half to the book's reward
/// pool, and it is taken off the roster.
contract AggregatorDraw {
    uint256 private constant BLOCKHASH_WINDOW = 256;
    uint256 private constant TRIES = 4;
    /// @dev A round drawn with no aggregator (the ecrecover precompile: never a node's address)
    address private constant NOBODY = address(1);

    struct Candidate {
        address node;
        uint64 since; // the block it enlisted in (or moved into this slot in)
    }

    struct Draw {
        uint64 requested; // the block whose hash draws (0: not requested)
        uint32 count; // the roster's length then
        address aggregator; // zero: not drawn yet; NOBODY: drawn with none (one slot in all)
    }

    ISwarmLedger private immutable _ledger;
    IRoundBook private immutable _book; // the book that created it
    RoundJudge private immutable _judge; // the book's: whether a submission leaf is its producer's
    bytes32 private immutable _separator; // the book's EIP-712 domain: receipts are signed under it
    uint64 private immutable _submitRounds;
    uint64 private immutable _challengeRounds;
    /// @notice The wei an enlisted node holds here (the book's bond).
    uint256 public immutable bond;

    Candidate[] private _roster;
    mapping(address node => uint256) private _slotOf; // its slot + 1 (0: not enlisted)
    mapping(uint64 round => Draw) private _draws;
    mapping(uint64 round => bool) private _unpostedProven; // a round's failure is paid for once
    /// @notice The bond each node holds here (0 once withdrawn or taken by a proof).
    mapping(address node => uint256) public bondOf;
    /// @notice The last round in which a proof of a round drawn to `node` may come: its bond is
    /// held until it is past.
    mapping(address node => uint64) public heldUntil;

    event Enlisted(address indexed node, uint256 slot);
    event Resigned(address indexed node, uint256 slot);
    event DrawRequested(uint64 indexed round, uint64 blockNumber, uint32 candidates);
    event AggregatorDrawn(uint64 indexed round, address indexed aggregator);
    event UnpostedProven(uint64 indexed round, address indexed aggregator, address indexed prover, uint256 paid);

    /// @param ledger_ The ledger the book reads.
    /// @param judge_ The book's judge.
    /// @param separator_ The book's EIP-712 domain separator.
    /// @param bond_ The book's bond.
    constructor(address ledger_, address judge_, bytes32 separator_, uint256 bond_) {
        _ledger = ISwarmLedger(ledger_);
        _book = IRoundBook(msg.sender);
        _judge = RoundJudge(judge_);
        _separator = separator_;
        bond = bond_;
        _submitRounds = _ledger.submitRounds();
        _challengeRounds = _ledger.challengeRounds();
    }

    /// @notice Enlists the caller, a node registered on the ledger, for the draws requested from
    /// the next block on, with `bond` wei (less what it still holds here from before).
    function enlist() external payable {
        if (_ledger.familyOf(msg.sender) == bytes32(0)) revert IRoundBook.NotARegisteredNode(msg.sender);
        if (_slotOf[msg.sender] != 0) revert IRoundBook.AlreadyEnlisted(msg.sender);
        uint256 held = bondOf[msg.sender] + msg.value;
        if (held != bond) revert IRoundBook.WrongBond(held, bond);
        bondOf[msg.sender] = held;
        _roster.push(Candidate(msg.sender, uint64(block.number)));
        _slotOf[msg.sender] = _roster.length;
        emit Enlisted(msg.sender, _roster.length - 1);
    }

    /// @notice Takes the caller off the roster: it is drawn no more (a round drawn to it already
    /// keeps it). The roster's last node moves into its slot, as enlisted now, so that a draw
    /// requested before passes it over in either place (a draw's slot past the roster's end is
    /// empty): the roster never keeps a hole, and a draw never falls on a node that moved under it.
    function resign() external {
        if (_slotOf[msg.sender] == 0) revert IRoundBook.NotEnlisted(msg.sender);
        _remove(msg.sender);
    }

    /// @notice Pays back the bond of a node off the roster, once the proof window of the last
    /// round drawn to it has closed.
    function withdrawBond() external {
        if (_slotOf[msg.sender] != 0) revert IRoundBook.StillEnlisted(msg.sender);
        uint256 amount = bondOf[msg.sender];
        if (amount == 0) revert IRoundBook.NothingOwed(msg.sender);
        uint64 current = _ledger.currentRound();
        if (current <= heldUntil[msg.sender]) revert IRoundBook.BondHeld(msg.sender, heldUntil[msg.sender]);
        bondOf[msg.sender] = 0;
        (bool ok,) = msg.sender.call{value: amount}("");
        if (!ok) revert IRoundBook.PaymentRefused(msg.sender);
    }

    /// @notice Proves that `round`'s drawn aggregator receipted `leaf` (`receipt`: its signature
    /// of `Messages.Receipt` over the submission's signing hash and its producer) and posted no
    /// submission root in the round's post round: from the round after it, for C rounds. The
    /// leaf must be its producer's signed submission of the round (RoundJudge.forged). Pays the
    /// caller half the aggregator's bond, the book's reward pool the rest, and takes it off the
    /// roster (once: its bond is spent).
    function proveUnposted(uint64 round, IRoundBook.SignedSubmission calldata leaf, bytes calldata receipt)
        external
    {
        uint64 current = _ledger.currentRound();
        uint64 post = round + _submitRounds + 1;
        if (current <= post) revert IRoundBook.ChallengeWindowOpen(round, current);
        if (current > post + _challengeRounds) revert IRoundBook.ChallengeWindowClosed(round, current);
        address aggregator = _draws[round].aggregator;
        if (aggregator == address(0) || aggregator == NOBODY || _book.roundOf(round).aggregator != address(0)) {
            revert IRoundBook.NoLie("a round posted, or drawn to nobody");
        }
        if (bytes(_judge.forged(round, leaf)).length != 0) revert IRoundBook.NoLie("not a submission of the round");
        bytes32 held = Messages.signingHash(_separator, Messages.structHash(leaf.submission));
        bytes32 receiptHash = Messages.signingHash(_separator, Messages.receiptHash(held, leaf.producer));
        if (Messages.signer(receiptHash, receipt) != aggregator) revert IRoundBook.NoLie("not the aggregator's receipt");
        if (_unpostedProven[round]) revert IRoundBook.NoLie("proven already");
        uint256 amount = bondOf[aggregator];
        if (amount == 0) revert IRoundBook.NoLie("its bond is spent");
        _unpostedProven[round] = true;
        bondOf[aggregator] = 0;
        if (_slotOf[aggregator] != 0) _remove(aggregator);
        uint256 half = amount / 2;
        emit UnpostedProven(round, aggregator, msg.sender, half);
        _book.fund{value: amount - half}();
        (bool ok,) = msg.sender.call{value: half}("");
        if (!ok) revert IRoundBook.PaymentRefused(msg.sender);
    }

    function _remove(address node) private {
        uint256 slot = _slotOf[node] - 1;
        uint256 last = _roster.length - 1;
        if (slot != last) {
            address moved = _roster[last].node;
            _roster[slot] = Candidate(moved, uint64(block.number));
            _slotOf[moved] = slot + 1;
        }
        _roster.pop();
        delete _slotOf[node];
        emit Resigned(node, slot);
    }

    /// @notice Requests `round`'s draw (from the round before it until its submission root's
    /// post round; again once a request's block hash lapsed undrawn), or draws it once the
    /// request's block is mined; nothing once drawn. Returns the round's aggregator (zero while
    /// not drawn, or drawn with none).
    function draw(uint64 round) external returns (address) {
        Draw storage d = _draws[round];
        if (d.aggregator != address(0)) return d.aggregator == NOBODY ? address(0) : d.aggregator;
        if (d.requested == 0 || block.number - d.requested > BLOCKHASH_WINDOW) {
            uint64 current = _ledger.currentRound();
            if (current + 1 < round || current > round + _submitRounds + 1) revert IRoundBook.DrawNotOpen(round, current);
            d.requested = uint64(block.number);
            d.count = uint32(_roster.length);
            emit DrawRequested(round, d.requested, d.count);
            return address(0);
        }
        if (block.number == d.requested) return address(0); // its hash is the next block's to know
        bytes32 seed = blockhash(d.requested);
        address drawn;
        for (uint256 t; t < TRIES && d.count != 0; ++t) {
            uint256 slot = uint256(keccak256(abi.encode(seed, round, t))) % d.count;
            if (slot >= _roster.length) continue; // a slot gone since the request
            Candidate storage c = _roster[slot];
            if (c.since <= d.requested && _ledger.familyOf(c.node) != bytes32(0)) {
                drawn = c.node;
                break;
            }
        }
        d.aggregator = drawn == address(0) ? NOBODY : drawn;
        uint64 proofsEnd = round + _submitRounds + 1 + _challengeRounds;
        if (drawn != address(0) && heldUntil[drawn] < proofsEnd) heldUntil[drawn] = proofsEnd;
        emit AggregatorDrawn(round, drawn);
        return drawn;
    }

    /// @notice `round`'s draw: its aggregator (zero until drawn, and when drawn with none),
    /// whether it is drawn, and the block of its request (0: none yet).
    function drawOf(uint64 round) external view returns (address aggregator, bool drawn, uint64 requested) {
        Draw storage d = _draws[round];
        bool done = d.aggregator != address(0);
        return (d.aggregator == NOBODY ? address(0) : d.aggregator, done, d.requested);
    }

    /// @notice Whether `node` is on the roster.
    function enlisted(address node) external view returns (bool) {
        return _slotOf[node] != 0;
    }

    /// @notice The enlisted nodes, by slot.
    function roster() external view returns (address[] memory nodes) {
        nodes = new address[](_roster.length);
        for (uint256 i; i < nodes.length; ++i) {
            nodes[i] = _roster[i].node;
        }
    }
}
