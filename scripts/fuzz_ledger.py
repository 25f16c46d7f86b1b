"""Runs the forge suites (contracts/test/forge: the ledger's stateful invariant campaigns, rule and
gas tests, and the round book's campaign, RoundBookInvariantsTest) and prints what they found:
each test's result and campaign size (runs x depth), how many calls of each handler action the
contracts accepted, and how often the runs reached the paths where the rules bite (the ledger's
disputes, credit moves, slashes, claims of disputed rounds, withdrawals after submitting; the
book's proven lies, answered challenges, claims with a tail or a short pool).

Exits 1 when a test fails (printing the rule it broke and forge's shrunk call sequence), when an
action was never accepted in any campaign of a suite, or when no suite reached a hard path: a
campaign that never takes a path tests nothing about it.

Usage: python -m scripts.fuzz_ledger [--runs N] [--depth N] [--match-contract REGEX]
       [--match-test REGEX]
(defaults: foundry.toml's [invariant] runs and depth)
"""

from __future__ import annotations

import sys
import time

from scripts import arguments
from tests.harness.foundry import ForgeError, problems, report, run_suites


def main() -> int:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--runs", type=int, help="invariant runs per campaign (foundry.toml: 64)")
    parser.add_argument("--depth", type=int, help="calls per run (foundry.toml: 200)")
    parser.add_argument("--match-contract", help="only suites whose name matches")
    parser.add_argument("--match-test", help="only tests whose name matches")
    args = parser.parse_args()
    for name in ("runs", "depth"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be at least 1 (got {value})")
    started = time.monotonic()
    try:
        run = run_suites(
            match_contract=args.match_contract,
            match_test=args.match_test,
            runs=args.runs,
            depth=args.depth,
        )
    except ForgeError as exc:
        print(f"fuzz-ledger: {exc}", file=sys.stderr)
        return 2
    print(report(run))
    found = problems(run)
    print(f"\n{len(run.results)} tests in {time.monotonic() - started:.0f} s")
    for problem in found:
        print(f"fuzz-ledger: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
