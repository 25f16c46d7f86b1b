"""The rollout batch's schema, `sapo.rollouts/5` (a decoder reads /4 too), and its canonical bytes.

A batch is one node's rollouts for one chain round: the header binds it to a chain, a ledger, a
round and a node (so it cannot be replayed elsewhere), the task catalog, the model and how it
sampled (temperature and top-p in 1/10,000, the token limit); the model names the base it
adapts (a content id, client.policy.adapter) and the adapter's shape, or null for a fully
fine-tuned model (v4; v3 batches had neither); then the local rounds the node
finished in that chain round, in order, numbered k = 0, 1, … with no gap (so it cannot leave out
the ones that went badly). Each local round names the checkpoint it sampled from (the id of its
weights, client.store.weights) and holds its items: a task reference (enough to regenerate the
question and its reference answer), the question, the completions with the token ids they were
sampled as, each token's log-probability under the distribution it was drawn from (temperature
and top-p applied; nats in 1/LOGPROB_SCALE, client.units: v5, so that a learner can weigh a
peer's completion as the off-policy sample it is), and each completion's reward in SCORE_SCALE
units (10,000 = 1.0). No floats reach the hashed bytes. A v4 batch has no log-probs; it decodes,
and encodes to the same bytes, as it always did. The checkpoints, token ids and log-probs are
what proof of generation checks (client.node.proving): a completion must be the seeded draw of
its local round's weights, and each log-prob the one those weights give.

Canonical encoding: UTF-8 JSON, keys sorted, no insignificant whitespace, non-ASCII kept as is.
The decoder accepts only bytes that re-encode to themselves, so one batch has exactly one digest."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from client.credit import batch_signal
from client.units import LOGPROB_FLOOR, LOGPROB_SCALE, SCORE_SCALE, logprob_value

SCHEMA = "sapo.rollouts/5"  # what this client writes
SCHEMA_V4 = "sapo.rollouts/4"  # before the log-probs: read, never written
SCHEMAS = (SCHEMA_V4, SCHEMA)
SAMPLING_SCALE = 10_000  # temperature and top-p are written in 1/10,000
MAX_BATCH_BYTES = 1 << 20
MAX_ITEMS = 1_024  # questions over all local rounds (~1.5 KB each: 1 MiB holds ~700)
MAX_LOCAL_ROUNDS = 512
MAX_DEPTH = 16  # a valid batch nests 7 deep (root, local_rounds, round, items, item, ...)
MAX_NEW_TOKENS = 8_192

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_DIGEST = re.compile(r"^0x[0-9a-f]{64}$")
_ENTRY = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


Text = Annotated[str, Field(max_length=256)]
U64 = Annotated[int, Field(ge=0, lt=2**64)]


class TaskRef(_Strict):
    """Where a question comes from: catalog entry, dataset seed, index in the dataset."""

    entry: Annotated[str, Field(pattern=_ENTRY.pattern)]
    seed: U64
    index: Annotated[int, Field(ge=0, lt=2**32)]


class AdapterDescriptor(_Strict):
    """A LoRA adapter's shape: what a checker builds over the base to load a checkpoint."""

    kind: Literal["lora"]
    rank: Annotated[int, Field(ge=1, le=1_024)]
    alpha: Annotated[int, Field(ge=1, le=65_536)]
    targets: Annotated[
        list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]],
        Field(min_length=1, max_length=16),
    ]


class ModelDescriptor(_Strict):
    """The model a batch was sampled from. `parameters` counts the whole model; `base` is the
    content id of the frozen base an adapter trains over (the model family: a checker needs that
    exact base), with `adapter` its shape; both null when every weight is trained."""

    name: Annotated[str, Field(min_length=1, max_length=256)]
    parameters: U64
    tokenizer: Annotated[str, Field(min_length=1, max_length=256)]
    base: Annotated[str, Field(pattern=_DIGEST.pattern)] | None = None
    adapter: AdapterDescriptor | None = None

    @model_validator(mode="after")
    def _base_with_adapter(self) -> ModelDescriptor:
        if (self.base is None) != (self.adapter is None):
            raise ValueError("base and adapter are given together (an adapter over a base) or not")
        return self


