"""Signed transactions from a local key: EIP-1559 fees under a cap, local nonces, receipts.

- Every transaction is simulated first (eth_estimateGas); a revert is decoded into the
  contract's named error before anything is signed.
- Nonces are tracked locally (several transactions per block) and re-read from the chain after
  any send error, so a node never wedges on a nonce gap.
- Fees: maxFeePerGas = min(cap, 2 * baseFee + tip); if the base fee alone is above the cap the
  transaction is not sent (FeeCapExceeded) rather than left to hang.
- Transient RPC failures (connection, timeout, HTTP 429/5xx, rate-limit codes) are retried with
  exponential backoff; reverts never are.
- A transaction not mined within the receipt time-out is replaced: the same nonce re-signed with
  both fees raised by 12.5% (what geth's and anvil's pools require), up to `replacements` times
  and never above the cap; whichever version is mined is the result.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import requests
from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.exceptions import (
    ContractCustomError,
    ContractLogicError,
    ContractPanicError,
    TransactionNotFound,
    Web3RPCError,
)

from client.chain.errors import (
    ChainError,
    ErrorDecoder,
    LedgerRevert,
    NoSigner,
    RpcUnavailable,
    TransactionTimeout,
)
from client.chain.models import TxResult

T = TypeVar("T")
GWEI = 10**9
# JSON-RPC error codes public endpoints use for "try again later".
_TRANSIENT_CODES = {-32005, 429}
_NONCE_TROUBLE = ("nonce too low", "already known", "replacement transaction underpriced")


class FeeCapExceeded(ChainError):
    """The chain's base fee is above the configured max fee; sending would only hang."""


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return True
    if isinstance(exc, requests.exceptions.HTTPError):
        status = exc.response.status_code if exc.response is not None else 0
        return status == 429 or status >= 500
    if isinstance(exc, Web3RPCError) and not isinstance(exc, ContractLogicError):
        code = (exc.rpc_response or {}).get("error", {}).get("code")
        return code in _TRANSIENT_CODES
    return isinstance(exc, ConnectionError | TimeoutError)


def with_retries(call: Callable[[], T], *, what: str, attempts: int, backoff_s: float = 0.25) -> T:
    """Returns call(), retrying transient RPC failures; raises RpcUnavailable when they persist."""
    for attempt in range(attempts):
        try:
            return call()
        except Exception as exc:
            if not _is_transient(exc):
                raise
            if attempt + 1 == attempts:
                raise RpcUnavailable(
                    f"{what}: RPC unavailable after {attempts} attempts ({type(exc).__name__}: "
                    f"{str(exc)[:200]})"
                ) from None
            time.sleep(backoff_s * (2**attempt))
    raise AssertionError("unreachable")


def revert_data(exc: BaseException) -> str | None:
    """Returns the 0x revert data a web3 contract error carries, if any."""
    data = getattr(exc, "data", None)
    if isinstance(data, dict):
        data = data.get("data")
    return data if isinstance(data, str) and data.startswith("0x") else None


RECEIPT_POLL_S = 0.5  # the longest pause between two asks for a pending transaction's receipt


class _Nonces:
    """One account's nonce sequence: the next nonce to use (None: read it from the chain), and
    the lock it is handed out under."""

    def __init__(self) -> None:
        self.next: int | None = None
        self.lock = threading.Lock()


