"""`sapo doctor`: the preflight an operator runs first (client.node.doctor), as one table with
the fix for each failure; exit 1 when anything fails."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from client.cli.config_cmd import load_or_exit
from client.cli.console import ConfigOption, Exit, JsonOption, out, print_json


def doctor(
    config: ConfigOption = None,
    no_model: Annotated[
        bool, typer.Option("--no-model", help="Skip loading the policy (the slowest check).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Print the fix for each failure; exit 1 when anything fails."""
    # lazily: the checks load web3 and the store, which `sapo --help` does without
    from client.node.doctor import preflight

    cfg = load_or_exit(config)
    checks = preflight(cfg, load_model=not no_model)
    failed = [c for c in checks if c.ok is False]
    if as_json:
        print_json({"ok": not failed, "checks": [c.as_dict() for c in checks]})
    else:
        table = Table(title=f"sapo doctor  {config or 'default config'}")
        for column in ("check", "", "detail", "fix"):
            table.add_column(column, overflow="fold")
        for c in checks:
            mark = {True: "[green]ok[/]", False: "[red]FAIL[/]", None: "[dim]skip[/]"}[c.ok]
            if c.ok and c.warning:
                mark = "[yellow]warn[/]"
            table.add_row(c.name, mark, escape(c.detail), escape(c.fix))
        out.print(table)
        out.print(
            f"[red]{len(failed)} check(s) failed[/]" if failed else "all checks passed",
            markup=True,
        )
    if failed:
        raise typer.Exit(int(Exit.CHECK_FAILED))
