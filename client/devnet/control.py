"""Starting and stopping a devnet the way the `sapo devnet` commands do: the command's options
applied to the config, the background start that `up --detach` waits on while it makes progress,
and the stop of a devnet by pid (its supervisor, whatever a supervisor killed hard left behind,
and its network namespaces). The command parses, calls these and prints.

Nothing here imports torch or web3 at module level: `devnet down` and `devnet ps` stay quick.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from client.config import NodeConfig, with_sections
from client.config.roles import expand
from client.devnet.netns import NetnsLayout
from client.devnet.process import started_after
from client.devnet.state import (
    STATE,
    DevnetState,
    DevnetStateError,
    read_state,
    supervisor_alive,
)
from client.pids import pid_alive

# `up --detach` waits while the background devnet makes progress; after this long without any
# (no stage change, no build step) it stops waiting, and leaves the devnet running.
STALL_S = 600


class DevnetOptionError(ValueError):
    """A `devnet up` option that cannot apply (the message names it)."""


def apply_options(
    cfg: NodeConfig,
    nodes: int | None,
    round_length: int | None,
    store: str | None,
    adversaries: list[str] | None = None,
    metrics: bool = False,
    root_lane: bool = False,
    light: int | None = None,
) -> tuple[NodeConfig, list[str]]:
    """Returns the config with the command's options applied (validated like the file) and the
    notes to show for what was adjusted to fit the devnet (its quorum, its checkers)."""
    changes: dict[str, dict] = {}
    notes: list[str] = []
    if light and not (root_lane or cfg.devnet.root_lane):
        root_lane = True  # light nodes send to the root lane's aggregator
        notes.append(f"--light {light}: the devnet runs the root lane (as --root-lane)")
    lane = root_lane or cfg.devnet.root_lane  # its aggregator takes an account and holds seats
    if adversaries:
        try:
            roles = expand([*cfg.devnet.adversaries, *adversaries])
        except ValueError as exc:
            raise DevnetOptionError(f"--adversary: {exc}") from None
        honest = nodes or cfg.devnet.nodes
        changes["devnet"] = {
            "adversaries": [*cfg.devnet.adversaries, *adversaries],
            "accounts": max(cfg.devnet.accounts, honest + len(roles) + 1 + lane),
        }
    if metrics:
        changes["devnet"] = {**changes.get("devnet", {}), "metrics": True}
    if light is not None:
        changes["devnet"] = {**changes.get("devnet", {}), "light": light}
    lights = cfg.devnet.light if light is None else light
    if cfg.devnet.light_equivocators > lights:
        raise DevnetOptionError(
            f"[devnet].light_equivocators = {cfg.devnet.light_equivocators}: more than the "
            f"{lights} light nodes the devnet runs (--light N, or [devnet].light)"
        )
    if cfg.devnet.aggregator_lies and not lane:
        raise DevnetOptionError(
            f"[devnet].aggregator_lies = {cfg.devnet.aggregator_lies!r}: the root lane's "
            "aggregator lies only where the devnet runs one (--root-lane, or [devnet].root_lane)"
        )
    if root_lane:
        devnet = changes.get("devnet", {})
        need = cfg.devnet.nodes + len(cfg.devnet.adversary_roles()) + 2
        accounts = max(cfg.devnet.accounts, devnet.get("accounts", 0), need)
        changes["devnet"] = {**devnet, "root_lane": True, "accounts": accounts}
    if store is not None:
        if store not in ("ipfs", "local"):
            raise DevnetOptionError(f"--store: expected ipfs or local, got {store!r}")
        changes["store"] = {"backend": store}
    if round_length is not None:
        least = cfg.ledger.model_copy(update={"round_length_s": round_length}).least_unbonding_s()
        changes["ledger"] = {
            "round_length_s": round_length,
            "unbonding_period_s": max(cfg.ledger.unbonding_period_s, least),
        }
    if nodes:
        devnet = changes.get("devnet", {})
        accounts = max(cfg.devnet.accounts, devnet.get("accounts", 0), nodes + 1 + lane)
        if "adversaries" in devnet:
            accounts = max(accounts, nodes + len(expand(devnet["adversaries"])) + 1 + lane)
        changes["devnet"] = {**devnet, "nodes": nodes, "accounts": accounts}
    honest = cfg.devnet.nodes if nodes is None else nodes
    if honest and cfg.ledger.quorum > max(1, honest - 1):
        # a batch's checkers are the other nodes: a smaller devnet lowers its quorum to fit (the
        # default quorum of 3 is a public swarm's; the default devnet has 3 nodes)
        quorum = max(1, honest - 1)
        notes.append(
            f"[ledger].quorum {cfg.ledger.quorum} lowered to {quorum} for a devnet of "
            f"{honest} node(s) (each batch has {honest - 1} possible checker(s))"
        )
        changes["ledger"] = {**changes.get("ledger", {}), "quorum": quorum}
    roles = expand(changes.get("devnet", {}).get("adversaries", cfg.devnet.adversaries))
    total = (nodes or cfg.devnet.nodes) + len(roles)
    seats = seats_for_every_node(total + lane)  # the aggregator is registered in a family too
    if cfg.ledger.checkers < seats:
        # with too few seat trials an honest batch may seat fewer than Q honest checkers
        # (adversaries never vote for it): the devnet then measures the draw, not the node
        notes.append(
            f"[ledger].checkers {cfg.ledger.checkers} raised to {seats} for a devnet of "
            f"{total} nodes (every node holds a seat on every batch but once in a million)"
        )
        changes["ledger"] = {**changes.get("ledger", {}), "checkers": seats}
    if cfg.ledger.appeal_checkers < seats:
        notes.append(
            f"[ledger].appeal_checkers {cfg.ledger.appeal_checkers} raised to {seats} (an "
            "appeal's committee is at least the first's)"
        )
        changes["ledger"] = {**changes.get("ledger", {}), "appeal_checkers": seats}
    budget = min(256, 2 * (total - 1))  # a vote on every other node's batch and on its appeal
    if cfg.sapo.attest_budget < budget:
        # drawn on every batch, a node that votes on only attest_budget of them leaves the rest
        # to the others: a free claim it does not report unavailable is a cartel's gain
        notes.append(
            f"[sapo].attest_budget {cfg.sapo.attest_budget} raised to {budget} for a devnet of "
            f"{total} nodes (each node is drawn on every other node's batch and its appeal)"
        )
        changes["sapo"] = {**changes.get("sapo", {}), "attest_budget": budget}
    return (with_sections(cfg, **changes) if changes else cfg), notes


def seats_for_every_node(nodes: int, miss: float = 1e-6) -> int:
    """The seat trials K at which each of `nodes` equal stakes holds a seat on a batch's
    committee but with chance `miss`: (1 - 1/nodes)^K <= miss (at most the ledger's 255)."""
    if nodes <= 1:
        return 1
    return min(255, math.ceil(math.log(miss) / math.log1p(-1 / nodes)))


class StartFailed(Exception):
    """The background `devnet up` exited before its devnet ran."""


class StartStalled(Exception):
    """The background start made no progress for STALL_S seconds (it keeps running)."""


@dataclass
class DetachedStart:
    """A `devnet up` re-run in the background, in a session of its own (so that it outlives the
    command on purpose), its output going to DIR/devnet.log."""

    proc: subprocess.Popen
    data_dir: Path
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @classmethod
    def spawn(cls, argv: list[str], data_dir: Path) -> DetachedStart:
        """Starts `python -m client.cli ARGV` (a `devnet up` without --detach) in the
        background, with --json and --background, logging to DIR/devnet.log."""
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / STATE).unlink(missing_ok=True)
        argv = [a for a in argv if a not in ("--detach", "--json")]
        if "--data-dir" not in argv:
            argv += ["--data-dir", str(data_dir)]
        command = [sys.executable, "-m", "client.cli", *argv, "--json", "--background"]
        log_path = data_dir / "devnet.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a detached devnet outlives this command on purpose
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        return cls(proc, data_dir, log_path)

    def wait(
        self,
        on_progress: Callable[[DevnetState, object | None], None],
        stall_s: float = STALL_S,
    ) -> DevnetState:
        """Returns the running devnet's state once it runs, calling `on_progress(state, build)`
        whenever its stage or its seed build's step changes (`build`: the BuildProgress of the
        seed policy being built, or None). Raises StartFailed when the start exited, and
        StartStalled after `stall_s` seconds without progress; never stops a devnet."""
        seen, changed = None, time.monotonic()
        while (state := self._state()) is None or not state.running:
            if self.proc.poll() is not None:
                tail = "\n".join(self.log_path.read_text().splitlines()[-15:])
                raise StartFailed(
                    f"the devnet did not start (exit {self.proc.returncode}); {self.log_path} "
                    f"ends with:\n{tail}"
                )
            # no state yet (the supervisor has not written it) counts as a stage, which stalls too
            build = seed_build_progress(state) if state is not None else None
            stage = state.stage if state is not None else None
            now = (stage, build and (build.stage, build.step))
            if now != seen:
                seen, changed = now, time.monotonic()
                if state is not None:
                    on_progress(state, build)
            elif time.monotonic() - changed > stall_s:
                raise StartStalled(
                    f"no progress for {stall_s / 60:.0f} minutes at stage "
                    f"{stage or 'starting'!r}; the devnet keeps running in the "
                    f"background (pid {self.pid}): see {self.log_path}, stop it with "
                    f"sapo devnet down --data-dir {self.data_dir}"
                )
            time.sleep(0.5)
        return state

    def _state(self) -> DevnetState | None:
        try:
            return read_state(self.data_dir)
        except DevnetStateError as exc:
            raise StartFailed(str(exc)) from None


