"""Where a local swarm stands: the state file its supervisor (client.devnet.supervisor) keeps in
the devnet's data dir, and its pid file. Read by `sapo devnet up --detach` while it waits, by
`devnet status`, `devnet ps` and `devnet down`; nothing here imports web3 or torch.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from client.config.roles import Role
from client.pids import pid_alive

STATE = "devnet.json"  # where the devnet stands: its stage while starting, then what runs
SUPERVISOR_PID = "devnet.pid"
# what `devnet status` keeps of the round book's rounds that stand for good (client.devnet.status)
BOOK_CREDITS = "book-credits.json"


class DevnetStatus(StrEnum):
    STARTING = "starting"  # parts are being started (`stage` says which)
    RUNNING = "running"  # every part runs (the fields below `running` are set)


class _Entry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DaemonEntry(_Entry):
    """One node's IPFS daemon: its RPC API, pid and the swarm address peers dial."""

    api: str
    pid: int
    swarm: str


class NodeEntry(_Entry):
    """One node process of the devnet."""

    index: int
    role: Role
    address: str
    pid: int
    config: Path
    data_dir: Path
    metrics: str | None = None  # http://HOST:PORT/metrics when [devnet].metrics is on


class AggregatorEntry(_Entry):
    """The root lane's aggregator ([devnet].root_lane): `sapo aggregate run` as its own node."""

    address: str
    pid: int
    url: str  # its endpoint (listed in its on-chain metadata)
    book: str  # the round book it posts to
    config: Path


class LightEntry(_Entry):
    """The light nodes ([devnet].light): `sapo devnet light`, one process for all of them."""

    count: int
    families: int
    pid: int
    config: Path
    roster: Path  # lights.json: their addresses and families


class DevnetState(_Entry):
    """The state file (`devnet.json`): written whole by the supervisor at each stage of a start
    and once everything runs; `sapo devnet up --json` prints it."""

    status: DevnetStatus
    supervisor_pid: int
    data_dir: Path
    detached: bool = False
    started_at: float
    netns: dict[str, Any] | None = None  # client.devnet.netns.NetnsLayout, to be undone
    # while starting
    stage: str | None = None
    nodes_wanted: int | None = None
    policy_dir: Path | None = None  # the seed policy being built, whose progress file it has
    previous: Path | None = None  # where this start moved the last stopped run's files
    # running
    rpc_url: str | None = None
    chain_id: int | None = None
    anvil_pid: int | None = None
    ipfs: list[DaemonEntry] = []
    config: Path | None = None
    ledger: str | None = None
    nodes: list[NodeEntry] = []
    aggregator: AggregatorEntry | None = None  # with [devnet].root_lane
    light: LightEntry | None = None  # with [devnet].light

    @property
    def running(self) -> bool:
        return self.status == DevnetStatus.RUNNING

    def public(self) -> dict[str, Any]:
        """The state as JSON (what the file holds, without the keys that are unset)."""
        return self.model_dump(mode="json", exclude_none=True)


class DevnetStateError(ValueError):
    """A devnet's state file that cannot be read or is not one."""


def read_state(data_dir: Path) -> DevnetState | None:
    """Returns the devnet's state, or None when there is no state file (no devnet was started
    there, or its supervisor has not written it yet). Raises DevnetStateError for a file that
    cannot be read or is not a devnet's state (it is written whole, by rename: never half)."""
    path = Path(data_dir) / STATE
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DevnetStateError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return DevnetState.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "the file"
        raise DevnetStateError(
            f"{path} is not a devnet's state file ({where}: {first['msg']}); no devnet started "
            "by this version runs there: remove the file, or start one with sapo devnet up"
        ) from None


def write_state(data_dir: Path, state: DevnetState) -> None:
    """Replaces the state file whole (temp file, rename)."""
    path = Path(data_dir) / STATE
    tmp = path.with_name(f".{STATE}.tmp")
    tmp.write_text(state.model_dump_json(indent=1, exclude_none=True))
    os.replace(tmp, path)


def supervisor_alive(data_dir: Path) -> int | None:
    """Returns the pid of the supervisor running the devnet in data_dir, or None."""
    try:
        pid = int((Path(data_dir) / SUPERVISOR_PID).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if pid_alive(pid) else None
