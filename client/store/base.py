"""A model's frozen base as content-addressed blocks, so that a node can join a model family
without the base on its disk: nodes of the family pin it, a newcomer fetches and verifies it.

A base is published as a bundle, `sapo.base/1`, canonical JSON in one raw block:

    {"files": {"config.json": {"bytes": N, "chunks": ["0x…"]}, "tokenizer.json": {…}, …},
     "manifest": {"bytes": N, "chunks": ["0x…", …]},
     "schema": "sapo.base/1",
     "tensors": [{"name": "lm_head.weight", "shape": [V, H]}, …],
     "weights": "0x<the base's content id: its model family>"}

- `weights` is the base's id (client.policy.adapter.base_id): the id of the `sapo.weights/1`
  manifest of its float32 bytes in parameter-name order. The manifest's own bytes are listed in
  `manifest` in chunks (a 7B base's manifest is ~2 MB: more than one block holds), and must hash to
  `weights`.
- `tensors` names each parameter and its shape in that order: the bytes are cut into tensors by it.
- `files` are the model directory's own config and tokenizer files, byte for byte as the model's
  publisher ships them (so two nodes with one Hugging Face snapshot name one bundle).

The bundle's id (sha256 of its bytes, a raw block's CID) names all of it: `[policy].base` pins a
node to one bundle as a revision hash pins a Hugging Face model. A fetched base is checked block by
block against the hashes above, the manifest against `weights`, the tensors against the manifest's
size, and (client.policy.base) the loaded model's own base id against `weights` again. A bundle
from a stranger can therefore waste a fetch, never put other weights, shapes or files under the
bundle id. The weights are written straight into a safetensors file as they arrive (one chunk in
memory), so the fetched directory is a model directory any loader reads. Nothing here needs torch.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import struct
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from client.store.backends import BlockStore
from client.store.batch import canonical_json
from client.store.cid import digest_to_cid
from client.store.errors import SpoolError, StoreError
from client.store.weights import (
    CHUNK,
    Manifest,
    _ours,
    _spooled,
    decode_canonical,
    problems,
    stream_manifest,
)

SCHEMA = "sapo.base/1"
MAX_BASE_BYTES = 1 << 36  # 64 GiB: a 16B-parameter base in float32
MAX_FILE_BYTES = 64 << 20  # a tokenizer.json is 7-17 MB; a 16B base's manifest ~4.5 MB
MAX_TENSORS = 1 << 16
# pinned for a round the retention rule never reaches: a base is kept while the node runs it
KEEP_ROUND = 1 << 62
# the model directory's files a bundle carries: configuration and tokenizer, never code
BASE_FILES = (
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "config.json",
    "generation_config.json",
    "merges.txt",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "vocab.json",
)
WEIGHTS_FILE = "model.safetensors"
_DIGEST = r"^0x[0-9a-f]{64}$"
_TENSOR = re.compile(r"^[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*$")


class BaseError(StoreError):
    """A base bundle that is not what its id says, or that could not be fetched whole."""


class BaseManifest(Manifest):
    """A base's weights manifest: a checkpoint's `sapo.weights/1`, up to MAX_BASE_BYTES."""

    parameters: Annotated[int, Field(gt=0, le=MAX_BASE_BYTES // 4)]
    bytes: Annotated[int, Field(gt=0, le=MAX_BASE_BYTES)]


class FileRef(BaseModel):
    """A file's bytes, in CHUNK-byte blocks."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    bytes: Annotated[int, Field(gt=0, le=MAX_FILE_BYTES)]
    chunks: list[Annotated[str, Field(pattern=_DIGEST)]]

    @model_validator(mode="after")
    def _consistent(self) -> FileRef:
        wanted = -(-self.bytes // CHUNK)
        if len(self.chunks) != wanted:
            raise ValueError(f"{self.bytes} bytes are {wanted} chunks, not {len(self.chunks)}")
        return self


class Tensor(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: Annotated[str, Field(min_length=1, max_length=200)]
    shape: Annotated[
        list[Annotated[int, Field(gt=0, le=1 << 40)]], Field(min_length=1, max_length=8)
    ]

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _TENSOR.match(value):
            raise ValueError(f"not a parameter name: {value[:60]!r}")
        return value

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


class BaseBundle(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)

    schema_: Literal["sapo.base/1"] = Field(SCHEMA, alias="schema")
    weights: Annotated[str, Field(pattern=_DIGEST)]
    manifest: FileRef
    tensors: Annotated[list[Tensor], Field(min_length=1, max_length=MAX_TENSORS)]
    files: dict[str, FileRef]

    @field_validator("files")
    @classmethod
    def _files(cls, files: dict[str, FileRef]) -> dict[str, FileRef]:
        unknown = sorted(set(files) - set(BASE_FILES))
        if unknown:
            raise ValueError(f"files a base does not carry: {', '.join(n[:40] for n in unknown)}")
        if "config.json" not in files:
            raise ValueError("no config.json")
        return files

    @model_validator(mode="after")
    def _consistent(self) -> BaseBundle:
        names = [t.name for t in self.tensors]
        if names != sorted(set(names)):
            raise ValueError("tensors are not listed once each, in name order")
        if 4 * self.parameters > MAX_BASE_BYTES:
            raise ValueError(f"{self.parameters} parameters: over {MAX_BASE_BYTES >> 30} GiB")
        return self

    @property
    def parameters(self) -> int:
        return sum(t.numel for t in self.tensors)

    def encode(self) -> bytes:
        return canonical_json(self.model_dump(by_alias=True, mode="json"))

    def id(self) -> str:
        """The bundle's id: '0x' + sha256 of its bytes (what `[policy].base` names)."""
        return "0x" + hashlib.sha256(self.encode()).hexdigest()


def decode_bundle(data: bytes) -> BaseBundle:
    """Returns the bundle in `data`, or raises BaseError naming what is wrong."""
    return decode_canonical(data, BaseBundle, BaseError, "a base bundle")


def describe(
    files: dict[str, bytes],
    tensors: list[tuple[str, tuple[int, ...]]],
    pieces: Iterable[bytes],
    chunk: Callable[[bytes], object] | None = None,
) -> BaseBundle:
    """The bundle of a base: its files, its tensors (name, shape) in name order, and their
    float32 bytes in that order (`pieces`, hashed as they come). `chunk` gets every block's bytes
    as it is cut (publish_base stores them); without it nothing is stored."""
    take = chunk or (lambda _data: None)
    manifest = stream_manifest(pieces, take)
    numel = sum(math.prod(shape) for _, shape in tensors)
    if manifest.bytes != 4 * numel:
        raise BaseError(f"{manifest.bytes} bytes of weights for {numel} float32 parameters")
    try:
        refs = {name: _file_ref(data, take) for name, data in sorted(files.items())}
        bundle = BaseBundle(
            weights=manifest.id(),
            manifest=_file_ref(manifest.encode(), take),
            tensors=[Tensor(name=n, shape=list(s)) for n, s in tensors],
            files=refs,
        )
    except ValidationError as exc:  # a model this format cannot carry: say what
        raise BaseError(f"this base cannot be a {SCHEMA} bundle: {problems(exc)}") from None
    if len(bundle.encode()) > CHUNK:
        raise BaseError(f"a bundle of {len(bundle.encode())} bytes: over one block ({CHUNK})")
    return bundle


def publish_base(
    store: BlockStore,
    files: dict[str, bytes],
    tensors: list[tuple[str, tuple[int, ...]]],
    pieces: Iterable[bytes],
) -> BaseBundle:
    """Pins a base (every block, kept while the node runs it) and returns its bundle. Safe to
    repeat: a block already stored is stored again under the same CID."""

    def put(data: bytes) -> None:
        store.put(data, KEEP_ROUND, limit=CHUNK)

    bundle = describe(files, tensors, pieces, put)
    put(bundle.encode())
    return bundle


def fetch_bundle(store: BlockStore, bundle_id: str, *, network: bool = True) -> BaseBundle:
    """Returns the bundle `bundle_id` names, its bytes checked against the id."""
    get = store.fetch if network else store.get
    return decode_bundle(get(digest_to_cid(bundle_id), CHUNK))


def fetch_base(
    store: BlockStore,
    bundle: BaseBundle,
    dest: Path,
    *,
    network: bool = True,
    progress: Callable[[int, int], None] | None = None,
    helpers: Sequence[BlockStore] = (),
) -> None:
    """Fetches the base `bundle` describes into the new directory `dest`: its files, and its
    weights as `model.safetensors` (float32, written in order as the blocks arrive). Every block
    is checked against its hash, the manifest against the bundle's `weights`, the tensors against
    the manifest. On any failure nothing is left at `dest`. `progress(bytes, of)` follows the
    weights. `helpers`: more clients of the same store, each fetching one block at a time beside
    `store` (a block fetched over bitswap is a round trip: several in flight fill the link), so
    at most 1 + len(helpers) blocks are held at once. Raises BaseError for a bundle that lies,
    and the store's errors for what could not be had."""
    get: Callable[[str, int], bytes] = store.fetch if network else store.get
    raw = _get_file(get, bundle.manifest)
    if "0x" + hashlib.sha256(raw).hexdigest() != bundle.weights:
        raise BaseError(f"the bundle's weights manifest is not base {bundle.weights[:12]}…")
    manifest = _decode_manifest(raw)
    if manifest.bytes != 4 * bundle.parameters:
        raise BaseError(
            f"base {bundle.weights[:12]}… holds {manifest.bytes} bytes; its tensors are "
            f"{bundle.parameters} float32 parameters ({4 * bundle.parameters} bytes)"
        )
    dest = Path(dest)
    if dest.exists():
        raise BaseError(f"{dest} already exists")
    with _ours(dest.parent):
        dest.parent.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(dest.parent).free
    if free < manifest.bytes + bundle.manifest.bytes + sum(f.bytes for f in bundle.files.values()):
        raise SpoolError(
            f"base {bundle.weights[:12]}… is {manifest.bytes / 1e9:.1f} GB; {dest.parent} has "
            f"{free / 1e9:.1f} GB free: free space there, or set [policy].cache_dir elsewhere"
        )
    part = dest.with_name(dest.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    try:
        with _ours(part):
            part.mkdir(parents=True)
        for name, ref in bundle.files.items():
            data = _get_file(get, ref)
            with _ours(part):
                (part / name).write_bytes(data)
        weights = part / WEIGHTS_FILE
        header = safetensors_header(bundle.tensors)
        clients = [store, *helpers]
        gets = [c.fetch if network else c.get for c in clients]
        done = 0
        # block i is fetched by client i % n, and block i + n is asked for only once block i is
        # written: each client has one request in flight, and the file is written in order
        with _spooled(weights) as out, ThreadPoolExecutor(len(clients)) as pool:
            with _ours(weights):
                out.write(header)
            cids = [digest_to_cid(d) for d in manifest.chunks]
            ahead = deque(
                pool.submit(gets[i], cid, CHUNK) for i, cid in enumerate(cids[: len(clients)])
            )
            for i in range(len(cids)):
                try:
                    chunk = ahead.popleft().result()
                except BaseException:
                    for pending in ahead:
                        pending.cancel()
                    raise
                following = i + len(clients)
                if following < len(cids):
                    ahead.append(
                        pool.submit(gets[following % len(clients)], cids[following], CHUNK)
                    )
                with _ours(weights):
                    out.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, manifest.bytes)
        with _ours(part):
            os.replace(part, dest)
    except BaseException:
        shutil.rmtree(part, ignore_errors=True)
        raise


def safetensors_header(tensors: list[Tensor]) -> bytes:
    """The header of a safetensors file holding `tensors` in float32, in their order: 8 bytes of
    length, then JSON padded with spaces to a multiple of 8 (the format's own alignment)."""
    entries: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for t in tensors:
        end = offset + 4 * t.numel
        entries[t.name] = {"dtype": "F32", "shape": t.shape, "data_offsets": [offset, end]}
        offset = end
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def pin_base(store: BlockStore, bundle_id: str, bundle: BaseBundle) -> None:
    """Keeps a fetched base (every block), so this node serves it to the family's next node."""
    refs = [bundle.manifest, *bundle.files.values()]
    digests = [bundle_id, *(d for r in refs for d in r.chunks)]
    manifest = _decode_manifest(_get_file(store.get, bundle.manifest))
    for digest in [*digests, *manifest.chunks]:
        store.pin(digest_to_cid(digest), KEEP_ROUND)


def _file_ref(data: bytes, take: Callable[[bytes], object]) -> FileRef:
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    for chunk in chunks:
        take(chunk)
    return FileRef(bytes=len(data), chunks=["0x" + hashlib.sha256(c).hexdigest() for c in chunks])


def _get_file(get: Callable[[str, int], bytes], ref: FileRef) -> bytes:
    data = b"".join(get(digest_to_cid(d), CHUNK) for d in ref.chunks)
    if len(data) != ref.bytes:
        raise BaseError(f"a file of {len(data)} bytes where its reference says {ref.bytes}")
    return data


def _decode_manifest(raw: bytes) -> Manifest:
    """A base's `sapo.weights/1` manifest: a checkpoint's, without the cap on what a batch may
    open (a base is fetched once, not by each checker each round)."""
    return decode_canonical(raw, BaseManifest, BaseError, "the base's weights manifest")


__all__ = [
    "BASE_FILES",
    "KEEP_ROUND",
    "SCHEMA",
    "WEIGHTS_FILE",
    "BaseBundle",
    "BaseError",
    "decode_bundle",
    "describe",
    "fetch_base",
    "fetch_bundle",
    "pin_base",
    "publish_base",
    "safetensors_header",
]
