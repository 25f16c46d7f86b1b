"""Where a local swarm stands: the state file its supervisor (client.devnet.supervisor) keeps in
the devnet's data dir, and its pid file. Read by `sapo devnet up --detach` while it waits, by
`devnet status`, `devnet ps` and `devnet down`; nothing here imports web3 or torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from client.pids import pid_alive

STATE = "devnet.json"  # where the devnet stands: its stage while starting, then what runs
SUPERVISOR_PID = "devnet.pid"


def read_state(data_dir: Path) -> dict | None:
    """Returns the devnet's state file, or None when there is none (or it cannot be read)."""
    try:
        return json.loads((Path(data_dir) / STATE).read_text())
    except (OSError, ValueError):
        return None


def write_state(data_dir: Path, state: dict) -> None:
    """Replaces the state file whole (temp file, rename)."""
    path = Path(data_dir) / STATE
    tmp = path.with_name(f".{STATE}.tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, path)


def supervisor_alive(data_dir: Path) -> int | None:
    """Returns the pid of the supervisor running the devnet in data_dir, or None."""
    try:
        pid = int((Path(data_dir) / SUPERVISOR_PID).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if pid_alive(pid) else None
