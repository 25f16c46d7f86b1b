"""Every way a batch or a block can be refused, each a named exception with a plain message.

Nothing that raises one of these has been accepted or half-written.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every store and batch failure."""


class BatchTooLarge(StoreError):
    def __init__(self, size: int, limit: int, cid: str | None = None):
        self.size, self.limit, self.cid = size, limit, cid
        where = f" ({cid})" if cid else ""
        super().__init__(f"batch{where} is {size} bytes, over the {limit}-byte limit; refused")


class MalformedBatch(StoreError):
    """The bytes are not canonical UTF-8 JSON of one object."""


class SchemaMismatch(StoreError):
    """The JSON does not fit the batch schema `expected`; `problems` names each field."""

    def __init__(self, problems: list[str], expected: str):
        self.problems, self.expected = problems, expected
        super().__init__(f"batch does not fit {expected}: " + "; ".join(problems[:10]))


class UnsupportedSchema(StoreError):
    """A document of another schema than `expected` (those this client reads), or of none."""

    def __init__(self, version: object, expected: str):
        self.version, self.expected = version, expected
        if version is None:
            text = "no schema field: a JSON document, but not a rollout batch"
        else:
            text = (
                f"batch schema {version!r} is not one this client reads ({expected}; another "
                "version of sapo-swarm may read it)"
            )
        super().__init__(text)


class BatchDigestMismatch(StoreError):
    """Bytes whose sha256 is not the one asked for: a tampered block or a lying daemon."""

    def __init__(self, expected: str, got: str, cid: str):
        self.expected, self.got, self.cid = expected, got, cid
        super().__init__(
            f"bytes for {cid} hash to {got}, expected {expected}: tampered block or lying store"
        )


class RecordMismatch(StoreError):
    """A batch whose header disagrees with the on-chain record it was fetched for."""

    def __init__(self, field: str, expected: object, got: object):
        self.field, self.expected, self.got = field, expected, got
        super().__init__(f"batch {field} is {got!r} but the ledger record says {expected!r}")


class BlockNotFound(StoreError):
    def __init__(self, cid: str, backend: str):
        self.cid, self.backend = cid, backend
        super().__init__(f"{cid} is not in the {backend} store")


class StoreUnavailable(StoreError):
    """The backend cannot be reached (daemon down, directory unwritable)."""


class StoreTimeout(StoreError):
    """The backend did not answer in time (a CID nobody has makes an IPFS daemon wait forever)."""


class SpoolError(StoreError):
    """This node could not write what it fetched to its own disk (full, unwritable): its own
    fault, never the producer's; the fetch is tried again later and no vote is cast."""
