"""The experiment's results: `summary.json`, `table.md` and `curves.png` from the cells' records.

The metric is the paper's cumulative reward, stated precisely: for one configuration and seed,
the sum over the scored rounds r and over the nodes n of the mean verifier reward of n's local
rollouts in round r (its I x L completions; the same number the node recorded on the ledger as
its claim divided by its rollouts). Across seeds we report the mean, the sample standard deviation
and the range, so that a difference between configurations can be told from noise.

(Over 400 lines, on purpose: the summary, the tables and the curves are made from one reading of
the records, so a number in the table and a point on the curve cannot disagree.)
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from client.experiment.cell import RECORD
from client.experiment.config import Cell, ExperimentConfig

TOLERANCE = 1e-6  # the journal's reward and the ledger's claim/rollouts are one number
# Student's t, 97.5% quantile, for 1..30 degrees of freedom (a 95% interval of a mean)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def ci95(values: list[float]) -> tuple[float, float] | None:
    """Returns (mean, half-width of its 95% t interval), or None below two values."""
    if len(values) < 2:
        return None
    df = len(values) - 1
    t = _T975[df - 1] if df <= len(_T975) else 1.96
    return statistics.fmean(values), t * statistics.stdev(values) / len(values) ** 0.5


def diff_ci95(a: list[float], b: list[float]) -> tuple[float, float] | None:
    """Returns (mean(b) - mean(a), half-width of its 95% Welch interval) for two independent
    samples, or None when either has fewer than two values. The t quantile is taken at the
    Welch degrees of freedom rounded down (a little wider than exact)."""
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = statistics.fmean(b) - statistics.fmean(a)
    if va + vb == 0:
        return diff, 0.0
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    k = max(1, int(df))
    t = _T975[k - 1] if k <= len(_T975) else 1.96
    return diff, t * (va + vb) ** 0.5


def held_out_numbers(held: dict[str, Any], trained: set[int]) -> dict[str, Any]:
    """A cell's held-out scores: per evaluation, the mean over nodes of greedy pass@1 (a reward
    of 1) and of greedy reward, over the evaluation questions outside `trained` (those a node
    of any cell of the experiment drew for training: one held-out set for every cell)."""
    kept = [i for i in range(held["questions"]) if i not in trained]
    curve = []
    for e in held["evaluations"]:
        per_node = [[rewards[i] for i in kept] for rewards in e["greedy"]]
        curve.append(
            {
                "round": e["round"],
                "pass1": statistics.fmean(
                    statistics.fmean(r >= 1.0 - TOLERANCE for r in rs) for rs in per_node
                )
                if kept
                else None,
                "reward": statistics.fmean(statistics.fmean(rs) for rs in per_node)
                if kept
                else None,
            }
        )
    start, end = curve[0], curve[-1]
    entries = held.get("entries") or []
    by_entry: dict[str, dict[str, Any]] = {}
    for entry in sorted(set(entries)):
        mine = [i for i in kept if entries[i] == entry]
        first, last = held["evaluations"][0]["greedy"], held["evaluations"][-1]["greedy"]
        by_entry[entry] = {
            "questions": len(mine),
            **{
                f"{what}_{when}": statistics.fmean(
                    statistics.fmean(
                        (r[i] >= 1.0 - TOLERANCE) if what == "pass1" else r[i] for i in mine
                    )
                    for r in rewards
                )
                if mine
                else None
                for what in ("pass1", "reward")
                for when, rewards in (("start", first), ("end", last))
            },
        }
    return {
        "held_out_by_entry": by_entry,
        "held_out_questions": len(kept),
        "held_out_excluded": len(trained),
        "held_out_curve": curve,
        "held_out_pass1_start": start["pass1"],
        "held_out_pass1_end": end["pass1"],
        "held_out_pass1_gain": None if start["pass1"] is None else end["pass1"] - start["pass1"],
        "held_out_reward_start": start["reward"],
        "held_out_reward_end": end["reward"],
    }


# mean local reward per node-round in the first and the last quarter of the scored rounds; for
# specialists also on the entries they were pretrained on (home) and on the others (foreign)
LEARNING_KEYS = (
    *(f"{part}{q}_quarter" for part in ("", "home_", "foreign_") for q in ("first", "last")),
    "external_used_per_round",
)
HELD_OUT_KEYS = (
    "held_out_pass1_start",
    "held_out_pass1_end",
    "held_out_pass1_gain",
    "held_out_reward_start",
    "held_out_reward_end",
)


def load_records(exp: ExperimentConfig, out_dir: Path) -> dict[str, dict[str, Any]]:
    """Returns the records of the cells that are done, by cell key."""
    found = {}
    for cell in exp.cells():
        path = out_dir / "cells" / cell.key / RECORD
        if path.is_file():
            found[cell.key] = json.loads(path.read_text())
    return found


def _quarters(values: list[float | None]) -> tuple[float | None, float | None]:
    """Returns the mean of the first and of the last quarter of a run's values (Nones skipped)."""
    q = max(1, len(values) // 4)

    def mean(part: list[float | None]) -> float | None:
        kept = [v for v in part if v is not None]
        return statistics.fmean(kept) if kept else None

    return mean(values[:q]), mean(values[-q:])


def _entry_reward(rounds: list[dict[str, Any]], keep) -> list[float | None]:
    """Per round, the mean local reward over the catalog entries `keep` accepts (None: none
    drawn that round)."""
    out = []
    for r in rounds:
        values = [mean for e, (mean, _) in (r.get("reward_by_entry") or {}).items() if keep(e)]
        out.append(statistics.fmean(values) if values else None)
    return out


def _cell_numbers(record: dict[str, Any], trained: set[int]) -> dict[str, Any]:
    on_chain = record.get("swarm", "devnet") == "devnet"  # the in-process swarm has no ledger
    rounds = len(record["nodes"][0]["rounds"])
    per_round = [0.0] * rounds
    missing = mismatched = 0
    compute = swarm = 0.0
    node_curves, home, foreign, external_used = [], [], [], []
    for node in record["nodes"]:
        node_curves.append([r["reward_local"] for r in node["rounds"]])
        for k, r in enumerate(node["rounds"]):
            if r["reward_local"] is None:
                missing += 1
                continue
            external_used.append(r["external_items"] or 0)
            per_round[k] += r["reward_local"]
            chain = r["reward_on_chain"]
            if on_chain and (chain is None or abs(chain - r["reward_local"]) > TOLERANCE):
                mismatched += 1
            compute += r["compute_s"]
            swarm += r["swarm_s"]
        specialties = set((node.get("policy") or {}).get("seed_datasets") or ())
        if specialties:  # a specialist: its pretrained entries and the others, apart
            home.append(_entry_reward(node["rounds"], lambda e, s=specialties: e in s))
            foreign.append(_entry_reward(node["rounds"], lambda e, s=specialties: e not in s))
    numbers = {
        "cumulative": sum(per_round),
        "per_round": per_round,
        "first_quarter": _mean_of(_quarters(c)[0] for c in node_curves),
        "last_quarter": _mean_of(_quarters(c)[1] for c in node_curves),
        # J asked for, J got: the sampler falls short when peers publish too few items with signal
        "external_used_per_round": _mean_of(external_used),
        "missing_node_rounds": missing,
        "not_on_chain_or_different": mismatched if on_chain else None,
        "compute_s": compute,
        "swarm_s": swarm,
        "wall_s": record.get("wall_s", 0.0),
    }
    if record.get("held_out"):
        numbers.update(held_out_numbers(record["held_out"], trained))
    if home:
        for name, curves in (("home", home), ("foreign", foreign)):
            numbers[f"{name}_first_quarter"] = _mean_of(_quarters(c)[0] for c in curves)
            numbers[f"{name}_last_quarter"] = _mean_of(_quarters(c)[1] for c in curves)
    return numbers


def _mean_of(values) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def split_label(entry: dict[str, Any]) -> str:
    """A configuration's I/J, with its external correction when it has one (`4/4 tis`)."""
    correction = entry.get("correction")
    return f"{entry['local']}/{entry['external']}" + (f" {correction}" if correction else "")


def summarize(exp: ExperimentConfig, out_dir: Path) -> dict[str, Any]:
    """Aggregates the done cells per configuration; writes summary.json, table.md, curves.png."""
    records = load_records(exp, out_dir)
    # evaluation questions drawn for training in any cell, or in a node's seed-policy pretraining
    # corpus: left out of every cell's held-out score (records made before `pretrained` was kept
    # name none)
    trained = {
        i
        for r in records.values()
        for key in ("trained", "pretrained")
        for i in (r.get("held_out") or {}).get(key) or []
    }
    configurations: dict[str, dict[str, Any]] = {}
    for cell in exp.cells():
        if cell.key not in records:
            continue
        numbers = _cell_numbers(records[cell.key], trained)
        entry = configurations.setdefault(
            cell.configuration,
            {"variant": cell.variant, "local": cell.local, "external": cell.external, "seeds": {}}
            | ({} if cell.correction == "none" else {"correction": cell.correction}),
        )
        entry["seeds"][str(cell.seed)] = numbers
    for entry in configurations.values():
        values = [s["cumulative"] for s in entry["seeds"].values()]
        curves = [s["per_round"] for s in entry["seeds"].values()]
        entry["cumulative_mean"] = statistics.fmean(values)
        entry["cumulative_std"] = statistics.stdev(values) if len(values) > 1 else None
        entry["cumulative_min"], entry["cumulative_max"] = min(values), max(values)
        entry["curve_mean"] = [
            statistics.fmean(c[k] for c in curves) for k in range(len(curves[0]))
        ]
        compute = sum(s["compute_s"] for s in entry["seeds"].values())
        swarm = sum(s["swarm_s"] for s in entry["seeds"].values())
        entry["swarm_share"] = swarm / (compute + swarm) if compute + swarm else None
        entry["wall_s"] = sum(s["wall_s"] for s in entry["seeds"].values())
        entry["missing_node_rounds"] = sum(
            s["missing_node_rounds"] for s in entry["seeds"].values()
        )
        checked = [s["not_on_chain_or_different"] for s in entry["seeds"].values()]
        entry["not_on_chain_or_different"] = (
            None if None in checked else sum(checked)  # None: played without a ledger
        )
        for key in LEARNING_KEYS + HELD_OUT_KEYS:
            values = [s[key] for s in entry["seeds"].values() if s.get(key) is not None]
            if values:
                entry[f"{key}_mean"] = statistics.fmean(values)
                if key in HELD_OUT_KEYS:
                    entry[f"{key}_ci95"] = ci95(values)
        entry["cumulative_ci95"] = ci95([s["cumulative"] for s in entry["seeds"].values()])
    for entry in configurations.values():
        base = configurations.get(
            Cell(variant=entry["variant"], local=exp.baseline[0], external=0, seed=0).configuration
        )
        entry["gain_vs_baseline"] = (
            entry["cumulative_mean"] / base["cumulative_mean"] - 1
            if base and base["cumulative_mean"]
            else None
        )
        # Configurations played with one seed drew the same questions: compare seed by seed.
        diffs = {
            seed: numbers["cumulative"] - base["seeds"][seed]["cumulative"]
            for seed, numbers in entry["seeds"].items()
            if base and seed in base["seeds"]
        }
        entry["paired_vs_baseline"] = {
            "per_seed": diffs,
            "mean": statistics.fmean(diffs.values()) if diffs else None,
            "std": statistics.stdev(diffs.values()) if len(diffs) > 1 else None,
            "ci95": ci95(list(diffs.values())),
            "seeds_better": sum(d > 0 for d in diffs.values()),
            "seeds": len(diffs),
        }
        # held-out pass@1 at the end, seed by seed against the baseline's (same questions drawn,
        # same held-out set)
        held = {
            seed: numbers["held_out_pass1_end"] - base["seeds"][seed]["held_out_pass1_end"]
            for seed, numbers in entry["seeds"].items()
            if base
            and seed in base["seeds"]
            and numbers.get("held_out_pass1_end") is not None
            and base["seeds"][seed].get("held_out_pass1_end") is not None
        }
        if held:
            entry["held_out_paired_vs_baseline"] = {
                "per_seed": held,
                "mean": statistics.fmean(held.values()),
                "ci95": ci95(list(held.values())),
                "seeds_better": sum(d > 0 for d in held.values()),
                "seeds": len(held),
            }
    summary = {
        # (runs before the corrections existed played under none, and say nothing of them)
        "experiment": exp.model_dump(
            mode="json", exclude={"corrections"} if exp.corrections == ["none"] else None
        ),
        "metric": "sum over scored rounds and nodes of the mean verifier reward of each node's "
        "local rollouts (I x L per node and round); mean and spread over seeds",
        "cells_done": len(records),
        "cells_total": len(exp.cells()),
        "configurations": configurations,
    }
    if any("pretrained" in (r.get("held_out") or {}) for r in records.values()):
        summary["held_out_excludes"] = (
            "drawn for training, or in a seed policy's pretraining corpus"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    (out_dir / "table.md").write_text(markdown_table(exp, summary))
    if configurations:
        plot_curves(exp, summary, out_dir / "curves.png")
    return summary


def markdown_table(exp: ExperimentConfig, summary: dict[str, Any]) -> str:
    rounds = (
        f"{exp.rounds} scored rounds of {exp.round_length_s} s on a devnet"
        if exp.swarm == "devnet"
        else f"{exp.rounds} rounds in process"
    )
    lines = [
        f"Experiment `{exp.name}`: {exp.nodes} nodes, {rounds}, {exp.questions} questions x "
        f"{exp.completions} completions per node and round, seeds "
        f"{', '.join(map(str, exp.seeds))} ({summary['cells_done']}/{summary['cells_total']} "
        "cells done).",
        "",
        "| configuration | I/J | cumulative reward (mean ± sd) | range | gain vs "
        f"{exp.baseline[0]}/0 | paired Δ (mean ± sd) | paired Δ, 95% CI | seeds better "
        "| swarm share | wall |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for e in summary["configurations"].values():
        sd = f" ± {e['cumulative_std']:.2f}" if e["cumulative_std"] is not None else ""
        gain = f"{100 * e['gain_vs_baseline']:+.1f}%" if e["gain_vs_baseline"] is not None else "-"
        share = f"{100 * e['swarm_share']:.1f}%" if e["swarm_share"] is not None else "-"
        paired = e["paired_vs_baseline"]
        delta, interval, better = "-", "-", "-"
        if paired["seeds"] and e["external"]:
            delta = f"{paired['mean']:+.2f}" + (
                f" ± {paired['std']:.2f}" if paired["std"] is not None else ""
            )
            interval = _interval(paired.get("ci95"), 2)
            better = f"{paired['seeds_better']}/{paired['seeds']}"
        lines.append(
            f"| {e['variant']} | {split_label(e)} | {e['cumulative_mean']:.2f}{sd} | "
            f"{e['cumulative_min']:.2f} – {e['cumulative_max']:.2f} | {gain} | {delta} | "
            f"{interval} | {better} | {share} | {e['wall_s'] / 60:.1f} min |"
        )
    lines += [
        "",
        "Learning within the run: mean local reward per node and round in the first and the last "
        "quarter of the scored rounds (mean over seeds); specialists also on the datasets they "
        "were pretrained on (home) and on the others (foreign).",
        "",
        "| configuration | I/J | external items used a round | first → last quarter "
        "| home: first → last | foreign: first → last |",
        "| --- | --- | ---: | --- | --- | --- |",
    ]

    def span(e: dict[str, Any], part: str) -> str:
        a, b = e.get(f"{part}first_quarter_mean"), e.get(f"{part}last_quarter_mean")
        return "-" if a is None or b is None else f"{a:.3f} → {b:.3f} ({b - a:+.3f})"

    for e in summary["configurations"].values():
        used = e.get("external_used_per_round_mean")
        lines.append(
            f"| {e['variant']} | {split_label(e)} | "
            f"{'-' if used is None else f'{used:.2f}'} | {span(e, '')} | "
            f"{span(e, 'home_')} | {span(e, 'foreign_')} |"
        )
    held = [e for e in summary["configurations"].values() if "held_out_pass1_end_mean" in e]
    if held:
        questions = sorted({s["held_out_questions"] for e in held for s in e["seeds"].values()})
        lines += [
            "",
            "Held-out: greedy pass@1 (a verifier reward of 1) of every node on "
            f"{exp.eval_questions} fixed evaluation questions, less the "
            f"{exp.eval_questions - questions[0]} that a node of some cell "
            + (
                "drew for training or saw in its seed policy's pretraining corpus"
                if summary.get("held_out_excludes")
                else "drew for training"
            )
            + "; mean over "
            "nodes, then over seeds with a 95% t interval. Paired: the end pass@1 minus the "
            f"{exp.baseline[0]}/0 configuration's with the same seed.",
            "",
            "| configuration | I/J | pass@1 at start | pass@1 at end | gain (95% CI) "
            f"| paired Δ vs {exp.baseline[0]}/0 (95% CI) | seeds better |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for e in held:
            paired = e.get("held_out_paired_vs_baseline")
            delta, better = "-", "-"
            if paired and e["external"]:
                delta = _interval(paired["ci95"], 3, paired["mean"])
                better = f"{paired['seeds_better']}/{paired['seeds']}"
            lines.append(
                f"| {e['variant']} | {split_label(e)} | "
                f"{e['held_out_pass1_start_mean']:.3f} | {e['held_out_pass1_end_mean']:.3f} | "
                f"{_interval(e.get('held_out_pass1_gain_ci95'), 3, e['held_out_pass1_gain_mean'])}"
                f" | {delta} | {better} |"
            )
    return "\n".join(lines) + "\n"


def _interval(ci: tuple[float, float] | list[float] | None, digits: int, mean=None) -> str:
    """`mean [low, high]` of a 95% interval; the mean alone below two seeds."""
    if ci is None:
        return "-" if mean is None else f"{mean:+.{digits}f}"
    m, half = ci
    return f"{m:+.{digits}f} [{m - half:+.{digits}f}, {m + half:+.{digits}f}]"


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
