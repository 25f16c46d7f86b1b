"""`sapo devnet`: a complete local swarm on loopback, started and stopped with one command.

`up` runs the supervisor (client.devnet.supervisor): anvil, the IPFS daemon (unless the store is
local), the seed policy (built once, with its progress shown), the ledger with a funded reward
pool, N registered and staked nodes as child processes; it writes DIR/devnet.toml for every
other command. In the foreground Ctrl-C stops it; with --detach it runs in the background (its
own log: DIR/devnet.log) until `sapo devnet down`. `status` shows where a devnet stands (its
stage while it starts, each node's progress once it runs); `ps` lists every devnet this user
runs, wherever its data dir.

It parses, calls client.devnet (control: options, background start, stop; status: what to show)
and prints (client.cli.devnet_view); it holds no process control of its own.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from client.cli.config_cmd import load_or_exit
from client.cli.console import ConfigOption, Exit, JsonOption, err, fail, out, print_json
from client.cli.devnet_view import describe_lights, report, show_stage, status_tables
from client.cli.progress import ProgressOutput, seed_progress
from client.config.models.devnet import MAX_LIGHT
from client.config.roles import CHOICES
from client.devnet import registry
from client.devnet.control import (
    DetachedStart,
    DevnetOptionError,
    StartFailed,
    StartStalled,
    StopFailed,
    apply_options,
    raise_on_stop_signals,
    stop_devnet,
    stop_event_on_signals,
)
from client.devnet.state import DevnetState, DevnetStateError, read_state, supervisor_alive
from client.pids import pid_alive

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS

# the chain lives in anvil's memory: client.devnet.supervisor.set_aside_previous_run
NEXT_START = "the next devnet up starts a new chain and moves this run's data to previous/"

DataDirOption = Annotated[
    Path, typer.Option("--data-dir", help="Where the devnet's state, logs and nodes live.")
]


def _detach(data_dir: Path, as_json: bool) -> None:
    """Re-runs this `up` in the background (client.devnet.control.DetachedStart) and returns
    once it runs, showing where it stands meanwhile."""
    start = DetachedStart.spawn(sys.argv[1:], data_dir)
    try:
        with ProgressOutput("starting the devnet", json_mode=as_json) as shown:
            state = start.wait(lambda state, build: show_stage(shown, state, build))
    except (StartFailed, StartStalled) as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    except KeyboardInterrupt:
        err.print(
            f"\nstopped waiting; the devnet goes on starting in the background (pid {start.pid}): "
            f"sapo devnet status --data-dir {data_dir}; stop it: sapo devnet down --data-dir "
            f"{data_dir}"
        )
        raise typer.Exit(130) from None
    report(state, as_json, foreground=False)
    if not as_json:
        out.print(
            f"running in the background (pid {start.pid}); "
            f"stop: sapo devnet down --data-dir {data_dir}"
        )


def _interrupted_up(as_json: bool) -> None:
    if not as_json:
        out.print("\nstopping the devnet…")


@app.command("up")
def up(
    config: ConfigOption = None,
    data_dir: DataDirOption = Path(".devnet"),
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes", min=0, max=64, help="Node processes (default \\[devnet].nodes; 0: none)."
        ),
    ] = None,
    round_length: Annotated[
        int | None,
        typer.Option("--round-length", min=2, max=86_400, help="Seconds per round."),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option("--store", help="ipfs (a js-ipfs daemon per node) or local (one shared dir)."),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", help="Start in the background and return; stop with down.")
    ] = False,
    background: Annotated[
        bool, typer.Option("--background", hidden=True, help="Set by --detach for its child.")
    ] = False,
    port: Annotated[
        int | None,
        typer.Option("--port", min=1, max=65_535, help="Chain RPC port (default: a free one)."),
    ] = None,
    adversary: Annotated[
        list[str] | None,
        typer.Option(
            "--adversary",
            help="Add adversary nodes beside the honest ones (repeatable): "
            f"{', '.join(CHOICES[:-1])} or all (each strategy but the whale, the sybils and the "
            "stake mover). See docs/operator.md#adversaries and scripts/run_attacks.py.",
        ),
    ] = None,
    metrics: Annotated[
        bool,
        typer.Option(
            "--metrics",
            help="Serve each node's Prometheus metrics (listed once up; with --netns on port "
            "9464 of its namespace address, which this host reaches).",
        ),
    ] = False,
    netns: Annotated[
        bool,
        typer.Option(
            "--netns",
            help="Each node and its IPFS daemon in a network namespace of its own, joined by "
            "veth links (root; partitions are real).",
        ),
    ] = False,
    root_lane: Annotated[
        bool,
        typer.Option(
            "--root-lane",
            help="Deploy a round book beside the ledger and run an aggregator: the honest nodes "
            "submit and vote off chain through it (\\[devnet].root_lane; docs/aggregator.md).",
        ),
    ] = False,
    light: Annotated[
        int | None,
        typer.Option(
            "--light",
            min=0,
            max=MAX_LIGHT,
            help="Light nodes beside the real ones: staked identities that sign their "
            "submissions and seat votes each round and send them to the aggregator, with no "
            "batch behind them (\\[devnet].light; implies --root-lane).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Start the local swarm: anvil, IPFS, the ledger, N nodes. Ctrl-C (or `down`) stops it."""
    # lazily: the supervisor brings web3, eth-account and the node's stack, which `devnet ps`,
    # `status` and `down` start without
    from client.chain import ChainError
    from client.devnet import AnvilNotFound, IpfsNotFound, ServerStartError
    from client.devnet.netns import NetnsError, NetnsUnavailable
    from client.devnet.provision import ProvisionError, quorum_problem, topology_conflicts
    from client.devnet.supervisor import NO_NETNS_ROOT_LANE, Supervisor
    from client.node.assemble import NodeConfigError

    given = load_or_exit(config)
    if conflicts := topology_conflicts(given):
        fail(
            f"{config or 'the environment'} does not fit a devnet: " + "; ".join(conflicts),
            Exit.USAGE,
        )
    try:
        cfg, notes = apply_options(
            given, nodes, round_length, store, adversary, metrics, root_lane, light
        )
    except DevnetOptionError as exc:
        fail(str(exc), Exit.USAGE)
    if netns and cfg.devnet.root_lane:  # before --detach: refused alike either way
        fail(NO_NETNS_ROOT_LANE, Exit.USAGE)
    for note in notes:
        err.print(f"note: {note}", markup=False)
    count = cfg.devnet.nodes if nodes is None else nodes
    if problem := quorum_problem(cfg, count):
        fail(problem, Exit.USAGE)
    data_dir = data_dir.absolute()
    if running := supervisor_alive(data_dir):
        fail(
            f"a devnet already runs in {data_dir} (pid {running}; stop it: sapo devnet down "
            f"--data-dir {data_dir})"
        )
    if detach:
        _detach(data_dir, as_json)
        return
    raise_on_stop_signals()
    shown = ProgressOutput("seed policy", json_mode=as_json)
    try:
        supervisor = Supervisor(
            cfg,
            data_dir,
            nodes=count,
            port=port,
            detached=background,
            seed_progress=seed_progress(shown),
            netns=netns,
        )
    except (NetnsUnavailable, NetnsError) as exc:
        fail(str(exc), Exit.USAGE)
    try:
        try:
            state = supervisor.start()
        except (AnvilNotFound, IpfsNotFound, NodeConfigError, ProvisionError) as exc:
            fail(str(exc), Exit.USAGE)
        except (ServerStartError, ChainError, NetnsError) as exc:
            fail(str(exc), Exit.CHECK_FAILED)
        finally:
            shown.close()
        report(state, as_json)
        dead = supervisor.watch(
            lambda proc: err.print(f"{proc.name} exited; its log: {proc.log_path}")
        )
        fail(
            f"{type(dead).__name__} (pid {dead.pid}) exited unexpectedly; its log ends with:\n"
            f"{dead.log_tail()}",
            Exit.CHECK_FAILED,
        )
    except KeyboardInterrupt:
        _interrupted_up(as_json)
    finally:
        supervisor.stop()
    if not as_json:
        out.print(f"stopped; logs and data kept in {data_dir} ({NEXT_START})")


