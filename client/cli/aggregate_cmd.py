"""`sapo aggregate`: the root lane's aggregator (docs/scaling.md), run by an operator.

`run` enlists this node on the round book's roster of aggregators (each round's aggregator is
drawn from it: only the drawn one may post the round's roots), serves the endpoint producers and
checkers send their signed messages to ([aggregator]: loopback unless made public), lists its
origin in this node's on-chain metadata (its `aggregator` key), makes the draws of the coming
rounds where nobody has, and on the round book's clock posts each round's submission root and
verdict root, answers data challenges, folds earnings and takes its bonds back
(client.node.aggregation.service); everything it holds is written to `<data_dir>/aggregator.db`
before it is answered, so a restart loses nothing. Run it with a key
of its own (a registered node of its own, not a training node's key: two processes sending from
one account race for its nonces). Ctrl-C or SIGTERM finishes the current pass and exits 0; the
node stays on the roster (a restart goes on). `resign` takes it off: it is drawn no more, the
rounds drawn to it already stay its own to post, and its roster bond comes back once they are
past their proofs.
"""

from __future__ import annotations

import json
import logging
import sqlite3

import typer

from client.chain import ChainError
from client.chain.keystore import KeystoreError
from client.cli.chain_ctx import book_address, chain_errors, open_book
from client.cli.config_cmd import load_or_exit
from client.cli.console import ConfigOption, Exit, fail, serve_until_signalled
from client.config.models import format_ether
from client.node.assemble import NodeConfigError, signing_ledger
from client.store import StoreError, open_store

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS
log = logging.getLogger("sapo.aggregator")


def listed_metadata(current: str, origin: str) -> str | None:
    """The metadata to write so that it lists `origin` as this node's aggregator (the rest kept),
    or None when it already does."""
    try:
        data = json.loads(current) if current else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    if data.get("aggregator") == origin:
        return None
    return json.dumps({**data, "aggregator": origin}, separators=(",", ":"))


@app.command("run")
def run(config: ConfigOption = None) -> None:
    """Serve the aggregator's endpoint and post each round's roots until Ctrl-C / SIGTERM."""
    serve(load_or_exit(config))


def serve(cfg, service_class=None) -> None:
    """`aggregate run`'s body: the service (`service_class`, an Aggregator's; a devnet's liar
    names its own, client.devnet.liar) on its endpoint until Ctrl-C / SIGTERM."""
    stop = serve_until_signalled(
        cfg.node.log_level, "sapo.aggregator", "stopping after the current pass…"
    )
    # lazily: web3 and the aggregation code load only for this command
    from client.chain.messages import Domain, ReceiptSigner
    from client.node.aggregation.endpoint import AggregatorServer, EndpointError
    from client.node.aggregation.held import Held, HeldError
    from client.node.aggregation.service import POLL_S, Aggregator

    book_address(cfg, "this aggregator posts to")  # before the keystore is unlocked
    try:
        ledger = signing_ledger(cfg)
    except (NodeConfigError, KeystoreError) as exc:
        fail(str(exc))
    with chain_errors():
        ledger.check(cfg.chain.chain_id)
        account = ledger.tx.account
        assert account is not None  # signing_ledger
        book = open_book(cfg, ledger, why="this aggregator posts to")
        info = ledger.node_info(account.address)
        if not info.registered:
            fail(
                f"{account.address} is not a registered node: only a registered node posts "
                "roots (register it: sapo node register --config …)",
                Exit.CHECK_FAILED,
            )
    try:
        store = open_store(cfg.store)
    except StoreError as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    domain = Domain(chain_id=ledger.chain_id, contract=book.address)
    try:
        held = Held(cfg.node.data_dir / "aggregator.db", domain)
    except HeldError as exc:
        fail(str(exc))
    try:
        service = (service_class or Aggregator)(
            ledger,
            book,
            held,
            ReceiptSigner(domain, bytes(account.key)),
            store=store,
            start_block=cfg.chain.round_book_deploy_block,
            chunk_blocks=cfg.chain.log_chunk_blocks,
        )
        try:
            server = AggregatorServer(
                cfg.aggregator.listen, service.desk, public=cfg.aggregator.public
            )
        except EndpointError as exc:
            fail(str(exc))
        try:
            # listed before start() enlists: a producer whose round is drawn to a node that
            # lists no endpoint goes to the ledger at once
            origin = cfg.aggregator.listed()
            with chain_errors():
                (bond, _), pay = book.bonds(), book.post_pay_bps()  # fixed for the book's life
                log.info(
                    "book %s: a round's bond %s, its pay %s bps of the round's reward",
                    book.address,
                    format_ether(bond),
                    pay,
                )
                wanted = listed_metadata(info.metadata, origin)
                if wanted is not None:
                    ledger.set_metadata(wanted)
                    log.info("metadata: lists %s as this node's aggregator", origin)
                service.start()
            log.info("aggregator %s: collecting at %s", account.address, server.url)
            said: dict[int, str] = {}  # why a round was not posted, logged once
            while not stop.is_set():
                try:
                    for round_, why in service.tick().skipped.items():
                        if said.get(round_) != why:
                            said[round_] = why
                            log.warning("round %s: not posted: %s", round_, why)
                except (ChainError, StoreError, HeldError, sqlite3.Error) as exc:
                    log.warning("aggregator: this pass stopped (%s); the next goes on", exc)
                stop.wait(POLL_S)
        finally:
            server.close()
    finally:
        held.close()


@app.command("resign")
def resign(config: ConfigOption = None) -> None:
    """Take this node off the round book's roster of aggregators (it is drawn no more), and
    take its roster bond back once the last round drawn to it is past its proofs (run it again
    then)."""
    cfg = load_or_exit(config)
    book_address(cfg, "whose roster this node resigns from")
    try:
        ledger = signing_ledger(cfg)
    except (NodeConfigError, KeystoreError) as exc:
        fail(str(exc))
    with chain_errors():
        book = open_book(cfg, ledger, why="whose roster this node resigns from")
        address = ledger.account_address
        held, until = book.held_bond(address)
        if book.enlisted(address):
            result = book.resign()
            typer.echo(
                f"{address} left the roster of aggregators in {result.tx_hash}; the rounds "
                "drawn to it already are still its own to post (keep `sapo aggregate run` up "
                "through them)"
            )
        elif not held:
            fail(
                f"{address} is not on the round book's roster of aggregators and holds no bond "
                "there",
                Exit.USAGE,
            )
        current = ledger.current_round()
        if held and current > until:
            result = book.withdraw_bond()
            typer.echo(f"its roster bond ({held} wei) came back in {result.tx_hash}")
        elif held:
            typer.echo(
                f"its roster bond ({held} wei) is held through round {until} (the proofs of the "
                f"last round drawn to it; now {current}): run `sapo aggregate resign` again then"
            )


__all__ = ["app", "listed_metadata", "resign", "serve"]
