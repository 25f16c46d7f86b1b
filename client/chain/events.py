"""Reading the ledger's events in bounded block ranges, resumably.

Public RPC endpoints cap eth_getLogs (by block range or by result count), so a scan walks the
chain in chunks of `chunk_blocks`, halves a chunk the endpoint refuses, and yields events in
chain order. `EventCursor` remembers where a scan stopped; `poll()` reads from there to the head
and advances it, and `save`/`load` keep it across restarts (written atomically).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from eth_abi import decode as abi_decode
from eth_abi.exceptions import DecodingError
from eth_utils import event_abi_to_log_topic, to_checksum_address
from pydantic import BaseModel, ConfigDict
from web3.exceptions import Web3RPCError

from client.chain.ledger import Ledger
from client.chain.ledger_events import ChainEvent, typed

E = TypeVar("E", bound=ChainEvent)

# Substrings of the answers public endpoints give when a log query is too large.
_TOO_LARGE = ("range", "too many", "more than", "limit", "exceed", "too large")


class LedgerEvent(BaseModel):
    """One decoded event, with where it happened."""

    model_config = ConfigDict(frozen=True)

    name: str
    block_number: int
    tx_hash: str
    log_index: int
    args: dict[str, Any]

    def typed(self) -> ChainEvent:
        """This event as its typed record (client.chain.ledger_events)."""
        return typed(
            self.name,
            self.args,
            block_number=self.block_number,
            tx_hash=self.tx_hash,
            log_index=self.log_index,
        )


class EventCursor(BaseModel):
    """The next block a scan will read."""

    next_block: int = 0

    @classmethod
    def load(cls, path: Path, default_block: int = 0) -> EventCursor:
        """Returns the cursor saved at path, or one at default_block when there is none."""
        try:
            return cls.model_validate_json(path.read_text())
        except FileNotFoundError:
            return cls(next_block=default_block)

    def save(self, path: Path) -> None:
        """Writes the cursor atomically (temp file + rename): a crash leaves the old one."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cursor-")
        with os.fdopen(fd, "w") as handle:
            handle.write(self.model_dump_json())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return "0x" + value.hex()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Query:
    """Event types (None: all) and the indexed arguments they are filtered on."""

    names: Sequence[str] | None = None
    indexed: dict[str, Any] = field(default_factory=dict)


