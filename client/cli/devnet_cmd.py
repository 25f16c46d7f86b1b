"""`sapo devnet`: a complete local swarm on loopback, started and stopped with one command.

`up` starts anvil, the IPFS daemon (unless the store is local), deploys the ledger with a funded
reward pool, creates, registers and stakes N nodes and runs them as child processes; it writes
DIR/devnet.toml for every other command. In the foreground Ctrl-C stops it; with --detach it runs
in the background (its own log: DIR/devnet.log) until `sapo devnet down`. `status` shows each
node's progress from its journal and the chain.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.table import Table

from client.chain import ChainError
from client.chain.audit import Auditor
from client.cli.chain_ctx import open_ledger
from client.cli.config_cmd import load_or_exit
from client.cli.console import ConfigOption, Exit, JsonOption, err, fail, out, print_json
from client.config import NodeConfig
from client.config.models import format_score as score
from client.devnet import Anvil, AnvilNotFound, IpfsDaemon, IpfsNotFound, ServerStartError
from client.devnet.process import ServerProcess, pid_alive, start_together
from client.node.assemble import SEED_MODELS, base_policy_path
from client.node.devnet import _with, node_process, provision
from client.node.journal import Journal

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS

STATE = "devnet.json"  # what runs: addresses, pids, config paths (present while up)
SUPERVISOR_PID = "devnet.pid"

DataDirOption = Annotated[
    Path, typer.Option("--data-dir", help="Where the devnet's state, logs and nodes live.")
]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _devnet_config(
    cfg: NodeConfig, nodes: int | None, round_length: int | None, store: str | None
) -> NodeConfig:
    """Applies the command's options to the config (validated like the file)."""
    changes: dict[str, dict] = {}
    if store is not None:
        if store not in ("ipfs", "local"):
            fail(f"--store: expected ipfs or local, got {store!r}")
        changes["store"] = {"backend": store}
    if round_length is not None:
        least = (2 * cfg.ledger.challenge_rounds + 1) * round_length
        changes["ledger"] = {
            "round_length_s": round_length,
            "unbonding_period_s": max(cfg.ledger.unbonding_period_s, least),
        }
    if nodes:
        changes["devnet"] = {"nodes": nodes, "accounts": max(cfg.devnet.accounts, nodes + 1)}
    return _with(cfg, **changes) if changes else cfg


