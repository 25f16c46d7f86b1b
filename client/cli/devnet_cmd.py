"""`sapo devnet`: a complete local swarm on loopback, started and stopped with one command.

`up` runs the supervisor (client.devnet.supervisor): anvil, the IPFS daemon (unless the store is
local), the seed policy (built once, with its progress shown), the ledger with a funded reward
pool, N registered and staked nodes as child processes; it writes DIR/devnet.toml for every
other command. In the foreground Ctrl-C stops it; with --detach it runs in the background (its
own log: DIR/devnet.log) until `sapo devnet down`. `status` shows where a devnet stands (its
stage while it starts, each node's progress once it runs); `ps` lists every devnet this user
runs, wherever its data dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.table import Table

from client.cli.chain_ctx import open_ledger
from client.cli.config_cmd import load_or_exit
from client.cli.console import ConfigOption, Exit, JsonOption, err, fail, out, print_json
from client.config import NodeConfig, with_sections
from client.config.models import format_score as score
from client.devnet import registry
from client.devnet.state import STATE, read_state, supervisor_alive
from client.node.snapshot import short
from client.pids import pid_alive

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS

# `up --detach` waits while the background devnet makes progress; after this long without any
# (no stage change, no build step) it stops waiting, and leaves the devnet running.
STALL_S = 600

DataDirOption = Annotated[
    Path, typer.Option("--data-dir", help="Where the devnet's state, logs and nodes live.")
]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _devnet_config(
    cfg: NodeConfig,
    nodes: int | None,
    round_length: int | None,
    store: str | None,
    adversaries: list[str] | None = None,
) -> NodeConfig:
    """Applies the command's options to the config (validated like the file)."""
    from client.config.roles import expand

    changes: dict[str, dict] = {}
    if adversaries:
        try:
            roles = expand([*cfg.devnet.adversaries, *adversaries])
        except ValueError as exc:
            fail(f"--adversary: {exc}", Exit.USAGE)
        honest = nodes or cfg.devnet.nodes
        changes["devnet"] = {
            "adversaries": [*cfg.devnet.adversaries, *adversaries],
            "accounts": max(cfg.devnet.accounts, honest + len(roles) + 1),
        }
    if store is not None:
        if store not in ("ipfs", "local"):
            fail(f"--store: expected ipfs or local, got {store!r}")
        changes["store"] = {"backend": store}
    if round_length is not None:
        least = cfg.ledger.model_copy(update={"round_length_s": round_length}).least_unbonding_s()
        changes["ledger"] = {
            "round_length_s": round_length,
            "unbonding_period_s": max(cfg.ledger.unbonding_period_s, least),
        }
    if nodes:
        devnet = changes.get("devnet", {})
        accounts = max(cfg.devnet.accounts, devnet.get("accounts", 0), nodes + 1)
        if "adversaries" in devnet:
            accounts = max(accounts, nodes + len(expand(devnet["adversaries"])) + 1)
        changes["devnet"] = {**devnet, "nodes": nodes, "accounts": accounts}
    honest = cfg.devnet.nodes if nodes is None else nodes
    if honest and cfg.ledger.quorum > max(1, honest - 1):
        # a batch's checkers are the other nodes: a smaller devnet lowers its quorum to fit (the
        # default quorum of 3 is a public swarm's; the default devnet has 3 nodes)
        quorum = max(1, honest - 1)
        err.print(
            f"note: [ledger].quorum {cfg.ledger.quorum} lowered to {quorum} for a devnet of "
            f"{honest} node(s) (each batch has {honest - 1} possible checker(s))",
            markup=False,
        )
        changes["ledger"] = {**changes.get("ledger", {}), "quorum": quorum}
    roles = expand(changes.get("devnet", {}).get("adversaries", cfg.devnet.adversaries))
    total = (nodes or cfg.devnet.nodes) + len(roles)
    if roles and cfg.ledger.checkers < total:
        # with fewer checkers than nodes an honest batch may draw fewer than Q honest checkers
        # (adversaries never vote for it): the devnet then measures the draw, not the attack
        err.print(
            f"note: [ledger].checkers {cfg.ledger.checkers} raised to {total} for a devnet of "
            f"{total} nodes with adversaries (every node checks every batch)",
            markup=False,
        )
        changes["ledger"] = {**changes.get("ledger", {}), "checkers": total}
    return with_sections(cfg, **changes) if changes else cfg


