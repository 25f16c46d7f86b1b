"""The `sapo` entry point: one typer app whose command groups are imported when they run.

A command group's module is imported only when one of its commands runs (or its own `--help`
is asked for), so `sapo --help` and the query commands pay for nothing they do not use: a
node's training stack (torch, transformers) costs ~2 CPU-seconds to import, web3 ~0.6.
`sapo --help` lists the groups from the table below without importing any of them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Annotated, Any

import click
import typer
from typer.core import TyperGroup

from client import __version__


@dataclass(frozen=True)
class Entry:
    module: str
    attribute: str
    help: str


# The one place each group's help is written: `sapo --help` shows it without importing the group.
COMMANDS: dict[str, Entry] = {
    "config": Entry("client.cli.config_cmd", "app", "Inspect the node configuration."),
    "devnet": Entry(
        "client.cli.devnet_cmd", "app", "Run a local swarm on this machine (loopback only)."
    ),
    "chain": Entry("client.cli.chain_cmd", "app", "Deploy and query the SwarmLedger contract."),
    "stake": Entry("client.cli.stake_cmd", "stake_app", "Add stake, request unstake, withdraw."),
    "rewards": Entry("client.cli.stake_cmd", "rewards_app", "Show, settle and claim rewards."),
    "audit": Entry(
        "client.cli.audit_cmd",
        "app",
        "Audit nodes, rounds and submissions through contract queries.",
    ),
    "store": Entry(
        "client.cli.store_cmd",
        "app",
        "Put, get and check rollout batches on IPFS or a local blockstore.",
    ),
    "tasks": Entry(
        "client.cli.tasks_cmd", "app", "Task catalogs and the seeded draw of a round's tasks."
    ),
    "policy": Entry("client.cli.policy_cmd", "app", "Build the seed policy, evaluate policies."),
    "node": Entry("client.cli.node_cmd", "app", "Register and run a SAPO node."),
    "aggregate": Entry(
        "client.cli.aggregate_cmd",
        "app",
        "Run the root lane's aggregator: enlist, collect messages, post the drawn rounds' roots.",
    ),
    "wallet": Entry("client.cli.wallet_cmd", "app", "Encrypted keystores: new, import, address."),
    "doctor": Entry(
        "client.cli.doctor_cmd",
        "doctor",
        "Check what a node needs (RPC, ledger, keystore, stake, IPFS, peers, clock, disk, model).",
    ),
    "experiment": Entry(
        "client.cli.experiment_cmd", "app", "Reproduce the SAPO paper's controlled experiment."
    ),
    "tui": Entry(
        "client.cli.tui_cmd",
        "tui",
        "Run a node with the terminal UI (--config), or watch a running one (--attach DIR).",
    ),
}


class _Placeholder(click.Command):
    """A group not imported yet: enough for the help listing and for name suggestions."""


class LazyGroup(TyperGroup):
    """The root group: COMMANDS' modules are imported on first use, not at start."""

    def __init__(self, **attrs: Any):
        super().__init__(**attrs)
        self._listing = False
        for name, entry in COMMANDS.items():
            self.commands.setdefault(name, _Placeholder(name, help=entry.help))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.commands.get(cmd_name)
        if isinstance(command, _Placeholder) and not self._listing:
            entry = COMMANDS[cmd_name]
            target = getattr(importlib.import_module(entry.module), entry.attribute)
            # mounted as `add_typer` / `command` would have: a group stays a group even when it
            # has one command, and takes its help from the table
            holder = typer.Typer()
            if isinstance(target, typer.Typer):
                holder.add_typer(target, name=cmd_name, help=entry.help)
            else:
                holder.command(cmd_name, help=entry.help)(target)
            command = typer.main.get_group(holder).commands[cmd_name]
            self.commands[cmd_name] = command
        return command

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True  # list the groups by their help; import none of them
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="sapo",
    cls=LazyGroup,
    help="sapo-swarm: a node client for a blockchain-anchored SAPO swarm "
    "(GRPO on verifiable tasks, rollouts on IPFS, peer-verified rewards on an EVM ledger).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals may hold secrets
    context_settings={"help_option_names": ["-h", "--help"]},
)


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