def _current_state(data_dir: Path) -> DevnetState:
    """Returns the state of the devnet that runs in data_dir, or exits 1 naming why none does."""
    try:
        state = read_state(data_dir)
    except DevnetStateError as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    if state is None:
        fail(
            f"no devnet runs in {data_dir} (start one: sapo devnet up --detach; see all: "
            "sapo devnet ps)",
            Exit.CHECK_FAILED,
        )
    pid = state.supervisor_pid
    if not pid_alive(pid):
        fail(
            f"the devnet in {data_dir} is not running: its supervisor (pid {pid}) is gone and its "
            f"parts went with it; data kept (start again: sapo devnet up; {NEXT_START})",
            Exit.CHECK_FAILED,
        )
    return state


@app.command("status")
def status(data_dir: DataDirOption = Path(".devnet"), as_json: JsonOption = False) -> None:
    """Where the devnet stands: its stage while it starts, then each node's progress."""
    data_dir = data_dir.absolute()
    state = _current_state(data_dir)
    # lazily, once a devnet runs: reading the nodes' journals and the chain imports web3
    # (`devnet ps`, `down` and a status that finds no devnet do without it)
    from client.devnet.status import (
        book_proofs,
        describe_proofs,
        light_view,
        node_rows,
        starting_view,
    )

    if not state.running:
        view = starting_view(state)
        if as_json:
            print_json({"data_dir": str(data_dir), **view})
            return
        line = (
            f"devnet {data_dir} is starting (pid {view['supervisor_pid']}, {view['seconds']} s): "
        )
        line += view["stage"] or "starting"
        if build := view.get("build"):
            line += f" {build['policy']}: {build['text']}"
        out.print(line)
        return
    unreadable: list[int] = []  # the book's rounds whose verdict list could not be read
    in_book: dict[str, int] = {}
    rows = node_rows(state, unreadable, in_book)
    lights = light_view(state, in_book)
    agg = state.aggregator
    proofs = book_proofs(state) if agg is not None else {}
    if as_json:
        print_json(
            {
                "data_dir": str(data_dir),
                "status": "running",
                "ledger": state.ledger,
                **(
                    {
                        "book": agg.book,
                        "aggregator": {
                            "address": agg.address,
                            "url": agg.url,
                            "pid": agg.pid,
                            "running": pid_alive(agg.pid),
                            **proofs,
                        },
                        "book_unreadable_rounds": unreadable,
                    }
                    if agg is not None
                    else {}
                ),
                **({"light": lights} if lights is not None else {}),
                "nodes": rows,
            }
        )
        return
    out.print(f"devnet {data_dir}", markup=False)
    out.print(f"ledger {state.ledger}", markup=False)
    if agg is not None:
        running = "running" if pid_alive(agg.pid) else "stopped"
        out.print(
            f"book {agg.book} (root lane; credited counts its verdicts)\naggregator "
            f"{agg.address} at {agg.url} ({running})",
            markup=False,
        )
        names = {n.address.lower(): f"node-{i}" for i, n in enumerate(state.nodes)}
        names[agg.address.lower()] = "the aggregator"
        for line in describe_proofs(proofs, names):
            out.print(line, style=None if line.startswith("no lie") else "red", markup=False)
        if unreadable:
            out.print(
                f"the verdict lists of rounds {', '.join(map(str, unreadable))} could not be read "
                "(no IPFS daemon serves them yet?): their credit is not counted",
                style="yellow",
                markup=False,
            )
    if lights is not None:
        out.print(describe_lights(lights), markup=False)
    chain, work = status_tables(rows)
    out.print(chain)
    out.print()
    out.print(work)
    out.print(
        "busy: the share of the last 10 rounds a node spent generating or training; blocked: "
        "waiting on chain or IPFS with work to do",
        soft_wrap=False,  # wrapped at the terminal's width, as the tables are
    )
    for i, r in enumerate(rows):
        if r["role"] != "honest":
            out.print(f"node-{i}: an adversary ({r['role']})", style="red", markup=False)
    for i, r in enumerate(rows):
        if metrics := r.get("metrics"):
            out.print(f"node-{i}: metrics at {metrics}", markup=False)
    for i, r in enumerate(rows):
        if outage := r.get("peer_outage"):
            out.print(
                f"node-{i}: {outage['text']}", style="bold red", markup=False, soft_wrap=False
            )


