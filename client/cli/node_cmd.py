"""`sapo node`: register a node on the ledger and run it headless.

`run` logs one human-readable line per event on stderr and appends the same events as JSON lines
to `<data_dir>/events.jsonl`; Ctrl-C or SIGTERM finishes the current step, checkpoints, flushes
the outbox and exits 0.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from client.chain import ChainError
from client.chain.keystore import KeystoreError
from client.cli.chain_ctx import amount, chain_errors
from client.cli.config_cmd import load_or_exit
from client.cli.console import (
    ConfigOption,
    Exit,
    JsonOption,
    fail,
    out,
    print_json,
    serve_until_signalled,
)
from client.config.models import format_ether as ether
from client.node.assemble import (
    NodeConfigError,
    check_family,
    node_family,
    open_node,
    signing_ledger,
)
from client.node.metadata import node_metadata
from client.store import StoreError, open_store
from client.tasks import CatalogError

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS


@app.command("register")
def register(
    config: ConfigOption = None,
    stake: Annotated[
        str | None,
        typer.Option("--stake", help="Stake to lock, e.g. '2 ether' (default: the minimum)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Stake and register this node in its model family, with its metadata (model, store,
    client version). The family is its base's content id (its architecture's without an adapter),
    fixed for the address's life."""
    cfg = load_or_exit(config)
    try:
        ledger = signing_ledger(cfg)
    except (NodeConfigError, KeystoreError) as exc:
        fail(str(exc))
    with chain_errors():
        params = ledger.check(cfg.chain.chain_id)
        value = amount(stake, "--stake") if stake else params.min_stake
        info = ledger.node_info(ledger.account_address)
        if info.registered:
            fail(
                f"{ledger.account_address} is already registered (stake more: sapo stake add)",
                Exit.CHECK_FAILED,
            )
        try:
            family = node_family(cfg)
            check_family(None, family, ledger.account_address, params.families)
        except NodeConfigError as exc:
            fail(str(exc), Exit.CHECK_FAILED)
        metadata = node_metadata(cfg, open_store(cfg.store))
        result = ledger.register(metadata, value, family)
    if as_json:
        print_json(
            {
                "address": ledger.account_address,
                "stake": value,
                "family": family,
                "tx_hash": result.tx_hash,
            }
        )
    else:
        out.print(
            f"registered {ledger.account_address} with {ether(value)} in model family "
            f"{family} in {result.tx_hash}"
        )


@app.command("run")
def run(
    config: ConfigOption = None,
    rounds: Annotated[
        int | None, typer.Option("--rounds", min=1, help="Stop after this many rounds.")
    ] = None,
) -> None:
    """Run the node headless: the SAPO round loop until Ctrl-C / SIGTERM."""
    cfg = load_or_exit(config)
    stop = serve_until_signalled(
        cfg.node.log_level, "sapo.node", "stopping after the current step…"
    )
    # lazily: the training stack (torch, transformers) loads only for the command that uses it
    from client.node.metrics import MetricsError, serve_metrics
    from client.policy import PolicyError

    metrics_can_listen(cfg)

    try:
        if cfg.policy.model.startswith("seed"):
            logging.getLogger("sapo.node").info(
                "policy: the %s policy (built once under %s if absent)",
                cfg.policy.model,
                cfg.policy.cache_dir,
            )
        node = open_node(cfg)
    except (NodeConfigError, KeystoreError, CatalogError, PolicyError) as exc:
        fail(str(exc))
    except (ChainError, StoreError) as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    # lazily, as above: the node module imports torch
    from client.node.node import StageFailed

    try:
        metrics = serve_metrics(cfg, node.address)
    except MetricsError as exc:
        fail(str(exc))
    try:
        node.run(stop, rounds=rounds)
    except StageFailed as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    finally:
        if metrics is not None:
            metrics.close()


def metrics_can_listen(cfg) -> None:
    """Exits 2 when [node].metrics_addr is set and its port is taken: checked before the node's
    start, which may build its policy for minutes (`sapo node run`, `sapo tui --config`)."""
    from client.node.metrics import MetricsError, check_listen

    if cfg.node.metrics_addr is not None:
        try:
            check_listen(cfg.node.metrics_addr)
        except MetricsError as exc:
            fail(str(exc))
