"""Running an experiment: every cell not done yet, one after another, then the report.

Resumable: a cell is done once its `cell.json` exists; an interrupted run skips the done cells
and plays the interrupted one again from scratch (its devnet cannot be resumed mid-run). The
results directory remembers the scale its cells were played at (`experiment.json`) and refuses
to resume at another: cells played at different scales must not be summed into one table.
Adding splits, seeds or variants is fine: the cells done stay comparable.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from client.experiment.cell import RECORD, play_cell, write_whole
from client.experiment.config import Cell, ExperimentConfig, ExperimentError
from client.experiment.inprocess import play_inprocess_cell
from client.experiment.report import summarize


def run_experiment(
    exp: ExperimentConfig,
    out_dir: Path,
    cache_dir: Path,
    *,
    on_cell: Callable[[Cell, str], None] | None = None,
    progress: Callable[[Cell, int, int], None] | None = None,
    seed_progress: Callable | None = None,
) -> dict[str, Any]:
    """Plays the cells not done yet; returns the summary (also written under out_dir)."""
    _remember_scale(exp, out_dir)
    for cell in exp.cells():
        cell_dir = out_dir / "cells" / cell.key
        if (cell_dir / RECORD).is_file():
            if on_cell:
                on_cell(cell, "done before")
            continue
        if on_cell:
            on_cell(cell, "playing")
        play = play_cell if exp.swarm == "devnet" else play_inprocess_cell
        play(
            exp,
            cell,
            cell_dir,
            cache_dir,
            progress=None if progress is None else lambda d, t, c=cell: progress(c, d, t),
            seed_progress=seed_progress,
        )
        summarize(exp, out_dir)  # the report grows as cells finish
        if on_cell:
            on_cell(cell, "played")
    return summarize(exp, out_dir)


SCALE_RECORD = "experiment.json"
# what every cell is played with: a done cell is only comparable with cells played at this scale
CELL_SCALE = (
    "swarm",
    "nodes",
    "rounds",
    "round_length_s",
    "questions",
    "completions",
    "store",
    "node",
    "eval_questions",
    "eval_set",
    "eval_every",
)


def _remember_scale(exp: ExperimentConfig, out_dir: Path) -> None:
    """Records the scale in out_dir; refuses a directory whose cells were played at another."""
    path = out_dir / SCALE_RECORD
    scale = exp.model_dump(mode="json", include=set(CELL_SCALE))
    if path.is_file():
        try:
            before = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ExperimentError(
                f"{path} is unreadable ({exc}); remove it only if every cell under "
                f"{out_dir / 'cells'} was played with the experiment file as it is now"
            ) from exc
        # a key the record predates was played at that key's default
        defaults = {k: ExperimentConfig.model_fields[k].default for k in CELL_SCALE}
        changed = [
            f"{key}: {before.get(key, defaults[key])!r} there, {scale[key]!r} now"
            for key in CELL_SCALE
            if before.get(key, defaults[key]) != scale[key]
        ]
        if changed:
            raise ExperimentError(
                f"{out_dir} holds cells played at another scale ({'; '.join(changed)}); "
                f"give the run another --out, or delete {out_dir} to play every cell again"
            )
        return
    write_whole(path, json.dumps(scale, indent=1, sort_keys=True))
