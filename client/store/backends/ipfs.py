"""`IpfsStore`: a real IPFS node (kubo, or js-ipfs) through its HTTP RPC API, and the swarm
connections to peers' nodes that fetching their blocks needs."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

from client.store.backends.blockstore import BlockStore, StoreStatus, _verified
from client.store.cid import cid_to_digest
from client.store.errors import (
    BatchDigestMismatch,
    BatchTooLarge,
    BlockNotFound,
    StoreTimeout,
    StoreUnavailable,
)
from client.store.pins import PinIndex


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
