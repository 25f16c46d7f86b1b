"""Aggregates the done cells per configuration (mean, spread and intervals over seeds, gain and
paired differences against the baseline) and writes `summary.json`, `table.md` and `curves.png`
from that one reading of the records, so a number in the table and a point on the curve cannot
disagree."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from client.experiment.cell import RECORD
from client.experiment.config import Cell, ExperimentConfig
from client.experiment.report.curves import plot_curves
from client.experiment.report.numbers import HELD_OUT_KEYS, LEARNING_KEYS, _cell_numbers
from client.experiment.report.stats import ci95
from client.experiment.report.table import markdown_table


def load_records(exp: ExperimentConfig, out_dir: Path) -> dict[str, dict[str, Any]]:
    """Returns the records of the cells that are done, by cell key."""
    found = {}
    for cell in exp.cells():
        path = out_dir / "cells" / cell.key / RECORD
        if path.is_file():
            found[cell.key] = json.loads(path.read_text())
    return found


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
