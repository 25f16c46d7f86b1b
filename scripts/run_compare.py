"""Sets two experiment runs side by side, configuration by configuration: the cumulative
reward (and, when both runs have it, the held-out greedy pass@1 at the end) as the mean and 95%
t interval over seeds in each, the difference B - A with a 95% Welch
interval (the runs are independent: their seeds draw other questions), and each run's gain
against its own I/0 baseline, paired by seed. Made to say how closely the in-process swarm
agrees with the devnet on a setting run both ways (issue 24).

Usage: python -m scripts.run_compare A_DIR B_DIR [--names A B] (each an output directory of
       `sapo experiment`, with its summary.json)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from client.experiment.report import ci95, diff_ci95
from scripts import arguments
from scripts.table import Table


def load(directory: Path) -> dict:
    path = directory / "summary.json"
    if not path.is_file():
        sys.exit(f"{path}: no summary.json; run `sapo experiment report` on that directory first")
    return json.loads(path.read_text())


def interval(ci: tuple[float, float] | None, digits: int = 2) -> str:
    return "-" if ci is None else f"{ci[0]:+.{digits}f} ± {ci[1]:.{digits}f}"


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--names", nargs=2, default=None, metavar=("A", "B"))
    args = parser.parse_args()
    runs = [load(args.a), load(args.b)]
    names = args.names or [r["experiment"]["name"] for r in runs]
    scale = [
        {k: r["experiment"].get(k) for k in ("nodes", "rounds", "questions", "completions")}
        for r in runs
    ]
    if scale[0] != scale[1]:
        sys.exit(f"the runs differ in scale ({scale[0]} vs {scale[1]}): not comparable")
    shared = [k for k in runs[0]["configurations"] if k in runs[1]["configurations"]]
    if not shared:
        sys.exit("the runs have no configuration in common")
    print(
        f"A = {names[0]}, B = {names[1]}: mean ± 95% t half-width (n seeds); B - A with a 95% "
        "Welch interval; gain vs I/0 paired by seed within each run"
    )
    table(runs, names, shared, "cumulative reward", "cumulative", "paired_vs_baseline", 2)
    if all(
        runs[i]["configurations"][k]["seeds"]
        and all("held_out_pass1_end" in v for v in runs[i]["configurations"][k]["seeds"].values())
        for i in (0, 1)
        for k in shared
    ):
        table(
            runs,
            names,
            shared,
            "held-out greedy pass@1 at the end",
            "held_out_pass1_end",
            "held_out_paired_vs_baseline",
            3,
        )


def table(
    runs: list[dict], names: list[str], shared: list[str], title: str, key: str, paired: str, d: int
) -> None:
    """One metric's side-by-side table: per configuration, each run's mean over seeds of the
    per-seed number `key`, B - A, and each run's gain against its I/0 split (`paired`)."""
    gain_columns = [f"{n}: Δ vs I/0" for n in names]
    numbers = [*names, "B - A", "B - A, % of A", *gain_columns]
    out = Table("configuration", *numbers, right=numbers)  # cells: intervals, "-" where none
    for name in shared:
        cells = [r["configurations"][name] for r in runs]
        values = [[s[key] for s in c["seeds"].values()] for c in cells]
        shown = []
        for v in values:
            ci = ci95(v)
            shown.append(
                f"{v[0]:.{d}f} (1)" if ci is None else f"{ci[0]:.{d}f} ± {ci[1]:.{d}f} ({len(v)})"
            )
        diff = diff_ci95(values[0], values[1])
        base = sum(values[0]) / len(values[0])
        rel = (
            "-"
            if diff is None or not base
            else interval((100 * diff[0] / base, 100 * diff[1] / base), 1)
        )
        # each run's gain against its own I/0 baseline, seed by seed (the report's pairing)
        gains = [
            interval(ci95(list(c[paired]["per_seed"].values())), d)
            if int(c["external"]) and c.get(paired)
            else "-"
            for c in cells
        ]
        out.row(name, *shown, interval(diff, d), rel, *gains)
    out.print(title)


if __name__ == "__main__":
    main()