def _detach(data_dir: Path, as_json: bool) -> None:
    """Re-runs this `up` in the background (own session) and returns once it runs, showing
    where it stands meanwhile; it never stops a devnet that is still making progress."""
    from client.cli.progress import ProgressOutput
    from client.policy.seed import read_progress

    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / STATE).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "client.cli", *[a for a in sys.argv[1:] if a != "--detach"]]
    if "--data-dir" not in argv:
        argv += ["--data-dir", str(data_dir)]
    argv = [a for a in argv if a != "--json"] + ["--json", "--background"]
    log_path = data_dir / "devnet.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a detached devnet outlives this command on purpose
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    seen, changed = None, time.monotonic()
    try:
        with ProgressOutput("starting the devnet", json_mode=as_json) as shown:
            while (state := read_state(data_dir) or {}).get("status") != "running":
                if proc.poll() is not None:
                    tail = "\n".join(log_path.read_text().splitlines()[-15:])
                    fail(
                        f"the devnet did not start (exit {proc.returncode}); {log_path} ends "
                        f"with:\n{tail}",
                        Exit.CHECK_FAILED,
                    )
                build = read_progress(Path(state["policy_dir"])) if "policy_dir" in state else None
                now = (state.get("stage"), build and (build.stage, build.step))
                if now != seen:
                    seen, changed = now, time.monotonic()
                    _show_stage(shown, state, build)
                elif time.monotonic() - changed > STALL_S:
                    fail(
                        f"no progress for {STALL_S // 60} minutes at stage "
                        f"{state.get('stage', 'starting')!r}; the devnet keeps running in the "
                        f"background (pid {proc.pid}): see {log_path}, stop it with "
                        f"sapo devnet down --data-dir {data_dir}",
                        Exit.CHECK_FAILED,
                    )
                time.sleep(0.5)
    except KeyboardInterrupt:
        err.print(
            f"\nstopped waiting; the devnet goes on starting in the background (pid {proc.pid}): "
            f"sapo devnet status --data-dir {data_dir}; stop it: sapo devnet down --data-dir "
            f"{data_dir}"
        )
        raise typer.Exit(130) from None
    _report(state, as_json, foreground=False)
    if not as_json:
        out.print(
            f"running in the background (pid {proc.pid}); "
            f"stop: sapo devnet down --data-dir {data_dir}"
        )


