"""Publishing a batch and fetching one by its on-chain digest, trusting nothing on the way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from client.config.models import StoreSection
from client.store.backends import BlockStore, IpfsStore, LocalStore
from client.store.batch import BatchLimits, RolloutBatch, check_record, decode_batch
from client.store.cid import digest_to_cid
from client.store.errors import BatchDigestMismatch, BlockNotFound, StoreTimeout, StoreUnavailable
from client.store.peers import PeerAddresses

# Failures that say nothing about the batch's producer: the block may exist, we did not get it.
NOT_THE_PRODUCERS_FAULT = (BlockNotFound, StoreTimeout, StoreUnavailable, BatchDigestMismatch)
MAX_DIALS = 3  # addresses dialled per source
T = TypeVar("T")
HELD = "held"  # the source of a batch this node's IPFS node had, or got from any peer it knew


Source = tuple[str, PeerAddresses]  # a node's name and where its IPFS node is dialled


class Sources:
    """Who may give a block: the producer first, then the peers who fetched it, read only when
    the producer did not give it (finding them costs a log query and a metadata read each)."""

    def __init__(self, first: Sequence[Source], more: Callable[[], Sequence[Source]] = list):
        self.first = list(first)
        self._more = more
        self._others: list[Source] | None = None

    @classmethod
    def of(cls, sources: Sequence[Source]) -> Sources:
        """Sources known up front: the first, then the rest."""
        rest = list(sources[1:])
        return cls(sources[:1], lambda: rest)

    def others(self) -> list[Source]:
        """The sources after the first, read once."""
        if self._others is None:
            self._others = list(self._more())
        return self._others


def open_store(section: StoreSection) -> BlockStore:
    """Returns the backend [store] names; the caller never needs to know which."""
    if section.backend == "local":
        return LocalStore(Path(section.store_dir), max_bytes=section.max_batch_bytes)
    return IpfsStore(
        section.ipfs_api,
        index_dir=Path(section.store_dir),
        timeout_s=section.timeout_s,
        max_bytes=section.max_batch_bytes,
    )


def publish_batch(store: BlockStore, batch: RolloutBatch) -> tuple[str, bytes]:
    """Pins the batch's canonical bytes for its round; returns (CID, sha256 digest)."""
    data = batch.encode()
    cid = store.put(data, batch.round)
    return cid, batch.digest()


def fetch_batch(
    store: BlockStore,
    digest: bytes | str,
    *,
    chain_id: int,
    ledger: str,
    round_: int,
    node: str,
    limits: BatchLimits | None = None,
    network: bool = False,
) -> RolloutBatch:
    """Returns the batch the ledger recorded as `digest` for (round_, node), fully checked.

    Raises a StoreError: unavailable or missing block, bytes that hash otherwise, a malformed or
    off-schema document, or a header that names another chain, ledger, round or node. With
    `network` the store may fetch the block from its peers (BlockStore.fetch).
    """
    cid = digest_to_cid(digest)
    batch = decode_batch(store.fetch(cid) if network else store.get(cid), limits)
    check_record(batch, chain_id=chain_id, ledger=ledger, round_=round_, node=node)
    return batch


def fetch_from_peers(
    store: BlockStore,
    digest: bytes | str,
    sources: Sources | Sequence[Source],
    *,
    connect_timeout_s: float,
    chain_id: int,
    ledger: str,
    round_: int,
    node: str,
) -> tuple[RolloutBatch, str]:
    """Fetches the batch of (round_, node) from `sources` (name, addresses: the producer first,
    then peers who fetched it), as from_sources tries them: dials at most MAX_DIALS addresses of
    each and, once connected, fetches over bitswap within the store's time-out; a source that
    cannot be dialled is passed over. Returns the checked batch and the source's name (HELD
    when no source was reached but the daemon had it or got it anyway). Raises one of
    NOT_THE_PRODUCERS_FAULT naming every source tried when nobody gave it; another StoreError
    when what came is not a valid batch. A store with no peers (a shared local directory) is
    read directly."""

    def get() -> RolloutBatch:
        return fetch_batch(
            store, digest, chain_id=chain_id, ledger=ledger, round_=round_, node=node, network=True
        )

    return from_sources(store, sources, get, connect_timeout_s=connect_timeout_s, what="batch")


def from_sources(
    store: BlockStore,
    sources: Sources | Sequence[Source],
    get: Callable[[], T],
    *,
    connect_timeout_s: float,
    what: str,
) -> tuple[T, str]:
    """Runs `get` (a fetch over the store's network): first once connected to the first of
    `sources` (the producer), then once connected to all the others at once (bitswap asks every
    connected peer, so one time-out covers them all: a batch nobody has costs two time-outs
    however many peers vouched for it); returns its result and the source's name (the first
    other source dialled, in the second try). A store with no peers runs it once, naming the
    first source."""
    if not isinstance(sources, Sources):  # a plain list: the first, then the rest
        sources = Sources.of(sources)
    if not isinstance(store, IpfsStore):
        return get(), sources.first[0][0] if sources.first else HELD
    failures: list[str] = []
    asked = False
    for group in (lambda: sources.first, sources.others):  # the others read once needed
        dialled = []
        for name, addresses in group():
            found, failed = store.connect(list(addresses.dialable[:MAX_DIALS]), connect_timeout_s)
            if found is None:  # not connected to it: a fetch now would not be its
                why = addresses.reason if not addresses.dialable else "; ".join(failed[:2])
                failures.append(f"{name[:10]}…: not dialled ({why})")
            else:
                dialled.append(name)
        if not dialled:
            continue
        try:
            asked = True
            return get(), dialled[0]
        except NOT_THE_PRODUCERS_FAULT as exc:
            failures.append(f"{', '.join(n[:10] + '…' for n in dialled)}: {exc}")
    if not asked:  # a get above asked every connected peer already (bitswap wants go to all)
        try:  # held here, or given by a peer the daemon is connected to anyway
            return get(), HELD
        except NOT_THE_PRODUCERS_FAULT as exc:
            failures.append(f"connected peers: {exc}")
    raise StoreTimeout(f"nobody gave the {what}: " + "; ".join(failures))
