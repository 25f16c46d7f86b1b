"""What a node tells its operator: a human-readable line on the terminal (logging) and the same
event as one JSON object per line in `<data_dir>/events.jsonl` (for tools, the TUI and tests).

Fields are plain values the node chose to report: rounds, digests, CIDs, tx hashes, rewards,
reasons. Nothing secret is ever passed in (the node never holds a key outside its account)."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("sapo.node")


class EventLog:
    """Appends events to a JSONL file and logs them for people."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.listeners: list = []  # callables(event dict), e.g. the TUI's read model

    def emit(self, kind: str, message: str, level: int = logging.INFO, **fields: Any) -> None:
        event = {"time": round(time.time(), 3), "kind": kind, "message": message, **fields}
        line = json.dumps(event, default=str, sort_keys=True)
        with self._lock, self.path.open("a") as f:
            f.write(line + "\n")
        log.log(level, message)
        for listener in list(self.listeners):
            listener(event)


def read_events(path: Path, last: int | None = None) -> list[dict[str, Any]]:
    """Returns the events of a JSONL event log (the `last` ones when given); skips a torn line."""
    if not Path(path).is_file():
        return []
    lines = Path(path).read_text().splitlines()
    events = []
    for line in lines[-last:] if last else lines:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # the last line of a killed writer
    return events
