"""`table.md`: the experiment's summary as Markdown tables for people (cumulative reward, learning
within the run, held-out pass@1), one row per configuration."""

from __future__ import annotations

from typing import Any

from client.experiment.config import ExperimentConfig


def split_label(entry: dict[str, Any]) -> str:
    """A configuration's I/J, with its external correction when it has one (`4/4 tis`)."""
    correction = entry.get("correction")
    return f"{entry['local']}/{entry['external']}" + (f" {correction}" if correction else "")


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