def seed_build_progress(state: DevnetState):
    """The seed build's progress a starting devnet's state points at (None: none)."""
    if state.policy_dir is None:
        return None
    # lazily: client.policy imports torch and transformers, which only a starting devnet's view
    # needs (its seed build's progress file)
    from client.policy.seed import read_progress

    return read_progress(state.policy_dir)


class StopFailed(Exception):
    """A devnet's supervisor outlived SIGTERM and SIGKILL."""


def stop_devnet(data_dir: Path, *, wipe: bool = False, timeout_s: float = 120) -> bool:
    """Stops the devnet in data_dir by pid: its supervisor (which stops nodes, IPFS and anvil in
    order), then what a supervisor killed hard left (servers by their pid files, network
    namespaces); deletes its data with `wipe`. Returns whether anything was running."""
    supervisor = supervisor_alive(data_dir)
    if supervisor and not _stop_supervisor(supervisor, timeout_s):
        raise StopFailed(f"could not stop the devnet supervisor pid {supervisor} in {data_dir}")
    left = _stop_leftovers(data_dir)
    _remove_namespaces(data_dir)
    (data_dir / STATE).unlink(missing_ok=True)
    if wipe and data_dir.exists():
        shutil.rmtree(data_dir)
    return bool(supervisor or left)


