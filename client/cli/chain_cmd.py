"""`sapo chain`: deploy a SwarmLedger and read its parameters and totals."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError
from rich.table import Table

from client.chain import connect, deploy_ledger
from client.chain.deploy import POST_PAY_BPS, check_bonds, check_lanes, deploy_with_book
from client.chain.models import TxResult
from client.cli.chain_ctx import (
    FROM_CONFIG,
    ChainOpts,
    KeystoreOption,
    RpcOption,
    amount,
    chain_errors,
    chain_options,
    open_account,
)
from client.cli.config_cmd import load_or_exit
from client.cli.console import ConfigOption, JsonOption, fail, fail_validation, out, print_json
from client.config.models import LedgerSection
from client.config.models import format_ether as ether

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS
BondOption = Annotated[
    str,
    typer.Option(
        "--bond",
        help="What an aggregator bonds per round it posts, and while on the roster ('1 ether').",
    ),
]
ChallengeBondOption = Annotated[
    str, typer.Option("--challenge-bond", help="What a data challenge bonds ('0.1 ether').")
]
PostPayOption = Annotated[
    int,
    typer.Option(
        "--post-pay-bps",
        min=0,
        max=10_000,
        help="What the book pays an aggregator at a round's release, in basis points of the "
        "round's reward (times its root's share of the round's credited signal), on top of the "
        "producers' shares; fixed for the book's life.",
    ),
]


@app.command("deploy")
def deploy(
    ctx: typer.Context,
    catalog_digest: Annotated[
        str,
        typer.Option(
            "--catalog-digest",
            help="sha256 (0x + 64 hex) of the task catalog nodes must draw from; fixed forever.",
        ),
    ],
    config: ConfigOption = None,
    rpc: RpcOption = None,
    keystore: KeystoreOption = None,
    round_length: Annotated[int | None, typer.Option(help="Seconds per round.")] = None,
    min_stake: Annotated[str | None, typer.Option(help="Least stake: '1 ether', wei...")] = None,
    unbonding_period: Annotated[int | None, typer.Option(help="Seconds to unbond.")] = None,
    challenge_rounds: Annotated[
        int | None,
        typer.Option(help="Rounds, after the submission window, a batch can be attested."),
    ] = None,
    submit_rounds: Annotated[
        int | None, typer.Option(help="Rounds after a round in which its batch is accepted (W).")
    ] = None,
    reward_per_round: Annotated[str | None, typer.Option(help="Reward split per round.")] = None,
    slash_bps: Annotated[int | None, typer.Option(help="Share of stake slashed, in bps.")] = None,
    tolerance_bps: Annotated[int | None, typer.Option(help="Agreement tolerance, in bps.")] = None,
    family: Annotated[
        list[str] | None,
        typer.Option(
            help="A model family the ledger checks (a base's content id: `sapo policy id "
            "MODEL`); repeat for each; replaces \\[ledger].families."
        ),
    ] = None,
    with_book: Annotated[
        bool,
        typer.Option(
            "--with-book",
            help="Deploy the root lane's RoundBook too, as the next transaction; the ledger names "
            "it for good (docs/scaling.md).",
        ),
    ] = False,
    bond: BondOption = "1 ether",
    challenge_bond: ChallengeBondOption = "0.1 ether",
    post_pay_bps: PostPayOption = POST_PAY_BPS,
    as_json: JsonOption = False,
) -> None:
    """Deploy a SwarmLedger (and its RoundBook with --with-book); parameters default to the
    config's \\[ledger] section."""
    cfg = load_or_exit(config)
    overrides = {
        "round_length_s": round_length,
        "min_stake": min_stake,
        "unbonding_period_s": unbonding_period,
        "challenge_rounds": challenge_rounds,
        "submit_rounds": submit_rounds,
        "reward_per_round": reward_per_round,
        "slash_bps": slash_bps,
        "agree_tolerance_bps": tolerance_bps,
        "families": family or None,
    }
    try:
        params = LedgerSection(
            **(cfg.ledger.model_dump() | {k: v for k, v in overrides.items() if v is not None})
        )
    except ValidationError as exc:
        fail_validation(exc)
    if not params.families:
        fail(
            "no model family: pass --family 0x… for each base this ledger checks (`sapo policy "
            "id MODEL` prints one) or set [ledger].families; they are fixed once deployed"
        )
    digest = catalog_digest.removeprefix("0x")
    if len(digest) != 64 or any(c not in "0123456789abcdefABCDEF" for c in digest):
        fail(f"--catalog-digest: expected 0x and 64 hex digits, got {catalog_digest!r}")
    given = [
        f"--{name.replace('_', '-')}"
        for name in ("bond", "challenge_bond", "post_pay_bps")
        # by name: typer's context is its own click's, whose ParameterSource is not click's
        if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"
    ]
    if given and not with_book:
        fail(
            f"{', '.join(given)} set the round book's terms and go with --with-book (without "
            "it no book is deployed); `sapo chain deploy-book` deploys one beside a ledger that "
            "names it"
        )
    bond_wei, challenge_wei = amount(bond, "--bond"), amount(challenge_bond, "--challenge-bond")
    if with_book:
        try:
            check_bonds(bond_wei, challenge_wei)
            check_lanes(params.appeal_rounds, params.challenge_rounds)
        except ValueError as exc:
            fail(str(exc))
    rpc_url = rpc or cfg.chain.rpc_url or fail("no RPC URL: pass --rpc or set [chain].rpc_url")
    fees = {
        "max_fee_gwei": cfg.chain.max_fee_gwei,
        "priority_fee_gwei": cfg.chain.priority_fee_gwei,
        "receipt_timeout_s": cfg.chain.receipt_timeout_s,
    }
    book = book_tx = None
    with chain_errors():
        account = open_account(cfg, keystore)
        w3 = connect(rpc_url, cfg.chain.request_timeout_s)
        if with_book:
            ledger, tx, book, book_tx = deploy_with_book(
                w3,
                account,
                params,
                bytes.fromhex(digest),
                bond_wei,
                challenge_wei,
                post_pay_bps,
                **fees,
            )
        else:
            ledger, tx = deploy_ledger(w3, account, params, bytes.fromhex(digest), **fees)
        chain_id = w3.eth.chain_id
    if as_json:
        found = {
            "address": ledger.address,
            "chain_id": chain_id,
            "tx_hash": tx.tx_hash,
            "block_number": tx.block_number,
            "gas_used": tx.gas_used,
            "params": ledger.params().model_dump(),
        }
        if book is not None and book_tx is not None:
            found["book"] = _book_json(
                book.address, ledger.address, book_tx, bond_wei, challenge_wei, post_pay_bps
            )
        print_json(found)
        return
    out.print(f"SwarmLedger deployed at {ledger.address} (chain {chain_id})")
    out.print(f"  tx {tx.tx_hash}  block {tx.block_number}  gas {tx.gas_used:,}")
    if book is not None and book_tx is not None:
        out.print(f"RoundBook deployed at {book.address}, named by the ledger")
        out.print(f"  {_terms(bond_wei, challenge_wei, post_pay_bps)}")
        out.print(f"  tx {book_tx.tx_hash}  block {book_tx.block_number}  gas {book_tx.gas_used:,}")
    out.print("Add to the node config:")
    out.print(f'  [chain]\n  ledger_address = "{ledger.address}"')
    out.print(f"  ledger_deploy_block = {tx.block_number}")
    if book is not None and book_tx is not None:
        out.print(f'  round_book_address = "{book.address}"')
        out.print(f"  round_book_deploy_block = {book_tx.block_number}")


