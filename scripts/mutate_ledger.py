"""Shows that the ledger's invariant suites can fail: writes each seeded fault into its own copy of
the ledger's sources (contracts/mutants/<fault>/: SwarmLedger.sol, ISwarmLedger.sol, ledger/ and
lib/, in a throwaway project), compiles them with the suites in one build, runs the forge
invariant campaigns and the directed rule tests against each mutant in turn (Cheats.sol's
deployLedger deploys the artifact SAPO_LEDGER_ARTIFACT names), and prints which invariant caught
it (and the shrunk call sequence's length). The unmutated ledger runs first and must pass
(unless --no-baseline). Exits 1 when a fault survives or the baseline fails.

Built once for all: the suites, which cost most of a via-IR compile, are compiled once, and each
mutant adds only its ledger's compile (in batches: see BUILD_BATCH).

Each fault is a one-line change a tired author could make, written against the ledger's source
text, wherever it is among the ledger's files; a fault whose text does not occur exactly once in
them is an error (the table would lie otherwise). --list names the file each fault edits.

Usage: python -m scripts.mutate_ledger [--only NAME[,NAME...]] [--list] [--runs N] [--depth N]
                            [--shrink-runs N] [--jobs N]
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scripts import arguments
from scripts.table import Table
from tests.harness.foundry import ForgeError, make_copy, run_forge, run_suites

ROOT = Path(__file__).resolve().parents[1]

# name -> (what the fault does, source text, replacement)
FAULTS: dict[str, tuple[str, str, str]] = {
    "empty-appeal-clears-dispute": (
        "an appeal whose committee reached no verdict clears the first committee's dispute (an "
        "appeal nobody votes on escapes the slash)",
        "        return t.wins(quorum) || t.disputes();\n    }",
        "        return true;\n    }",
    ),
    "claim-not-marked-paid": (
        "claim forgets to mark a round paid (a node can claim it again)",
        "            s.flags |= PAID;\n            if (s.flags & SETTLED == 0)",
        "            if (s.flags & SETTLED == 0)",
    ),
    "disputed-batch-credited": (
        "a submission its checkers outweighed still gets its pro-rata share",
        "if (s.signal == 0 || !_credited(s)) return 0;",
        "if (s.signal == 0 || (s.flags & APPEALED != 0 ? s.appealVotes : s.votes).count(0) "
        "< quorum) return 0;",
    ),
    "unbonding-released-early": (
        "withdraw frees unbonding stake one round before its clock has run",
        "if (block.timestamp < n.unbondingEnd) revert StillUnbonding",
        "if (block.timestamp + roundLength < n.unbondingEnd) revert StillUnbonding",
    ),
    "tolerance-comparison-misordered": (
        "the score's agreement tolerance compares with < where the rule says <= (the edge "
        "disputes)",
        "_gap(score, s.score) * BPS <= maxScore * agreeToleranceBps;",
        "_gap(score, s.score) * BPS < maxScore * agreeToleranceBps;",
    ),
    "signal-within-tolerance": (
        "the signal agrees within the score's tolerance (the padder: a claim above what checkers "
        "recomputed is credited at its claim)",
        "bool agrees = signal == s.signal && ",
        "bool agrees = _gap(signal, s.signal) * BPS <= maxScore * agreeToleranceBps && ",
    ),
    "round-window-skipped": (
        "submit checks only that the round is not in the future (any past round is taken)",
        "return round <= current && current - round <= submitRounds;",
        "return round <= current;",
    ),
    "slash-wrong-amount": (
        "a slash (a settlement's or a losing vote's) takes a share of the active stake only, "
        "sparing what is unbonding",
        "slashed = ((active + unbonding) * bps) / BPS;",
        "slashed = (active * bps) / BPS;",
    ),
    "credit-flip-ignored": (
        "attest never removes credit when disputing stake comes to outweigh agreeing stake",
        "if (credited != wasCredited) _moveCredit(round, node, s.signal, credited);",
        "if (credited && !wasCredited) _moveCredit(round, node, s.signal, credited);",
    ),
    "attest-after-window": (
        "votes on a batch not appealed are taken one round after the challenge window closed",
        "return current <= (appealed ? _finalAfter(round) : _close(round));",
        "return current <= (appealed ? _finalAfter(round) : _close(round) + 1);",
    ),
    "settle-before-final": (
        "a submission can be settled in the last round of its challenge window",
        "if (!_isFinal(round, current)) revert RoundNotFinal(round, current);"
        "\n        if (s.flags & SETTLED",
        "if (current < _finalAfter(round)) revert RoundNotFinal(round, current);"
        "\n        if (s.flags & SETTLED",
    ),
    "double-attestation": (
        "a checker's vote is not recorded as seen (it can vote twice, and is never judged)",
        "        _votes[voter][round][node] |= uint8(side << shift);\n",
        "",
    ),
    "unbonding-clock-not-restarted": (
        "a second unstake request keeps the first request's clock for all unbonding stake",
        "        n.unbondingEnd = end;\n",
        "        if (n.unbondingEnd == 0) n.unbondingEnd = end;\n        end = n.unbondingEnd;\n",
    ),
    "tie-goes-to-dispute": (
        "agreeing seats equal to disputing + unavailable seats remove credit (the rule: credited "
        "unless outweighed)",
        "seatsIn(t, 0) >= seatsIn(t, 1) + seatsIn(t, 2);",
        "seatsIn(t, 0) > seatsIn(t, 1) + seatsIn(t, 2);",
    ),
    "quorum-ignored": (
        "one agreeing checker is enough, whatever the quorum (the colluders' attack)",
        "return count(t, 0) >= quorum && seatsIn(t, 0)",
        "return count(t, 0) >= 1 && seatsIn(t, 0)",
    ),
    "unattested-batch-credited": (
        "a submission nobody checked is credited (dispute 0 <= agree 0: the free claim)",
        "return count(t, 0) >= quorum && seatsIn(t, 0)",
        "return (count(t, 0) >= quorum || t == 0) && seatsIn(t, 0)",
    ),
    "unavailable-votes-ignored": (
        "unavailable votes do not count against credit",
        "seatsIn(t, 0) >= seatsIn(t, 1) + seatsIn(t, 2);",
        "seatsIn(t, 0) >= seatsIn(t, 1);",
    ),
    "unavailable-slashes": (
        "unavailable votes count as disputes at settlement (the voter's network slashes the "
        "producer)",
        "(bool disputed, bool byAppeal) = _disputed(s);",
        "(bool disputed, bool byAppeal) = _disputed(s);\n"
        "        uint72 u = s.flags & APPEALED != 0 ? s.appealVotes : s.votes;\n"
        "        disputed = u.seatsIn(1) + u.seatsIn(2) > u.seatsIn(0);",
    ),
    "checkers-not-drawn": (
        "any staked node may vote, drawn or not (a producer's friends check its batches)",
        "if (seats == 0) revert NotDrawn(round, node, msg.sender)",
        "if (false) revert NotDrawn(round, node, msg.sender)",
    ),
    "vote-counts-once": (
        "an agreeing vote counts once whatever its seats (many small stakes outvote one large)",
        "return uint72(uint256(t) + (seats << (16 * i)) + ",
        "return uint72(uint256(t) + ((side == AGREE ? 1 : seats) << (16 * i)) + ",
    ),
    "draw-reads-live-stake": (
        "the draw reads the checker's stake now, not as of the submission (stake bought once "
        "the beacon is known draws seats)",
        "uint256 stake = _stakeHistory[checker].valueAt(snapshot);",
        "uint256 stake = _nodes[checker].active;",
    ),
    "draw-reads-live-total": (
        "the draw divides by its family's stake now (stake registered after a beacon un-draws "
        "the honest checkers already drawn)",
        "uint256 total = _familyHistory[family].valueAt(snapshot);",
        "uint256 total = _familyActive[family];",
    ),
    "checker-of-another-family-drawn": (
        "a node of another model family sits on a batch's committee (it cannot run the batch's "
        "model: it disputes or reports every honest batch it is drawn for)",
        "if (_nodes[checker].family != family) return 0;",
        "",
    ),
    "draw-divides-by-all-stake": (
        "seats are drawn at stake / all families' stake (another family's stake shrinks every "
        "committee: a small family's batches reach no quorum)",
        "uint256 total = _familyHistory[family].valueAt(snapshot);",
        "uint256 total = _totalHistory.valueAt(snapshot);",
    ),
    "family-stake-not-recorded": (
        "a family's stake history misses a change (its draws read stale stake)",
        "_familyHistory[family].record(_familyActive[family]);",
        "",
    ),
    "unknown-family-registers": (
        "a node registers in a family the ledger was not deployed with (a committee its opener "
        "owns)",
        "if (slot == 0) revert UnknownFamily(family);",
        "if (slot == 0) slot = 1;",
    ),
    "checkpoint-overwrites-history": (
        "a stake change overwrites the last checkpoint instead of adding one (older snapshots "
        "read newer stake)",
        "if (len != 0 && history[len - 1].fromBlock == block.number) {",
        "if (len != 0) {",
    ),
    "beacon-known-at-submission": (
        "the beacon is the hash of the submission's own block's parent, known before submitting "
        "(the appeal's stays the next block's)",
        "return from == 0 ? 0 : from + 1;",
        "return from == 0 ? 0 : (ofAppeal ? from + 1 : from - 1);",
    ),
    "lapsed-beacon-redrawn": (
        "a beacon nobody drew in 256 blocks is drawn from a recent block instead (the producer "
        "waits for a committee and openings it likes)",
        "beacon = SeatDraw.beaconFrom(blockhash(beaconBlock));",
        "beacon = SeatDraw.beaconFrom(blockhash(block.number > beaconBlock + BLOCKHASH_WINDOW "
        "? block.number - 1 : beaconBlock));",
    ),
    "withdraw-skips-settlement": (
        "withdraw pays out unbonding stake while the node's submissions are unsettled (a "
        "disputed node leaves before anyone slashes it)",
        "        if (n.backing != 0) revert UnsettledSubmissions(msg.sender, n.backing);\n",
        "",
    ),
    "backing-not-reset-on-unstake": (
        "an unstake request does not count the unsettled submissions its stake backed (a node "
        "submits, unstakes and withdraws before its batch is settled)",
        "        n.backing = n.unsettled; "
        "// every unsettled submission was made with this stake active\n",
        "",
    ),
    "escalate-by-anyone": (
        "anyone may escalate a batch (open a submission in a producer's name, with any committee)",
        "if (msg.sender != book || book == address(0)) revert NotTheBook",
        "if (book == address(0)) revert NotTheBook",
    ),
    "escalate-on-a-bookless-ledger": (
        "a ledger that names no round book takes an escalation from the zero address",
        "if (msg.sender != book || book == address(0)) revert NotTheBook",
        "if (msg.sender != book) revert NotTheBook",
    ),
    "escalate-without-seat": (
        "any node escalates a batch of the root lane, drawn on its committee or not",
        "        if (seats == 0) revert NotDrawn(round, node, checker);\n",
        "",
    ),
    "escalation-without-its-vote": (
        "an escalation does not record its checker's dispute (escalating an honest batch costs "
        "nothing: its committee must vote on the ledger for nothing)",
        "        _tally(s, round, node, checker, seats, 0, DISPUTE);\n",
        "",
    ),
    "escalation-that-agrees": (
        "a checker escalates with a vote that agrees (its committee brought on chain with no "
        "dispute to judge)",
        "            revert NotADispute(round, node, checker); "
        "// an agreeing checker signs off chain\n",
        "",
    ),
    "escalate-over-a-submission": (
        "an escalation overwrites the producer's submission of the round",
        "        if (s.rollouts != 0) revert AlreadySubmitted(round, node);\n"
        "        if (checker == node)",
        "        if (checker == node)",
    ),
    "escalated-batch-not-backing": (
        "an escalated batch of a producer that has asked its stake back does not hold the "
        "withdrawal (it signs in the root lane, unstakes, and leaves before it is slashed)",
        "        if (n.unstakes != 0) n.backing += 1;\n",
        "",
    ),
    "escalation-drawn-now": (
        "an escalated batch's committee is drawn from stakes as of the escalation, not the "
        "root's block (stake moved once the beacon is known changes the committee)",
        "        s.snapshotBlock = uint40(snapshotBlock);\n",
        "        s.snapshotBlock = uint40(block.number);\n",
    ),
    "claim-skips-settlement": (
        "claim pays a round without settling it (its submission stays unsettled)",
        "            if (s.flags & SETTLED == 0) _settle(s, round, msg.sender);\n",
        "",
    ),
    "paid-by-score": (
        "the round's reward is split by claimed score instead of learning signal",
        "return (rewardPerRound * s.signal) / (_rounds[round].totalCredited + other);",
        "return (rewardPerRound * s.score) / (_rounds[round].totalCredited + other);",
    ),
    "signal-not-checked": (
        "a checker agrees when the score matches, whatever signal the producer claimed",
        "bool agrees = signal == s.signal && ",
        "bool agrees = ",
    ),
    "settle-votes-slashes-winners": (
        "settleVotes slashes the side of the final verdict instead of the side that lost it (the "
        "honest checkers of a credited batch pay)",
        "uint256 losing = credited ? DISPUTE : isDisputed ? AGREE : 0;",
        "uint256 losing = credited ? AGREE : isDisputed ? DISPUTE : 0;",
    ),
    "lost-appeal-slashed-once": (
        "a lost appeal is slashed slashBps like any disputed batch (appealing is a free second "
        "draw for a bad batch)",
        "uint256 bps = byAppeal && s.flags & VOTER_APPEAL == 0 ? 2 * uint256(slashBps) : slashBps;",
        "uint256 bps = slashBps;",
    ),
    "appeal-drawn-with-checkers": (
        "appellate votes are drawn with `checkers` trials instead of `appealCheckers` (the "
        "appeal's committee is no larger than the one it reviews)",
        "seats = _seats(beacon, round, node, msg.sender, s.snapshotBlock, "
        "appealed ? appealCheckers : checkers);",
        "seats = _seats(beacon, round, node, msg.sender, s.snapshotBlock, checkers);",
    ),
    "appeal-drawn-from-first-beacon": (
        "the appeal's committee is drawn from the first beacon (the same draw again, not a fresh "
        "one)",
        "uint256 beacon = _drawBeacon(s, round, node, appealed);",
        "uint256 beacon = _drawBeacon(s, round, node, false);",
    ),
    "appeal-seats-from-appeal-block": (
        "appellate votes read stake as of the appeal's block, not the submission's (stake bought "
        "once a batch is disputed buys appeal seats)",
        "seats = _seats(beacon, round, node, msg.sender, s.snapshotBlock, "
        "appealed ? appealCheckers : checkers);",
        "seats = _seats(beacon, round, node, msg.sender, "
        "appealed ? s.appealBlock : s.snapshotBlock, appealed ? appealCheckers : checkers);",
    ),
    "appeal-of-credited-batch": (
        "a producer may appeal a credited batch (its credit is replaced by an empty appeal's)",
        "        if (_credited(s)) revert AlreadyCredited(round, msg.sender);\n",
        "",
    ),
    "appeal-in-challenge-window": (
        "an appeal is taken in the challenge window's last round (the first committee is cut "
        "short)",
        "if (!_appealOpen(round, current)) revert NotAppealable(round, current);"
        "\n        if (s.appealBlock != 0) revert AlreadyAppealed(round, msg.sender);",
        "if (current < _close(round) || current >= _finalAfter(round)) revert NotAppealable(round, "
        "current);\n        if (s.appealBlock != 0) revert AlreadyAppealed(round, msg.sender);",
    ),
    "appeal-votes-in-first-tally": (
        "appellate votes are added to the first committee's tally (the appeal's own tally stays "
        "empty: no appeal is ever won)",
        "else s.appealVotes = s.appealVotes.add(seats, side, round, node);",
        "else s.votes = s.votes.add(seats, side, round, node);",
    ),
    "settle-votes-no-window-end": (
        "settleVotes has no end (a vote is judged after the stake that cast it may have left)",
        "        if (current > fin + challengeRounds) "
        "revert SettlementWindowClosed(round, current);\n",
        "",
    ),
    "settle-votes-before-final": (
        "votes are judged in the last appeal round, before the verdict is final",
        "if (current <= fin) revert RoundNotFinal(round, current);",
        "if (current < fin) revert RoundNotFinal(round, current);",
    ),
    "vote-judged-twice": (
        "settleVotes does not skip a vote it judged already (a loser listed again is slashed "
        "again)",
        "if (record == 0 || record & VOTE_SETTLED != 0) continue;",
        "if (record == 0) continue;",
    ),
    "unavailable-vote-loses": (
        "an unavailable vote loses with the losing side (the side tested as a bit mask: the "
        "voter's network slashes the voter)",
        "bool lost = losing != 0 && (record & 3 == losing || second == losing);",
        "bool lost = losing != 0 && (record & losing != 0 || second & losing != 0);",
    ),
    "settler-paid-for-own-slash": (
        "a producer that settles its own disputed batch is paid the settler's cut of its own slash",
        "if (msg.sender != node) _paySettler(msg.sender, round, node, slashed);",
        "_paySettler(msg.sender, round, node, slashed);",
    ),
    "equivocation-slashed-by-anyone": (
        "anyone may slash a node for an equivocation (no book judged it)",
        "        if (msg.sender != book) revert NotTheBook(msg.sender, book);\n",
        "",
    ),
    "equivocation-cut-to-the-book": (
        "an equivocation's settler cut goes to the book that called, not to its prover",
        "_paySettler(prover, round, node, slashed);",
        "_paySettler(msg.sender, round, node, slashed);",
    ),
    "settler-paid-for-own-vote": (
        "a voter that has its own losing vote judged is paid the settler's cut of its own slash",
        "if (voter != msg.sender) cutFrom += slashed;",
        "cutFrom += slashed;",
    ),
    "settler-cut-not-from-pool": (
        "the settler's cut is paid without leaving the pool (the pool pays it twice)",
        "        rewardPool -= cut;\n",
        "",
    ),
    "undecided-appeal-votes-judged": (
        "an appeal that reached no verdict has its votes judged anyway (an honest checker that "
        "agreed on an appeal too few others voted on loses slashBps to the first dispute)",
        "uint8 second = appealDecided ? (record >> 2) & 3 : 0;",
        "uint8 second = (record >> 2) & 3;",
    ),
    "winning-vote-appeals": (
        "any voter may appeal a verdict, not only one it judges lost (the side that won gets a "
        "second draw against the batch it agreed with or disputed)",
        "if (!losing) revert VoteNotLosing(round, node, msg.sender);",
        "if (side == 0) revert VoteNotLosing(round, node, msg.sender);",
    ),
    "voter-appeal-slashes-producer-twice": (
        "a batch disputed on a voter's appeal slashes its producer twice slashBps, as if the "
        "producer had asked for the second draw",
        "uint256 bps = byAppeal && s.flags & VOTER_APPEAL == 0 ? 2 * uint256(slashBps) : slashBps;",
        "uint256 bps = byAppeal ? 2 * uint256(slashBps) : slashBps;",
    ),
    "lost-voter-appeal-slashed-once": (
        "a voter whose appeal lost pays slashBps like any losing vote (appealing costs the side "
        "that lost nothing, a free second draw)",
        "uint256 bps = appealDecided && record & VOTE_APPELLANT != 0 ? 2 * uint256(slashBps) : "
        "slashBps;",
        "uint256 bps = slashBps;",
    ),
    "undecided-voter-appeal-slashed-twice": (
        "a voter whose appeal reached no verdict pays twice slashBps (its committee never ruled "
        "against it: allies voting unavailable on the appeal would double an honest appellant's "
        "loss)",
        "uint256 bps = appealDecided && record & VOTE_APPELLANT != 0 ? 2 * uint256(slashBps) : "
        "slashBps;",
        "uint256 bps = record & VOTE_APPELLANT != 0 ? 2 * uint256(slashBps) : slashBps;",
    ),
    "signal-bounded-by-score": (
        "a claim's signal is bounded by rollouts x SCORE_SCALE, twice what a batch's groups can "
        "carry (a free claim a cartel carries is worth twice the most a real batch earns)",
        "if (signal > maxScore / 2) revert SignalOutOfRange(signal, maxScore / 2);\n\n",
        "if (signal > maxScore) revert SignalOutOfRange(signal, maxScore);\n\n",
    ),
}


# the gas tests and the reentrancy attacker say nothing about these faults: not compiled for them
SKIP = ("LedgerGas.t.sol", "ReentrantNode.sol")


MUTANTS = Path("contracts") / "mutants"
BUILD_BATCH = 12


IMPORT = re.compile(r'^import\s+[^;]*?"([^"]+)"\s*;', re.MULTILINE)


def ledger_sources(project: Path) -> list[Path]:
    """The ledger's sources, relative to contracts/: SwarmLedger.sol and what it imports,
    transitively (not the other contracts beside it, such as the root lane's RoundBook): what a
    mutant copies, and what a fault's text is sought in."""
    contracts = project / "contracts"
    found: set[Path] = set()
    todo = [contracts / "SwarmLedger.sol"]
    while todo:
        path = todo.pop().resolve()
        rel = path.relative_to(contracts.resolve())
        if rel in found:
            continue
        found.add(rel)
        todo += [path.parent / name for name in IMPORT.findall(path.read_text())]
    return sorted(found)


def fault_file(project: Path, name: str, source: str) -> Path:
    """The ledger source (relative to contracts/) holding fault `name`'s text, which must occur
    exactly once among all of them."""
    counts = {
        rel: (project / "contracts" / rel).read_text().count(source)
        for rel in ledger_sources(project)
    }
    found = {rel: n for rel, n in counts.items() if n}
    if sum(found.values()) != 1:
        where = ", ".join(f"{n} in {rel}" for rel, n in found.items()) or "none"
        raise SystemExit(
            f"mutate-ledger: fault {name}'s source text occurs {sum(found.values())} times in the "
            f"ledger's sources ({where}), not once:\n{source}"
        )
    return next(iter(found))


def write_mutant(project: Path, name: str, source: str, replacement: str) -> str:
    """Writes the ledger with one fault as contracts/mutants/<name>/ (a copy of every ledger
    source, the faulty one edited); returns its artifact."""
    faulty = fault_file(project, name, source)
    into = project / MUTANTS / name
    for rel in ledger_sources(project):
        text = (project / "contracts" / rel).read_text()
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        (into / rel).write_text(text.replace(source, replacement) if rel == faulty else text)
    return f"{MUTANTS / name / 'SwarmLedger.sol'}:SwarmLedger"


def main() -> int:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--only", help="comma-separated fault names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the faults and exit")
    parser.add_argument(
        "--runs", type=int, help="invariant runs per campaign (foundry.toml's by default)"
    )
    parser.add_argument("--depth", type=int, help="calls per run (foundry.toml's by default)")
    parser.add_argument(
        "--shrink-runs",
        type=int,
        help="bound on forge's shrinking of a failing sequence (forge's 5000 by default; "
        "a caught fault is caught whatever its sequence's length)",
    )
    parser.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop a mutant's suites at its first failing test: enough to call it caught, and "
        "the table then names that test only",
    )
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the run on the unmutated ledger, where something else shows that it passes "
        "its suites (tests/chain/test_ledger_forge.py runs them in full first)",
    )
    args = parser.parse_args()
    if args.list:
        for name, (what, source, _) in FAULTS.items():
            print(f"{name}: {what} [{fault_file(ROOT, name, source)}]")
        return 0
    names = list(FAULTS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in FAULTS]
        if unknown:
            parser.error(f"unknown fault(s) {', '.join(unknown)}; see --list")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1 (got {args.jobs})")
    rows = []
    survived = []
    with tempfile.TemporaryDirectory(prefix="sapo-mutants-") as tmp:
        project = make_copy(Path(tmp) / "ledger", skip=SKIP)
        started = time.monotonic()
        artifacts = {}
        # BUILD_BATCH mutants a compile: forge hands solcjs every source not in its cache at once,
        # and all the mutants' copies of the ledger's modules in one compile exhaust its wasm
        # memory; the suites are compiled with the first batch, each later one adds its mutants
        for first in range(0, len(names), BUILD_BATCH):
            batch = names[first : first + BUILD_BATCH]
            artifacts |= {name: write_mutant(project, name, *FAULTS[name][1:]) for name in batch}
            built = run_forge(["build"], root=project)
            if built.returncode != 0:
                print(
                    f"mutate-ledger: the build failed:\n{built.stderr or built.stdout}",
                    file=sys.stderr,
                )
                return 2
        print(
            f"built the suites, the ledger and {len(names)} mutants in "
            f"{-(-len(names) // BUILD_BATCH)} compiles ({time.monotonic() - started:.0f} s)",
            flush=True,
        )

        def campaign(name: str):
            started = time.monotonic()
            # the campaigns, and the directed tests of the credit rule's edges (a tie, a quorum
            # reached exactly), which random sequences reach too rarely to catch a fault in
            run = run_suites(
                root=project,
                match_contract="LedgerInvariants|LedgerRules",
                runs=args.runs,
                depth=args.depth,
                ledger_artifact=artifacts.get(name),
                shrink_runs=args.shrink_runs,
                fail_fast=args.fail_fast,
            )
            return run, time.monotonic() - started

        if not args.no_baseline:
            try:
                baseline, seconds = campaign("(none)")
            except ForgeError as exc:
                print(f"mutate-ledger: the unmutated ledger: {exc}", file=sys.stderr)
                return 2
            if baseline.failed:
                print("mutate-ledger: the unmutated ledger fails its own suites:", file=sys.stderr)
                for r in baseline.failed:
                    print(f"  {r.suite}.{r.name}: {r.reason}", file=sys.stderr)
                return 1
            print(
                f"baseline: {len(baseline.results)} invariant campaigns pass ({seconds:.0f} s)\n",
                flush=True,
            )
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {name: pool.submit(campaign, name) for name in names}
            for name in names:
                try:
                    run, seconds = futures[name].result()
                except ForgeError as exc:
                    print(f"mutate-ledger: {name}: {exc}", file=sys.stderr)
                    return 2
                failed = run.failed
                caught_by = sorted({r.name.removeprefix("invariant_") for r in failed})
                shortest = min((len(r.sequence) for r in failed if r.sequence), default=0)
                first = min(failed, key=lambda r: len(r.sequence) or 1 << 30) if failed else None
                if not failed:
                    survived.append(name)
                result = "caught" if failed else "SURVIVED"
                rows.append(
                    (
                        name,
                        result,
                        ", ".join(caught_by) or "-",
                        shortest,
                        first.reason if first else "",
                    )
                )
                print(f"{name}: {result} ({seconds:.0f} s)", flush=True)
    table = Table(
        *("fault", "result", "invariants that failed", "shortest sequence", "first reason"),
        right=("shortest sequence",),
    )
    for name, result, caught_by, shortest, reason in rows:
        table.row(name, result, caught_by, f"{shortest:,} calls", reason[:110])
    table.print()
    print(f"\n{len(rows) - len(survived)} of {len(rows)} seeded faults caught")
    for name in survived:
        print(f"mutate-ledger: {name} survived: {FAULTS[name][0]}", file=sys.stderr)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
