"""A child server process on loopback that can never outlive us.

Local parts of the swarm (anvil, the IPFS daemon, node processes) are started through
`ServerProcess`. Three mechanisms keep them from becoming orphans:
- on Linux the child asks the kernel for SIGKILL when its parent dies (PR_SET_PDEATHSIG), which
  covers the parent being SIGKILLed, where no Python code runs;
- every running server is stopped by an atexit hook on a normal interpreter exit;
- `stop()` sends SIGTERM, waits, then SIGKILL, and reaps the pid.
The child gets its own session, so a Ctrl-C in the terminal reaches only us and we stop the
children in order. PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, so start
servers from a thread that lives as long as they should (the main thread). A pid file is
written beside the log so that a later `devnet down` can stop a server by pid.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

LOOPBACK = "127.0.0.1"
_PR_SET_PDEATHSIG = 1


class ServerStartError(RuntimeError):
    """A server exited or did not become ready; the message carries the end of its log."""


def free_loopback_port(host: str = LOOPBACK) -> int:
    """Returns a TCP port that was free on host (127.0.0.1 unless said) a moment ago (the
    kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_listening(port: int, host: str = LOOPBACK) -> bool:
    """Returns whether something accepts TCP connections on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def started_after(pid: int, when: float) -> bool:
    """Returns whether process `pid` started after unix time `when` (Linux; False elsewhere or
    when it cannot be told): a pid file older than its process names a reused pid."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    return boot + ticks / os.sysconf("SC_CLK_TCK") > when


# Loaded before any fork: the child between fork and exec must not take the dynamic loader's lock.
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    def preexec() -> None:
        if _libc is not None:
            _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            # The parent may have died between fork and prctl: then nobody would signal us.
            if os.getppid() != parent_pid:
                os._exit(1)

    return preexec


_running: set[ServerProcess] = set()
_running_lock = threading.Lock()


def stop_together(processes: list[ServerProcess], timeout_s: float = 10.0) -> None:
    """Stops every process (SIGTERM to all first, then waits for each, SIGKILL after
    timeout_s): N nodes that checkpoint and flush their outbox as they stop take about as long
    as the slowest, not N times as long."""
    for proc in processes:
        proc.terminate()
    for proc in processes:
        proc.stop(timeout_s=timeout_s)


def start_together(processes: list[ServerProcess]) -> None:
    """Spawns every process, then waits for each to be ready: N slow starters (node processes
    import torch) take about as long as the slowest, not N times as long. On a failure the
    ones already spawned are stopped."""
    try:
        for proc in processes:
            proc.spawn()
        for proc in processes:
            proc.wait_ready()
    except BaseException:
        for proc in processes:
            proc.stop()
        raise


@atexit.register
def _stop_all() -> None:
    with _running_lock:
        servers = list(_running)
    for server in servers:
        server.stop()


class ServerProcess:
    """Starts `argv`, waits until `ready()` is true, and stops it by pid; a context manager."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_path: Path,
        ready: Callable[[], bool],
        ready_timeout_s: float = 30.0,
        while_logging: bool = False,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ):
        """`while_logging`: the time-out counts from the log's last growth instead of the spawn,
        for a process that prepares for minutes (a node building its policy, starting vLLM) and
        says so as it goes; one silent for the whole time-out is stopped."""
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.pid_path = log_path.with_suffix(".pid")
        self._ready = ready
        self._ready_timeout_s = ready_timeout_s
        self._while_logging = while_logging
        self._env = env
        self._cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._terminated: subprocess.Popen[bytes] | None = None  # the process sent SIGTERM

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> ServerProcess:
        """Starts the process and returns once it is ready; raises ServerStartError otherwise."""
        return self.spawn().wait_ready()

    def spawn(self) -> ServerProcess:
        """Starts the process without waiting for it to be ready (see `wait_ready`)."""
        if self.running:
            return self
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env,
                cwd=self._cwd,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()),
            )
        with _running_lock:
            _running.add(self)
        self.pid_path.write_text(f"{self._proc.pid}\n")
        self._spawned_at = time.monotonic()
        return self

    def wait_ready(self) -> ServerProcess:
        """Returns once the spawned process is ready; stops it and raises ServerStartError when
        it exits first or is not ready within the time-out (counted from its spawn, or from its
        log's last growth when `while_logging`)."""
        if self._proc is None:
            raise ServerStartError(f"{self.name} was not started")
        deadline = self._spawned_at + self._ready_timeout_s
        logged = self._log_size()
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._forget()
                raise ServerStartError(
                    f"{self.name} exited with code {code} before it was ready; "
                    f"its log ({self.log_path}) ends with:\n{self.log_tail()}"
                )
            try:
                if self._ready():
                    return self
            except OSError:
                pass  # not listening yet
            except Exception:
                self.stop()
                raise
            if self._while_logging and (size := self._log_size()) != logged:
                logged, deadline = size, time.monotonic() + self._ready_timeout_s
            if time.monotonic() > deadline:
                self.stop()
                quiet = " of its last log line" if self._while_logging else ""
                raise ServerStartError(
                    f"{self.name} did not become ready within {self._ready_timeout_s:.0f} s"
                    f"{quiet}; "
                    f"its log ({self.log_path}) ends with:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def terminate(self) -> None:
        """Asks the process to stop (SIGTERM, once) without waiting for it (see `stop`)."""
        proc = self._proc
        if proc is not None and proc.poll() is None and self._terminated is not proc:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            self._terminated = proc

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stops the process (SIGTERM, then SIGKILL after timeout_s) and reaps it. Idempotent."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            self.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout=timeout_s)
        self._forget()

    def _forget(self) -> None:
        with _running_lock:
            _running.discard(self)
        with contextlib.suppress(FileNotFoundError):
            self.pid_path.unlink()

    def log_tail(self, lines: int = 20) -> str:
        """Returns the last lines of the server's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ServerProcess({self.name!r}, pid={self.pid}, running={self.running})"


class ManagedServer:
    """What a local part (anvil, the IPFS daemon) shares: one ServerProcess, stopped by pid.

    Subclasses implement start(), which sets self._server, and return self from it.
    """

    _server: ServerProcess | None = None

    @property
    def pid(self) -> int | None:
        return self._server.pid if self._server else None

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.running

    def start(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def stop(self) -> None:
        """Stops the server (SIGTERM, then SIGKILL) and reaps it; idempotent."""
        if self._server is not None:
            self._server.stop()

    def log_tail(self, lines: int = 20) -> str:
        """Returns the last lines of the server's log."""
        return self._server.log_tail(lines) if self._server else "(not started)"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