def _terms(bond: int, challenge_bond: int, post_pay_bps: int) -> str:
    """A book's terms, fixed for its life, as the deploy commands print them."""
    return (
        f"bond {ether(bond)} a round, challenge bond {ether(challenge_bond)}, the aggregator's "
        f"pay {post_pay_bps} bps of a round's reward"
    )


def _book_json(
    address: str, ledger: str, tx: TxResult, bond: int, challenge_bond: int, post_pay_bps: int
) -> dict:
    return {
        "address": address,
        "ledger": ledger,
        "tx_hash": tx.tx_hash,
        "block_number": tx.block_number,
        "gas_used": tx.gas_used,
        "bond": bond,
        "challenge_bond": challenge_bond,
        "post_pay_bps": post_pay_bps,
    }


@app.command("deploy-book")
@chain_options(keystore=True)
def deploy_book_cmd(
    bond: BondOption = "1 ether",
    challenge_bond: ChallengeBondOption = "0.1 ether",
    post_pay_bps: PostPayOption = POST_PAY_BPS,
    as_json: JsonOption = False,
    chain: ChainOpts = FROM_CONFIG,
) -> None:
    """Deploy the root lane's RoundBook the configured ledger names: from the account that
    deployed the ledger, as its next transaction (`chain deploy --with-book` does both)."""
    from client.chain import deploy_book

    bond_wei, challenge_wei = amount(bond, "--bond"), amount(challenge_bond, "--challenge-bond")
    with chain_errors():
        cfg, ledger, _ = chain.open(signer=True)
        account = ledger.tx.account
        assert account is not None  # a signing ledger
        try:
            book, tx = deploy_book(
                ledger,
                account,
                bond_wei,
                challenge_wei,
                post_pay_bps=post_pay_bps,
                max_fee_gwei=cfg.chain.max_fee_gwei,
                priority_fee_gwei=cfg.chain.priority_fee_gwei,
                receipt_timeout_s=cfg.chain.receipt_timeout_s,
            )
        except ValueError as exc:
            fail(str(exc))
    if as_json:
        print_json(
            _book_json(book.address, ledger.address, tx, bond_wei, challenge_wei, post_pay_bps)
        )
        return
    out.print(f"RoundBook deployed at {book.address} beside ledger {ledger.address}")
    out.print(f"  {_terms(bond_wei, challenge_wei, post_pay_bps)}")
    out.print(f"  tx {tx.tx_hash}  block {tx.block_number}  gas {tx.gas_used:,}")
    out.print("Add to the config:")
    out.print(f'  [chain]\n  round_book_address = "{book.address}"')
    out.print(f"  round_book_deploy_block = {tx.block_number}")


