"""Reaching a SwarmLedger: a Web3 over HTTP, the check that deployed code is this client's
contract, and the argument forms (32-byte values, checksummed addresses) its calls take."""

from __future__ import annotations

from typing import Any

from eth_utils import is_address, to_checksum_address
from web3 import Web3
from web3.types import RPCEndpoint

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


def bytes32(value: bytes | str) -> bytes:
    raw = bytes.fromhex(value.removeprefix("0x")) if isinstance(value, str) else bytes(value)
    if len(raw) != 32:
        raise ValueError(f"expected 32 bytes, got {len(raw)}")
    return raw


def _address(value: str) -> str:
    if not is_address(value):
        raise ValueError(f"not an address: {value!r}")
    return to_checksum_address(value)