class EventReader:
    """Scans one ledger's events; `names` picks event types, keyword filters pick indexed args."""

    def __init__(self, ledger: Ledger, *, chunk_blocks: int = 2_000, start_block: int = 0):
        if chunk_blocks <= 0:
            raise ValueError("chunk_blocks must be positive")
        self.ledger = ledger
        self.chunk_blocks = chunk_blocks
        self.start_block = start_block
        self._events = {
            item["name"]: item for item in ledger.contract.abi if item.get("type") == "event"
        }
        self._by_topic = {event_abi_to_log_topic(abi): name for name, abi in self._events.items()}
        self._layouts = {name: _Layout(abi) for name, abi in self._events.items()}

    def head(self) -> int:
        """Returns the latest block number."""
        return self.ledger.head()

    def read(
        self,
        names: Sequence[str] | None = None,
        *,
        from_block: int | None = None,
        to_block: int | None = None,
        **indexed: Any,
    ) -> Iterator[LedgerEvent]:
        """Yields matching events from from_block to to_block (inclusive), in chain order.

        `indexed` filters on indexed arguments by name (round=3, node="0x…"); an event type that
        lacks such an argument is skipped.
        """
        return self.read_any([Query(names, indexed)], from_block=from_block, to_block=to_block)

    def read_any(
        self,
        queries: Sequence[Query],
        *,
        from_block: int | None = None,
        to_block: int | None = None,
    ) -> Iterator[LedgerEvent]:
        """Yields the events any of `queries` matches (each once), in chain order: one walk of
        the range, with one log query per chunk for each distinct topic filter (event types
        filtered alike share one)."""
        first = self.start_block if from_block is None else from_block
        last = self.head() if to_block is None else to_block
        topic_sets: list[list[Any]] = []
        for query in queries:
            for topics in self._topics(query.names, query.indexed):
                if topics not in topic_sets:
                    topic_sets.append(topics)
        block = first
        while block <= last:
            end = min(block + self.chunk_blocks - 1, last)
            yield from self._chunk(block, end, topic_sets)
            block = end + 1

    def events(
        self,
        *kinds: type[E],
        from_block: int | None = None,
        to_block: int | None = None,
        **indexed: Any,
    ) -> Iterator[E]:
        """`read` of the event types `kinds`, as their typed records."""
        names = [k.NAME for k in kinds]
        for event in self.read(names, from_block=from_block, to_block=to_block, **indexed):
            yield event.typed()  # type: ignore[misc]

    def poll(self, cursor: EventCursor, names: Sequence[str] | None = None, **indexed: Any):
        """Returns the events since the cursor up to the head, and advances the cursor."""
        return self.poll_any(cursor, [Query(names, indexed)])

    def poll_any(self, cursor: EventCursor, queries: Sequence[Query]) -> list[LedgerEvent]:
        """`read_any` since the cursor up to the head; advances the cursor."""
        head = self.head()
        events = list(self.read_any(queries, from_block=cursor.next_block, to_block=head))
        cursor.next_block = max(cursor.next_block, head + 1)
        return events

    def _topics(self, names: Sequence[str] | None, indexed: dict[str, Any]) -> list[list[Any]]:
        wanted = list(names) if names else list(self._events)
        unknown = [n for n in wanted if n not in self._events]
        if unknown:
            raise ValueError(f"unknown event(s) {unknown}; known: {sorted(self._events)}")
        if not indexed:
            return [[[event_abi_to_log_topic(self._events[n]) for n in wanted]]]
        # event types whose filter lies alike in topics 1-3 share one query (topic 0: any of them)
        grouped: dict[tuple[Any, ...], list[bytes]] = {}
        for name in wanted:
            abi = self._events[name]
            positions = [inp for inp in abi["inputs"] if inp["indexed"]]
            if not set(indexed) <= {inp["name"] for inp in positions}:
                continue
            rest = [
                None
                if indexed.get(inp["name"]) is None
                else _topic(inp["type"], indexed[inp["name"]])
                for inp in positions
            ]
            while rest and rest[-1] is None:
                rest.pop()
            grouped.setdefault(tuple(rest), []).append(event_abi_to_log_topic(abi))
        return [[signatures, *rest] for rest, signatures in grouped.items()]

    def _chunk(self, start: int, end: int, topic_sets: list[list[Any]]) -> Iterator[LedgerEvent]:
        logs: list[Any] = []
        try:
            for topics in topic_sets:
                query = {
                    "address": self.ledger.address,
                    "fromBlock": start,
                    "toBlock": end,
                    "topics": topics,
                }
                logs += self.ledger.tx.rpc(
                    lambda query=query: self.ledger.w3.eth.get_logs(query), "eth_getLogs"
                )
        except Web3RPCError as exc:
            if end > start and any(s in str(exc).lower() for s in _TOO_LARGE):
                middle = (start + end) // 2
                yield from self._chunk(start, middle, topic_sets)
                yield from self._chunk(middle + 1, end, topic_sets)
                return
            raise
        logs.sort(key=lambda log: (log["blockNumber"], log["logIndex"]))
        seen = None
        for log in logs:
            at = (log["blockNumber"], log["logIndex"])
            if at != seen:  # a log two filters matched comes once
                seen = at
                yield self._decode(log)

    def _decode(self, log: Any) -> LedgerEvent:
        name = self._by_topic[bytes(log["topics"][0])]
        return LedgerEvent(
            name=name,
            block_number=log["blockNumber"],
            tx_hash="0x" + bytes(log["transactionHash"]).hex(),
            log_index=log["logIndex"],
            args=self._layouts[name].args(log),
        )


