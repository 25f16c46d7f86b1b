"""Deploying a SwarmLedger, and a RoundBook beside it: the parameters are fixed for their life,
so they are checked first."""

from __future__ import annotations

from eth_abi import encode
from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address
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
    book: str | None = None,
    artifact: dict | None = None,
) -> tuple[Ledger, TxResult]:
    """Deploys a SwarmLedger with `params`; returns a Ledger bound to it (signing as `account`).
    `book`: the address of the round book that may escalate into it (a contract not deployed
    yet: `created_address`), fixed for the ledger's life; None for none. `artifact`: another
    build of SwarmLedger with the same ABI (a seeded fault's, scripts/mutate_roundbook.py);
    contracts/artifacts' by default.

    Raises ValueError when `params` names no model family: a ledger checks only the families
    fixed at its deployment."""
    if not params.families:
        raise ValueError(
            "name the model families this ledger checks: [ledger].families = ['0x…'] (the base "
            "ids `sapo policy id MODEL` prints); they are fixed for the ledger's life"
        )
    artifact = artifact or load_artifact(CONTRACT)
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
            book or "0x" + "00" * 20,
        ],
    )
    fees = {
        "max_fee_gwei": max_fee_gwei,
        "priority_fee_gwei": priority_fee_gwei,
        "receipt_timeout_s": receipt_timeout_s,
    }
    return _deploy(w3, account, CONTRACT, args, Ledger, fees, artifact)  # type: ignore[return-value]


