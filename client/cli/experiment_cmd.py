"""`sapo experiment`: the SAPO paper's controlled experiment, through the real node code.

`run` plays every configuration of an experiment file (configs/experiments/<name>.toml) once per
seed, on a fresh devnet (anvil, N node processes, the ledger recording everything) or, for
`swarm = "in-process"`, by the in-process swarm (client.experiment.inprocess), and writes
results/<name>/: summary.json, table.md, curves.png, and cells/<cell>/ (a devnet cell keeps
every node's journal and the ledger's final state). Interrupted, it resumes at the first cell
not done.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

from client.chain import ChainError
from client.cli.console import Exit, JsonOption, err, fail, out, print_json
from client.cli.progress import ProgressOutput, seed_progress
from client.devnet import AnvilNotFound, IpfsNotFound
from client.devnet.process import ServerStartError
from client.experiment import ExperimentError, load_experiment, run_experiment
from client.experiment.cell import CellFailed
from client.experiment.report import summarize

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS

ExperimentOption = Annotated[
    str,
    typer.Option(
        "--config", "-c", help="An experiment: a name under configs/experiments/ or a TOML path."
    ),
]
OutOption = Annotated[
    Path | None, typer.Option("--out", help="Results directory (default: results/<name>).")
]


@app.command("run")
def run(
    config: ExperimentOption,
    out_dir: OutOption = None,
    cache_dir: Annotated[
        Path, typer.Option("--cache-dir", help="Where seed policies are built and cached.")
    ] = Path(".sapo"),
    as_json: JsonOption = False,
) -> None:
    """Play every configuration x seed not done yet, then write the report."""
    exp = _load(config)
    target = out_dir or Path("results") / exp.name
    cells = exp.cells()
    # SIGTERM and SIGHUP (a closed SSH session) stop like Ctrl-C: nodes and devnet shut down
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)

    count = {"done": 0}
    with ProgressOutput(f"{exp.name}", json_mode=as_json) as shown:
        show_build = seed_progress(shown)

        def on_cell(cell, state: str) -> None:
            if state != "playing":
                count["done"] += 1
            else:
                shown.update(
                    0,
                    exp.rounds,
                    f"cell {count['done'] + 1}/{len(cells)} {cell.key}: starting",
                    stage=cell.key,
                    title=exp.name,
                )

        def progress(cell, done: int, total: int) -> None:
            shown.update(
                done,
                total,
                f"cell {count['done'] + 1}/{len(cells)} {cell.key}: round {done}/{total}",
                stage=cell.key,
                title=exp.name,
            )

        try:
            summary = run_experiment(
                exp,
                target,
                cache_dir.absolute(),
                on_cell=on_cell,
                progress=progress,
                seed_progress=show_build,
            )
        except (AnvilNotFound, IpfsNotFound) as exc:
            fail(str(exc))
        except (CellFailed, ServerStartError, ChainError) as exc:
            fail(f"{exc} (done cells are kept; run again to resume)", Exit.CHECK_FAILED)
        except KeyboardInterrupt:
            shown.close()
            err.print(
                "interrupted: the cell being played was stopped"
                + (" (its devnet and nodes too)" if exp.swarm == "devnet" else "")
                + f"; done cells are kept in {target}; run the same command again to resume"
            )
            raise typer.Exit(130) from None
    _print(summary, target, as_json)


@app.command("report")
def report(config: ExperimentOption, out_dir: OutOption = None, as_json: JsonOption = False):
    """Write the report again from the cells done so far."""
    exp = _load(config)
    target = out_dir or Path("results") / exp.name
    _print(summarize(exp, target), target, as_json)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _load(config: str):
    try:
        return load_experiment(config)
    except ExperimentError as exc:
        fail(str(exc))


def _print(summary: dict, target: Path, as_json: bool) -> None:
    if as_json:
        print_json(summary)
        return
    out.print((target / "table.md").read_text())
    out.print(f"results in {target}: summary.json, table.md, curves.png, cells/")
