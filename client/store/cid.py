"""Content addressing: a batch's sha256 digest and its CIDv1 are two spellings of one hash.

The ledger stores the 32-byte sha256 of the canonical batch bytes; IPFS names the same bytes
CIDv1(raw codec, sha2-256 multihash), written in base32 (`bafkrei…`). Converting between the two
needs no network and no trust.
"""

from __future__ import annotations

from multiformats import CID, multihash


class InvalidCid(ValueError):
    """A string is not a CIDv1 of raw bytes hashed with sha2-256."""


def digest_to_cid(digest: bytes | str) -> str:
    """Returns the base32 CIDv1 (raw, sha2-256) of a 32-byte sha256 digest (bytes or 0x-hex)."""
    raw = bytes.fromhex(digest.removeprefix("0x")) if isinstance(digest, str) else bytes(digest)
    if len(raw) != 32:
        raise ValueError(f"a sha256 digest is 32 bytes, got {len(raw)}")
    return str(CID("base32", 1, "raw", multihash.wrap(raw, "sha2-256")))


def cid_to_digest(cid: str) -> bytes:
    """Returns the sha256 digest inside a CID; raises InvalidCid for another version/codec/hash."""
    try:
        parsed = CID.decode(cid.strip())
    except Exception as exc:
        raise InvalidCid(f"not a CID: {cid!r} ({exc})") from None
    if parsed.version != 1 or parsed.codec.name != "raw" or parsed.hashfun.name != "sha2-256":
        raise InvalidCid(
            f"{cid} is a CIDv{parsed.version} with codec {parsed.codec.name} and hash "
            f"{parsed.hashfun.name}; rollout batches are CIDv1 raw sha2-256"
        )
    return bytes(multihash.unwrap(parsed.digest))
