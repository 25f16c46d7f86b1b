"""What every chain command shares: its options, opening the ledger, and how failures print.

web3 (~0.6 CPU-s to import) is imported when a ledger is opened, not when a command group is
loaded, so `--help` of a chain group stays instant."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import TypeAdapter, ValidationError

from client.cli.config_cmd import load_or_exit
from client.cli.console import ConfigOption, Exit, fail
from client.cli.options import Command, flattened
from client.config import NodeConfig
from client.config.models import Address, RpcUrl, parse_wei

if TYPE_CHECKING:
    from client.chain import Ledger
    from client.chain.events import EventReader

RpcOption = Annotated[
    str | None, typer.Option("--rpc", help="EVM JSON-RPC URL (overrides \\[chain].rpc_url).")
]
LedgerOption = Annotated[
    str | None,
    typer.Option("--ledger", help="SwarmLedger address (overrides \\[chain].ledger_address)."),
]
KeystoreOption = Annotated[
    Path | None,
    typer.Option(
        "--keystore",
        help="Encrypted keystore (overrides \\[chain].keystore). Password: SAPO_KEYSTORE_PASSWORD, "
        "\\[chain].password_file, or a prompt.",
    ),
]


@dataclass(frozen=True)
class ChainOpts:
    """The options every chain command takes, as one value: the node config and what overrides
    its [chain] section. `chain_options` adds them to a command, the way cast flattens its
    RpcOpts into each subcommand."""

    config: Path | None = None
    rpc: str | None = None
    ledger: str | None = None
    keystore: Path | None = None

    def open(self, *, signer: bool = False) -> tuple[NodeConfig, Ledger, EventReader]:
        """The config, a checked Ledger (signing with the keystore when `signer`) and an event
        reader (`open_ledger`)."""
        return open_ledger(self.config, self.rpc, self.ledger, self.keystore, signer=signer)


FROM_CONFIG = ChainOpts()  # a command's `chain` default: `chain_options` always passes its own

_OPTIONS = {
    "config": ConfigOption,
    "rpc": RpcOption,
    "ledger": LedgerOption,
    "keystore": KeystoreOption,
}


def chain_options(*, keystore: bool) -> Callable[[Command], Command]:
    """Gives a command --config, --rpc, --ledger and, with `keystore`, --keystore, after its own
    parameters; the command receives them as its `ChainOpts` parameter."""
    return flattened(ChainOpts, {n: t for n, t in _OPTIONS.items() if keystore or n != "keystore"})


@contextlib.contextmanager
def chain_errors() -> Iterator[None]:
    """Turns chain and keystore failures into one-line errors with meaningful exit codes."""
    # lazily: web3 loads only for the commands that reach a chain (`--help` and `config` do not)
    from client.chain import ChainError
    from client.chain.keystore import KeystoreError

    try:
        yield
    except KeystoreError as exc:
        fail(str(exc), Exit.USAGE)
    except ChainError as exc:
        fail(str(exc), Exit.CHECK_FAILED)


def _validated(adapter: TypeAdapter, value: str, flag: str) -> str:
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        fail(f"{flag}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")


def amount(text: str, flag: str = "AMOUNT") -> int:
    """Returns wei from '1.5 ether', '20 gwei' or a wei integer; exits 2 on anything else."""
    try:
        value = parse_wei(int(text) if text.strip().isdigit() else text)
    except ValueError as exc:
        fail(f"{flag}: {exc}")
    if value == 0:
        fail(f"{flag}: must be above zero")
    return value


def open_ledger(
    config: Path | None,
    rpc: str | None,
    ledger: str | None,
    keystore: Path | None = None,
    *,
    signer: bool = False,
) -> tuple[NodeConfig, Ledger, EventReader]:
    """Returns the config, a checked Ledger (signing when `signer`) and an event reader."""
    # lazily: web3 loads only for the commands that reach a chain (`--help` and `config` do not)
    from client.chain import Ledger, connect
    from client.chain.events import EventReader

    cfg = load_or_exit(config)
    rpc_url = rpc or cfg.chain.rpc_url
    if not rpc_url:
        fail("no RPC URL: pass --rpc or set [chain].rpc_url in the config")
    rpc_url = _validated(TypeAdapter(RpcUrl), rpc_url, "--rpc")
    address = ledger or cfg.chain.ledger_address
    if not address:
        fail("no ledger address: pass --ledger or set [chain].ledger_address in the config")
    address = _validated(TypeAdapter(Address), address, "--ledger")
    with chain_errors():
        account = open_account(cfg, keystore) if signer else None
        bound = Ledger(
            connect(rpc_url, cfg.chain.request_timeout_s),
            address,
            account=account,
            max_fee_gwei=cfg.chain.max_fee_gwei,
            priority_fee_gwei=cfg.chain.priority_fee_gwei,
            receipt_timeout_s=cfg.chain.receipt_timeout_s,
        )
        bound.check(cfg.chain.chain_id)
    reader = EventReader(
        bound, chunk_blocks=cfg.chain.log_chunk_blocks, start_block=cfg.chain.ledger_deploy_block
    )
    return cfg, bound, reader


def open_account(cfg: NodeConfig, keystore: Path | None):
    """Returns the LocalAccount of --keystore or [chain].keystore; exits 2 without one."""
    # lazily: web3 loads only for the commands that reach a chain (`--help` and `config` do not)
    from client.chain.keystore import load_account

    path = keystore or cfg.chain.keystore
    if path is None:
        fail("no keystore: pass --keystore or set [chain].keystore (create one: sapo wallet new)")
    return load_account(path, password_file=cfg.chain.password_file)


def book_address(cfg: NodeConfig, why: str) -> str:
    """`[chain].round_book_address`; exits 2 naming the key (`why`: what the command needs the
    book for) when the config names none."""
    if cfg.chain.round_book_address is None:
        fail(
            f"set [chain].round_book_address to the RoundBook {why} "
            "(deploy one: sapo chain deploy-book)"
        )
    return cfg.chain.round_book_address


def open_book(cfg: NodeConfig, ledger: Ledger, *, why: str):
    """The round book `[chain].round_book_address` names (`book_address`), checked to read
    `ledger`, signing as the ledger's account when it has one. Call it in `chain_errors()`."""
    from client.chain.book import RoundBook

    book = RoundBook(
        ledger.w3,
        book_address(cfg, why),
        account=ledger.tx.account,
        max_fee_gwei=cfg.chain.max_fee_gwei,
        priority_fee_gwei=cfg.chain.priority_fee_gwei,
        receipt_timeout_s=cfg.chain.receipt_timeout_s,
        # one nonce sequence for the account's transactions to both contracts
        nonces_of=ledger.tx if ledger.tx.account is not None else None,
    )
    book.check(ledger.address)
    return book