def created_address(sender: str, nonce: int) -> str:
    """The address of the contract `sender` creates with transaction `nonce` (CREATE: the last
    20 bytes of keccak256(rlp([sender, nonce])))."""
    n = nonce.to_bytes((nonce.bit_length() + 7) // 8, "big")
    encoded = n if len(n) == 1 and n[0] < 0x80 else bytes([0x80 + len(n)]) + n
    payload = b"\x94" + bytes.fromhex(sender.removeprefix("0x")) + encoded
    return to_checksum_address(keccak(bytes([0xC0 + len(payload)]) + payload)[12:])


def next_created(w3: Web3, account: LocalAccount, ahead: int = 0) -> str:
    """The address of the contract `account`'s transaction `ahead` after its next one creates."""
    nonce = w3.eth.get_transaction_count(account.address, "pending")
    return created_address(account.address, nonce + ahead)


def _deploy(
    w3: Web3,
    account: LocalAccount,
    name: str,
    args: bytes,
    bound,
    fees: dict,
    artifact: dict | None = None,
):
    """Deploys artifact `name` (or `artifact`, a build of it) with its ABI-encoded constructor
    `args`; returns the `bound` client of the new address (signing as `account`, with `fees`)
    and the creation's result."""
    artifact = artifact or load_artifact(name)
    sender = TxSender(w3, account, ErrorDecoder(artifact["abi"]), **fees)
    result = sender.send({"data": artifact["bytecode"] + args.hex(), "value": 0}, f"deploy {name}")
    assert result.contract_address, "a contract creation receipt carries the new address"
    return bound(w3, result.contract_address, account=account, **fees), result


# what a book pays an aggregator at a round's release by default, in basis points of the round's
# reward (times its root's share of the round's credited signal): RoundBook.postPayBps
POST_PAY_BPS = 100


def check_post_pay(post_pay_bps: int) -> None:
    """Raises ValueError unless a round book may be deployed with this pay (RoundBook refuses
    more than the round's reward too, PostPayAboveTheReward)."""
    if not 0 <= post_pay_bps <= 10_000:
        raise ValueError(
            f"the aggregator's pay is 0 to 10,000 basis points of a round's reward, not "
            f"{post_pay_bps}"
        )


def check_bonds(bond: int, challenge_bond: int) -> None:
    """Raises ValueError unless a round book may be deployed with these bonds (wei)."""
    if bond <= 0 or challenge_bond <= 0:
        raise ValueError("the bond and the challenge bond are positive amounts of wei")
    if challenge_bond > bond:
        raise ValueError(
            "a challenge bond above the aggregator's bond makes a challenge cost more than "
            "the lie it proves pays"
        )


def check_lanes(appeal_rounds: int, challenge_rounds: int) -> None:
    """Raises ValueError unless a round book may run beside a ledger with these windows: both
    lanes split one reward a round, and the book reads the ledger's credited total of a round at
    its release (the aggregator's pay) and when it settles it for a later round's earnings, so
    the ledger's round must be final by then (RoundBook's constructor refuses it too, but only
    after the ledger is deployed)."""
    if appeal_rounds > challenge_rounds + 2:
        raise ValueError(
            f"appeal_rounds {appeal_rounds} is more than challenge_rounds + 2 "
            f"({challenge_rounds + 2}): a round book pays a round's aggregator and producers "
            "before the ledger's credit of it is final; lower [ledger].appeal_rounds or raise "
            "[ledger].challenge_rounds"
        )


# what `sapo chain deploy --with-book` bonds unless told (and a devnet's book): an aggregator's
# bond per round it posts (and while it is on the roster of aggregators), and a data challenge's
DEFAULT_BOND = 10**18
DEFAULT_CHALLENGE_BOND = 10**17


def deploy_book(
    ledger: Ledger,
    account: LocalAccount,
    bond: int,
    challenge_bond: int,
    *,
    max_fee_gwei: float = 50.0,
    priority_fee_gwei: float = 1.0,
    receipt_timeout_s: float = 120.0,
    post_pay_bps: int = POST_PAY_BPS,
) -> tuple[RoundBook, TxResult]:
    """Deploys a RoundBook beside `ledger` (the root lane, docs/scaling.md): `bond` wei an
    aggregator bonds per round it posts, `challenge_bond` a data challenge, `post_pay_bps` what
    it pays an aggregator at a round's release (basis points of the round's reward, times its
    root's share of the round's signal); all fixed for the book's life. Returns it bound to
    `account`."""
    check_bonds(bond, challenge_bond)
    check_post_pay(post_pay_bps)
    params = ledger.params()
    check_lanes(params.appeal_rounds, params.challenge_rounds)
    named = ledger.book()
    if named is None:
        raise ValueError(
            f"ledger {ledger.address} names no round book (it was deployed without one), and a "
            "book its ledger does not name cannot escalate a batch, so its root lane could not "
            "slash a forger: deploy a ledger with its book (sapo chain deploy --with-book)"
        )
    if named.lower() != next_created(ledger.w3, account).lower():
        raise ValueError(
            f"ledger {ledger.address} names the round book {named}, which is not the address "
            f"this account's next transaction ({account.address}) creates: deploy the book from "
            "the account that deployed the ledger, as its next transaction after it"
        )
    args = encode(
        ["address", "uint256", "uint256", "uint256"],
        [ledger.address, bond, challenge_bond, post_pay_bps],
    )
    fees = {
        "max_fee_gwei": max_fee_gwei,
        "priority_fee_gwei": priority_fee_gwei,
        "receipt_timeout_s": receipt_timeout_s,
    }
    return _deploy(ledger.w3, account, BOOK, args, RoundBook, fees)  # type: ignore[return-value]


def deploy_with_book(
    w3: Web3,
    account: LocalAccount,
    params: LedgerSection,
    catalog_digest: bytes | str,
    bond: int,
    challenge_bond: int,
    post_pay_bps: int = POST_PAY_BPS,
    **fees: float,
) -> tuple[Ledger, TxResult, RoundBook, TxResult]:
    """Deploys a SwarmLedger that names its round book, then the book (with `bond`,
    `challenge_bond` and `post_pay_bps`, as deploy_book), as `account`'s next two transactions
    (the ledger names the address the second creates). Returns both, bound to `account`, with
    their creations' results."""
    check_bonds(bond, challenge_bond)
    check_post_pay(post_pay_bps)
    check_lanes(params.appeal_rounds, params.challenge_rounds)
    ledger, ledger_tx = deploy_ledger(
        w3, account, params, catalog_digest, book=next_created(w3, account, ahead=1), **fees
    )
    book, book_tx = deploy_book(
        ledger, account, bond, challenge_bond, post_pay_bps=post_pay_bps, **fees
    )
    return ledger, ledger_tx, book, book_tx