class TxSender:
    """Signs and sends transactions for one account; thread-safe (one nonce sequence)."""

    def __init__(
        self,
        w3: Web3,
        account: LocalAccount | None,
        decoder: ErrorDecoder,
        *,
        max_fee_gwei: float = 50.0,
        priority_fee_gwei: float = 1.0,
        receipt_timeout_s: float = 120.0,
        attempts: int = 4,
        replacements: int = 2,
    ):
        self.w3 = w3
        self.account = account
        self._decoder = decoder
        self._max_fee = int(max_fee_gwei * GWEI)
        self._tip = int(priority_fee_gwei * GWEI)
        self._receipt_timeout_s = receipt_timeout_s
        self._attempts = attempts
        self._replacements = replacements
        self.replaced = 0  # transactions replaced for a higher fee so far (for operators)
        self._seq = _Nonces()  # shared by the senders `for_contract` makes
        self._chain_id: int | None = None

    def for_contract(self, decoder: ErrorDecoder) -> TxSender:
        """A sender for another contract, with its errors (`decoder`), signing as this one's
        account on the same nonce sequence: two contracts a node writes to from two threads never
        hand out one nonce twice."""
        other = copy.copy(self)
        other._decoder = decoder
        return other

    @property
    def address(self) -> str:
        if self.account is None:
            raise NoSigner("this ledger is read-only: configure a keystore to send transactions")
        return self.account.address

    def rpc(self, call: Callable[[], T], what: str) -> T:
        """Returns call() with transient failures retried and reverts decoded."""
        try:
            return with_retries(call, what=what, attempts=self._attempts)
        except (ContractCustomError, ContractLogicError, ContractPanicError) as exc:
            raise self._revert(exc, what) from None

    def _revert(self, exc: BaseException, action: str) -> LedgerRevert:
        data = revert_data(exc)
        if data and len(data) >= 10:
            return self._decoder.decode(data, action)
        return LedgerRevert("Revert", {"reason": str(exc)[:200]}, action)

    def send(self, tx: dict[str, Any], action: str) -> TxResult:
        """Simulates, signs, sends and waits for `tx` ({to?, data, value}); returns its receipt."""
        sender = self.address
        tx = {**tx, "from": sender}
        # Against the pending block, which the tx will join: a "latest" estimate runs with the
        # latest block's number, and the ledger's stake history costs a new slot per block (an
        # addStake one block after register was estimated 44k gas short and ran out).
        gas = self.rpc(lambda: self.w3.eth.estimate_gas(tx, "pending"), action)
        with self._seq.lock:
            if self._chain_id is None:
                self._chain_id = self.rpc(lambda: self.w3.eth.chain_id, "eth_chainId")
            base_fee = self.rpc(
                lambda: self.w3.eth.get_block("latest")["baseFeePerGas"], "eth_getBlockByNumber"
            )
            if base_fee + self._tip > self._max_fee:
                raise FeeCapExceeded(
                    f"{action}: base fee {base_fee / GWEI:.3f} gwei + tip exceeds the cap of "
                    f"{self._max_fee / GWEI:.3f} gwei; raise [chain].max_fee_gwei or wait"
                )
            signed = {
                **tx,
                "gas": int(gas * 1.25) + 10_000,
                "maxPriorityFeePerGas": self._tip,
                "maxFeePerGas": min(self._max_fee, 2 * base_fee + self._tip),
                "chainId": self._chain_id,
                "type": 2,
            }
            tx_hash, nonce = self._sign_and_send(signed, action)
        return self._wait([tx_hash], tx, {**signed, "nonce": nonce}, action)

    def _sign_and_send(self, tx: dict[str, Any], action: str) -> tuple[str, int]:
        for attempt in range(2):
            if self._seq.next is None:
                self._seq.next = self.rpc(
                    lambda: self.w3.eth.get_transaction_count(self.address, "pending"),
                    "eth_getTransactionCount",
                )
            signed = self.account.sign_transaction({**tx, "nonce": self._seq.next})
            try:
                tx_hash = self.rpc(
                    lambda signed=signed: self.w3.eth.send_raw_transaction(signed.raw_transaction),
                    action,
                )
            except Web3RPCError as exc:
                self._seq.next = None  # resync from the chain before anything else is sent
                if attempt == 0 and any(t in str(exc).lower() for t in _NONCE_TROUBLE):
                    continue
                raise ChainError(f"{action}: the node refused the transaction: {exc}") from None
            except RpcUnavailable:
                self._seq.next = None
                raise
            self._seq.next += 1
            return "0x" + bytes(tx_hash).hex(), self._seq.next - 1
        raise AssertionError("unreachable")

    def _receipt_of_any(self, hashes: list[str]) -> Any | None:
        """Returns the receipt of whichever of `hashes` is mined within the time-out, or None.
        Asks quickly at first (a devnet mines within a second) and backs off to RECEIPT_POLL_S:
        a 12-s block asked for every 50 ms cost 240 requests to the operator's RPC provider and
        the node's CPU for web3's encoding of each; backed off, about 30."""
        deadline = time.monotonic() + self._receipt_timeout_s
        pause = 0.05
        while True:
            for tx_hash in hashes:
                try:
                    return self.rpc(
                        lambda h=tx_hash: self.w3.eth.get_transaction_receipt(h),
                        "eth_getTransactionReceipt",
                    )
                except TransactionNotFound:
                    continue
            if time.monotonic() > deadline:
                return None
            time.sleep(pause)
            pause = min(RECEIPT_POLL_S, pause * 1.5)

    def _wait(
        self, hashes: list[str], tx: dict[str, Any], signed: dict[str, Any], action: str
    ) -> TxResult:
        """Waits for any of `hashes` (versions of one nonce); replaces a stuck one."""
        for replacement in range(self._replacements + 1):
            receipt = self._receipt_of_any(hashes)
            if receipt is not None:
                break
            if replacement == self._replacements:
                self._seq.next = None  # resync: the pool may have dropped it
                raise TransactionTimeout(
                    f"{action}: transaction {hashes[-1]} not mined within "
                    f"{self._receipt_timeout_s:.0f} s after {self._replacements} fee bumps; it "
                    "may still be pending"
                )
            signed = {
                **signed,
                "maxPriorityFeePerGas": signed["maxPriorityFeePerGas"] * 9 // 8 + 1,
                "maxFeePerGas": signed["maxFeePerGas"] * 9 // 8 + 1,
            }
            if signed["maxFeePerGas"] > self._max_fee:
                raise TransactionTimeout(
                    f"{action}: transaction {hashes[-1]} is stuck and a higher fee would pass the "
                    f"cap of {self._max_fee / GWEI:.3f} gwei; raise [chain].max_fee_gwei"
                )
            raw = self.account.sign_transaction(signed).raw_transaction
            try:
                new = self.rpc(lambda raw=raw: self.w3.eth.send_raw_transaction(raw), action)
            except Web3RPCError as exc:
                if "nonce too low" in str(exc).lower():
                    continue  # an earlier version was just mined: its receipt comes next
                raise ChainError(f"{action}: the node refused the replacement: {exc}") from None
            hashes.append("0x" + bytes(new).hex())
            self.replaced += 1
        mined = "0x" + bytes(receipt["transactionHash"]).hex()
        if receipt["status"] != 1:
            # Replay at the mined block to learn why (state changed since the simulation).
            try:
                self.w3.eth.call(tx, block_identifier=receipt["blockNumber"])
            except (ContractCustomError, ContractLogicError, ContractPanicError) as exc:
                raise self._revert(exc, action) from None
            raise LedgerRevert("Revert", {"tx": mined}, action)
        return TxResult(
            tx_hash=mined,
            block_number=receipt["blockNumber"],
            gas_used=receipt["gasUsed"],
            effective_gas_price=receipt.get("effectiveGasPrice", 0),
            contract_address=receipt.get("contractAddress"),
        )
