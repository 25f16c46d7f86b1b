"""A node that runs inside the TUI's process: its round loop in a thread, its log in a file.

The UI thread never waits on the node: it reads the node's phase and pause flag (plain
attributes), sends the operator's transactions through the node's own signing ledger (its
`TxSender` is thread-safe: one nonce sequence), and asks it to stop with an Event, as Ctrl-C
does for `sapo node run`.
"""

from __future__ import annotations

import logging
import threading
import traceback
from pathlib import Path

from client.chain import Ledger
from client.node.eventlog import Event
from client.node.node import Node

log = logging.getLogger("sapo.node")


def log_to_file(path: Path, level: str) -> logging.Handler:
    """Sends the node's log lines to `path` instead of the terminal the TUI draws on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(message)s", "%H:%M:%S"))
    root = logging.getLogger("sapo")
    root.handlers = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    return handler


class LiveNode:
    """The TUI's handle on an opened node: start, pause, resume, stop."""

    def __init__(self, node: Node):
        self.node = node
        self.stop_requested = threading.Event()
        self.error: str | None = None
        self._thread = threading.Thread(target=self._main, name="sapo-node", daemon=True)

    @property
    def ledger(self) -> Ledger:
        return self.node.ledger

    @property
    def address(self) -> str:
        return self.node.address

    @property
    def phase(self) -> str:
        return "failed" if self.error else str(self.node.phase)

    @property
    def paused(self) -> bool:
        return self.node.paused.is_set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def _main(self) -> None:
        try:
            self.node.run(self.stop_requested)
        except Exception as exc:  # shown on screen; the node's journal keeps what it had done
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("node stopped by an error: %s\n%s", self.error, traceback.format_exc())
            self.node.events.emit(Event.NODE_ERROR, f"node stopped by an error: {self.error}")

    def pause(self) -> None:
        """The node finishes its current round, then idles until resumed (its outbox still
        flushes on the next start or resume)."""
        self.node.paused.set()

    def resume(self) -> None:
        self.node.paused.clear()

    def stop(self, timeout: float | None = None) -> bool:
        """Asks the node to stop (finish the step, checkpoint, flush); returns True once it has."""
        self.stop_requested.set()
        self.node.paused.clear()
        self._thread.join(timeout)
        return not self._thread.is_alive()