def _supervisor_alive(data_dir: Path) -> int | None:
    try:
        pid = int((data_dir / SUPERVISOR_PID).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def _detach(data_dir: Path, as_json: bool) -> None:
    """Re-runs this `up` in the background (own session) and returns once it is ready."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / STATE).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "client.cli", *[a for a in sys.argv[1:] if a != "--detach"]]
    if "--data-dir" not in argv:
        argv += ["--data-dir", str(data_dir)]
    argv = [a for a in argv if a != "--json"] + ["--json"]
    with open(data_dir / "devnet.log", "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    deadline = time.monotonic() + 900
    while not (data_dir / STATE).is_file():
        if proc.poll() is not None:
            tail = "\n".join((data_dir / "devnet.log").read_text().splitlines()[-15:])
            fail(
                f"the devnet did not start (exit {proc.returncode}); devnet.log ends with:\n{tail}",
                Exit.CHECK_FAILED,
            )
        if time.monotonic() > deadline:
            proc.terminate()
            fail(
                "the devnet did not become ready within 15 minutes; see devnet.log",
                Exit.CHECK_FAILED,
            )
        time.sleep(0.2)
    _report(json.loads((data_dir / STATE).read_text()), as_json, foreground=False)
    if not as_json:
        out.print(
            f"running in the background (pid {proc.pid}); "
            f"stop: sapo devnet down --data-dir {data_dir}"
        )


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
        typer.Option("--store", help="ipfs (a js-ipfs daemon) or local (one shared dir)."),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", help="Start in the background and return; stop with down.")
    ] = False,
    port: Annotated[
        int | None,
        typer.Option("--port", min=1, max=65_535, help="Chain RPC port (default: a free one)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Start the local swarm: anvil, IPFS, the ledger, N nodes. Ctrl-C (or `down`) stops it."""
    cfg = _devnet_config(load_or_exit(config), nodes, round_length, store)
    count = cfg.devnet.nodes if nodes is None else nodes
    data_dir = data_dir.absolute()
    if _supervisor_alive(data_dir):
        fail(
            f"a devnet already runs in {data_dir} (stop it: sapo devnet down --data-dir {data_dir})"
        )
    if detach:
        _detach(data_dir, as_json)
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / STATE).unlink(missing_ok=True)
    # SIGTERM (kill, `devnet down`) and SIGHUP (a closed SSH session) stop as cleanly as Ctrl-C;
    # SIGINT is set too, as a shell that starts us in the background leaves it ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    (data_dir / SUPERVISOR_PID).write_text(f"{os.getpid()}\n")

    anvil = Anvil(
        data_dir,
        port=port,
        chain_id=cfg.devnet.chain_id,
        accounts=cfg.devnet.accounts,
        balance_eth=cfg.devnet.balance_eth,
        block_time_s=1,  # block.timestamp follows the wall clock: rounds advance on chain
    )
    # The local swarm's IPFS daemon, unless its nodes share a local blockstore instead.
    ipfs = IpfsDaemon(data_dir) if cfg.store.backend == "ipfs" else None
    parts: list = [p for p in (anvil, ipfs) if p is not None]
    node_procs: list[ServerProcess] = []
    try:
        try:
            for part in parts:
                part.start()
            if count and cfg.policy.model in SEED_MODELS:
                if not as_json:
                    out.print(
                        f"seed policy: {cfg.policy.model} (built once under {cfg.policy.cache_dir})"
                    )
                base_policy_path(cfg)
            swarm = provision(
                cfg,
                data_dir,
                rpc_url=anvil.url,
                chain_id=anvil.chain_id,
                ipfs_api=ipfs.api if ipfs else None,
                nodes=count,
            )
            node_procs += [
                node_process(f"node-{i}", path) for i, path in enumerate(swarm.node_configs)
            ]
            start_together(node_procs)
        except (AnvilNotFound, IpfsNotFound) as exc:
            fail(str(exc), Exit.USAGE)
        except (ServerStartError, ChainError) as exc:
            fail(str(exc), Exit.CHECK_FAILED)
        state = _state(anvil, ipfs, data_dir, swarm, node_procs)
        (data_dir / STATE).write_text(json.dumps(state, indent=1))
        _report(state, as_json)
        # A dead chain or IPFS daemon ends the devnet; a node that exits is reported and the
        # swarm goes on without it (restart it with `sapo node run --config DIR/node-<i>/...`).
        reported: set[str] = set()
        while all(p.running for p in parts):
            for proc in node_procs:
                if not proc.running and proc.name not in reported:
                    reported.add(proc.name)
                    err.print(f"{proc.name} exited; its log: {proc.log_path}")
            time.sleep(0.2)
        dead = next(p for p in parts if not p.running)
        fail(
            f"{type(dead).__name__} (pid {dead.pid}) exited unexpectedly; its log ends with:\n"
            f"{dead.log_tail()}",
            Exit.CHECK_FAILED,
        )
    except KeyboardInterrupt:
        if not as_json:
            out.print("\nstopping the devnet…")
    finally:
        for proc in node_procs:  # nodes first: they checkpoint and flush their outbox
            proc.stop(timeout_s=60)
        for part in reversed(parts):
            part.stop()
        (data_dir / STATE).unlink(missing_ok=True)
        (data_dir / SUPERVISOR_PID).unlink(missing_ok=True)
    if not as_json:
        out.print(f"stopped; logs and data kept in {data_dir}")


def _state(anvil, ipfs, data_dir: Path, swarm, node_procs) -> dict:
    return {
        "rpc_url": anvil.url,
        "chain_id": anvil.chain_id,
        "anvil_pid": anvil.pid,
        "ipfs_api": ipfs.api if ipfs else None,
        "ipfs_pid": ipfs.pid if ipfs else None,
        "data_dir": str(data_dir),
        "config": str(swarm.config_path),
        "ledger": swarm.ledger,
        "supervisor_pid": os.getpid(),
        "nodes": [
            {
                "index": i,
                "address": address,
                "pid": proc.pid,
                "config": str(path),
                "data_dir": str(path.parent),
            }
            for i, (address, path, proc) in enumerate(
                zip(swarm.addresses, swarm.node_configs, node_procs, strict=True)
            )
        ],
    }


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
    if state["ipfs_api"]:
        out.print(f"  ipfs    js-ipfs API {state['ipfs_api']} (offline)  pid {state['ipfs_pid']}")
    else:
        out.print("  store   local blockstore shared by the nodes (no IPFS daemon)")
    out.print(f"  ledger  {state['ledger']} (reward pool funded)")
    for node in state["nodes"]:
        out.print(
            f"  node-{node['index']}  {node['address']}  pid {node['pid']}  "
            f"log {Path(node['data_dir']) / 'node.log'}"
        )
    out.print(f"  config  {state['config']}  (use it with --config, e.g. sapo audit leaderboard)")
    if foreground and os.isatty(1):
        out.print("Press Ctrl-C to stop.")
    sys.stdout.flush()