def _show_stage(shown, state: dict, build) -> None:
    """Puts a starting devnet's stage (and its seed build's progress) on the progress output."""
    stage = state.get("stage", "starting")
    if build is not None and stage == "building the seed policy":
        shown.update(
            build.step, build.steps, f"{stage} {build.policy}: {build.describe()}", stage=stage
        )
    else:
        shown.update(0, None, stage, stage=stage)


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
            "--nodes", min=0, max=64, help="Node processes (default [devnet].nodes; 0: none)."
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
            help="Add adversary nodes beside the honest ones (repeatable): free-claim, "
            "answer-farmer, mixed-farmer, copycat, colluders (a pair), cartel (three), griefer "
            "or all. See "
            "scripts/attack-table and docs/credit.md.",
        ),
    ] = None,
    netns: Annotated[
        bool,
        typer.Option(
            "--netns",
            help="Each node and its IPFS daemon in a network namespace of its own, joined by "
            "veth links (root; partitions are real).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Start the local swarm: anvil, IPFS, the ledger, N nodes. Ctrl-C (or `down`) stops it."""
    from client.chain import ChainError
    from client.cli.progress import ProgressOutput, seed_progress
    from client.devnet import AnvilNotFound, IpfsNotFound, ServerStartError
    from client.devnet.netns import NetnsError, NetnsUnavailable
    from client.devnet.provision import quorum_problem, topology_conflicts
    from client.devnet.supervisor import Supervisor
    from client.node.assemble import NodeConfigError

    given = load_or_exit(config)
    if conflicts := topology_conflicts(given):
        fail(
            f"{config or 'the environment'} does not fit a devnet: " + "; ".join(conflicts),
            Exit.USAGE,
        )
    cfg = _devnet_config(given, nodes, round_length, store, adversary)
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
    # SIGTERM (kill, `devnet down`) and SIGHUP (a closed SSH session) stop as cleanly as Ctrl-C;
    # SIGINT is set too, as a shell that starts us in the background leaves it ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
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
        except (AnvilNotFound, IpfsNotFound, NodeConfigError) as exc:
            fail(str(exc), Exit.USAGE)
        except (ServerStartError, ChainError, NetnsError) as exc:
            fail(str(exc), Exit.CHECK_FAILED)
        finally:
            shown.close()
        _report(state, as_json)
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
        out.print(f"stopped; logs and data kept in {data_dir}")


def _report(state: dict, as_json: bool, foreground: bool = True) -> None:
    if as_json:
        print(json.dumps(state), flush=True)
        return
    data_dir = Path(state["data_dir"])
    out.print(f"[bold]devnet up[/]  data in {data_dir}", markup=True)
    out.print(
        f"  chain   anvil at {state['rpc_url']}  chain id {state['chain_id']}  "
        f"pid {state['anvil_pid']}  log {data_dir / 'anvil.log'}"
    )
    out.print("          dev accounts from anvil's public test mnemonic: devnet use only")
    if state.get("ipfs"):
        for i, daemon in enumerate(state["ipfs"]):
            out.print(
                f"  ipfs-{i}  js-ipfs API {daemon['api']}  swarm {daemon['swarm']}  "
                f"pid {daemon['pid']}"
            )
    else:
        out.print("  store   local blockstore shared by the nodes (no IPFS daemon)")
    out.print(f"  ledger  {state['ledger']} (reward pool funded)")
    for node in state["nodes"]:
        role = node.get("role", "honest")
        out.print(
            f"  node-{node['index']}  {node['address']}  pid {node['pid']}  "
            f"log {Path(node['data_dir']) / 'node.log'}"
            + ("" if role == "honest" else f"  [bold red]adversary: {role}[/]"),
            markup=role != "honest",
        )
    out.print(f"  config  {state['config']}  (use it with --config, e.g. sapo audit leaderboard)")
    if foreground and os.isatty(1):
        out.print("Press Ctrl-C to stop.")
    sys.stdout.flush()


def _node_rows(state: dict) -> list[dict]:
    """Returns each node's progress and shares of time (its journal, through the read model),
    plus its credited total from the chain."""
    from dataclasses import asdict

    from client.chain import ChainError
    from client.chain.audit import Auditor
    from client.node.view_journal import NodeView

    credited: dict[str, int] = {}
    genesis = round_length = None
    with contextlib.suppress(ChainError, SystemExit, typer.Exit):
        _, ledger, reader = open_ledger(Path(state["config"]), None, None)
        params = ledger.params()
        genesis, round_length = params.genesis, params.round_length
        credited = {row.node.lower(): row.credited for row in Auditor(ledger, reader).leaderboard()}
    rows = []
    for node in state["nodes"]:
        view = NodeView(Path(node["data_dir"]))
        summary = view.summary(genesis, round_length, time.time()) if genesis is not None else None
        view.close()
        rows.append(
            {
                "address": node["address"],
                "role": node.get("role", "honest"),  # or its adversary strategy
                "pid": node["pid"],
                "running": pid_alive(node["pid"]),
                "credited": credited.get(node["address"].lower(), 0),
                **(asdict(summary) if summary else {}),
            }
        )
        if summary is not None and summary.peer_outage is not None:
            rows[-1]["peer_outage"]["text"] = summary.peer_outage.describe()
    return rows


def _starting_view(state: dict) -> dict:
    """Returns what a starting devnet is doing: its stage, and its seed build's progress."""
    from client.policy.seed import read_progress

    view = {
        "status": "starting",
        "stage": state.get("stage"),
        "supervisor_pid": state.get("supervisor_pid"),
        "seconds": round(time.time() - state.get("started_at", time.time())),
    }
    if "policy_dir" in state and (build := read_progress(Path(state["policy_dir"]))):
        view["build"] = {
            "policy": build.policy,
            "stage": build.stage,
            "step": build.step,
            "steps": build.steps,
            "loss": build.loss,
            "eta_s": build.eta_s,
            "builder_pid": build.builder_pid,
            "resumed_from": build.resumed_from,
            "text": build.describe(),
        }
    return view


def _current_state(data_dir: Path) -> dict:
    """Returns the state of the devnet that runs in data_dir, or exits 1 naming why none does."""
    state = read_state(data_dir)
    if state is None:
        fail(
            f"no devnet runs in {data_dir} (start one: sapo devnet up --detach; see all: "
            "sapo devnet ps)",
            Exit.CHECK_FAILED,
        )
    pid = state.get("supervisor_pid")
    if not isinstance(pid, int) or not pid_alive(pid):
        fail(
            f"the devnet in {data_dir} is not running: its supervisor (pid {pid}) is gone and its "
            "parts went with it; data kept (start again: sapo devnet up)",
            Exit.CHECK_FAILED,
        )
    return state


@app.command("status")
def status(data_dir: DataDirOption = Path(".devnet"), as_json: JsonOption = False) -> None:
    """Where the devnet stands: its stage while it starts, then each node's progress."""
    data_dir = data_dir.absolute()
    state = _current_state(data_dir)
    if state.get("status") == "starting":
        view = _starting_view(state)
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
    rows = _node_rows(state)
    if as_json:
        print_json(
            {
                "data_dir": str(data_dir),
                "status": "running",
                "ledger": state["ledger"],
                "nodes": rows,
            }
        )
        return
    table = Table(title=f"devnet {data_dir}  ledger {state['ledger']}")
    columns = ("node", "address", "state", "round", "last sub.", "missed", "skipped", "credited")
    for column in (*columns, "local/round", "busy", "blocked", "ext. items", "peers used"):
        table.add_column(
            column, justify="left" if column in ("node", "address", "state") else "right"
        )

    def number(value, spec: str = "") -> str:
        return "-" if value is None else format(value, spec)

    for i, r in enumerate(rows):
        table.add_row(
            f"node-{i}" + ("" if r["role"] == "honest" else f" [red]({r['role']})[/]"),
            short(r["address"]),
            "running" if r["running"] else "[red]stopped[/]",
            number(r.get("round")),
            number(r.get("last_submission")),
            number(r.get("missed")),
            number(r.get("skipped")),
            score(r["credited"]),
            number(r.get("local_rounds_per_round"), ".1f"),
            number(r.get("busy_share"), ".0%"),
            number(r.get("blocked_share"), ".0%"),
            number(r.get("external_items_used")),
            number(r.get("peers_used")),
        )
    out.print(table)
    out.print(
        "busy: the share of the last 10 rounds a node spent generating or training; blocked: "
        "waiting on chain or IPFS with work to do"
    )
    for i, r in enumerate(rows):
        if outage := r.get("peer_outage"):
            out.print(f"node-{i}: {outage['text']}", style="bold red", markup=False)


@app.command("ps")
def ps(as_json: JsonOption = False) -> None:
    """List every devnet this user runs, wherever its data dir (foreground and background)."""
    rows = []
    for entry in registry.running():
        state = read_state(Path(entry.data_dir)) or {}
        rows.append(
            {
                "pid": entry.pid,
                "data_dir": entry.data_dir,
                "mode": "background" if entry.detached else "foreground",
                "status": state.get("status", "starting"),
                "stage": state.get("stage"),
                "nodes": len(state.get("nodes", [])) or state.get("nodes_wanted"),
                "rpc_url": state.get("rpc_url"),
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


def _stop_supervisor(pid: int, timeout_s: float = 120) -> bool:
    """SIGTERMs a devnet's supervisor (it stops its nodes, IPFS and anvil in order); returns
    whether it is gone. After `timeout_s` it is SIGKILLed: its parts die with it (PDEATHSIG)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    return not pid_alive(pid)


def _stop_leftovers(data_dir: Path) -> list[int]:
    """Stops servers whose pid files a supervisor killed hard left behind (a process that
    started after its pid file was written reuses the pid: it is not ours and is spared)."""
    from client.devnet.process import started_after

    pids = []
    for pid_file in [*data_dir.glob("*.pid"), *data_dir.glob("node-*/*.pid")]:
        with contextlib.suppress(ValueError, OSError):
            pid = int(pid_file.read_text().strip())
            if pid_alive(pid) and not started_after(pid, pid_file.stat().st_mtime + 1):
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
            pid_file.unlink(missing_ok=True)
    deadline = time.monotonic() + 30
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return pids


def _remove_namespaces(data_dir: Path) -> None:
    """Removes the network namespaces a --netns devnet's supervisor left (killed before it
    could); they are kernel objects that outlive every process."""
    state = read_state(data_dir) or {}
    if isinstance(state.get("netns"), dict):
        from client.devnet.netns import NetnsLayout

        with contextlib.suppress(TypeError, ValueError, OSError):
            NetnsLayout(**state["netns"]).destroy()


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
        supervisor = supervisor_alive(target)
        if supervisor and not _stop_supervisor(supervisor):
            fail(f"could not stop the devnet supervisor pid {supervisor} in {target}")
        left = _stop_leftovers(target)
        _remove_namespaces(target)
        (target / STATE).unlink(missing_ok=True)
        if wipe and target.exists():
            import shutil

            shutil.rmtree(target)
        stopped = "stopped" if supervisor or left else "nothing was running"
        out.print(f"devnet {target} {stopped}; " + ("data wiped" if wipe else "data kept"))


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
    import logging

    from client.chain import ChainError
    from client.chain.keystore import KeystoreError
    from client.devnet.adversary import Adversary
    from client.node.assemble import NodeConfigError, signing_ledger
    from client.store import StoreError
    from client.tasks import CatalogError

    cfg = load_or_exit(config)
    logging.basicConfig(level=cfg.node.log_level.upper(), format="%(asctime)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: stop.set())
    try:
        node = Adversary(cfg, signing_ledger(cfg), strategy, partners=partner)
    except (NodeConfigError, KeystoreError, CatalogError, ValueError) as exc:
        fail(str(exc), Exit.USAGE)
    except (ChainError, StoreError) as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    node.run(stop)
