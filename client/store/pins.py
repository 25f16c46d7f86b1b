"""Which batches a node keeps pinned, and for which round: the retention rule's memory.

A small JSON file (cid -> round) beside the store, updated under an exclusive file lock and
replaced atomically, so several node processes sharing one store never lose each other's pins.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


class PinIndex:
    """cid -> round of every batch this store keeps."""

    def __init__(self, path: Path):
        self.path = path
        self._lock_path = path.with_suffix(".lock")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, int]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                pins = self._read()
                before = dict(pins)
                yield pins
                if pins != before:
                    self._write(pins)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict[str, int]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError:
            raise OSError(f"pin index {self.path} is corrupt; move it aside to rebuild") from None
        return {str(k): int(v) for k, v in data.items()}

    def _write(self, pins: dict[str, int]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".pins-")
        with os.fdopen(fd, "w") as handle:
            json.dump(pins, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def add(self, cid: str, round_: int) -> None:
        with self._locked() as pins:
            pins[cid] = max(round_, pins.get(cid, round_))

    def remove(self, cid: str) -> None:
        with self._locked() as pins:
            pins.pop(cid, None)

    def all(self) -> dict[str, int]:
        with self._locked() as pins:
            return dict(pins)

    def older_than(self, round_: int) -> list[str]:
        """Returns the CIDs pinned for rounds before `round_`."""
        return sorted(cid for cid, r in self.all().items() if r < round_)
