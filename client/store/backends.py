"""Two block stores behind one small interface: a real IPFS node, or a local directory.

Both name a block by its CIDv1 (raw, sha2-256), verify every byte they return against it, refuse
oversized blocks before reading them whole, and keep a pin index for the retention rule. The
node never knows which one it has.

(About 400 lines, on purpose: the two backends share the interface, the CID check and the pin
index rules defined here, and reading them side by side is how one tells they agree.)
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
import warnings
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from client.store.cid import cid_to_digest, digest_to_cid
from client.store.errors import (
    BatchDigestMismatch,
    BatchTooLarge,
    BlockNotFound,
    StoreTimeout,
    StoreUnavailable,
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


class IpfsStore(BlockStore):
    """A real IPFS node (kubo, or js-ipfs which speaks the same RPC API) via ipfshttpclient.

    Blocks go in with block/put (format raw, sha2-256, pinned); the CID the daemon answers must
    be the one computed here. Reads stat the block first (size cap), then stream it with a
    time-out: a daemon asked for a CID nobody has waits forever otherwise.
    """

    name = "ipfs"

    def __init__(
        self, api: str, index_dir: Path, timeout_s: float = 10.0, max_bytes: int = 1 << 20
    ):
        self.api = api
        self.timeout_s = timeout_s
        self._client = None
        super().__init__(PinIndex(Path(index_dir) / "ipfs-pins.json"), max_bytes)

    def _call(self, what: str, fn, *args, **kwargs):
        import ipfshttpclient
        from ipfshttpclient import exceptions as ipfs_errors

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # urllib3 noise inside the client
                if self._client is None:
                    self._client = ipfshttpclient.Client(self.api, timeout=self.timeout_s)
                return fn(self._client, *args, **kwargs)
        except ipfs_errors.TimeoutError:
            raise StoreTimeout(
                f"IPFS {what} timed out after {self.timeout_s:.0f} s at {self.api}"
            ) from None
        except ipfs_errors.ConnectionError:
            self._client = None
            raise StoreUnavailable(
                f"IPFS daemon not reachable at {self.api}: start it (`ipfs daemon`) or fix "
                "[store].ipfs_api"
            ) from None
        except ipfs_errors.Error as exc:
            raise StoreUnavailable(f"IPFS {what} failed at {self.api}: {exc}") from None

    def _put(self, cid: str, data: bytes) -> None:
        answer = self._call(
            "block/put",
            lambda c: c.block.put(
                io.BytesIO(data), opts={"format": "raw", "mhtype": "sha2-256", "pin": "true"}
            ),
        )
        returned = str(answer["Key"])
        try:
            same = cid_to_digest(returned) == cid_to_digest(cid)
        except ValueError:
            same = False
        if not same:
            raise BatchDigestMismatch(cid, returned, cid)

    def _get(self, cid: str, limit: int) -> bytes:
        size = self._stat(cid)
        if size is None:
            raise BlockNotFound(cid, self.name)
        return self._read(cid, size, limit)

    def _read(self, cid: str, size: int, limit: int) -> bytes:
        """Streams a block the daemon holds (`size` from its stat), capped at `limit` bytes."""
        if size > limit:
            raise BatchTooLarge(size, limit, cid)

        def read(client) -> bytes:
            chunks, total = [], 0
            for chunk in client.block.get(cid, stream=True, timeout=self.timeout_s):
                total += len(chunk)
                if total > limit:
                    raise BatchTooLarge(total, limit, cid)
                chunks.append(chunk)
            return b"".join(chunks)

        return self._call("block/get", read)

    def _stat(self, cid: str) -> int | None:
        """Returns the block's size, or None when this daemon does not hold it."""
        from ipfshttpclient import exceptions as ipfs_errors

        def stat(client):
            try:
                # offline: only what this daemon holds (kubo answers "not found" at once)
                return int(client.block.stat(cid, offline=True, timeout=self.timeout_s)["Size"])
            except ipfs_errors.ErrorResponse:
                return None

        try:
            return self._call("block/stat", stat)
        except StoreTimeout:
            # js-ipfs ignores `offline` and waits for a block it lacks. If the daemon answers
            # anything else at once, the silence meant "not here"; if not, it is the daemon.
            self._call("version", lambda c: c.version(timeout=min(self.timeout_s, 5.0)))
            return None

    def has(self, cid: str) -> bool:
        return self._stat(cid) is not None

    def fetch(self, cid: str, limit: int | None = None) -> bytes:
        """Returns the verified bytes of `cid`, from this daemon or over bitswap from the peers
        it is connected to, within the store's time-out (StoreTimeout: nobody gave it)."""
        cid_to_digest(cid)
        limit = limit or self.max_bytes

        def stat(client) -> int:
            # online: the daemon fetches the block it lacks (and keeps it, unpinned)
            return int(client.block.stat(cid, timeout=self.timeout_s)["Size"])

        return _verified(cid, self._read(cid, self._call("block/stat", stat), limit))

    def connect(self, addresses: list[str], timeout_s: float = 5.0) -> tuple[str | None, list[str]]:
        """Dials the peer at each address in turn until one answers. Returns (the address that
        connected, or None; one line per address that failed, naming it and why)."""
        failures = []
        for address in addresses:
            try:
                self._call(
                    "swarm/connect",
                    lambda c, a=address: c._client.request(
                        "/swarm/connect", (a,), decoder="json", timeout=timeout_s
                    ),
                )
                return address, failures
            except (StoreUnavailable, StoreTimeout) as exc:
                failures.append(f"{address}: {exc}")
        return None, failures

    def swarm_peers(self) -> list[str]:
        """The peer ids this daemon is connected to."""
        answer = self._call(
            "swarm/peers", lambda c: c._client.request("/swarm/peers", decoder="json")
        )
        peers = answer[0].get("Peers") if answer and isinstance(answer[0], dict) else None
        return [
            p["Peer"] for p in peers or [] if isinstance(p, dict) and isinstance(p.get("Peer"), str)
        ]

    def _pin(self, cid: str) -> None:
        self._call("pin/add", lambda c: c.pin.add(cid))

    def _unpin(self, cid: str) -> None:
        from ipfshttpclient import exceptions as ipfs_errors

        def rm(client):
            with contextlib.suppress(ipfs_errors.ErrorResponse):  # not pinned: nothing to do
                client.pin.rm(cid)

        self._call("pin/rm", rm)

    def peer(self) -> dict[str, Any]:
        """Returns the daemon's peer id and listen addresses (for a node's on-chain metadata)."""
        answer = self._call("id", lambda c: dict(c.id()))  # a Mapping, not a dict
        if not isinstance(answer, dict) or not isinstance(answer.get("ID"), str):
            raise StoreUnavailable(f"IPFS id at {self.api} gave no peer id")
        peer = answer["ID"]
        listed = [a for a in answer.get("Addresses") or [] if isinstance(a, str)]
        # js-ipfs answers `id` with no addresses; both answer swarm/addrs/local
        local = self._call(
            "swarm/addrs/local",
            lambda c: c._client.request("/swarm/addrs/local", decoder="json"),
        )
        if local and isinstance(local[0], dict):
            listed += [a for a in local[0].get("Strings") or [] if isinstance(a, str)]
        addresses = []
        for address in listed:  # peers learn the id once, beside the addresses
            base = address.split("/p2p/")[0].split("/ipfs/")[0]
            if "/tcp/" in base and "/ws" not in base and base not in addresses:
                addresses.append(base)
        return {"id": peer, "addresses": addresses[:8]}

    def ping(self) -> None:
        self._call("version", lambda c: c.version())

    def status(self) -> StoreStatus:
        pins = self.pins.all()
        try:
            stat = self._call("repo/stat", lambda c: c.repo.stat())
            version = self._call("version", lambda c: c.version())
        except (StoreUnavailable, StoreTimeout) as exc:
            return StoreStatus(
                backend=self.name,
                address=self.api,
                reachable=False,
                pinned=len(pins),
                pinned_bytes=0,
                detail=str(exc),
            )
        sizes = [self._stat(cid) or 0 for cid in pins]
        return StoreStatus(
            backend=self.name,
            address=self.api,
            reachable=True,
            pinned=len(pins),
            pinned_bytes=sum(sizes),
            detail=f"IPFS {version.get('Version', '?')}, repo {stat.get('RepoSize', '?')} bytes",
        )
