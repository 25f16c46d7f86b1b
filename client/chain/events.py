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
from pathlib import Path
from typing import Any, TypeVar

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
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


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
        first = self.start_block if from_block is None else from_block
        last = self.head() if to_block is None else to_block
        topic_sets = self._topics(names, indexed)
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
        head = self.head()
        events = list(self.read(names, from_block=cursor.next_block, to_block=head, **indexed))
        cursor.next_block = max(cursor.next_block, head + 1)
        return events

    def _topics(self, names: Sequence[str] | None, indexed: dict[str, Any]) -> list[list[Any]]:
        wanted = list(names) if names else list(self._events)
        unknown = [n for n in wanted if n not in self._events]
        if unknown:
            raise ValueError(f"unknown event(s) {unknown}; known: {sorted(self._events)}")
        if not indexed:
            return [[[event_abi_to_log_topic(self._events[n]) for n in wanted]]]
        sets = []
        for name in wanted:
            abi = self._events[name]
            positions = [inp for inp in abi["inputs"] if inp["indexed"]]
            if not set(indexed) <= {inp["name"] for inp in positions}:
                continue
            topics: list[Any] = [event_abi_to_log_topic(abi)]
            for inp in positions:
                value = indexed.get(inp["name"])
                topics.append(None if value is None else _topic(inp["type"], value))
            while topics[-1] is None:
                topics.pop()
            sets.append(topics)
        return sets

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
        for log in logs:
            yield self._decode(log)

    def _decode(self, log: Any) -> LedgerEvent:
        name = self._by_topic[bytes(log["topics"][0])]
        decoded = self.ledger.contract.events[name]().process_log(log)
        return LedgerEvent(
            name=name,
            block_number=log["blockNumber"],
            tx_hash="0x" + bytes(log["transactionHash"]).hex(),
            log_index=log["logIndex"],
            args={k: _plain(v) for k, v in decoded["args"].items()},
        )


def _topic(abi_type: str, value: Any) -> str:
    if abi_type == "address":
        return "0x" + "0" * 24 + to_checksum_address(value)[2:].lower()
    if abi_type.startswith("uint"):
        return "0x" + int(value).to_bytes(32, "big").hex()
    if abi_type == "bytes32":
        raw = bytes.fromhex(value.removeprefix("0x")) if isinstance(value, str) else value
        return "0x" + raw.hex()
    raise ValueError(f"cannot filter on indexed {abi_type}")
