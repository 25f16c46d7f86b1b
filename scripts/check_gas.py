"""The ledger's gas snapshot: the gas of submit, attest, settle and claim (contracts/test/forge/
LedgerGas.t.sol, one ledger call per test), committed in contracts/gas/LedgerGasTest.json.

  python -m scripts.check_gas          measure and write the snapshot (commit it with the change)
  python -m scripts.check_gas --check  measure into a temporary folder and compare with the
                                       committed snapshot; exit 1 when a call costs more than
                                       --tolerance percent (default 5) above it, or a call is
                                       missing from either side

Gas is deterministic for a given source and compiler, so a change that moves it must carry the
updated snapshot; the tolerance only spares changes too small to be worth a snapshot update.
Usage: python -m scripts.check_gas [--check] [--tolerance PCT] [--root DIR]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from scripts import arguments
from scripts.table import Table
from tests.harness.foundry import run_forge

ROOT = Path(__file__).resolve().parents[1]

SNAPSHOT = Path("contracts/gas/LedgerGasTest.json")


def measure(root: Path, into: Path) -> dict[str, int]:
    """Runs the gas tests with forge writing its snapshot files into `into`; returns name -> gas."""
    done = run_forge(
        ["test", "--match-contract", "^LedgerGasTest$"],
        root=root,
        env={"FOUNDRY_SNAPSHOTS": str(into)},
    )
    if done.returncode != 0:
        raise SystemExit(
            f"gas-ledger: the gas tests failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
        )
    path = into / SNAPSHOT.name
    if not path.exists():
        raise SystemExit(f"gas-ledger: forge wrote no {SNAPSHOT.name} into {into}")
    return {name: int(gas) for name, gas in json.loads(path.read_text()).items()}


def main() -> int:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--check", action="store_true", help="compare with the committed snapshot")
    parser.add_argument(
        "--tolerance", type=float, default=5.0, help="percent of growth allowed (default 5)"
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the forge project (default: this checkout)"
    )
    args = parser.parse_args()
    if not 0 <= args.tolerance < 100:
        parser.error(f"--tolerance must be a percentage in [0, 100) (got {args.tolerance})")
    root = args.root.resolve()
    committed_path = root / SNAPSHOT
    if not args.check:
        committed_path.parent.mkdir(parents=True, exist_ok=True)
        now = measure(root, committed_path.parent)
        for name, gas in now.items():
            print(f"{name:32} {gas:>9,}")
        print(f"gas-ledger: wrote {SNAPSHOT}")
        return 0
    if not committed_path.exists():
        print(
            f"gas-ledger: no committed snapshot at {SNAPSHOT}; "
            "run python -m scripts.check_gas and commit it",
            file=sys.stderr,
        )
        return 1
    committed = {name: int(gas) for name, gas in json.loads(committed_path.read_text()).items()}
    with tempfile.TemporaryDirectory(prefix="sapo-gas-") as tmp:
        now = measure(root, Path(tmp))
    problems = []
    # "–" where a side lacks the call; the change as "+1.25%", or "new" / "gone"
    table = Table("call", "snapshot", "now", "change", right=("change",))
    for name in sorted(set(committed) | set(now)):
        before, after = committed.get(name), now.get(name)
        if before is None or after is None:
            where = (
                f"is measured but not in {SNAPSHOT}"
                if before is None
                else f"is in {SNAPSHOT} but no longer measured"
            )
            problems.append(f"{name} {where}; run python -m scripts.check_gas and commit it")
            table.row(name, before, after, "new" if before is None else "gone")
            continue
        change = 100.0 * (after - before) / before
        table.row(name, before, after, f"{change:+.2f}%")
        if change > args.tolerance:
            problems.append(
                f"{name} costs {after:,} gas, {change:+.1f}% over the snapshot's {before:,} "
                f"(tolerance {args.tolerance:g}%): make it cheaper, "
                "or run python -m scripts.check_gas "
                "and commit the snapshot"
            )
    print(table.render())
    for problem in problems:
        print(f"gas-ledger: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
