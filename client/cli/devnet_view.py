"""How `sapo devnet` shows a devnet: the summary `up` prints once it runs, the stage of one still
starting, and `status`'s two tables (client.cli.devnet_cmd parses and calls; this prints)."""

from __future__ import annotations

import json
import os
import sys

from rich import box
from rich.table import Table

from client.cli.console import out
from client.config.models import format_score as score
from client.config.roles import Role
from client.devnet.state import DevnetState
from client.node.view.snapshot import short


def show_stage(shown, state: DevnetState, build) -> None:
    """Puts a starting devnet's stage (and its seed build's progress) on the progress output."""
    stage = state.stage or "starting"
    if build is not None and stage == "building the seed policy":
        shown.update(
            build.step, build.steps, f"{stage} {build.policy}: {build.describe()}", stage=stage
        )
    else:
        shown.update(0, None, stage, stage=stage)


def report(state: DevnetState, as_json: bool, foreground: bool = True) -> None:
    if as_json:
        print(json.dumps(state.public()), flush=True)
        return
    data_dir = state.data_dir
    out.print(f"[bold]devnet up[/]  data in {data_dir}", markup=True)
    if state.previous is not None:
        out.print(
            f"  a new chain: the last run's ended when it stopped; its data moved to "
            f"{state.previous}",
            markup=False,
        )
    out.print(
        f"  chain   anvil at {state.rpc_url}  chain id {state.chain_id}  "
        f"pid {state.anvil_pid}  log {data_dir / 'anvil.log'}"
    )
    out.print("          dev accounts from anvil's public test mnemonic: devnet use only")
    if state.ipfs:
        # the nodes' first (node 0's at least), then the aggregator's, then the light nodes'
        extra = max(1, len(state.nodes))
        whose_daemon = {extra: " (the aggregator's)", extra + 1: " (the light nodes')"}
        for i, daemon in enumerate(state.ipfs):
            whose = whose_daemon.get(i, "") if state.aggregator else ""
            out.print(
                f"  ipfs-{i}  js-ipfs API {daemon.api}  swarm {daemon.swarm}  pid {daemon.pid}"
                + whose
            )
    else:
        out.print("  store   local blockstore shared by the nodes (no IPFS daemon)")
    out.print(f"  ledger  {state.ledger} (reward pool funded)")
    if (agg := state.aggregator) is not None:
        out.print(f"  book    {agg.book} (the root lane's round book; reward pool funded)")
        out.print(
            f"  aggregator  {agg.address}  endpoint {agg.url}  pid {agg.pid}  "
            f"log {agg.config.parent / 'aggregator.log'}"
        )
    if (light := state.light) is not None:
        out.print(
            f"  light   {light.count} light nodes in {light.families} families  pid {light.pid}  "
            f"log {light.config.parent / 'light.log'}  roster {light.roster}"
        )
    for node in state.nodes:
        honest = node.role == Role.HONEST
        out.print(
            f"  node-{node.index}  {node.address}  pid {node.pid}  log {node.data_dir / 'node.log'}"
            + (f"  metrics {node.metrics}" if node.metrics else "")
            + ("" if honest else f"  [bold red]adversary: {node.role}[/]"),
            markup=not honest,
        )
    out.print(f"  config  {state.config}  (use it with --config, e.g. sapo audit leaderboard)")
    if foreground and os.isatty(1):
        out.print("Press Ctrl-C to stop.")
    sys.stdout.flush()


def status_tables(rows: list[dict]) -> tuple[Table, Table]:
    """`devnet status`'s two tables, each within 80 columns: where each node stands on chain,
    then how it spends its time and what it takes from its peers."""

    def number(value, spec: str = "") -> str:
        return "-" if value is None else format(value, spec)

    def table(*columns: str) -> Table:
        made = Table(
            box=box.SIMPLE_HEAD,
            padding=(0, 1),
            collapse_padding=True,  # one space between columns, not three
            pad_edge=False,
            show_edge=False,
        )
        for column in columns:
            left = column in ("node", "address", "state")
            made.add_column(column, justify="left" if left else "right", no_wrap=True)
        return made

    chain = table("node", "address", "state", "round", "last sub.", "missed", "skipped", "credited")
    work = table("node", "local/round", "busy", "blocked", "ext. items", "peers used")
    for i, r in enumerate(rows):
        name = f"node-{i}"
        chain.add_row(
            name,
            short(r["address"]),
            "running" if r["running"] else "[red]stopped[/]",
            number(r.get("round")),
            number(r.get("last_submission")),
            number(r.get("missed")),
            number(r.get("skipped")),
            score(r["credited"]),
        )
        work.add_row(
            name,
            number(r.get("local_rounds_per_round"), ".1f"),
            number(r.get("busy_share"), ".0%"),
            number(r.get("blocked_share"), ".0%"),
            number(r.get("external_items_used")),
            number(r.get("peers_used")),
        )
    return chain, work


def describe_lights(view: dict) -> str:
    """`devnet status`'s line on the light nodes (client.devnet.status.light_view)."""
    running = "running" if view["running"] else "stopped"
    line = f"light {view['count']} light nodes in {view['families']} families ({running})"
    if "round" in view:
        line += (
            f": round {view['round']}, {view['submitted']} submissions and {view['voted']} "
            f"votes held by the aggregator, {view['refused']} refused"
        )
        if view.get("equivocated"):
            line += f" ({view['equivocated']} second votes of equivocators kept as evidence)"
    if "credited_in_book" in view:
        line += (
            f"; {view['credited_nodes']} of them credited in the book, "
            f"{score(view['credited_in_book'])} in all"
        )
    if view.get("problem"):
        line += f"\nlight: the last pass stopped: {view['problem']}"
    return line
