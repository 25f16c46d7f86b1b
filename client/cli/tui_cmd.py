"""`sapo tui`: run a node with the operator's terminal UI, or watch one that runs elsewhere.

`--config PATH` opens the node here (the same checks as `sapo node run`, before the screen
starts), runs its round loop in a thread and shows it; its log goes to `<data_dir>/node.log`.
`--attach DATA_DIR` watches a node that runs headless on this machine, read-only: its journal and
`events.jsonl` in DATA_DIR, and the chain (its config from DATA_DIR/node.toml or --config).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from client.chain import ChainError
from client.chain.keystore import KeystoreError, keystore_address
from client.cli.config_cmd import load_or_exit
from client.cli.console import ConfigOption, Exit, fail
from client.cli.progress import ProgressOutput, seed_progress
from client.config import NodeConfig
from client.node.datadir import DataDir
from client.node.eventlog import Event, read_events
from client.store import StoreError
from client.tasks import CatalogError


def tui(
    config: ConfigOption = None,
    attach: Annotated[
        Path | None,
        typer.Option(
            "--attach",
            help="Watch the node whose data dir this is, read-only (it runs elsewhere).",
            file_okay=False,
        ),
    ] = None,
    interval: Annotated[
        float, typer.Option("--interval", min=0.2, max=60, help="Seconds between refreshes.")
    ] = 1.0,
) -> None:
    """Run a node with the terminal UI (--config), or watch a running one (--attach DIR)."""
    # lazily: Textual and the read model load only when the TUI runs (`sapo --help` stays quick)
    from client.node.view import Watcher
    from tui.app import SapoApp
    from tui.live import LiveNode, log_to_file

    metrics = None
    if attach is not None:
        cfg, address = _attached(attach, config)
        app = SapoApp(Watcher(cfg, address, mode="attached"), interval_s=interval, preflight=True)
    elif config is not None:
        # lazily: the training stack (torch, transformers) loads only for the command that uses it
        from client.cli.node_cmd import metrics_can_listen
        from client.node.assemble import NodeConfigError, check_node_data_dir, open_node
        from client.node.metrics import MetricsError, serve_metrics
        from client.policy import PolicyError

        cfg = load_or_exit(config)
        _need_chain(cfg, config)
        metrics_can_listen(cfg)
        try:
            check_node_data_dir(cfg)  # refused before its log is written there
            log_to_file(DataDir(cfg.node.data_dir).log, cfg.node.log_level)
            # a first start may build the seed policy: its progress shows here, before the screen
            with ProgressOutput("seed policy") as shown:
                node = open_node(cfg, progress=seed_progress(shown))
        except (NodeConfigError, KeystoreError, CatalogError, PolicyError) as exc:
            fail(str(exc))
        except (ChainError, StoreError) as exc:
            fail(str(exc), Exit.CHECK_FAILED)
        live = LiveNode(node)
        try:
            metrics = serve_metrics(cfg, node.address, running=lambda: live.running)
        except MetricsError as exc:
            fail(str(exc))
        app = SapoApp(
            Watcher(cfg, node.address, mode="live"), live, interval_s=interval, preflight=True
        )
    else:
        fail("give --config PATH to run a node here, or --attach DATA_DIR to watch one")
    try:
        app.run()
    finally:
        if metrics is not None:
            metrics.close()


def _need_chain(cfg: NodeConfig, source: Path) -> None:
    if not cfg.chain.rpc_url or not cfg.chain.ledger_address:
        fail(f"{source}: set [chain].rpc_url and [chain].ledger_address (the ledger to show)")


def _attached(data_dir: Path, config: Path | None) -> tuple[NodeConfig, str]:
    """Returns the watched node's config (its data dir forced to DATA_DIR) and address."""
    if not data_dir.is_dir():
        fail(f"--attach {data_dir}: no such directory (a node's data dir, e.g. .devnet/node-0)")
    source = config or DataDir(data_dir).config
    if not Path(source).is_file():
        fail(f"--attach {data_dir}: no node.toml there; pass the node's config with --config PATH")
    cfg = load_or_exit(source)
    _need_chain(cfg, Path(source))
    cfg = cfg.model_copy(
        update={"node": cfg.node.model_copy(update={"data_dir": data_dir.absolute()})}
    )
    if cfg.chain.keystore is not None:
        try:
            return cfg, keystore_address(Path(cfg.chain.keystore))
        except KeystoreError as exc:
            fail(f"{source}: {exc}")
    events = read_events(DataDir(data_dir).events)
    started = [e for e in events if e["kind"] == Event.NODE_STARTED]
    if started and isinstance(started[-1].get("address"), str):
        return cfg, started[-1]["address"]
    fail(
        f"--attach {data_dir}: cannot tell whose node this is: set [chain].keystore in "
        f"{source} (its address is read without the password)"
    )
    raise AssertionError  # fail() exits; this keeps type checkers honest
