"""Command groups whose commands have not landed yet. They say so and do nothing.

Each entry becomes a command that accepts any arguments, explains in its help what it will do
and which piece of work brings it, and exits 2 when invoked, so no script mistakes it for success.
"""

from __future__ import annotations

import typer

from client.cli.console import Exit, err

PENDING: dict[str, tuple[str, str]] = {
    "experiment": ("Reproduce the SAPO paper's controlled experiment.", "replication"),
}


def register(app: typer.Typer) -> None:
    """Adds one honest placeholder command per pending group to app."""
    for name, (what, work) in PENDING.items():
        app.command(
            name,
            help=f"{what} (not available yet: lands with the {work} work)",
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            rich_help_panel="Not available yet",
        )(_placeholder(name, work))


def _placeholder(name: str, work: str):
    def placeholder(ctx: typer.Context) -> None:
        err.print(
            f"[bold red]error:[/] `sapo {name}` is not available in this version yet "
            f"(it lands with the {work} work); nothing was done.",
            markup=True,
        )
        raise typer.Exit(int(Exit.USAGE))

    placeholder.__name__ = f"{name}_pending"
    return placeholder
