"""A round's published lists on IPFS (docs/scaling.md): what the CID an aggregator posts with each
root names, and how anyone fetches it.

A list (client.chain.roots: the submission list, 384 bytes an entry, 3.84 MB at 10,000 nodes; or
the verdict list) is cut into raw blocks of CHUNK bytes, the size a checkpoint's chunks have
(kubo's bitswap carries blocks up to 2 MiB), and named by one more raw block, its index,
`sapo.list/1` in canonical JSON:

    {"bytes": N, "chunks": ["0x<sha256>", …], "kind": "submissions", "round": R,
     "schema": "sapo.list/1"}

The CID posted on chain (`postSubmissions`, `postVerdicts`) is the index's. A reader checks the
index before it fetches anything more: that it is this schema, names the list and round it
wants, and is no larger than that list can be (a submission list is exactly count x 384 bytes,
a verdict list at most credits x MAX_VERDICT_ENTRY_BYTES); every block is checked against its
hash by the store. Whether the bytes are the root's data is the caller's check
(`open_submission_list`, `open_verdict_list`): a list whose CID cannot be fetched, or whose
index or bytes are not what the root says, is answered with a data challenge on chain, never
trusted.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from client.chain.roots import MAX_VERDICT_ENTRY_BYTES, SUBMISSION_BYTES
from client.store import BlockStore, StoreError, StoreUnavailable
from client.store.batch import canonical_json
from client.store.cid import InvalidCid, cid_to_digest, digest_to_cid
from client.store.weights import CHUNK, problems

SCHEMA = "sapo.list/1"
KINDS = ("submissions", "verdicts")
MAX_LIST_BYTES = 1 << 32  # a list of 2**32 - 1 submissions (the book's count is a uint32) fits
MAX_INDEX_BYTES = 1 << 20  # an index naming 4,096 chunks is ~290 KB


class ListUnavailable(Exception):
    """A list's CID names nothing usable: not a CID, an index that is not one, blocks nobody
    serves. The text says what; an auditor challenges the root's data on chain for it. With
    `store_down`, it was this node's own store that did not answer: nothing is known of the
    list, and nobody is to be challenged for it."""

    def __init__(self, message: str, *, store_down: bool = False):
        super().__init__(message)
        self.store_down = store_down


class ListIndex(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)

    schema_: Literal["sapo.list/1"] = Field(SCHEMA, alias="schema")
    kind: Literal["submissions", "verdicts"]
    round: Annotated[int, Field(ge=0, lt=1 << 64)]
    bytes: Annotated[int, Field(gt=0, le=MAX_LIST_BYTES)]
    chunks: list[Annotated[str, Field(pattern=r"^0x[0-9a-f]{64}$")]]

    def encode(self) -> bytes:
        return canonical_json(self.model_dump(by_alias=True))

    @classmethod
    def of(cls, kind: str, round_: int, data: bytes) -> tuple[ListIndex, list[bytes]]:
        """The index of list `data`, and the chunks it names."""
        if kind not in KINDS:
            raise ValueError(f"a list is one of {KINDS}, not {kind!r}")
        if not data:
            raise ValueError("an empty list is not published: a round with nothing posts no root")
        chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
        digests = ["0x" + hashlib.sha256(c).hexdigest() for c in chunks]
        return cls(kind=kind, round=round_, bytes=len(data), chunks=digests), chunks  # type: ignore[arg-type]


def list_digest(kind: str, round_: int, data: bytes) -> bytes:
    """The digest of list `data`'s index block (what a root's post names), computed without
    storing anything: what publish_list's CID carries."""
    index, _ = ListIndex.of(kind, round_, data)
    return hashlib.sha256(index.encode()).digest()


def publish_list(store: BlockStore, kind: str, round_: int, data: bytes, keep_round: int) -> str:
    """Pins a list's blocks and its index until the retention rule drops `keep_round` (the
    round's challenge window must be past by then); returns the index's CID, what the root's
    post names. Safe to retry: a block stored again keeps its CID."""
    index, chunks = ListIndex.of(kind, round_, data)
    for chunk in chunks:
        store.put(chunk, keep_round, limit=CHUNK)
    return store.put(index.encode(), keep_round, limit=MAX_INDEX_BYTES)


def max_list_bytes(kind: str, entries: int) -> int:
    """The most bytes the list of a root of `entries` leaves can hold (exactly that many for
    submissions)."""
    if kind == "submissions":
        return entries * SUBMISSION_BYTES
    return entries * MAX_VERDICT_ENTRY_BYTES + 64  # the ABI array's offset and length words


def fetch_list(
    store: BlockStore, cid: str, kind: str, round_: int, entries: int, *, keep_round: int | None
) -> bytes:
    """Fetches the list `cid` names (through the store's peers), for `kind` of round `round_`
    whose root has `entries` leaves; raises ListUnavailable saying what was wrong. `keep_round`:
    pin what was fetched until then, so that this node serves the list to others through the
    challenge window (None: do not pin)."""
    try:
        cid_to_digest(cid)
    except (InvalidCid, AttributeError):
        raise ListUnavailable(f"the posted list CID {cid[:80]!r} is not a raw CIDv1") from None
    try:
        raw = store.fetch(cid, MAX_INDEX_BYTES)
    except StoreError as exc:
        down = isinstance(exc, StoreUnavailable)
        raise ListUnavailable(
            f"the {kind} list {cid} of round {round_}: {exc}", store_down=down
        ) from None
    try:
        index = ListIndex.model_validate_json(raw)
    except ValidationError as exc:
        raise ListUnavailable(f"{cid} is not a {SCHEMA} index: {problems(exc)}") from None
    if index.encode() != raw:
        raise ListUnavailable(f"{cid} is not a {SCHEMA} index in canonical form")
    if index.kind != kind or index.round != round_:
        raise ListUnavailable(
            f"{cid} indexes the {index.kind} list of round {index.round}, not the {kind} list "
            f"of round {round_}"
        )
    most = max_list_bytes(kind, entries)
    if index.bytes > most or len(index.chunks) != -(-index.bytes // CHUNK):
        raise ListUnavailable(
            f"{cid} says {index.bytes} bytes in {len(index.chunks)} chunks; a {kind} list of "
            f"{entries} entries holds at most {most} bytes, in chunks of {CHUNK}"
        )
    parts = []
    for i, digest in enumerate(index.chunks):
        block = digest_to_cid(digest)
        try:
            parts.append(store.fetch(block, CHUNK))
        except StoreError as exc:
            raise ListUnavailable(
                f"chunk {i} of the {kind} list of round {round_} ({block}): {exc}",
                store_down=isinstance(exc, StoreUnavailable),
            ) from None
    data = b"".join(parts)
    if len(data) != index.bytes:
        raise ListUnavailable(
            f"{cid}'s chunks hold {len(data)} bytes, its index says {index.bytes}"
        )
    if keep_round is not None:
        for block in [cid, *(digest_to_cid(d) for d in index.chunks)]:
            store.pin(block, keep_round)
    return data


__all__ = [
    "KINDS",
    "SCHEMA",
    "ListIndex",
    "ListUnavailable",
    "fetch_list",
    "list_digest",
    "max_list_bytes",
    "publish_list",
]
