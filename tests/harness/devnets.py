"""Devnets for tests: `sapo devnet up` in the foreground as a child of the test run (never
detached: a killed run must not leave a swarm behind), as README writes it or on
configs/devnet.toml, and stopped as Ctrl-C would."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness.processes import _spawn, sapo_run


class DevnetDidNotStart(RuntimeError):
    """`sapo devnet up` exited, or did not run within its time-out; the message ends with its
    log."""


def foreground_devnet(
    data_dir: Path,
    *args: str,
    log: Path,
    env: dict[str, str] | None = None,
    timeout_s: float | None = None,
):
    """Starts `sapo devnet up` in the foreground as a child of this process (it dies with it,
    and its parts with it in turn), its output in `log`, and returns (process, its DevnetState)
    once it runs; with no `timeout_s`, waits as long as it lives (a first start builds its
    policy for minutes). Tests use `start_devnet`; the scripts call this."""
    from client.devnet.state import read_state

    with open(log, "w") as out:
        proc = _spawn(
            "devnet",
            "up",
            "--data-dir",
            str(data_dir),
            "--json",
            *args,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while (state := read_state(data_dir)) is None or not state.running:
        if proc.poll() is not None or (deadline is not None and time.monotonic() > deadline):
            proc.kill()
            raise DevnetDidNotStart(f"devnet up did not start: {log.read_text()[-3000:]}")
        time.sleep(0.2)
    return proc, state


def start_devnet(
    data_dir: Path, *args: str, env: dict[str, str] | None = None, timeout_s: float = 900
) -> tuple[subprocess.Popen[str], dict]:
    """Starts `sapo devnet up` in the foreground as a child of the test run and returns
    (process, its state as `devnet up --json` prints it) once it runs. Not --detach: a detached
    devnet outlives whatever started it, so a killed test run would leave a swarm behind; this
    one ends with the run. Stop it with `stop_devnet` or `sapo devnet down`; it is not killed
    after the test that started it: a module's devnet serves all its tests."""
    log = Path(data_dir).parent / f"{Path(data_dir).name}-devnet.out"
    try:
        proc, state = foreground_devnet(data_dir, *args, log=log, env=env, timeout_s=timeout_s)
    except DevnetDidNotStart as exc:
        pytest.fail(str(exc))
    return proc, state.public()


# A devnet whose mechanics are under test, not learning: the tiny test policy, a GRPO step every
# local round (the end-to-end, p2p and netns tests), and two local rounds a chain round. A node
# left uncapped computes local rounds back to back for as long as the test waits on the chain,
# on the cores the other test worker needs; two hold what a batch needs (OPEN_ROUNDS checkpoints
# to open). The end-to-end test, which measures the busy share, runs its nodes uncapped.
CAPPED_LOCAL_ROUNDS = "2"
MECHANICS_ENV = {
    "SAPO_POLICY__MODEL": "seed-test",
    "SAPO_TRAIN__ROUNDS_PER_UPDATE": "1",
    "SAPO_SAPO__MAX_LOCAL_ROUNDS": CAPPED_LOCAL_ROUNDS,
    "PYTHONUNBUFFERED": "1",
}


def start_readme_devnet(
    data_dir: Path, nodes: int, round_s: int, *args: str, env: dict[str, str]
) -> tuple[subprocess.Popen[str], dict]:
    """`start_devnet` as README writes the command: `--nodes N --round-length S`, no --config
    (the defaults of a public node, which the devnet must adapt to its own topology). In the
    foreground rather than with README's --detach: --detach re-runs this same `up` in the
    background (tests/swarm/test_devnet.py), and a detached devnet would outlive a killed test
    run."""
    return start_devnet(
        data_dir, "--nodes", str(nodes), "--round-length", str(round_s), *args, env=env
    )


def credited_nodes(data_dir: Path, env: dict[str, str]) -> dict[str, dict]:
    """Returns `sapo devnet status --json`'s rows (by address) of the nodes credited so far."""
    status = sapo_run("devnet", "status", "--data-dir", str(data_dir), "--json", env=env)
    rows = json.loads(status.stdout)["nodes"] if status.returncode == 0 else []
    return {r["address"]: r for r in rows if r["credited"] > 0}


def credited_on_chain(ledger) -> set[str]:
    """The nodes (lower-case addresses) with credited learning signal so far on `ledger`: the
    leaderboard's rows whose credited total is above 0, as `credited_nodes` (`devnet status`)
    counts them. A batch whose groups all scored alike carries signal 0 and is credited with 0
    (a seed policy's first round often is), so a CreditChanged alone does not make a node count.
    What a wait polls: read in this process, where each poll of `credited_nodes` starts a `sapo`
    process (~3 CPU-s of imports) on the cores the devnet under test runs on; a test then reads
    `devnet status` once, as an operator would."""
    from client.chain.audit import Auditor
    from client.chain.events import EventReader

    rows = Auditor(ledger, EventReader(ledger)).leaderboard(0, ledger.current_round())
    return {row.node.lower() for row in rows if row.credited > 0}


def start_mechanics_devnet(
    data_dir: Path, nodes: int, round_s: int, *args: str, env: dict[str, str]
) -> tuple[subprocess.Popen[str], dict]:
    """`start_devnet` with configs/devnet.toml, `nodes` nodes and `round_s`-second rounds."""
    return start_devnet(
        data_dir,
        "--config",
        "configs/devnet.toml",
        "--nodes",
        str(nodes),
        "--round-length",
        str(round_s),
        *args,
        env=env,
    )


def stop_devnet(proc: subprocess.Popen[str], timeout_s: float = 120) -> int:
    """Stops a devnet started by start_devnet as Ctrl-C would; returns its exit code."""
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=timeout_s)
