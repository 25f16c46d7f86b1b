"""Processes by pid, for any layer: the devnet's supervisor and registry, the CLI, and the vLLM
engine's watcher in client.policy (which must not import client.devnet)."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Returns whether pid is a live process. A zombie counts as gone once all its threads are.

    (A multi-threaded process such as anvil shows its main thread as a zombie while the other
    threads are still tearing down and its sockets still open; an unreaped zombie, common in
    containers whose init does not reap, holds nothing.)
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        return True  # no procfs (macOS): the signal probe is all we have
    for task in tasks.iterdir():
        try:
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if state not in ("Z", "X"):
            return True
    return False
