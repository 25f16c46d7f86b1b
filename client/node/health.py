"""Whether the chain and the store answered at the last try, shared by the node's stages; an
event whenever that changes (the TUI's badges, the operator's log)."""

from __future__ import annotations

import logging
import threading

from client.node.eventlog import Event, EventLog


class Health:
    """The reachability of the chain and of the store, as the stages last saw them."""

    def __init__(self, events: EventLog):
        self.events = events
        self.chain_ok = True
        self.store_ok = True
        self._lock = threading.Lock()

    def chain(self, ok: bool, reason: str = "") -> None:
        self._set("chain", ok, reason)

    def store(self, ok: bool, reason: str = "") -> None:
        self._set("store", ok, reason)

    def _set(self, part: str, ok: bool, reason: str) -> None:
        with self._lock:  # several stages report
            if ok == getattr(self, f"{part}_ok"):
                return
            setattr(self, f"{part}_ok", ok)
        self.events.emit(
            Event.CHAIN_STATUS if part == "chain" else Event.STORE_STATUS,
            f"{part} reachable again" if ok else f"{part} unreachable: {reason}",
            logging.INFO if ok else logging.WARNING,
            ok=ok,
        )
