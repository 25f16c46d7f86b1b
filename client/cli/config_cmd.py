"""`sapo config`: see the configuration a node would run with."""

from __future__ import annotations

import json
from typing import Any

import typer

from client.cli.console import ConfigOption, JsonOption, fail, out, print_json
from client.config import ConfigError, load_config, public_view

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS


def load_or_exit(path: Any) -> Any:
    """Returns the loaded config, or exits 2 with every problem listed."""
    try:
        return load_config(path)
    except ConfigError as exc:
        fail(str(exc))


@app.command("show")
def show(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Print the resolved config: file + SAPO_* environment + defaults, secrets masked."""
    view = public_view(load_or_exit(config))
    if as_json:
        print_json(view)
        return
    out.print(f"# resolved from {config or '(defaults)'} and SAPO_* environment variables")
    for section, values in view.items():
        out.print(f"\n[{section}]", markup=False)
        for key, value in values.items():
            if value is None:
                out.print(f"# {key} = (unset)", markup=False)
            else:
                out.print(f"{key} = {json.dumps(value)}", markup=False)
