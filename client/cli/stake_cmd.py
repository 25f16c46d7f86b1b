"""`sapo stake` and `sapo rewards`: a node's money on the ledger."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from client.cli.chain_ctx import (
    FROM_CONFIG,
    ChainOpts,
    amount,
    chain_errors,
    chain_options,
)
from client.cli.console import Exit, JsonOption, fail, out, print_json
from client.config.models import format_ether as ether
from client.config.models import format_score as score

if TYPE_CHECKING:
    from client.chain import Ledger, TxResult
    from client.chain.events import EventReader

stake_app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS
rewards_app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS

AmountArg = Annotated[str, typer.Argument(help="Amount: '1.5 ether', '20 gwei', or wei.")]


def _done(action: str, tx: TxResult, bound: Ledger, as_json: bool) -> None:
    info = bound.node_info(bound.account_address)
    if as_json:
        print_json({"action": action, **tx.model_dump(), "node": info.model_dump()})
        return
    out.print(f"{action}: tx {tx.tx_hash} (block {tx.block_number}, gas {tx.gas_used:,})")
    out.print(
        f"  active {ether(info.active_stake)}, unbonding {ether(info.unbonding)}"
        + (f" (frees at unix time {info.unbonding_end})" if info.unbonding else "")
    )


@stake_app.command("add")
@chain_options(keystore=True)
def add(
    value: AmountArg,
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Add to the node's active stake."""
    wei = amount(value)
    _, bound, _ = chain.open(signer=True)
    with chain_errors():
        _done("stake added", bound.add_stake(wei), bound, as_json)


