"""`sapo tasks`: the task catalogs and the seeded draw, so anyone can regenerate a round's tasks."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from client.cli.console import Exit, JsonOption, fail, out, print_json
from client.tasks import CatalogError, draw, load_catalog, reference_answer

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS

CatalogOption = Annotated[
    str, typer.Option("--catalog", help="Catalog name (configs/tasks/<name>.toml) or path.")
]


def _catalog(name: str):
    try:
        return load_catalog(name)
    except CatalogError as exc:
        fail(str(exc))


@app.command("catalog")
def catalog(catalog: CatalogOption = "tiny", as_json: JsonOption = False) -> None:
    """List a catalog's entries and its digest (what a ledger pins as catalogDigest)."""
    cat = _catalog(catalog)
    digest = "0x" + cat.digest().hex()
    if as_json:
        print_json(
            {"name": cat.name, "digest": digest, "entries": [e.model_dump() for e in cat.entries]}
        )
        return
    table = Table(title=f"catalog {cat.name}  digest {digest}")
    for column in ("id", "dataset", "weight", "config"):
        table.add_column(column)
    for e in cat.entries:
        config = ", ".join(f"{k}={v}" for k, v in e.config.items()) or "(defaults)"
        table.add_row(e.id, e.dataset, str(e.weight), config)
    out.print(table)


@app.command("draw")
def draw_cmd(
    seed: Annotated[str, typer.Option("--seed", help="32-byte task seed, 0x hex (taskSeed).")],
    count: Annotated[int, typer.Option("--count", min=1, max=4096, help="How many tasks.")],
    catalog: CatalogOption = "tiny",
    as_json: JsonOption = False,
) -> None:
    """The task references, questions and reference answers a task seed yields."""
    cat = _catalog(catalog)
    try:
        tasks = draw(seed, count, cat)
    except ValueError as exc:
        fail(f"--seed: {exc}")
    except Exception as exc:  # a reasoning-gym generator failing is a check failure, said plainly
        fail(
            f"drawing from catalog {cat.name!r} failed: {type(exc).__name__}: {exc}",
            Exit.CHECK_FAILED,
        )
    rows = [
        {
            "entry": t.entry,
            "seed": t.seed,
            "index": t.index,
            "question": t.question,
            "answer": reference_answer(t),
        }
        for t in tasks
    ]
    if as_json:
        print_json({"catalog": cat.name, "digest": "0x" + cat.digest().hex(), "tasks": rows})
        return
    for i, row in enumerate(rows):
        out.print(f"[{i}] {row['entry']} seed={row['seed']} index={row['index']}", markup=False)
        out.print(f"    Q: {row['question']}", markup=False)
        out.print(f"    A: {row['answer']}", markup=False)
