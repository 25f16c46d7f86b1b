"""keccak256, the EVM's hash, as fast as Python gets it: safe-pysha3's C keccak (0.7 µs for a
64-byte input here, against 5 µs through pycryptodome, eth-hash's default backend). The hot
paths call it: the seat draw (a node draws over every peer of its family each round, an
aggregator checks every vote's seat), the signed messages' hashes, the trees."""

from __future__ import annotations

from sha3 import keccak_256


def keccak256(data: bytes) -> bytes:
    return keccak_256(data).digest()


def checksum_address(value: str) -> str:
    """EIP-55's checksum form of a 0x-prefixed 40-hex-digit address, with the C keccak (eth_utils'
    own takes ~50 µs, 10 times as long: a node reads 10,000 producers' addresses a round).
    Raises ValueError for anything else."""
    digits = value[2:].lower() if len(value) == 42 and value[:2] in ("0x", "0X") else ""
    if not digits or any(c not in "0123456789abcdef" for c in digits):
        raise ValueError(f"not an address: {value[:50]!r}")
    hashed = keccak256(digits.encode("ascii")).hex()
    return "0x" + "".join(
        c.upper() if c > "9" and hashed[i] >= "8" else c for i, c in enumerate(digits)
    )


__all__ = ["checksum_address", "keccak256"]
