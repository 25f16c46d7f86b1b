"""`LocalStore`: a directory blockstore for one machine (a devnet, tests, a node without IPFS)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from client.store.backends.blockstore import BlockStore, StoreStatus, _verified
from client.store.errors import (
    BatchDigestMismatch,
    BatchTooLarge,
    BlockNotFound,
    StoreUnavailable,
)
from client.store.pins import PinIndex


class LocalStore(BlockStore):
    """A directory blockstore for one machine; several processes may share it.

    Blocks live at blocks/<next-to-last two characters of the CID>/<CID> (kubo's flatfs
    sharding), written to a temp file, fsynced and renamed into place, so a reader sees a whole
    block or none. Unpinning deletes the block: nothing else would collect it.
    """

    name = "local"

    def __init__(self, root: Path, max_bytes: int = 1 << 20):
        self.root = Path(root)
        self.blocks = self.root / "blocks"
        super().__init__(PinIndex(self.root / "pins.json"), max_bytes)

    def _path(self, cid: str) -> Path:
        return self.blocks / cid[-3:-1] / cid

    def _put(self, cid: str, data: bytes) -> None:
        path = self._path(cid)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and path.stat().st_size == len(data):
                with contextlib.suppress(BatchDigestMismatch):
                    _verified(cid, path.read_bytes())
                    return  # already there, intact; a damaged copy is rewritten below
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".put-")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise StoreUnavailable(f"local store {self.root}: {exc.strerror or exc}") from None

    def _get(self, cid: str, limit: int) -> bytes:
        path = self._path(cid)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise BlockNotFound(cid, self.name) from None
        if size > limit:
            raise BatchTooLarge(size, limit, cid)
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:  # grew since stat
            raise BatchTooLarge(len(data), limit, cid)
        return data

    def has(self, cid: str) -> bool:
        return self._path(cid).is_file()

    def _pin(self, cid: str) -> None:
        pass  # presence in the pin index is the pin

    def _unpin(self, cid: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(cid).unlink()

    def ping(self) -> None:
        if self.root.exists() and not os.access(self.root, os.W_OK):
            raise StoreUnavailable(f"local store {self.root}: directory not writable")

    def status(self) -> StoreStatus:
        pins = self.pins.all()
        size = sum(p.stat().st_size for c in pins if (p := self._path(c)).is_file())
        writable = os.access(self.root, os.W_OK) if self.root.exists() else True
        return StoreStatus(
            backend=self.name,
            address=str(self.root),
            reachable=writable,
            pinned=len(pins),
            pinned_bytes=size,
            detail="" if writable else "directory not writable",
        )