class _Layout:
    """How one event's arguments lie in a log: the indexed ones in topics 1-3 (one word each),
    the others ABI-encoded in the data. Words of static elementary types are read here directly
    and the rest with eth_abi, not through web3's `process_log` (which re-derives the ABI, checks
    and wraps every log): ~15 us a Submitted log instead of ~250 us on this CPU, for a node that
    reads every submission of the swarm each round. The ledger's indexed arguments are all
    static (a dynamic one would be a hash, and is refused here)."""

    def __init__(self, abi: dict[str, Any]):
        inputs = abi["inputs"]
        self.name = abi["name"]
        self.names = [i["name"] for i in inputs]
        self.indexed = [(i["name"], i["type"]) for i in inputs if i["indexed"]]
        self.data = [(i["name"], i["type"]) for i in inputs if not i["indexed"]]
        self.topics = [_word_reader(kind) for _, kind in self.indexed]
        for (_, kind), read in zip(self.indexed, self.topics, strict=True):
            if read is None:
                raise ValueError(f"event {self.name} indexes a {kind}: not decodable")
        readers = [_word_reader(kind) for _, kind in self.data]
        # all static words: read in place; else eth_abi decodes the data
        self.words = readers if all(r is not None for r in readers) else None

    def args(self, log: Any) -> dict[str, Any]:
        try:
            return self._args(log["topics"], bytes(log["data"]))
        except (ValueError, TypeError, DecodingError) as exc:
            raise ValueError(
                f"the RPC answered a {self.name} log that does not decode ({exc}): is the "
                "ledger address in the config this ledger's?"
            ) from exc

    def _args(self, topics: Sequence[Any], data: bytes) -> dict[str, Any]:
        if len(topics) != 1 + len(self.indexed):
            raise ValueError(f"{len(topics) - 1} indexed topics, its ABI {len(self.indexed)}")
        found: dict[str, Any] = {}
        for (name, _), read, topic in zip(self.indexed, self.topics, topics[1:], strict=True):
            found[name] = read(bytes(topic))  # type: ignore[misc]
        if self.words is not None:
            if len(data) != 32 * len(self.data):
                raise ValueError(f"{len(data)} bytes of data, its ABI {32 * len(self.data)}")
            for i, ((name, _), read) in enumerate(zip(self.data, self.words, strict=True)):
                found[name] = read(data[32 * i : 32 * i + 32])
        else:
            values = abi_decode([k for _, k in self.data], data)
            for (name, _), value in zip(self.data, values, strict=True):
                found[name] = _plain(value)
        return {n: found[n] for n in self.names}


def _address(word: bytes) -> str:
    if any(word[:12]):
        raise ValueError("an address word with its upper 12 bytes set")
    return to_checksum_address(word[12:])  # as web3 gives them


def _bool(word: bytes) -> bool:
    value = int.from_bytes(word, "big")
    if value > 1:
        raise ValueError(f"a bool word of {value}")
    return value == 1


def _bytes32(word: bytes) -> str:
    return "0x" + word.hex()


def _word_reader(kind: str):
    """The reader of one ABI word of a static elementary type; None for any other type."""
    if kind == "address":
        return _address
    if kind == "bool":
        return _bool
    if kind == "bytes32":
        return _bytes32
    if kind.startswith("uint") and kind[4:].isdigit():
        bits = int(kind[4:] or 256)

        def read(word: bytes) -> int:
            value = int.from_bytes(word, "big")
            if value >> bits:
                raise ValueError(f"a {kind} word of {value}")
            return value

        return read
    return None


def _topic(abi_type: str, value: Any) -> str:
    if abi_type == "address":
        return "0x" + "0" * 24 + to_checksum_address(value)[2:].lower()
    if abi_type.startswith("uint"):
        return "0x" + int(value).to_bytes(32, "big").hex()
    if abi_type == "bytes32":
        raw = bytes.fromhex(value.removeprefix("0x")) if isinstance(value, str) else value
        return "0x" + raw.hex()
    raise ValueError(f"cannot filter on indexed {abi_type}")
