"""The batch format: canonical bytes, one digest per batch, a decoder that accepts nothing else."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.store import (
    BatchLimits,
    BatchTooLarge,
    MalformedBatch,
    RecordMismatch,
    SchemaMismatch,
    StoreError,
    UnsupportedSchema,
    decode_batch,
)
from client.store.batch import canonical_json, check_record
from tests.harness.batches import LEDGER, NODE, make_batch


def document() -> dict:
    return json.loads(make_batch().encode())


def encode(doc: object) -> bytes:
    return canonical_json(doc)


def test_round_trip_and_one_digest() -> None:
    batch = make_batch()
    data = batch.encode()
    assert decode_batch(data) == batch
    assert batch.digest() == hashlib.sha256(data).digest()
    assert (batch.rollouts, batch.score) == (32, 16 * 10_000)
    # field order in the source does not matter: the encoding sorts keys
    shuffled = dict(reversed(list(document().items())))
    assert encode(shuffled) == data
    assert b" " not in data.replace(b"What is", b"").split(b"question")[0]
    assert "é→✓".encode() in data  # UTF-8 as is, not \\u escapes


def test_same_batch_hashes_the_same_in_another_process() -> None:
    import subprocess
    import sys

    code = "from tests.harness.batches import make_batch; print(make_batch().digest().hex())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == make_batch().digest().hex()


# tests.harness.batches.make_batch(local_rounds=2) as the client before the log-probs
# (sapo.rollouts/4, commit 48e242e) encoded it: 4,189 bytes with this sha256
V4_DIGEST = "6ef969b86d414c653a9b1369c7c23e29a1dff9b7d1fee959946ab08ed2d9a6e1"


def as_v4(batch) -> bytes:
    """The batch's content as a v4 batch: no log-probs, the old schema name."""
    doc = json.loads(batch.encode())
    doc["schema"] = "sapo.rollouts/4"
    for lr in doc["local_rounds"]:
        for item in lr["items"]:
            del item["logprobs"]
    return encode(doc)


def test_a_v4_batch_decodes_and_hashes_byte_for_byte_as_before() -> None:
    data = as_v4(make_batch(local_rounds=2))
    assert (len(data), hashlib.sha256(data).hexdigest()) == (4_189, V4_DIGEST)
    batch = decode_batch(data)
    assert batch.schema_ == "sapo.rollouts/4"
    assert all(item.logprobs is None for item in batch.items)
    assert batch.encode() == data and batch.digest().hex() == V4_DIGEST


def test_a_round_sampled_before_the_upgrade_is_sealed_as_v4() -> None:
    from client.node.rollouts import make_batch as seal
    from client.tasks import load_catalog

    batch = make_batch(local_rounds=2)
    old = batch.local_rounds[0].model_copy(
        update={"items": [i.model_copy(update={"logprobs": None}) for i in batch.items[:4]]}
    )
    kwargs = dict(
        chain_id=31_337,
        ledger=LEDGER,
        round_=3,
        node=NODE,
        catalog=load_catalog("tiny"),
        model=batch.model.model_dump(),
        sampling=batch.sampling,
    )
    mixed = seal(**kwargs, local_rounds=[old, batch.local_rounds[1]])
    assert mixed.schema_ == "sapo.rollouts/4" and all(i.logprobs is None for i in mixed.items)
    assert decode_batch(mixed.encode()) == mixed
    assert seal(**kwargs, local_rounds=batch.local_rounds).schema_ == "sapo.rollouts/5"


