"""`curves.png`: one panel per variant of each split's local reward per node and round, and, when
the cells were evaluated, their held-out pass@1."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from client.experiment.config import ExperimentConfig
from client.experiment.report.table import split_label


def _rolling(values: list[float], window: int) -> list[float]:
    """Trailing mean over `window` values (fewer at the start)."""
    return [statistics.fmean(values[max(0, k - window + 1) : k + 1]) for k in range(len(values))]


def plot_curves(exp: ExperimentConfig, summary: dict[str, Any], path: Path) -> None:
    """One panel per variant: each split's mean local reward per node and round, as a trailing
    mean over a few rounds (mean over seeds: line; the seeds' range: band)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    window = max(1, exp.rounds // 8)
    variants = sorted({e["variant"] for e in summary["configurations"].values()})
    held = any("held_out_pass1_end_mean" in e for e in summary["configurations"].values())
    rows = 2 if held else 1
    fig, axes = plt.subplots(
        rows, len(variants), figsize=(6 * len(variants), 4 * rows), squeeze=False
    )
    for ax, variant in zip(axes[0], variants, strict=True):
        for e in summary["configurations"].values():
            if e["variant"] != variant:
                continue
            per_seed = [
                _rolling([y / exp.nodes for y in s["per_round"]], window)
                for s in e["seeds"].values()
            ]
            xs = range(1, len(per_seed[0]) + 1)
            mean = [statistics.fmean(c[k] for c in per_seed) for k in range(len(xs))]
            (line,) = ax.plot(xs, mean, label=f"{split_label(e)}")
            if len(per_seed) > 1:
                low = [min(c[k] for c in per_seed) for k in range(len(xs))]
                high = [max(c[k] for c in per_seed) for k in range(len(xs))]
                ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.15)
        ax.set_title(f"{exp.name}: {variant} ({len(exp.seeds)} seeds)")
        ax.set_xlabel("scored round")
        ax.set_ylabel(f"local reward per node ({window}-round mean)")
        ax.legend(title="I/J")
    for ax, variant in zip(axes[1], variants, strict=True) if held else ():
        for e in summary["configurations"].values():
            if e["variant"] != variant or "held_out_pass1_end_mean" not in e:
                continue
            curves = [s["held_out_curve"] for s in e["seeds"].values()]
            xs = [point["round"] for point in curves[0]]
            mean = [statistics.fmean(c[k]["pass1"] for c in curves) for k in range(len(xs))]
            (line,) = ax.plot(xs, mean, marker="o", label=f"{split_label(e)}")
            if len(curves) > 1:
                low = [min(c[k]["pass1"] for c in curves) for k in range(len(xs))]
                high = [max(c[k]["pass1"] for c in curves) for k in range(len(xs))]
                ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.15)
        ax.set_title(f"{exp.name}: {variant}, held-out questions")
        ax.set_xlabel("round")
        ax.set_ylabel("greedy pass@1 per node")
        ax.legend(title="I/J")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
