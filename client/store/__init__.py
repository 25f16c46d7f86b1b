"""The rollout store: batch format, content addressing, IPFS and local backends."""

from client.store.backends import BlockStore, IpfsStore, LocalStore, StoreStatus
from client.store.batch import (
    SCHEMA,
    SCORE_SCALE,
    BatchLimits,
    Item,
    LocalRound,
    ModelDescriptor,
    RolloutBatch,
    Sampling,
    TaskRef,
    decode_batch,
)
from client.store.cid import InvalidCid, cid_to_digest, digest_to_cid
from client.store.errors import (
    BatchDigestMismatch,
    BatchTooLarge,
    BlockNotFound,
    MalformedBatch,
    RecordMismatch,
    SchemaMismatch,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
    UnsupportedSchema,
)
from client.store.exchange import fetch_batch, fetch_from_peers, open_store, publish_batch

__all__ = [
    "SCHEMA",
    "SCORE_SCALE",
    "BatchDigestMismatch",
    "BatchLimits",
    "BatchTooLarge",
    "BlockNotFound",
    "BlockStore",
    "InvalidCid",
    "IpfsStore",
    "Item",
    "LocalRound",
    "LocalStore",
    "MalformedBatch",
    "ModelDescriptor",
    "RecordMismatch",
    "RolloutBatch",
    "Sampling",
    "SchemaMismatch",
    "StoreError",
    "StoreStatus",
    "StoreTimeout",
    "StoreUnavailable",
    "TaskRef",
    "UnsupportedSchema",
    "cid_to_digest",
    "decode_batch",
    "digest_to_cid",
    "fetch_batch",
    "fetch_from_peers",
    "open_store",
    "publish_batch",
]
