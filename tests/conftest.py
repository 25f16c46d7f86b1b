"""Shared fixtures: real parts only (anvil from the project's node_modules, real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from client.devnet import Anvil

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch):
    """A typer CliRunner with no SAPO_* variable leaking in from the caller's environment."""
    from typer.testing import CliRunner

    for name in list(os.environ):
        if name.startswith("SAPO_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner()


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Anvil]:
    """One anvil shared by a test module; each test deploys its own ledger on it."""
    with Anvil(tmp_path_factory.mktemp("chain")) as anvil:
        yield anvil


@pytest.fixture
def swarm(chain: Anvil):
    """A freshly deployed SwarmLedger with funded accounts (see ledger_swarm.Swarm)."""
    from ledger_swarm import Swarm

    return Swarm(chain)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory):
    """One js-ipfs daemon (offline, loopback) shared by a test module."""
    from client.devnet import IpfsDaemon

    with IpfsDaemon(tmp_path_factory.mktemp("ipfs")) as running:
        yield running


@pytest.fixture
def anvil(tmp_path: Path) -> Iterator[Anvil]:
    """A running anvil on a free loopback port, stopped after the test."""
    with Anvil(tmp_path / "chain") as chain:
        yield chain


def wait_until(predicate: Callable[[], bool], timeout_s: float = 15.0, what: str = "") -> None:
    """Polls predicate until true; fails the test naming `what` if it never becomes true."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what or predicate}")


_STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_sapo_process_outlives_its_test() -> Iterator[None]:
    """Kills what `sapo_process` started and a failed test left running (its servers die with
    it: PR_SET_PDEATHSIG)."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def sapo_process(*args: str, **kwargs) -> subprocess.Popen[str]:
    """Starts `sapo ARGS` as a real child process (stdout/stderr piped, text mode)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAPO_")}
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "client.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=kwargs.pop("cwd", REPO),
        env=env | kwargs.pop("env", {}),
        **kwargs,
    )
    _STARTED.append(proc)
    return proc


def listening_addresses(port: int) -> set[str]:
    """Returns the local addresses with a TCP socket listening on `port` (from /proc/net)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            host, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A = LISTEN
                found.add(host)
    return found
