"""Deploying a SwarmLedger, and a RoundBook beside it: the parameters are fixed for their life,
so they are checked first."""

from __future__ import annotations

from eth_abi import encode
from eth_account.signers.local import LocalAccount
from web3 import Web3

from client.chain.artifacts import load_artifact
from client.chain.book import CONTRACT as BOOK
from client.chain.book import RoundBook
from client.chain.errors import ErrorDecoder
from client.chain.ledger import CONTRACT, Ledger, bytes32
from client.chain.models import TxResult
from client.chain.tx import TxSender
from client.config.models import LedgerSection


def deploy_ledger(
    w3: Web3,
    account: LocalAccount,
    params: LedgerSection,
    catalog_digest: bytes | str,
    *,
    max_fee_gwei: float = 50.0,
    priority_fee_gwei: float = 1.0,
    receipt_timeout_s: float = 120.0,
) -> tuple[Ledger, TxResult]:
    """Deploys a SwarmLedger with `params`; returns a Ledger bound to it (signing as `account`).

    Raises ValueError when `params` names no model family: a ledger checks only the families
    fixed at its deployment."""
    if not params.families:
        raise ValueError(
            "name the model families this ledger checks: [ledger].families = ['0x…'] (the base "
            "ids `sapo policy id MODEL` prints); they are fixed for the ledger's life"
        )
    artifact = load_artifact(CONTRACT)
    constructor = next(item for item in artifact["abi"] if item["type"] == "constructor")
    args = encode(
        [inp["type"] for inp in constructor["inputs"]],
        [
            params.round_length_s,
            params.min_stake,
            params.unbonding_period_s,
            params.challenge_rounds,
            params.submit_rounds,
            params.reward_per_round,
            params.slash_bps,
            params.agree_tolerance_bps,
            bytes32(catalog_digest),
            params.quorum,
            params.checkers,
            params.appeal_rounds,
            params.appeal_checkers,
            [bytes32(f) for f in params.families],
        ],
    )
    fees = {
        "max_fee_gwei": max_fee_gwei,
        "priority_fee_gwei": priority_fee_gwei,
        "receipt_timeout_s": receipt_timeout_s,
    }
    return _deploy(w3, account, CONTRACT, args, Ledger, fees)  # type: ignore[return-value]


def _deploy(w3: Web3, account: LocalAccount, name: str, args: bytes, bound, fees: dict):
    """Deploys artifact `name` with its ABI-encoded constructor `args`; returns the `bound`
    client of the new address (signing as `account`, with `fees`) and the creation's result."""
    artifact = load_artifact(name)
    sender = TxSender(w3, account, ErrorDecoder(artifact["abi"]), **fees)
    result = sender.send({"data": artifact["bytecode"] + args.hex(), "value": 0}, f"deploy {name}")
    assert result.contract_address, "a contract creation receipt carries the new address"
    return bound(w3, result.contract_address, account=account, **fees), result


def deploy_book(
    ledger: Ledger,
    account: LocalAccount,
    bond: int,
    challenge_bond: int,
    *,
    max_fee_gwei: float = 50.0,
    priority_fee_gwei: float = 1.0,
    receipt_timeout_s: float = 120.0,
) -> tuple[RoundBook, TxResult]:
    """Deploys a RoundBook beside `ledger` (the root lane, docs/scaling.md): `bond` wei an
    aggregator bonds per round it posts, `challenge_bond` a data challenge; both fixed for the
    book's life. Returns it bound to `account`."""
    if bond <= 0 or challenge_bond <= 0:
        raise ValueError("the bond and the challenge bond are positive amounts of wei")
    if challenge_bond > bond:
        raise ValueError(
            "a challenge bond above the aggregator's bond makes a challenge cost more than "
            "the lie it proves pays"
        )
    args = encode(["address", "uint256", "uint256"], [ledger.address, bond, challenge_bond])
    fees = {
        "max_fee_gwei": max_fee_gwei,
        "priority_fee_gwei": priority_fee_gwei,
        "receipt_timeout_s": receipt_timeout_s,
    }
    return _deploy(ledger.w3, account, BOOK, args, RoundBook, fees)  # type: ignore[return-value]
