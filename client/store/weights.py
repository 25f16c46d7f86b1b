"""Weights as content-addressed blocks: the checkpoint a local round sampled from, published so
that a batch's checkers can re-run its draws (docs/proof-of-generation.md).

A checkpoint's bytes are the policy's parameters in float32, little-endian, in parameter-name order
(client.policy.weights makes them). They are cut into CHUNK-byte blocks (an IPFS block holds at
most 1 MiB) and listed in a manifest, `sapo.weights/1`, canonical JSON like a batch:

    {"bytes": N, "chunks": ["0x<sha256 of chunk 0>", ...], "dtype": "float32",
     "parameters": P, "schema": "sapo.weights/1"}

The checkpoint's id is the sha256 of the manifest's bytes: a raw block's CID, so the id a batch
names is enough to fetch the manifest, and the manifest enough to fetch every chunk, each checked
against its hash on arrival. Nothing here needs torch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, BinaryIO, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from client.store.backends import BlockStore
from client.store.batch import canonical_json
from client.store.cid import digest_to_cid
from client.store.errors import SpoolError, StoreError, StoreTimeout

SCHEMA = "sapo.weights/1"
CHUNK = 1 << 20  # bytes a chunk holds (the last one may hold fewer)
MAX_WEIGHTS_BYTES = 4 << 30  # a 1B-parameter float32 checkpoint
_DIGEST = r"^0x[0-9a-f]{64}$"


class WeightsError(StoreError):
    """A checkpoint that is not what its id says, or not one this node's model can load."""


class Manifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)

    schema_: Literal["sapo.weights/1"] = Field(SCHEMA, alias="schema")
    dtype: Literal["float32"] = "float32"
    parameters: Annotated[int, Field(gt=0, le=MAX_WEIGHTS_BYTES // 4)]
    bytes: Annotated[int, Field(gt=0, le=MAX_WEIGHTS_BYTES)]
    chunks: list[Annotated[str, Field(pattern=_DIGEST)]]

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        if self.bytes != 4 * self.parameters:
            raise ValueError(f"{self.parameters} float32 parameters are not {self.bytes} bytes")
        wanted = -(-self.bytes // CHUNK)  # the chunks `bytes` fills, the last maybe in part
        if len(self.chunks) != wanted:
            raise ValueError(f"{self.bytes} bytes are {wanted} chunks, not {len(self.chunks)}")
        return self

    def encode(self) -> bytes:
        return canonical_json(self.model_dump(by_alias=True, mode="json"))

    def id(self) -> str:
        """The checkpoint's id: '0x' + sha256 of the manifest's bytes."""
        return "0x" + hashlib.sha256(self.encode()).hexdigest()


def split(data: bytes) -> tuple[Manifest, list[bytes]]:
    """Returns the manifest of a checkpoint's bytes and its chunks."""
    if not data or len(data) % 4:
        raise WeightsError(f"{len(data)} bytes are not float32 parameters")
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    manifest = Manifest(
        parameters=len(data) // 4,
        bytes=len(data),
        chunks=["0x" + hashlib.sha256(c).hexdigest() for c in chunks],
    )
    return manifest, chunks


def weights_id(data: bytes) -> str:
    """The id of a checkpoint's bytes (what a batch's local round names)."""
    return split(data)[0].id()


def stream_id(pieces: Iterable[bytes]) -> str:
    """The id `weights_id` gives the concatenation of `pieces`, hashed as they come: chunk by
    chunk, so nothing is held whole, and with no size limit (a model's frozen base is named
    this way however large: client.policy.adapter.base_id)."""
    return stream_manifest(pieces).id()


def stream_manifest(
    pieces: Iterable[bytes], chunk: Callable[[bytes], object] | None = None
) -> Manifest:
    """The manifest of the concatenation of `pieces`, cut and hashed as they come (one chunk in
    memory at a time). `chunk`, if given, gets each chunk's bytes as it is cut (a base being
    pinned: client.store.base). The manifest is built without validation: its size cap is for a
    checkpoint a batch may open, not for a base."""
    chunks: list[str] = []
    pending, total = bytearray(), 0

    def cut(data: bytes) -> None:
        chunks.append("0x" + hashlib.sha256(data).hexdigest())
        if chunk is not None:
            chunk(data)

    for piece in pieces:
        data = memoryview(piece)
        total += len(data)
        while len(data):
            take = min(CHUNK - len(pending), len(data))
            pending += data[:take]
            data = data[take:]
            if len(pending) == CHUNK:
                cut(bytes(pending))
                pending.clear()
    if pending:
        cut(bytes(pending))
    if not total or total % 4:
        raise WeightsError(f"{total} bytes are not float32 parameters")
    return Manifest.model_construct(parameters=total // 4, bytes=total, chunks=chunks)


def decode_manifest(data: bytes) -> Manifest:
    """Returns the manifest in `data`, or raises WeightsError naming what is wrong."""
    if len(data) > CHUNK:
        raise WeightsError(f"a manifest of {len(data)} bytes: over {CHUNK}")
    return decode_canonical(data, Manifest, WeightsError, "a manifest")


M = TypeVar("M", bound=BaseModel)


def decode_canonical(data: bytes, model: type[M], error: type[Exception], what: str) -> M:
    """Returns the canonical JSON document in `data` as `model` (whose `schema` field names its
    schema and whose `encode()` gives its canonical bytes), or raises `error` saying what of
    `what` is wrong: not JSON, another schema, off the schema, or not in canonical form."""
    schema = model.model_fields["schema_"].default
    try:
        document = json.loads(data.decode("utf-8"))
        if not isinstance(document, dict) or document.get("schema") != schema:
            raise error(f"{what} that is not {schema}")
        decoded = model.model_validate(document)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{what} that is not JSON: {exc}") from None
    except ValidationError as exc:
        raise error(f"{what} that does not fit {schema}: {problems(exc)}") from None
    if decoded.encode() != data:
        raise error(f"{what} not in canonical form")
    return decoded


def problems(exc: ValidationError, limit: int = 400) -> str:
    """A validation error's problems on one line: `field.path: message; …` (at most `limit`)."""
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())[:limit]


def put_weights(store: BlockStore, data: bytes, round_: int) -> str:
    """Pins a checkpoint's chunks and manifest for `round_`; returns its id. Safe to retry."""
    manifest, chunks = split(data)
    for chunk in chunks:
        store.put(chunk, round_, limit=CHUNK)
    store.put(manifest.encode(), round_, limit=CHUNK)
    return manifest.id()


def get_weights(
    store: BlockStore,
    ident: str,
    dest: Path,
    *,
    parameters: int,
    network: bool = True,
    min_rate: float | None = None,
    allowance_s: float = 0.0,
) -> Manifest:
    """Fetches checkpoint `ident` into the file `dest`, every block checked against its hash, and
    returns its manifest. The chunks go to disk as they arrive (written to `dest`.part, renamed
    to `dest` once whole), so a fetch holds one chunk in memory however large the checkpoint; on
    any failure the partial file is removed and nothing is left at `dest`. Raises WeightsError
    for a manifest that is not one of `parameters` float32s (not this model's), and the store's
    errors (BlockNotFound, StoreTimeout, ...) for what could not be fetched.

    `min_rate` (bytes a second): the whole fetch must end within `allowance_s` plus the
    checkpoint's size at that rate, else StoreTimeout. The store's time-out bounds each block
    only, so without it a source that trickles each chunk just within that time-out would hold
    the fetch for hours (a 0.5B checkpoint is 2,000 chunks); with it, a fetch ends at most one
    block's time-out past its deadline."""
    get: Callable[[str, int], bytes] = store.fetch if network else store.get
    started = time.monotonic()
    manifest = decode_manifest(get(digest_to_cid(ident), CHUNK))
    if manifest.parameters != parameters:
        raise WeightsError(
            f"checkpoint {ident[:12]}… holds {manifest.parameters} parameters; the declared model "
            f"has {parameters} parameters"
        )
    deadline = None if min_rate is None else started + allowance_s + manifest.bytes / min_rate
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    try:
        with _spooled(part) as out:
            for cid in manifest.chunks:
                if deadline is not None and time.monotonic() > deadline:
                    raise StoreTimeout(
                        f"checkpoint {ident[:12]}…: {out.tell()} of {manifest.bytes} bytes in "
                        f"{time.monotonic() - started:.0f} s, under the least rate of "
                        f"{min_rate / 1024:.0f} KiB/s ([store].min_rate_kib_s)"
                    )
                chunk = get(digest_to_cid(cid), CHUNK)
                with _ours(part):
                    out.write(chunk)
        with _ours(part):
            os.replace(part, dest)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return manifest


@contextlib.contextmanager
def _ours(path: Path) -> Iterator[None]:
    """Turns a failure of our own disk into SpoolError: not the producer's fault."""
    try:
        yield
    except OSError as exc:
        raise SpoolError(f"could not write a fetched checkpoint to {path}: {exc}") from None


@contextlib.contextmanager
def _spooled(path: Path) -> Iterator[BinaryIO]:
    with _ours(path):
        out = open(path, "wb")  # noqa: SIM115 - closed below, its errors ours too
    try:
        yield out
    finally:
        with _ours(path):
            out.close()


def pin_weights(store: BlockStore, manifest: Manifest, round_: int) -> None:
    """Keeps a fetched checkpoint (manifest and chunks) for `round_`, as a fetched batch is."""
    for digest in [manifest.id(), *manifest.chunks]:
        store.pin(digest_to_cid(digest), round_)


__all__ = [
    "CHUNK",
    "SCHEMA",
    "Manifest",
    "WeightsError",
    "decode_canonical",
    "decode_manifest",
    "get_weights",
    "pin_weights",
    "problems",
    "put_weights",
    "split",
    "stream_id",
    "stream_manifest",
    "weights_id",
]