def _node_rows(state: dict) -> list[dict]:
    """Returns each node's progress from its journal, plus its credited total from the chain."""
    credited: dict[str, int] = {}
    with contextlib.suppress(ChainError, SystemExit, typer.Exit):
        _, ledger, reader = open_ledger(Path(state["config"]), None, None)
        credited = {row.node.lower(): row.credited for row in Auditor(ledger, reader).leaderboard()}
    rows = []
    for node in state["nodes"]:
        row = {
            "address": node["address"],
            "pid": node["pid"],
            "running": pid_alive(node["pid"]),
            "round": None,
            "last_submission": None,
            "missed": 0,
            "credited": credited.get(node["address"].lower(), 0),
            "external_items_used": 0,
            "peers_used": 0,
        }
        path = Path(node["data_dir"]) / "journal.sqlite"
        with contextlib.suppress(FileNotFoundError, OSError, Exception):
            journal = Journal.read_only(path)
            rounds = journal.rounds()
            if rounds:
                row["round"] = rounds[-1].round
            confirmed = journal.confirmed_rounds()
            row["last_submission"] = confirmed[-1] if confirmed else None
            row["missed"] = sum(1 for r in rounds if r.phase == "missed")
            verdicts = journal.peer_verdicts()
            row["external_items_used"] = sum(v["used"] for v in verdicts)
            row["peers_used"] = len({v["node"] for v in verdicts if v["used"]})
            journal.close()
        rows.append(row)
    return rows


@app.command("status")
def status(data_dir: DataDirOption = Path(".devnet"), as_json: JsonOption = False) -> None:
    """Show each node: address, round, last submission, credited score, peers used."""
    data_dir = data_dir.absolute()
    if not (data_dir / STATE).is_file():
        fail(
            f"no devnet runs in {data_dir} (start one: sapo devnet up --detach)", Exit.CHECK_FAILED
        )
    state = json.loads((data_dir / STATE).read_text())
    rows = _node_rows(state)
    if as_json:
        print_json({"data_dir": str(data_dir), "ledger": state["ledger"], "nodes": rows})
        return
    table = Table(title=f"devnet {data_dir}  ledger {state['ledger']}")
    for column in (
        "node",
        "address",
        "state",
        "round",
        "last submission",
        "missed",
        "credited",
        "external items",
        "peers used",
    ):
        table.add_column(
            column, justify="left" if column in ("node", "address", "state") else "right"
        )
    for i, r in enumerate(rows):
        table.add_row(
            f"node-{i}",
            r["address"],
            "running" if r["running"] else "[red]stopped[/]",
            str(r["round"] if r["round"] is not None else "-"),
            str(r["last_submission"] if r["last_submission"] is not None else "-"),
            str(r["missed"]),
            score(r["credited"]),
            str(r["external_items_used"]),
            str(r["peers_used"]),
        )
    out.print(table)


@app.command("down")
def down(
    data_dir: DataDirOption = Path(".devnet"),
    wipe: Annotated[bool, typer.Option("--wipe", help="Also delete the devnet's data.")] = False,
) -> None:
    """Stop everything a detached `devnet up` started (by pid); data kept unless --wipe."""
    data_dir = data_dir.absolute()
    pids = []
    supervisor = _supervisor_alive(data_dir)
    if supervisor:
        os.kill(supervisor, signal.SIGTERM)  # it stops its nodes, IPFS and anvil in order
        deadline = time.monotonic() + 120
        while pid_alive(supervisor) and time.monotonic() < deadline:
            time.sleep(0.1)
    # Anything left (a supervisor killed hard): stop by the pid files the servers left.
    for pid_file in [*data_dir.glob("*.pid"), *data_dir.glob("node-*/*.pid")]:
        with contextlib.suppress(ValueError, OSError):
            pid = int(pid_file.read_text().strip())
            if pid_alive(pid):
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
    (data_dir / STATE).unlink(missing_ok=True)
    if wipe and data_dir.exists():
        import shutil

        shutil.rmtree(data_dir)
    stopped = "stopped" if supervisor or pids else "nothing was running"
    out.print(f"devnet {stopped}; " + ("data wiped" if wipe else f"data kept in {data_dir}"))