class Sampling(_Strict):
    """How the node sampled: temperature and top-p in 1/SAMPLING_SCALE, and the token limit."""

    temperature: Annotated[int, Field(gt=0, le=5 * SAMPLING_SCALE)]
    top_p: Annotated[int, Field(gt=0, le=SAMPLING_SCALE)]
    max_new_tokens: Annotated[int, Field(gt=0, le=MAX_NEW_TOKENS)]

    @classmethod
    def of(cls, temperature: float, top_p: float, max_new_tokens: int) -> Sampling:
        return cls(
            temperature=round(temperature * SAMPLING_SCALE),
            top_p=round(top_p * SAMPLING_SCALE),
            max_new_tokens=max_new_tokens,
        )

    @property
    def temperature_value(self) -> float:
        """The temperature a node samples at (exactly what the batch says)."""
        return self.temperature / SAMPLING_SCALE

    @property
    def top_p_value(self) -> float:
        return self.top_p / SAMPLING_SCALE


TokenIds = Annotated[
    list[Annotated[int, Field(ge=0, lt=2**32)]], Field(min_length=1, max_length=MAX_NEW_TOKENS)
]
LogProbs = Annotated[
    list[Annotated[int, Field(ge=LOGPROB_FLOOR * LOGPROB_SCALE, le=0)]],
    Field(min_length=1, max_length=MAX_NEW_TOKENS),
]


class Item(_Strict):
    """One question and the L completions the node's model wrote for it (as text, as the token
    ids it sampled and, v5, each token's sampling log-probability), with their rewards."""

    task: TaskRef
    question: Annotated[str, Field(min_length=1, max_length=8_192)]
    completions: Annotated[
        list[Annotated[str, Field(max_length=8_192)]], Field(min_length=1, max_length=64)
    ]
    token_ids: Annotated[list[TokenIds], Field(min_length=1, max_length=64)]
    rewards: Annotated[
        list[Annotated[int, Field(ge=0, le=SCORE_SCALE)]], Field(min_length=1, max_length=64)
    ]
    logprobs: Annotated[list[LogProbs], Field(min_length=1, max_length=64)] | None = None

    @model_validator(mode="after")
    def _one_reward_per_completion(self) -> Item:
        if len(self.rewards) != len(self.completions):
            raise ValueError(f"{len(self.completions)} completions but {len(self.rewards)} rewards")
        if len(self.token_ids) != len(self.completions):
            raise ValueError(
                f"{len(self.completions)} completions but {len(self.token_ids)} token id lists"
            )
        if self.logprobs is not None:
            if len(self.logprobs) != len(self.token_ids):
                raise ValueError(
                    f"{len(self.token_ids)} token id lists but {len(self.logprobs)} log-prob lists"
                )
            for j, (ids, lps) in enumerate(zip(self.token_ids, self.logprobs, strict=True)):
                if len(ids) != len(lps):
                    raise ValueError(
                        f"completion {j}: {len(ids)} token ids but {len(lps)} log-probs"
                    )
        return self


@dataclass(frozen=True)
class Sampled:
    """How a v5 batch's item was drawn, as a learner weighs it (client.sapo.offpolicy): its
    completions' token ids, each token's log-probability under the producer's distribution (in
    nats), that distribution's temperature and top-p, and the producer's tokenizer label
    (`name:vocabulary:fingerprint`, ModelDescriptor.tokenizer)."""

    token_ids: list[list[int]]
    logprobs: list[list[float]]
    temperature: float
    top_p: float
    tokenizer: str

    @classmethod
    def of(cls, batch: RolloutBatch, item: Item) -> Sampled | None:
        """The item's sampling, or None for a v4 batch's (it has no log-probs)."""
        if item.logprobs is None:
            return None
        return cls(
            [list(ids) for ids in item.token_ids],
            [[logprob_value(x) for x in row] for row in item.logprobs],
            batch.sampling.temperature_value,
            batch.sampling.top_p_value,
            batch.model.tokenizer,
        )


