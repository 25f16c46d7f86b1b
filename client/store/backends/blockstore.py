"""The interface both block stores share (`BlockStore`): blocks named by their CIDv1 (raw,
sha2-256), every byte returned verified against it, oversized blocks refused, and a pin index
for the retention rule (gc)."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod

from pydantic import BaseModel

from client.store.cid import cid_to_digest, digest_to_cid
from client.store.errors import (
    BatchDigestMismatch,
    BatchTooLarge,
    BlockNotFound,
)
from client.store.pins import PinIndex


class StoreStatus(BaseModel):
    backend: str
    address: str
    reachable: bool
    pinned: int
    pinned_bytes: int
    detail: str = ""


def _verified(cid: str, data: bytes) -> bytes:
    expected = cid_to_digest(cid)
    got = hashlib.sha256(data).digest()
    if got != expected:
        raise BatchDigestMismatch("0x" + expected.hex(), "0x" + got.hex(), cid)
    return data


class BlockStore(ABC):
    """put, get, pin, unpin, has; plus status and the retention rule (gc)."""

    name: str

    def __init__(self, pins: PinIndex, max_bytes: int):
        self.pins = pins
        self.max_bytes = max_bytes

    def put(self, data: bytes, round_: int, limit: int | None = None) -> str:
        """Stores and pins `data` for `round_`; returns its CID. Safe to retry. `limit` replaces
        the store's size cap for this block (a checkpoint's chunks: client.store.weights)."""
        limit = limit or self.max_bytes
        if len(data) > limit:
            raise BatchTooLarge(len(data), limit)
        cid = digest_to_cid(hashlib.sha256(data).digest())
        self._put(cid, data)
        self.pins.add(cid, round_)
        return cid

    def get(self, cid: str, limit: int | None = None) -> bytes:
        """Returns the verified bytes of `cid` (BatchDigestMismatch if they hash otherwise), at
        most `limit` bytes (default: the store's cap)."""
        cid_to_digest(cid)  # refuses other codecs and hashes before any I/O
        return _verified(cid, self._get(cid, limit or self.max_bytes))

    def fetch(self, cid: str, limit: int | None = None) -> bytes:
        """Like get, but may fetch the block from the store's peers (an IPFS node asks the
        peers it is connected to, see IpfsStore.connect); a local store has no peers."""
        return self.get(cid, limit)

    def pin(self, cid: str, round_: int) -> None:
        """Keeps `cid` (which must be stored) until the retention rule drops `round_`."""
        if not self.has(cid):
            raise BlockNotFound(cid, self.name)
        self._pin(cid)
        self.pins.add(cid, round_)

    def unpin(self, cid: str) -> None:
        self._unpin(cid)
        self.pins.remove(cid)

    def gc(self, current_round: int, retain_rounds: int) -> list[str]:
        """Unpins batches of rounds older than current_round - retain_rounds; returns them."""
        dropped = self.pins.older_than(current_round - retain_rounds)
        for cid in dropped:
            self.unpin(cid)
        return dropped

    @abstractmethod
    def has(self, cid: str) -> bool: ...

    @abstractmethod
    def status(self) -> StoreStatus: ...

    @abstractmethod
    def ping(self) -> None:
        """Returns when the store answers; raises StoreUnavailable / StoreTimeout otherwise
        (cheap: for health badges, unlike `status`, which sizes every pin)."""

    @abstractmethod
    def _put(self, cid: str, data: bytes) -> None: ...

    @abstractmethod
    def _get(self, cid: str, limit: int) -> bytes: ...

    @abstractmethod
    def _pin(self, cid: str) -> None: ...

    @abstractmethod
    def _unpin(self, cid: str) -> None: ...
