"""Real processes for tests: `sapo` as a child that dies with the test run, waiting on what a
process does, and which addresses a port listens on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from client.devnet.process import die_with_parent

REPO = Path(__file__).resolve().parents[2]


def wait_until(predicate: Callable[[], bool], timeout_s: float = 15.0, what: str = "") -> None:
    """Polls predicate until true; fails the test naming `what` if it never becomes true.
    Polls quickly at first (a process exiting, a port opening) and backs off to once a second:
    a long wait (rounds of a devnet) must not take the cores its nodes are measured on."""
    deadline = time.monotonic() + timeout_s
    pause = 0.05
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(pause)
        pause = min(1.0, pause * 1.5)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what or predicate}")


def wait_progressing(
    done: Callable[[], bool], progress: Callable[[], int], stall_s: float, what: str = ""
) -> None:
    """Polls done() until true; fails naming `what` only when progress() has not grown for
    `stall_s`. For a wait on something a process does at its own pace (a slow node's batches):
    a loaded machine slows it down, and the wait lasts as long as it still moves."""
    last, since, pause = progress(), time.monotonic(), 0.05
    while not done():
        if time.monotonic() - since > stall_s:
            pytest.fail(f"no progress for {stall_s:.0f} s (at {last}) waiting for {what or done}")
        time.sleep(pause)
        pause = min(1.0, pause * 1.5)
        if (now := progress()) > last:
            last, since = now, time.monotonic()


_STARTED: list[subprocess.Popen[str]] = []


def kill_started() -> None:
    """Kills what `sapo_process` started and is still running (its servers die with it:
    PR_SET_PDEATHSIG); conftest's fixture runs it after every test."""
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def _clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAPO_")}
    return env | {"PYTHONUNBUFFERED": "1"} | (extra or {})


def _spawn(*args: str, **kwargs) -> subprocess.Popen[str]:
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(
        [sys.executable, "-m", "client.cli", *args],
        text=True,
        cwd=kwargs.pop("cwd", REPO),
        env=_clean_env(kwargs.pop("env", None)),
        preexec_fn=die_with_parent(os.getpid()),
        **kwargs,
    )


def sapo_process(*args: str, **kwargs) -> subprocess.Popen[str]:
    """Starts `sapo ARGS` as a real child process (stdout/stderr piped, text mode) that dies
    with the test run, however the run ends (PR_SET_PDEATHSIG: a SIGKILLed pytest too), and is
    killed after its test if still running."""
    proc = _spawn(*args, **kwargs)
    _STARTED.append(proc)
    return proc


def sapo_run(
    *args: str, timeout: float = 600, env: dict[str, str] | None = None, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    """Runs `sapo ARGS` to completion (output captured); it dies with the test run too."""
    return subprocess.run(
        [sys.executable, "-m", "client.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_clean_env(env),
        timeout=timeout,
        check=False,
        preexec_fn=die_with_parent(os.getpid()),
    )


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