@app.command("info")
@chain_options(keystore=False)
def info(
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Show the ledger's parameters, clock and money totals."""
    _, bound, _ = chain.open()
    with chain_errors():
        params = bound.params()
        data = {
            "address": bound.address,
            "current_round": bound.current_round(),
            "node_count": bound.node_count(),
            "params": params.model_dump(),
            "totals": bound.totals(),
        }
    if as_json:
        print_json(data)
        return
    table = Table(title=f"SwarmLedger {bound.address}", show_header=False)
    table.add_row("current round", str(data["current_round"]))
    table.add_row("nodes", str(data["node_count"]))
    table.add_row("round length", f"{params.round_length} s")
    table.add_row("min stake", ether(params.min_stake))
    table.add_row("unbonding period", f"{params.unbonding_period} s")
    w = params.submit_rounds
    table.add_row("submission window", f"{w} rounds (a batch of round r until round r + {w})")
    table.add_row(
        "challenge window",
        f"{params.challenge_rounds} rounds after it (its first committee votes until round "
        f"r + {params.submit_rounds + params.challenge_rounds})",
    )
    table.add_row(
        "appeal window",
        f"{params.appeal_rounds} rounds after it (a batch not credited is appealed in all but "
        f"the last; final after round r + {params.final_after(0)})",
    )
    table.add_row(
        "committees",
        f"{params.checkers} seat trials per node (quorum {params.quorum}); an appeal's "
        f"{params.appeal_checkers}",
    )
    table.add_row("reward per round", ether(params.reward_per_round))
    table.add_row("slash", f"{params.slash_bps / 100:.2f}% of stake")
    table.add_row("agreement tolerance", f"{params.agree_tolerance_bps / 100:.2f}% of max score")
    table.add_row("catalog digest", params.catalog_digest)
    for i, family in enumerate(params.families):
        table.add_row("model families" if i == 0 else "", family)
    for key, value in data["totals"].items():
        table.add_row(key.replace("_", " "), ether(value))
    out.print(table)