@stake_app.command("unstake")
@chain_options(keystore=True)
def unstake(
    value: AmountArg,
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Move active stake into unbonding (the unbonding clock restarts for the whole amount)."""
    wei = amount(value)
    _, bound, _ = chain.open(signer=True)
    with chain_errors():
        _done("unstake requested", bound.request_unstake(wei), bound, as_json)


@stake_app.command("withdraw")
@chain_options(keystore=True)
def withdraw(
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Withdraw unbonded stake once its clock has run."""
    _, bound, _ = chain.open(signer=True)
    with chain_errors():
        _done("withdrawn", bound.withdraw(), bound, as_json)


def _reward_rows(bound: Ledger, reader: EventReader, node: str) -> list[dict]:
    current = bound.current_round()
    params = bound.params()
    rows = []
    for event in reader.read(["Submitted"], node=node):
        sub = bound.submission(event.args["round"], node)
        final = params.is_final(sub.round, current)
        claimable = bound.claimable(node, [sub.round]) if final and not sub.paid else 0
        rows.append(
            {
                "round": sub.round,
                "score": sub.score,
                "signal": sub.signal,
                "credited": sub.credited,
                "why_not_credited": sub.why_not_credited(params.quorum),
                "final": final,
                "appealed": sub.appealed,
                "appealable": not sub.credited
                and not sub.appealed
                and params.appeal_open(sub.round, current),
                "settled": sub.settled,
                "paid": sub.paid,
                "claimable": claimable,
            }
        )
    return rows


@rewards_app.command("show")
@chain_options(keystore=True)
def show(
    address: Annotated[
        str | None, typer.Argument(help="Node address (default: the keystore's).")
    ] = None,
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Per round: score, claimed and credited learning signal (what pays), why a round earns
    nothing, whether final, paid and claimable rewards."""
    _, bound, reader = chain.open(signer=address is None)
    with chain_errors():
        node = address or bound.account_address
        rows = _reward_rows(bound, reader, node)
        pool = bound.reward_pool()
    total = sum(r["claimable"] for r in rows)
    if as_json:
        print_json({"node": node, "claimable": total, "reward_pool": pool, "rounds": rows})
        return
    table = Table(title=f"rewards of {node}")
    columns = (
        "round",
        "score",
        "signal",
        "credited",
        "final",
        "appeal",
        "settled",
        "paid",
        "claimable",
    )
    for column in (*columns, "why not"):
        table.add_column(column, justify="left" if column == "why not" else "right")
    for r in rows:
        table.add_row(
            str(r["round"]),
            score(r["score"]),
            score(r["signal"]),
            score(r["credited"]),
            "yes" if r["final"] else "no",
            "yes" if r["appealed"] else ("open" if r["appealable"] else "-"),
            "yes" if r["settled"] else ("due" if r["final"] else "no"),
            ether(r["paid"]),
            ether(r["claimable"]),
            r["why_not_credited"] or "",
        )
    out.print(table)
    due = [r["round"] for r in rows if r["final"] and not r["settled"]]
    out.print(f"claimable now: {ether(total)} (reward pool {ether(pool)})")
    if due:
        out.print(
            f"unsettled final rounds: {', '.join(map(str, due))} (withdraw waits for them; "
            "a running node settles them, or `sapo rewards settle`)"
        )


@rewards_app.command("claim")
@chain_options(keystore=True)
def claim(
    rounds: Annotated[
        list[int] | None, typer.Option("--round", help="Claim this round (repeatable).")
    ] = None,
    book: Annotated[
        bool,
        typer.Option(
            "--book",
            help="Claim what the root lane's round book (\\[chain].round_book_address) owes "
            "instead: one proof of your newest credit in a standing round, with the credits "
            "before it that it does not carry yet.",
        ),
    ] = False,
    lookback: Annotated[
        int,
        typer.Option(
            "--lookback", min=1, max=100_000, help="With --book: standing rounds searched back."
        ),
    ] = 100,
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Claim rewards of final rounds in one transaction (default: every claimable round)."""
    cfg, bound, reader = chain.open(signer=True)
    if book:
        if rounds:
            fail("--round names the ledger's rounds: the book pays from one credit (--book)")
        _claim_book(cfg, bound, lookback, as_json)
        return
    with chain_errors():
        node = bound.account_address
        if not rounds:
            rounds = [r["round"] for r in _reward_rows(bound, reader, node) if r["claimable"]]
        if not rounds:
            fail(
                "nothing to claim: no final, credited, unpaid round (a round is final once its "
                "challenge window has closed, and where a round book runs, paid once the book "
                "has decided it too; see sapo rewards show)",
                Exit.CHECK_FAILED,
            )
        before = bound.node_info(node).total_paid
        tx = bound.claim(rounds)
        paid = bound.node_info(node).total_paid - before
    if as_json:
        print_json({"node": node, "rounds": rounds, "paid": paid, **tx.model_dump()})
        return
    out.print(f"claimed {ether(paid)} for rounds {', '.join(map(str, rounds))}: tx {tx.tx_hash}")


def _claim_book(cfg, bound: Ledger, lookback: int, as_json: bool) -> None:
    """`claim --book`: the root lane's earnings, from the round book."""
    from client.cli.chain_ctx import open_book
    from client.node.aggregation.claims import Claimant, NoClaim
    from client.store import StoreError, open_store

    try:
        store = open_store(cfg.store)
    except StoreError as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    with chain_errors():
        rb = open_book(cfg, bound, why="whose earnings to claim")
        node = bound.account_address
        claimant = Claimant.of(cfg, bound, rb, store)
        try:
            found = claimant.find(node, lookback)
        except NoClaim as exc:
            fail(f"nothing to claim from the round book: {exc}", Exit.CHECK_FAILED)
        before = rb.paid_of(node)[0]
        if found.due <= before:
            fail(
                f"nothing to claim from the round book: its newest credit of yours (round "
                f"{found.entry.round}) is paid already ({ether(before)})",
                Exit.CHECK_FAILED,
            )
        tx = rb.call("claim", found.args())
        paid = rb.paid_of(node)[0] - before
    rounds = [found.entry.round, *(t.round for t in found.tail)]
    if as_json:
        print_json(
            {"node": node, "book": rb.address, "rounds": rounds, "paid": paid, **tx.model_dump()}
        )
        return
    out.print(
        f"claimed {ether(paid)} from the round book (credit of round {found.entry.round}"
        + (f", with rounds {', '.join(map(str, rounds[1:]))}" if rounds[1:] else "")
        + f"): tx {tx.tx_hash}"
    )


@rewards_app.command("appeal")
@chain_options(keystore=True)
def appeal(
    round_: Annotated[int, typer.Argument(metavar="ROUND", help="The round of your batch.")],
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Appeal the verdict on your batch of ROUND to a larger committee drawn afresh (open in
    the appeal rounds after its challenge window, to a batch not credited; a running node
    appeals by itself when its re-check agrees with its claim). A lost appeal slashes twice."""
    _, bound, _ = chain.open(signer=True)
    with chain_errors():
        tx = bound.appeal(round_)
        sub = bound.submission(round_, bound.account_address)
    if as_json:
        print_json({"round": round_, "appeal_block": sub.appeal_block, **tx.model_dump()})
        return
    out.print(
        f"round {round_}: appealed in block {sub.appeal_block} (its committee is drawn from the "
        f"next block's hash): tx {tx.tx_hash}"
    )


@rewards_app.command("settle")
@chain_options(keystore=True)
def settle(
    address: Annotated[
        str | None,
        typer.Argument(help="Whose submissions (default: the keystore's); anyone may settle."),
    ] = None,
    rounds: Annotated[
        list[int] | None, typer.Option("--round", help="Settle this round (repeatable).")
    ] = None,
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Settle final submissions (default: every final, unsettled one of the node): a disputed
    one is slashed; until all are settled the node's unbonding stake cannot be withdrawn."""
    _, bound, reader = chain.open(signer=True)
    done = []
    with chain_errors():
        node = address or bound.account_address
        if not rounds:
            rows = _reward_rows(bound, reader, node)
            rounds = [r["round"] for r in rows if r["final"] and not r["settled"]]
        if not rounds:
            fail(
                f"nothing to settle: no final, unsettled submission of {node} (a round is final "
                "once its challenge window has closed; see sapo rewards show)",
                Exit.CHECK_FAILED,
            )
        for round_ in rounds:
            tx = bound.settle(round_, node)
            slashed = bound.submission(round_, node).disputed
            done.append({"round": round_, "disputed": slashed, **tx.model_dump()})
    if as_json:
        print_json({"node": node, "settled": done})
        return
    for d in done:
        out.print(
            f"round {d['round']}: settled"
            + (" (disputed: slashed)" if d["disputed"] else "")
            + f": tx {d['tx_hash']}"
        )