def test_v5_carries_a_log_prob_per_token_and_v4_none() -> None:
    batch = make_batch()
    assert batch.schema_ == "sapo.rollouts/5"
    assert decode_batch(batch.encode()).items[0].logprobs == [[-1_234 - c, -5, 0] for c in range(8)]
    with_logprobs = json.loads(as_v4(batch))
    with_logprobs["local_rounds"][0]["items"][0]["logprobs"] = [[0, 0, 0]] * 8
    doc = document()
    del doc["local_rounds"][0]["items"][1]["logprobs"]
    short = document()
    short["local_rounds"][0]["items"][0]["logprobs"][3] = [-1, -2]
    positive = document()
    positive["local_rounds"][0]["items"][0]["logprobs"][0][0] = 7
    below_floor = document()
    below_floor["local_rounds"][0]["items"][0]["logprobs"][0][0] = -1_000_001
    cases = [
        (with_logprobs, "log-probs are a sapo.rollouts/5 field"),
        (doc, "every item of a sapo.rollouts/5 batch has its tokens' log-probs"),
        (short, "completion 3: 3 token ids but 2 log-probs"),
        (positive, "less than or equal to 0"),
        (below_floor, "greater than or equal to -1000000"),
    ]
    for bad, message in cases:
        with pytest.raises(SchemaMismatch, match=message):
            decode_batch(encode(bad))


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (b"\xff\xfe{}", MalformedBatch, "not UTF-8"),
        (b'{"schema": ', MalformedBatch, "not JSON"),
        (b"[1,2]", MalformedBatch, "a batch is a JSON object"),
        # json's C parser would recurse 100k levels and crash the process: refused before it
        (b"[" * 100_000 + b"]" * 100_000, MalformedBatch, "nested 17 levels deep"),
        (b'{"a":' * 50_000 + b"1" + b"}" * 50_000, MalformedBatch, "nested 17 levels deep"),
        (b'{"schema":"sapo.rollouts/1"}', UnsupportedSchema, "sapo.rollouts/1"),
        (b'{"x":NaN}', MalformedBatch, "NaN is not JSON"),
    ],
)
def test_malformed_bytes_are_refused(data: bytes, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        decode_batch(data, BatchLimits(max_bytes=1 << 20))


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    from client.store.batch.decode import _nesting_depth

    assert _nesting_depth(b'["[[[[", {"a": [1]}]') == 3
    assert _nesting_depth(rb'["a\"[[[", [1]]') == 2  # an escaped quote does not end the string
    # hostile shapes stay linear: a megabyte of quotes or backslashes is one pass
    assert _nesting_depth(b'"' + b'\\"' * 300_000) == 0
    assert _nesting_depth(b'"' * 1_000_000) == 0


def mutate(path: list, value: object, *, delete: bool = False) -> bytes:
    doc = document()
    target = doc
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return encode(doc)


@pytest.mark.parametrize(
    ("path", "value", "delete", "field"),
    [
        (["chain_id"], None, True, "chain_id: Field required"),
        (["surprise"], 1, False, "surprise: unknown field"),
        (["round"], "3", False, "round"),
        (["round"], -1, False, "round"),
        (["round"], True, False, "round"),
        (["node"], "0x1234", False, "node"),
        (["node"], NODE.upper().replace("0X", "0x"), False, "lowercase"),
        (["catalog_digest"], "0x" + "AB" * 32, False, "catalog_digest"),
        (["local_rounds"], [], False, "local_rounds"),
        (["local_rounds", 0, "k"], 1, False, "numbered 0, 1, … with no gap, got [1]"),
        (["local_rounds", 0, "items"], [], False, "local_rounds.0.items"),
        (["local_rounds", 0, "items", 0, "rewards", 0], 10_001, False, "items.0.rewards.0"),
        (["local_rounds", 0, "items", 0, "rewards", 0], 0.5, False, "items.0.rewards.0"),
        (["local_rounds", 0, "items", 0, "rewards"], [0], False, "8 completions but 1 rewards"),
        (["local_rounds", 0, "items", 0, "task", "entry"], "../etc", False, "task.entry"),
        (["local_rounds", 0, "items", 0, "question"], "", False, "items.0.question"),
        (["model", "parameters"], 2**64, False, "model.parameters"),
        # an adapter's base without the adapter's shape (or the other way): no checker could
        # build the model its checkpoints belong to
        (["model", "base"], "0x" + "ab" * 32, False, "base and adapter are given together"),
        (
            ["model", "adapter"],
            {"kind": "lora", "rank": 0, "alpha": 8, "targets": ["q_proj"]},
            False,
            "model.adapter.rank",
        ),
        (
            ["model", "adapter"],
            {"kind": "lora", "rank": 4, "alpha": 8, "targets": ["../q_proj"]},
            False,
            "model.adapter.targets.0",
        ),
    ],
)
def test_off_schema_documents_name_the_field(path, value, delete, field) -> None:
    with pytest.raises(SchemaMismatch) as info:
        decode_batch(mutate(path, value, delete=delete))
    assert any(field in p for p in info.value.problems), info.value.problems


def test_non_canonical_bytes_are_refused() -> None:
    data = make_batch().encode()
    pretty = json.dumps(json.loads(data), indent=1, ensure_ascii=False).encode()
    escaped = json.dumps(json.loads(data), sort_keys=True, separators=(",", ":")).encode()
    duplicated = data[:-1] + b',"round":3}'
    for variant in (pretty, escaped, duplicated):
        with pytest.raises(MalformedBatch, match="canonical"):
            decode_batch(variant)


def test_local_rounds_must_be_contiguous_from_zero() -> None:
    """A node cannot leave out the local rounds that went badly (k 0, 2 without 1)."""
    doc = json.loads(make_batch(local_rounds=3).encode())
    del doc["local_rounds"][1]
    with pytest.raises(SchemaMismatch, match=r"no gap, got \[0, 2\]"):
        decode_batch(canonical_json(doc))
    batch = decode_batch(make_batch(local_rounds=3).encode())
    assert [lr.k for lr in batch.local_rounds] == [0, 1, 2]
    assert batch.rollouts == 3 * 4 * 8 and len(batch.items) == 12


def test_limits_refuse_before_parsing_and_can_be_lowered() -> None:
    data = make_batch().encode()
    with pytest.raises(BatchTooLarge, match=f"{len(data)} bytes, over the 1024-byte limit"):
        decode_batch(data, BatchLimits(max_bytes=1024))
    with pytest.raises(SchemaMismatch, match="over the limit of 2"):
        decode_batch(data, BatchLimits(max_items=2))
    with pytest.raises(SchemaMismatch, match="local_rounds: 3 over the limit of 2"):
        decode_batch(make_batch(local_rounds=3).encode(), BatchLimits(max_local_rounds=2))
    with pytest.raises(SchemaMismatch, match="completions: over the limit of 4"):
        decode_batch(data, BatchLimits(max_completions=4))
    with pytest.raises(ValueError):
        BatchLimits(max_bytes=2 << 20)  # limits only go down


def test_header_must_match_the_on_chain_record() -> None:
    batch = make_batch(round_=3)
    check_record(
        batch, chain_id=31_337, ledger=LEDGER.upper().replace("0X", "0x"), round_=3, node=NODE
    )
    for kwargs, field in [
        ({"chain_id": 1}, "chain_id"),
        ({"ledger": "0x" + "11" * 20}, "ledger"),
        ({"round_": 4}, "round"),
        ({"node": "0x" + "22" * 20}, "node"),
    ]:
        record = {"chain_id": 31_337, "ledger": LEDGER, "round_": 3, "node": NODE} | kwargs
        with pytest.raises(RecordMismatch, match=field):
            check_record(batch, **record)


# ------------------------------------------------------------------------------------- fuzzing


@settings(max_examples=3_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2_048))
def test_random_bytes_never_crash_and_are_never_accepted(data: bytes) -> None:
    with pytest.raises(StoreError):
        decode_batch(data)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=3_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_near_valid_documents_are_refused_or_exactly_valid(data: st.DataObject) -> None:
    """Replace, delete or add one node anywhere in a valid batch: the decoder either refuses
    with a StoreError or returns a batch whose canonical bytes are exactly the input."""
    doc = document()
    paths = []

    def walk(node, path):
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, [*path, k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, [*path, i])

    walk(doc, [])
    path = data.draw(st.sampled_from(paths[1:]))
    action = data.draw(st.sampled_from(["replace", "delete", "add"]))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if action == "replace":
        parent[path[-1]] = data.draw(JSON)
    elif action == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[data.draw(st.text(max_size=8))] = data.draw(JSON)
    else:
        parent.append(data.draw(JSON))
    raw = canonical_json(doc)
    try:
        batch = decode_batch(raw)
    except StoreError:
        return
    assert batch.encode() == raw  # accepted only when it is a valid batch, to the byte
