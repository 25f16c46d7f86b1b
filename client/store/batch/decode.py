"""The batch decoder, trusting nothing: size before parsing, UTF-8, nesting depth, JSON, schema
version, schema and limits, then canonical form. It accepts only bytes that re-encode to
themselves, so one batch has exactly one digest. And the check of a batch's header against the
on-chain record it came from."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from client.store.batch.schema import (
    MAX_BATCH_BYTES,
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_LOCAL_ROUNDS,
    SCHEMAS,
    RolloutBatch,
)
from client.store.errors import (
    BatchTooLarge,
    MalformedBatch,
    RecordMismatch,
    SchemaMismatch,
    UnsupportedSchema,
)


class BatchLimits(BaseModel):
    """Bounds a decoder enforces; each can be lowered, none raised above the hard caps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_bytes: int = Field(MAX_BATCH_BYTES, ge=256, le=MAX_BATCH_BYTES)
    max_items: int = Field(MAX_ITEMS, ge=1, le=MAX_ITEMS)
    max_local_rounds: int = Field(MAX_LOCAL_ROUNDS, ge=1, le=MAX_LOCAL_ROUNDS)
    max_completions: int = Field(64, ge=1, le=64)
    max_question_chars: int = Field(8_192, ge=16, le=8_192)
    max_completion_chars: int = Field(8_192, ge=16, le=8_192)


def _no_constants(name: str) -> None:
    raise MalformedBatch(f"{name} is not JSON (only finite numbers are)")


def decode_batch(data: bytes, limits: BatchLimits | None = None) -> RolloutBatch:
    """Returns the batch in `data`, or raises the StoreError that names what is wrong.

    Checks, in order: size (before anything is parsed), UTF-8, JSON, schema version, schema and
    limits, canonical form (the bytes must be exactly what encode() gives).
    """
    limits = limits or BatchLimits()
    if len(data) > limits.max_bytes:
        raise BatchTooLarge(len(data), limits.max_bytes)
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedBatch(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    depth = _nesting_depth(data)
    if depth > MAX_DEPTH:
        # json's C parser recurses per level: 100k nested brackets crash the interpreter.
        raise MalformedBatch(f"JSON nested {depth} levels deep; a batch nests at most {MAX_DEPTH}")
    try:
        document = json.loads(text, parse_constant=_no_constants)
    except RecursionError:
        raise MalformedBatch("JSON nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise MalformedBatch(
            f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(document, dict):
        raise MalformedBatch(f"a batch is a JSON object, got {type(document).__name__}")
    schema = document.get("schema")
    if schema not in SCHEMAS:
        raise UnsupportedSchema(schema, " or ".join(SCHEMAS))
    try:
        batch = RolloutBatch.model_validate(document)
    except ValidationError as exc:
        raise SchemaMismatch([_problem(e) for e in exc.errors()], schema) from None
    except RecursionError:
        raise MalformedBatch("JSON nested too deeply") from None
    _check_limits(batch, limits)
    if batch.encode() != bytes(data):
        raise MalformedBatch("not in canonical form (sorted keys, no spaces, UTF-8, no duplicates)")
    return batch


# The bytes that matter to nesting: brackets, quotes, backslashes. One pass, no backtracking.
_SPECIAL = re.compile(rb'[\[\]{}"\\]')


def _nesting_depth(data: bytes) -> int:
    """Returns how deep brackets nest outside string literals (checked before parsing).

    Linear in the input whatever it holds, and stops once past MAX_DEPTH.
    """
    depth = deepest = 0
    in_string = False
    escaped_at = -1  # position of a character a backslash escapes
    for match in _SPECIAL.finditer(data):
        position, char = match.start(), match.group()
        if position == escaped_at:
            continue
        if in_string:
            if char == b"\\":
                escaped_at = position + 1
            elif char == b'"':
                in_string = False
        elif char == b'"':
            in_string = True
        elif char in (b"[", b"{"):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    break
        elif char in (b"]", b"}"):
            depth -= 1
    return deepest


def _problem(err: dict[str, Any]) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "(document)"
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown field"
    return f"{where}: {message}"


def _check_limits(batch: RolloutBatch, limits: BatchLimits) -> None:
    problems = []
    if len(batch.local_rounds) > limits.max_local_rounds:
        problems.append(
            f"local_rounds: {len(batch.local_rounds)} over the limit of {limits.max_local_rounds}"
        )
    if len(batch.items) > limits.max_items:
        problems.append(f"items: {len(batch.items)} over the limit of {limits.max_items}")
    for lr in batch.local_rounds:
        for i, item in enumerate(lr.items):
            where = f"local_rounds.{lr.k}.items.{i}"
            if len(item.completions) > limits.max_completions:
                problems.append(f"{where}.completions: over the limit of {limits.max_completions}")
            if len(item.question) > limits.max_question_chars:
                problems.append(f"{where}.question: over {limits.max_question_chars} characters")
            longest = max(len(c) for c in item.completions)
            if longest > limits.max_completion_chars:
                problems.append(
                    f"{where}.completions: over {limits.max_completion_chars} characters"
                )
    if problems:
        raise SchemaMismatch(problems, batch.schema_)


def check_record(
    batch: RolloutBatch, *, chain_id: int, ledger: str, round_: int, node: str
) -> None:
    """Raises RecordMismatch unless the batch header matches the on-chain record it came from."""
    for field, expected, got in (
        ("chain_id", chain_id, batch.chain_id),
        ("ledger", ledger.lower(), batch.ledger),
        ("round", round_, batch.round),
        ("node", node.lower(), batch.node),
    ):
        if expected != got:
            raise RecordMismatch(field, expected, got)
