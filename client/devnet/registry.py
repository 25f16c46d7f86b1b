"""Every devnet this user runs, wherever its data dir: so `sapo devnet ps` can list them and
`sapo devnet down --all` can stop them, as `docker ps` finds containers started anywhere.

Each running `devnet up` supervisor writes one small JSON file, named by its pid, under
`$XDG_STATE_HOME/sapo-swarm/devnets` (default `~/.local/state/sapo-swarm/devnets`), and removes
it when it stops. A supervisor killed hard leaves its file behind; the file records the
process's start time as the kernel counts it, so a reader tells a live supervisor from a stale
file or from an unrelated process that reused the pid, and prunes the stale ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from client.pids import pid_alive


def registry_dir() -> Path:
    """Returns the folder where running devnets register (this user's state dir)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "sapo-swarm" / "devnets"


def process_start(pid: int) -> int | None:
    """Returns the process's start time in clock ticks since boot (Linux), else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # field 22 of proc(5)


@dataclass(frozen=True)
class DevnetEntry:
    """One running devnet, as its supervisor registered it."""

    pid: int
    data_dir: str
    detached: bool
    started_at: float  # unix time
    process_start: int | None

    def alive(self) -> bool:
        """Returns whether the registering supervisor still runs (not a reused pid)."""
        if not pid_alive(self.pid):
            return False
        return self.process_start is None or process_start(self.pid) == self.process_start


def register(data_dir: Path, *, detached: bool) -> Path:
    """Records this process as the supervisor of the devnet in `data_dir`; returns the file."""
    folder = registry_dir()
    folder.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    entry = DevnetEntry(
        pid, str(Path(data_dir).absolute()), detached, time.time(), process_start(pid)
    )
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".devnet-")
    with os.fdopen(fd, "w") as handle:
        json.dump(asdict(entry), handle)
    path = folder / f"{pid}.json"
    os.replace(tmp, path)
    return path


def unregister(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def running() -> list[DevnetEntry]:
    """Returns the devnets whose supervisor still runs, oldest first; prunes stale files."""
    folder = registry_dir()
    entries = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            entry = DevnetEntry(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            entry = None
        if entry is not None and entry.alive():
            entries.append(entry)
        else:
            unregister(path)
    return sorted(entries, key=lambda e: e.started_at)
