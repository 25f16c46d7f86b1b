"""Reaching a SwarmLedger: a Web3 over HTTP, the check that deployed code is this client's
contract, and the argument forms (32-byte values, checksummed addresses) its calls take."""

from __future__ import annotations

from typing import Any, ClassVar

from eth_account.signers.local import LocalAccount
from eth_utils import is_address, to_checksum_address
from web3 import Web3
from web3.contract import Contract
from web3.types import RPCEndpoint

from client.chain.artifacts import load_artifact
from client.chain.errors import ErrorDecoder, WrongChain
from client.chain.models import TxResult
from client.chain.tx import TxSender

CONTRACT = "SwarmLedger"


def connect(rpc_url: str, request_timeout_s: float = 10.0) -> Web3:
    """Returns a Web3 over HTTP with a request timeout and web3's own retries off (ours apply).

    The chain id is asked once: web3's validation asks for it before every eth_call and gas
    estimate, which doubled the requests of each contract read (an endpoint does not change
    chains under a running process; `Ledger.check` compares it with the config's at start)."""
    provider = Web3.HTTPProvider(
        rpc_url,
        request_kwargs={"timeout": request_timeout_s},
        exception_retry_configuration=None,
        cache_allowed_requests=True,
        cacheable_requests={RPCEndpoint("eth_chainId")},
    )
    return Web3(provider)


def matches_runtime(code: bytes, artifact: dict[str, Any]) -> bool:
    """Returns whether deployed `code` is the artifact's runtime code, immutables aside."""
    expected = bytearray(bytes.fromhex(artifact["deployedBytecode"].removeprefix("0x")))
    if len(code) != len(expected):
        return False
    actual = bytearray(code)
    for ref in artifact.get("immutableReferences", []):
        start, length = ref["start"], ref["length"]
        actual[start : start + length] = expected[start : start + length] = bytes(length)
    return actual == expected


class Deployed:
    """One deployed contract of this client's artifacts (`NAME`): its web3 contract, the decoder
    of its named errors, and the TxSender of the account that writes to it (none: read-only).
    Every read and write goes through TxSender.rpc (retries, decoded reverts)."""

    NAME: ClassVar[str]

    def __init__(
        self,
        w3: Web3,
        address: str,
        *,
        account: LocalAccount | None = None,
        max_fee_gwei: float = 50.0,
        priority_fee_gwei: float = 1.0,
        receipt_timeout_s: float = 120.0,
        attempts: int = 4,
        nonces_of: TxSender | None = None,
    ):
        """`nonces_of`: another contract's sender whose account (and fees and nonce sequence)
        this one signs with, as a node writing to the ledger and the round book does."""
        artifact = load_artifact(self.NAME)
        self.w3 = w3
        self.address = _address(address)
        self.contract: Contract = w3.eth.contract(address=self.address, abi=artifact["abi"])
        self.decoder = ErrorDecoder(artifact["abi"])
        if nonces_of is not None:
            self.tx = nonces_of.for_contract(self.decoder)
            return
        self.tx = TxSender(
            w3,
            account,
            self.decoder,
            max_fee_gwei=max_fee_gwei,
            priority_fee_gwei=priority_fee_gwei,
            receipt_timeout_s=receipt_timeout_s,
            attempts=attempts,
        )

    def _view(self, name: str, *args: Any) -> Any:
        fn = self.contract.functions[name](*args)
        return self.tx.rpc(fn.call, f"{name}()")

    def _send(self, name: str, *args: Any, value: int = 0) -> TxResult:
        data = self.contract.encode_abi(name, args=list(args))
        return self.tx.send({"to": self.address, "data": data, "value": value}, name)

    def _check_code(self, where: str) -> None:
        """Raises WrongChain unless this client's `NAME` is deployed at the address (its runtime
        code, immutables aside); `where` ends the message of an address with no code."""
        code = bytes(self.tx.rpc(lambda: self.w3.eth.get_code(self.address), "eth_getCode"))
        if not code:
            raise WrongChain(f"no contract at {self.address} {where}")
        if not matches_runtime(code, load_artifact(self.NAME)):
            raise WrongChain(
                f"the contract at {self.address} is not this client's {self.NAME} "
                "(a different build or another contract)"
            )

    def head(self) -> int:
        """The chain's latest block number."""
        return self.tx.rpc(lambda: self.w3.eth.block_number, "eth_blockNumber")


def bytes32(value: bytes | str) -> bytes:
    raw = bytes.fromhex(value.removeprefix("0x")) if isinstance(value, str) else bytes(value)
    if len(raw) != 32:
        raise ValueError(f"expected 32 bytes, got {len(raw)}")
    return raw


def _address(value: str) -> str:
    if not is_address(value):
        raise ValueError(f"not an address: {value!r}")
    return to_checksum_address(value)