class LocalRound(_Strict):
    """One local round: the checkpoint it sampled from, the questions drawn for it (from the
    task seed of the chain round and k) and the node's completions with their rewards."""

    k: Annotated[int, Field(ge=0, lt=MAX_LOCAL_ROUNDS)]
    weights: Annotated[str, Field(pattern=_DIGEST.pattern)]
    items: Annotated[list[Item], Field(min_length=1, max_length=256)]


class RolloutBatch(_Strict):
    """A node's rollouts for one chain round, as published on IPFS and hashed on chain."""

    schema_: Literal["sapo.rollouts/4", "sapo.rollouts/5"] = Field(SCHEMA, alias="schema")
    chain_id: Annotated[int, Field(gt=0, lt=2**64)]
    ledger: Annotated[str, Field(pattern=_ADDRESS.pattern)]
    round: U64
    node: Annotated[str, Field(pattern=_ADDRESS.pattern)]
    catalog_digest: Annotated[str, Field(pattern=_DIGEST.pattern)]
    model: ModelDescriptor
    sampling: Sampling
    local_rounds: Annotated[list[LocalRound], Field(min_length=1, max_length=MAX_LOCAL_ROUNDS)]

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)

    @model_validator(mode="after")
    def _contiguous_local_rounds(self) -> RolloutBatch:
        numbers = [lr.k for lr in self.local_rounds]
        if numbers != list(range(len(numbers))):
            raise ValueError(f"local rounds must be numbered 0, 1, … with no gap, got {numbers}")
        with_logprobs = {item.logprobs is not None for item in self.items}
        if self.schema_ == SCHEMA_V4 and True in with_logprobs:
            raise ValueError(f"log-probs are a {SCHEMA} field; a {SCHEMA_V4} batch has none")
        if self.schema_ == SCHEMA and False in with_logprobs:
            raise ValueError(f"every item of a {SCHEMA} batch has its tokens' log-probs")
        longest = max(len(ids) for lr in self.local_rounds for i in lr.items for ids in i.token_ids)
        if longest > self.sampling.max_new_tokens:
            raise ValueError(
                f"a completion of {longest} tokens, over the batch's max_new_tokens "
                f"{self.sampling.max_new_tokens}"
            )
        return self

    @property
    def items(self) -> list[Item]:
        """Every item of every local round, in order."""
        return [item for lr in self.local_rounds for item in lr.items]

    @field_validator("ledger", "node")
    @classmethod
    def _lowercase_address(cls, value: str) -> str:
        # One spelling per address, or two encodings of one batch would hash differently.
        if value != value.lower():
            raise ValueError("addresses are written in lowercase hex in a batch")
        return value

    @property
    def rollouts(self) -> int:
        """Completions in the batch: the `rollouts` the ledger records."""
        return sum(len(item.completions) for item in self.items)

    @property
    def score(self) -> int:
        """Summed rewards in SCORE_SCALE units: the score the ledger records."""
        return sum(sum(item.rewards) for item in self.items)

    @property
    def signal(self) -> int:
        """The batch's learning signal in SCORE_SCALE units (client.credit): what it earns."""
        return batch_signal(item.rewards for item in self.items)

    def encode(self) -> bytes:
        """Returns the canonical bytes (what is hashed, pinned and fetched)."""
        document = self.model_dump(by_alias=True, mode="json")
        if self.schema_ == SCHEMA_V4:  # v4 had no such key: its bytes stay what they were
            for lr in document["local_rounds"]:
                for item in lr["items"]:
                    del item["logprobs"]
        return canonical_json(document)

    def digest(self) -> bytes:
        """Returns sha256 of the canonical bytes: the ledger's digest and the CID's hash."""
        return hashlib.sha256(self.encode()).digest()


def canonical_json(document: Any) -> bytes:
    """Returns the canonical encoding of a JSON document."""
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")