@app.command("ps")
def ps(as_json: JsonOption = False) -> None:
    """List every devnet this user runs, wherever its data dir (foreground and background)."""
    rows = []
    for entry in registry.running():
        try:
            state = read_state(Path(entry.data_dir))  # None: not written yet
        except DevnetStateError:
            state = None
        rows.append(
            {
                "pid": entry.pid,
                "data_dir": entry.data_dir,
                "mode": "background" if entry.detached else "foreground",
                "status": str(state.status) if state else "starting",
                "stage": state.stage if state else None,
                "nodes": (len(state.nodes) or state.nodes_wanted) if state else None,
                "rpc_url": state.rpc_url if state else None,
                "up_s": round(time.time() - entry.started_at),
            }
        )
    if as_json:
        print_json({"devnets": rows})
        return
    if not rows:
        out.print("no devnet runs for this user")
        return
    table = Table(title=f"devnets of this user ({registry.registry_dir()})")
    for column in ("pid", "data dir", "mode", "status", "nodes", "rpc", "up"):
        table.add_column(column)
    for r in rows:
        table.add_row(
            str(r["pid"]),
            r["data_dir"],
            r["mode"],
            r["status"] if r["status"] == "running" else f"starting: {r['stage']}",
            str(r["nodes"] if r["nodes"] is not None else "-"),
            r["rpc_url"] or "-",
            f"{r['up_s'] // 60} min" if r["up_s"] >= 120 else f"{r['up_s']} s",
        )
    out.print(table)


