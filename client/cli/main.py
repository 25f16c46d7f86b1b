"""The `sapo` entry point: one typer app, one sub-app per command group."""

from __future__ import annotations

from typing import Annotated

import typer

from client import __version__
from client.cli import (
    audit_cmd,
    chain_cmd,
    config_cmd,
    devnet_cmd,
    experiment_cmd,
    node_cmd,
    policy_cmd,
    stake_cmd,
    store_cmd,
    tasks_cmd,
    tui_cmd,
    wallet_cmd,
)

app = typer.Typer(
    name="sapo",
    help="sapo-swarm: a node client for a blockchain-anchored SAPO swarm "
    "(GRPO on verifiable tasks, rollouts on IPFS, peer-verified rewards on an EVM ledger).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals may hold secrets
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(config_cmd.app, name="config")
app.add_typer(devnet_cmd.app, name="devnet")
app.add_typer(chain_cmd.app, name="chain")
app.add_typer(stake_cmd.stake_app, name="stake")
app.add_typer(stake_cmd.rewards_app, name="rewards")
app.add_typer(audit_cmd.app, name="audit")
app.add_typer(store_cmd.app, name="store")
app.add_typer(tasks_cmd.app, name="tasks")
app.add_typer(policy_cmd.app, name="policy")
app.add_typer(node_cmd.app, name="node")
app.add_typer(wallet_cmd.app, name="wallet")
app.add_typer(experiment_cmd.app, name="experiment")
app.command("tui")(tui_cmd.tui)


def _version(value: bool) -> None:
    if value:
        print(f"sapo-swarm {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """sapo-swarm node client."""
