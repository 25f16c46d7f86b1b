"""The rollout batch: schema `sapo.rollouts/5` (a decoder reads /4 too), its canonical bytes; a
decoder trusting nothing.

- `schema`: what a batch holds (header, local rounds, items) and its canonical encoding
- `decode`: the decoder, its limits, and the check of a header against its on-chain record
"""

from client.store.batch.decode import BatchLimits, check_record, decode_batch
from client.store.batch.schema import (
    MAX_BATCH_BYTES,
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_LOCAL_ROUNDS,
    MAX_NEW_TOKENS,
    SAMPLING_SCALE,
    SCHEMA,
    SCHEMA_V4,
    SCHEMAS,
    U64,
    AdapterDescriptor,
    Item,
    LocalRound,
    LogProbs,
    ModelDescriptor,
    RolloutBatch,
    Sampled,
    Sampling,
    TaskRef,
    Text,
    TokenIds,
    canonical_json,
)
from client.units import LOGPROB_FLOOR, LOGPROB_SCALE, SCORE_SCALE  # re-exported for importers

__all__ = [
    "LOGPROB_FLOOR",
    "LOGPROB_SCALE",
    "MAX_BATCH_BYTES",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_LOCAL_ROUNDS",
    "MAX_NEW_TOKENS",
    "SAMPLING_SCALE",
    "SCHEMA",
    "SCHEMAS",
    "SCHEMA_V4",
    "SCORE_SCALE",
    "U64",
    "AdapterDescriptor",
    "BatchLimits",
    "Item",
    "LocalRound",
    "LogProbs",
    "ModelDescriptor",
    "RolloutBatch",
    "Sampled",
    "Sampling",
    "TaskRef",
    "Text",
    "TokenIds",
    "canonical_json",
    "check_record",
    "decode_batch",
]
