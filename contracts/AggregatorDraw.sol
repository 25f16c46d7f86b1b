// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {IRoundBook} from "./IRoundBook.sol";
import {ISwarmLedger} from "./ISwarmLedger.sol";

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
/// second, in a later block while that hash is known, draws. A slot left empty, or whose node
/// enlisted after the request or is no longer registered, is passed over for another slot
/// (TRIES in all); a round whose tries all fall on such slots, or whose request lapsed and was
/// not made again before its post, has no aggregator: its producers submit on the ledger.
contract AggregatorDraw {
    uint256 private constant BLOCKHASH_WINDOW = 256;
    uint256 private constant TRIES = 4;

    struct Candidate {
        address node; // zero: a slot its node left (the next to enlist takes it)
        uint64 since; // the block it enlisted in
    }

    struct Draw {
        uint64 requested; // the block whose hash draws (0: not requested)
        uint32 count; // the roster's length then
        bool drawn;
        address aggregator; // zero once drawn: the round has none
    }

    ISwarmLedger private immutable _ledger;
    uint64 private immutable _submitRounds;

    Candidate[] private _roster;
    uint256[] private _free; // slots left, taken again by the next to enlist
    mapping(address node => uint256) private _slotOf; // its slot + 1 (0: not enlisted)
    mapping(uint64 round => Draw) private _draws;

    event Enlisted(address indexed node, uint256 slot);
    event Left(address indexed node, uint256 slot);
    event DrawRequested(uint64 indexed round, uint64 blockNumber, uint32 candidates);
    event AggregatorDrawn(uint64 indexed round, address indexed aggregator);

    constructor(address ledger_) {
        _ledger = ISwarmLedger(ledger_);
        _submitRounds = _ledger.submitRounds();
    }

    /// @notice Enlists the caller, a node registered on the ledger, for the draws requested from
    /// the next block on.
    function enlist() external {
        if (_ledger.familyOf(msg.sender) == bytes32(0)) revert IRoundBook.NotARegisteredNode(msg.sender);
        if (_slotOf[msg.sender] != 0) revert IRoundBook.AlreadyEnlisted(msg.sender);
        uint256 slot;
        Candidate memory c = Candidate(msg.sender, uint64(block.number));
        if (_free.length != 0) {
            slot = _free[_free.length - 1];
            _free.pop();
            _roster[slot] = c;
        } else {
            slot = _roster.length;
            _roster.push(c);
        }
        _slotOf[msg.sender] = slot + 1;
        emit Enlisted(msg.sender, slot);
    }

    /// @notice Takes the caller off the roster: it is drawn no more (a round drawn to it already
    /// keeps it). Its slot stays where it is, empty until the next node enlists, so that no
    /// other node moves into a slot a pending draw may fall on.
    function leave() external {
        uint256 slot = _slotOf[msg.sender];
        if (slot == 0) revert IRoundBook.NotEnlisted(msg.sender);
        delete _roster[slot - 1];
        delete _slotOf[msg.sender];
        _free.push(slot - 1);
        emit Left(msg.sender, slot - 1);
    }

    /// @notice Requests `round`'s draw (from the round before it until its submission root's
    /// post round; again once a request's block hash lapsed undrawn), or draws it once the
    /// request's block is mined; nothing once drawn. Returns the round's aggregator (zero while
    /// not drawn, or drawn with none).
    function draw(uint64 round) external returns (address) {
        Draw storage d = _draws[round];
        if (d.drawn) return d.aggregator;
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
            Candidate storage c = _roster[uint256(keccak256(abi.encode(seed, round, t))) % d.count];
            if (c.node != address(0) && c.since <= d.requested && _ledger.familyOf(c.node) != bytes32(0)) {
                drawn = c.node;
                break;
            }
        }
        d.drawn = true;
        d.aggregator = drawn;
        emit AggregatorDrawn(round, drawn);
        return drawn;
    }

    /// @notice `round`'s draw: its aggregator (zero until drawn, and when drawn with none),
    /// whether it is drawn, and the block of its request (0: none yet).
    function drawOf(uint64 round) external view returns (address aggregator, bool drawn, uint64 requested) {
        Draw storage d = _draws[round];
        return (d.aggregator, d.drawn, d.requested);
    }

    /// @notice Whether `node` is on the roster.
    function enlisted(address node) external view returns (bool) {
        return _slotOf[node] != 0;
    }

    /// @notice The enlisted nodes, by slot (zero: an empty slot).
    function roster() external view returns (address[] memory nodes) {
        nodes = new address[](_roster.length);
        for (uint256 i; i < nodes.length; ++i) {
            nodes[i] = _roster[i].node;
        }
    }
}
