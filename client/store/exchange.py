"""Publishing a batch and fetching one by its on-chain digest, trusting nothing on the way."""

from __future__ import annotations

from pathlib import Path

from client.config.models import StoreSection
from client.store.backends import BlockStore, IpfsStore, LocalStore
from client.store.batch import BatchLimits, RolloutBatch, check_record, decode_batch
from client.store.cid import digest_to_cid


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