def _stop_supervisor(pid: int, timeout_s: float) -> bool:
    """SIGTERMs a devnet's supervisor (it stops its nodes, IPFS and anvil in order); returns
    whether it is gone. After `timeout_s` it is SIGKILLed: its parts die with it (PDEATHSIG)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    return not pid_alive(pid)


def _stop_leftovers(data_dir: Path) -> list[int]:
    """Stops servers whose pid files a supervisor killed hard left behind (a process that
    started after its pid file was written reuses the pid: it is not ours and is spared)."""
    pids = []
    pid_files = [*data_dir.glob("*.pid"), *data_dir.glob("node-*/*.pid")]
    pid_files += data_dir.glob("aggregator/*.pid")  # a root lane's aggregator and its daemon
    pid_files += data_dir.glob("light/*.pid")  # the light nodes and their daemon
    for pid_file in pid_files:
        with contextlib.suppress(ValueError, OSError):
            pid = int(pid_file.read_text().strip())
            if pid_alive(pid) and not started_after(pid, pid_file.stat().st_mtime + 1):
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
            pid_file.unlink(missing_ok=True)
    deadline = time.monotonic() + 30
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return pids


def _remove_namespaces(data_dir: Path) -> None:
    """Removes the network namespaces a --netns devnet's supervisor left (killed before it
    could); they are kernel objects that outlive every process."""
    with contextlib.suppress(TypeError, ValueError, OSError):  # DevnetStateError included
        state = read_state(data_dir)
        if state is not None and state.netns is not None:
            NetnsLayout(**state.netns).destroy()


def raise_on_stop_signals() -> None:
    """Makes SIGTERM (kill, `devnet down`) and SIGHUP (a closed SSH session) stop a foreground
    process as cleanly as Ctrl-C, by raising KeyboardInterrupt; SIGINT is set too, as a shell
    that starts it in the background leaves SIGINT ignored."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)


def stop_event_on_signals() -> threading.Event:
    """Returns an event that SIGINT, SIGTERM or SIGHUP sets (an adversary node's loop ends on
    it, as a node's does)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: stop.set())
    return stop
