"""Runs the contracts' forge suites (the ledger's, and the round book's campaign) and reads what
they found: test results, the campaign's calls per handler action (calls forge made, reverts =
calls the contracts refused as the model expected, or an action with nothing to do), the hard
paths each run reached, and the shrunk sequence of a failing invariant.

Shared by scripts/fuzz_ledger.py (the report), scripts/mutate_ledger.py (runs it on seeded faults),
scripts/check_gas.py and the pytest wrappers in tests/chain/test_ledger_forge.py.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATHS_FILE = Path(".forge/metrics/paths.jsonl")

# Paths of the ledger's rules the campaigns must reach (LedgerHandler's _pathNames): a handler
# that never reaches one tests nothing about it. Each must be reached by at least one suite: some
# are rare in one parameter corner (a tie, or credit regained after a loss, needs equal stake
# sums after a quorum of 2) and common in the other; LedgerRulesTest covers those edges directly.
HARD_PATHS = (
    "disputedAttestations",
    "creditLost",
    "creditRegained",
    "slashes",
    "slashesIntoUnbonding",
    "zeroShareClaims",
    "fullUnstakes",
    "withdrawalsAfterSubmitting",
    "ties",
    "quorumReached",
    "unavailableVotes",
    "unavailableNotSlashed",
    "finalWithoutQuorum",
    "beaconsLapsed",
    "claimsSettling",
    "appeals",
    "appealsLapsed",
    "appealVotes",
    "secondVotes",
    "appealsOverturned",
    "lostAppealsSlashedTwice",
    "losingVotesSlashed",
    "unavailableVotesSpared",
    "votesJudgedOnce",
    "voteSettlementsClosed",
    "settlersPaid",
    "voterAppeals",
    "lostVoterAppealsSlashedTwice",
)

# The round book's campaign (BookHandler's _pathNames): each lie proven (or, withheld data and a
# missing verdict root, voided), a lie left unproven past its window (it stands), the answers,
# the claims with a tail and with settled earnings, a claim the pool cannot pay, a credit whose
# earnings have an anchor, a draw with nobody, roster bonds taken back, a challenge of a void root.
BOOK_SUITE = "RoundBookInvariantsTest"
BOOK_PATHS = (
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
    "lateEscalationsRefused",
)


def paths_of(suite: str) -> tuple[str, ...]:
    """The hard paths a suite's campaigns report."""
    return BOOK_PATHS if suite == BOOK_SUITE else HARD_PATHS


class ForgeError(RuntimeError):
    """forge could not run or compile the suites (not a failing test)."""


@dataclass
class TestResult:
    suite: str
    name: str
    passed: bool
    reason: str
    runs: int = 0
    calls: int = 0
    depth: int = 0
    actions: dict[str, tuple[int, int]] = field(default_factory=dict)  # action -> (calls, reverts)
    sequence: list[str] = field(default_factory=list)  # the shrunk failing call sequence


@dataclass
class ForgeRun:
    results: list[TestResult]
    paths: dict[str, Counter]  # suite -> hard path -> count over the campaign
    output: str

    @property
    def failed(self) -> list[TestResult]:
        return [r for r in self.results if not r.passed]


def forge_binary(root: Path = ROOT) -> Path:
    from client.devnet import find_foundry_tool

    return find_foundry_tool("forge", root)


