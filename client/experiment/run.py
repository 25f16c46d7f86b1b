"""Running an experiment: every cell not done yet, one after another, then the report.

Resumable: a cell is done once its `cell.json` exists; an interrupted run skips the done cells
and plays the interrupted one again from scratch (its devnet cannot be resumed mid-run).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from client.experiment.cell import RECORD, play_cell
from client.experiment.config import Cell, ExperimentConfig
from client.experiment.report import summarize


def run_experiment(
    exp: ExperimentConfig,
    out_dir: Path,
    cache_dir: Path,
    *,
    on_cell: Callable[[Cell, str], None] | None = None,
    progress: Callable[[Cell, int, int], None] | None = None,
) -> dict[str, Any]:
    """Plays the cells not done yet; returns the summary (also written under out_dir)."""
    for cell in exp.cells():
        cell_dir = out_dir / "cells" / cell.key
        if (cell_dir / RECORD).is_file():
            if on_cell:
                on_cell(cell, "done before")
            continue
        if on_cell:
            on_cell(cell, "playing")
        play_cell(
            exp,
            cell,
            cell_dir,
            cache_dir,
            progress=None if progress is None else lambda d, t, c=cell: progress(c, d, t),
        )
        summarize(exp, out_dir)  # the report grows as cells finish
        if on_cell:
            on_cell(cell, "played")
    return summarize(exp, out_dir)
