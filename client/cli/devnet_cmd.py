"""`sapo devnet`: a complete local swarm on loopback, started and stopped with one command."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from client.cli.config_cmd import load_or_exit
from client.cli.console import ConfigOption, Exit, JsonOption, fail, out
from client.devnet import Anvil, AnvilNotFound, IpfsDaemon, IpfsNotFound, ServerStartError

app = typer.Typer(help="Run a local swarm on this machine (loopback only).", no_args_is_help=True)

# Parts of a full devnet that later work brings; `up` lists them instead of pretending.
NOT_YET = [
    # `sapo chain deploy` works against this chain today; the devnet deploys its own ledger
    # once the task catalog (whose digest the ledger pins) exists.
    ("ledger", "SwarmLedger deployed with a funded reward pool", "node"),
    ("nodes", "node processes with registered, staked keystores", "node"),
    ("tui", "the operator's TUI watching the swarm", "TUI"),
]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@app.command("up")
def up(
    config: ConfigOption = None,
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Where logs, pid files and state go.")
    ] = Path(".devnet"),
    port: Annotated[
        int | None,
        typer.Option("--port", min=1, max=65_535, help="Chain RPC port (default: a free one)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Start the local swarm in the foreground; Ctrl-C stops everything it started."""
    cfg = load_or_exit(config)
    data_dir = data_dir.absolute()
    data_dir.mkdir(parents=True, exist_ok=True)
    # SIGTERM (kill, systemd) and SIGHUP (a closed SSH session) stop as cleanly as Ctrl-C.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)

    anvil = Anvil(
        data_dir,
        port=port,
        chain_id=cfg.devnet.chain_id,
        accounts=cfg.devnet.accounts,
        balance_eth=cfg.devnet.balance_eth,
    )
    # The local swarm's IPFS daemon, unless its nodes share a local blockstore instead.
    ipfs = IpfsDaemon(data_dir) if cfg.store.backend == "ipfs" else None
    parts = [p for p in (anvil, ipfs) if p is not None]
    try:
        try:
            for part in parts:
                part.start()
        except (AnvilNotFound, IpfsNotFound) as exc:
            fail(str(exc), Exit.USAGE)
        except ServerStartError as exc:
            fail(str(exc), Exit.CHECK_FAILED)
        _report(anvil, ipfs, data_dir, as_json)
        while all(part.running for part in parts):
            time.sleep(0.2)
        dead = next(part for part in parts if not part.running)
        fail(
            f"{type(dead).__name__} (pid {dead.pid}) exited unexpectedly; its log ends with:\n"
            f"{dead.log_tail()}",
            Exit.CHECK_FAILED,
        )
    except KeyboardInterrupt:
        if not as_json:
            out.print("\nstopping the devnet…")
    finally:
        for part in reversed(parts):
            part.stop()
    if not as_json:
        out.print(f"stopped; logs kept in {data_dir}")


def _report(anvil: Anvil, ipfs: IpfsDaemon | None, data_dir: Path, as_json: bool) -> None:
    if as_json:
        ready = {
            "rpc_url": anvil.url,
            "chain_id": anvil.chain_id,
            "anvil_pid": anvil.pid,
            "ipfs_api": ipfs.api if ipfs else None,
            "ipfs_pid": ipfs.pid if ipfs else None,
            "data_dir": str(data_dir),
            "not_yet": [name for name, _, _ in NOT_YET],
        }
        print(json.dumps(ready), flush=True)
        return
    out.print(f"[bold]devnet up[/]  data in {data_dir}", markup=True)
    out.print(
        f"  chain   anvil at {anvil.url}  chain id {anvil.chain_id}  pid {anvil.pid}  "
        f"log {data_dir / 'anvil.log'}"
    )
    out.print("          dev accounts from anvil's public test mnemonic: devnet use only")
    if ipfs is not None:
        out.print(
            f"  ipfs    js-ipfs API {ipfs.api} (offline)  pid {ipfs.pid}  "
            f"log {data_dir / 'ipfs.log'}"
        )
    else:
        out.print("  store   local blockstore (no IPFS daemon)")
    out.print("[yellow]not there yet:[/]", markup=True)
    for name, what, work in NOT_YET:
        out.print(f"  {name:<7} {what} (lands with the {work} work)")
    out.print("Press Ctrl-C to stop.")
    sys.stdout.flush()