def run_forge(
    args: list[str],
    root: Path = ROOT,
    env: dict[str, str] | None = None,
    timeout_s: float = 900,
) -> subprocess.CompletedProcess:
    """Runs `forge <args>` in `root` (its foundry.toml: offline, the solcjs shim)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [str(forge_binary(ROOT)), *args],
        cwd=root,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def make_copy(into: Path, skip: tuple[str, ...] = ()) -> Path:
    """A throwaway forge project holding what the suites need: the contracts, foundry.toml, the
    solc shim (which loads solcjs from the real node_modules through a link). For seeded faults
    and inflated gas, which must never touch the working tree; `skip` names files left out."""
    shutil.copytree(
        ROOT / "contracts", into / "contracts", ignore=shutil.ignore_patterns("artifacts", *skip)
    )
    shutil.copy2(ROOT / "foundry.toml", into / "foundry.toml")
    # this checkout's build, when there is one: forge then compiles only what differs (a mutant,
    # an inflated ledger), since its cache knows each source by its content
    for built in ("cache", "out"):
        if (ROOT / ".forge" / built).is_dir():
            shutil.copytree(ROOT / ".forge" / built, into / ".forge" / built)
    (into / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "solc", into / "scripts" / "solc")
    (into / "node_modules").symlink_to(ROOT / "node_modules")
    return into


def _describe_call(call: dict) -> str:
    target = call.get("contract_name") or call.get("address", "?")
    signature = call.get("signature") or call.get("func_name") or "?"
    args = call.get("args", "")
    name = target.rsplit(":", 1)[-1]
    return f"{name}.{signature.split('(')[0]}({args})"


def run_suites(
    root: Path = ROOT,
    match_contract: str | None = None,
    match_test: str | None = None,
    runs: int | None = None,
    depth: int | None = None,
    ledger_artifact: str | None = None,
    shrink_runs: int | None = None,
    fail_fast: bool = False,
    book_artifact: str | None = None,
) -> ForgeRun:
    """Runs `forge test --json` and parses it; raises ForgeError when forge itself failed.
    `ledger_artifact` ("path.sol:SwarmLedger") is the ledger the suites deploy instead of
    contracts/SwarmLedger.sol's (Cheats.sol's deployLedger; scripts/mutate_ledger.py's mutants);
    `book_artifact` (a JSON artifact's path) is the round book the book's campaign deploys
    instead of contracts/artifacts/RoundBook.json (scripts/mutate_roundbook.py's mutants);
    `shrink_runs` bounds forge's shrinking of a failing sequence (foundry.toml's by default);
    `fail_fast` stops at the first failing test (the others are then not reported)."""
    paths_file = root / PATHS_FILE
    paths_file.parent.mkdir(parents=True, exist_ok=True)
    paths_file.unlink(missing_ok=True)
    args = ["test", "--json"]
    if match_contract:
        args += ["--match-contract", match_contract]
    if match_test:
        args += ["--match-test", match_test]
    if fail_fast:
        args.append("--fail-fast")
    # the gas tests' snapshot goes to a throwaway folder: only scripts/check_gas.py writes the
    # committed one, so that running the suites never rewrites it behind the gas check's back
    scratch = Path(tempfile.mkdtemp(prefix="sapo-forge-snapshots-"))
    env = {"FOUNDRY_SNAPSHOTS": str(scratch)}
    if runs is not None:
        env["FOUNDRY_INVARIANT_RUNS"] = str(runs)
    if depth is not None:
        env["FOUNDRY_INVARIANT_DEPTH"] = str(depth)
    if shrink_runs is not None:
        env["FOUNDRY_INVARIANT_SHRINK_RUN_LIMIT"] = str(shrink_runs)
    if ledger_artifact is not None:
        env["SAPO_LEDGER_ARTIFACT"] = ledger_artifact
    if book_artifact is not None:
        env["SAPO_ROUNDBOOK_ARTIFACT"] = book_artifact
    if ledger_artifact is not None or book_artifact is not None:
        # forge replays a persisted failing sequence first on the next run: one mutant's failures
        # must not be replayed against another's
        env["FOUNDRY_INVARIANT_FAILURE_PERSIST_DIR"] = str(scratch / "invariant-failures")
    try:
        done = run_forge(args, root=root, env=env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text = done.stdout.strip()
    start = text.find("{")
    try:
        data = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise ForgeError(
            f"forge test did not report results (exit {done.returncode}):\n"
            f"{done.stderr or done.stdout}"
        )
    results = []
    for suite_path, suite in data.items():
        suite_name = suite_path.rsplit(":", 1)[-1]
        for test_name, r in suite.get("test_results", {}).items():
            result = TestResult(
                suite=suite_name,
                name=test_name.split("(")[0],
                passed=r.get("status") == "Success",
                reason=name_errors(r.get("reason") or ""),
            )
            kind = r.get("kind") or {}
            inv = kind.get("Invariant")
            if inv:
                result.runs = inv.get("runs", 0)
                result.calls = inv.get("calls", 0)
                result.depth = result.calls // result.runs if result.runs else 0
                for selector, m in (inv.get("metrics") or {}).items():
                    action = selector.rsplit(".", 1)[-1]
                    result.actions[action] = (m.get("calls", 0), m.get("reverts", 0))
            counter = r.get("counterexample")
            if isinstance(counter, dict) and "Sequence" in counter:
                result.sequence = [_describe_call(c) for c in counter["Sequence"][1] or []]
            elif isinstance(counter, dict) and "Single" in counter:
                result.sequence = [_describe_call(counter["Single"])]
            results.append(result)
    paths: dict[str, Counter] = {}
    if paths_file.exists():
        for line in paths_file.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            paths.setdefault(row.pop("suite"), Counter()).update(row)
    return ForgeRun(results=results, paths=paths, output=done.stdout + done.stderr)


@functools.cache
def _error_names() -> dict[str, str]:
    """4-byte selector -> name of each custom error of the ledger and the round book (and
    Solidity's Panic/Error)."""
    from client.chain.artifacts import selectors

    names = {"0x4e487b71": "Panic(uint256)", "0x08c379a0": "Error(string)"}
    for contract in ("SwarmLedger", "RoundBook"):
        names |= {"0x" + k.hex(): v for k, v in selectors(contract, "error").items()}
    return names


def name_errors(reason: str) -> str:
    """Writes the ledger's error name beside each 4-byte selector the handler quoted."""
    names = _error_names()
    return re.sub(
        r"0x[0-9a-f]{8}\b",
        lambda m: f"{names[m.group(0)]} ({m.group(0)})" if m.group(0) in names else m.group(0),
        reason,
    )


def problems(run: ForgeRun) -> list[str]:
    """What makes a campaign not count: failing tests, an action the ledger never accepted in
    any campaign of a suite, a hard path no suite reached.

    An action is asked of the suite, not of each of its campaigns: forge's campaigns do not repeat
    call for call under one seed (two runs of one campaign, same seed and code, differed: 197 and
    214 of 768 submits refused), and a claim succeeds only once a credited round is final (0 to 6
    times in a campaign's 749 claims), so a campaign that met none was chance, not a handler that
    can no longer reach the action."""
    found = [f"{r.suite}.{r.name} failed: {r.reason}" for r in run.failed]
    totals: dict[str, dict[str, list[int]]] = {}
    for r in run.results:
        for action, (calls, reverts) in r.actions.items():
            seen = totals.setdefault(r.suite, {}).setdefault(action, [0, 0])
            seen[0] += calls
            seen[1] += calls - reverts
    for suite, actions in sorted(totals.items()):
        for action, (calls, accepted) in sorted(actions.items()):
            if accepted == 0:
                found.append(f"{suite}: action {action} never succeeded in {calls} calls")
    campaigns = sorted({r.suite for r in run.results if r.actions})
    for group in (HARD_PATHS, BOOK_PATHS):
        suites = [s for s in campaigns if paths_of(s) is group]
        for path in group:
            if suites and not any(run.paths.get(s, Counter())[path] for s in suites):
                found.append(f"no run of {', '.join(suites)} reached {path}")
    return found


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
        for i, h in enumerate(headers)
    ]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "| " + " | ".join("-" * w for w in widths) + " |",
    ]
    for row in rows:
        cells = [
            c.rjust(w) if re.fullmatch(r"[\d.,%x -]+", c) else c.ljust(w)
            for c, w in zip(row, widths, strict=True)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(run: ForgeRun) -> str:
    """The campaign as tables: tests, accepted calls per action per suite, hard paths reached."""
    parts = []
    rows = []
    for r in run.results:
        size = f"{r.runs} x {r.depth}" if r.runs else "-"
        rows.append([r.suite, r.name, "pass" if r.passed else "FAIL", size])
    parts.append(_table(["suite", "test", "result", "runs x depth"], rows))
    for suite in sorted({r.suite for r in run.results if r.actions}):
        totals: dict[str, list[int]] = {}
        campaigns = [r for r in run.results if r.suite == suite and r.actions]
        for r in campaigns:
            for action, (calls, reverts) in r.actions.items():
                t = totals.setdefault(action, [0, 0, calls - reverts])
                t[0] += calls
                t[1] += reverts
                t[2] = min(t[2], calls - reverts)
        rows = []
        for action, (calls, reverts, least) in sorted(totals.items()):
            ok = calls - reverts
            rows.append(
                [action, str(calls), str(ok), str(reverts), f"{100 * ok / calls:.0f}%", str(least)]
            )
        parts.append(
            f"{suite}: calls per handler action over its {len(campaigns)} campaigns "
            "(accepted: the contracts took the call; refused: they refused it as the model "
            "expected, or the action had nothing to do)\n"
            + _table(
                [
                    "action",
                    "calls",
                    "accepted",
                    "refused",
                    "accepted %",
                    "fewest accepted in a campaign",
                ],
                rows,
            )
        )
    for group in (HARD_PATHS, BOOK_PATHS):
        suites = sorted(s for s in run.paths if paths_of(s) is group)
        if suites:
            rows = [[path, *(str(run.paths[s][path]) for s in suites)] for path in group]
            table = _table(["path", *suites], rows)
            parts.append("hard paths reached (summed over runs)\n" + table)
    for r in run.failed:
        lines = [f"FAILED {r.suite}.{r.name}: {r.reason}"]
        if r.sequence:
            lines.append(f"  shrunk sequence ({len(r.sequence)} calls):")
            lines += [f"    {i + 1}. {call}" for i, call in enumerate(r.sequence)]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