@app.command("down")
def down(
    data_dir: DataDirOption = Path(".devnet"),
    all_: Annotated[
        bool, typer.Option("--all", help="Stop every devnet of this user (see sapo devnet ps).")
    ] = False,
    wipe: Annotated[bool, typer.Option("--wipe", help="Also delete the devnet's data.")] = False,
) -> None:
    """Stop a devnet (foreground or detached) by pid; data kept unless --wipe."""
    targets = [Path(e.data_dir) for e in registry.running()] if all_ else [data_dir.absolute()]
    if all_ and not targets:
        out.print("no devnet runs for this user")
        return
    for target in targets:
        try:
            stopped = stop_devnet(target, wipe=wipe)
        except StopFailed as exc:
            fail(str(exc))
        out.print(
            f"devnet {target} {'stopped' if stopped else 'nothing was running'}; "
            + ("data wiped" if wipe else f"data kept ({NEXT_START})")
        )


@app.command("light", hidden=True)
def light(config: ConfigOption = None) -> None:
    """Run a devnet's light nodes (`devnet up --light N` starts them) until SIGTERM."""
    # lazily, as in `up`: the light nodes' stack is for this hidden command alone
    import logging

    from client.chain import ChainError
    from client.chain.keystore import KeystoreError
    from client.devnet.light import ROSTER, STATUS, LightSwarm, Roster, run
    from client.node.assemble import NodeConfigError, round_book, signing_ledger
    from client.store import StoreError, open_store

    cfg = load_or_exit(config)
    logging.basicConfig(level=cfg.node.log_level.upper(), format="%(asctime)s %(message)s")
    stop = stop_event_on_signals()
    folder = cfg.node.data_dir
    try:
        ledger = signing_ledger(cfg)  # its key is the light nodes' seed
        roster = Roster.load(folder / ROSTER)
    except (NodeConfigError, KeystoreError, OSError, ValueError, KeyError) as exc:
        fail(f"the light nodes cannot start: {exc}", Exit.USAGE)
    try:
        ledger.check(cfg.chain.chain_id)
        book = round_book(cfg, ledger)
        if book is None:
            fail("set [chain].round_book_address: the light nodes play the root lane", Exit.USAGE)
        account = ledger.tx.account
        assert account is not None  # signing_ledger
        swarm = LightSwarm(
            ledger,
            book,
            open_store(cfg.store),
            bytes(account.key),
            roster,
            start_block=cfg.chain.round_book_deploy_block,
            equivocators=cfg.devnet.light_equivocators,
        )
    except NodeConfigError as exc:
        fail(str(exc), Exit.USAGE)
    except (ChainError, StoreError) as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    try:
        run(swarm, folder / STATUS, stop)
    finally:
        swarm.close()


@app.command("liar", hidden=True)
def liar(config: ConfigOption = None) -> None:
    """Run a devnet's root lane aggregator as an adversary (\\[devnet].aggregator_lies; `devnet
    up` starts it instead of `sapo aggregate run`) until SIGTERM."""
    from client.cli.aggregate_cmd import serve
    from client.devnet.liar import liar as lying

    cfg = load_or_exit(config)
    try:
        service_class = lying(cfg.devnet.aggregator_lies)
    except ValueError as exc:
        fail(str(exc), Exit.USAGE)
    serve(cfg, service_class)


@app.command("adversary", hidden=True)
def adversary(
    strategy: Annotated[str, typer.Argument(help="free-claim, answer-farmer, mixed-farmer, …")],
    config: ConfigOption = None,
    partner: Annotated[
        list[str] | None,
        typer.Option(
            "--partner", help="A node a colluder or cartel member vouches for (repeatable)."
        ),
    ] = None,
) -> None:
    """Run one adversary node of a devnet (`devnet up --adversary` starts them) until SIGTERM."""
    # lazily, as in `up`: an adversary node's stack is for this hidden command alone
    import logging

    from client.chain import ChainError
    from client.chain.keystore import KeystoreError
    from client.devnet.adversary import Adversary
    from client.node.assemble import NodeConfigError, signing_ledger
    from client.store import StoreError
    from client.tasks import CatalogError

    cfg = load_or_exit(config)
    logging.basicConfig(level=cfg.node.log_level.upper(), format="%(asctime)s %(message)s")
    stop = stop_event_on_signals()
    try:
        node = Adversary(cfg, signing_ledger(cfg), strategy, partners=partner)
    except (NodeConfigError, KeystoreError, CatalogError, ValueError) as exc:
        fail(str(exc), Exit.USAGE)
    except (ChainError, StoreError) as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    node.run(stop)
