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


def start_devnet(
    data_dir: Path, *args: str, env: dict[str, str] | None = None, timeout_s: float = 900
) -> tuple[subprocess.Popen[str], dict]:
    """Starts `sapo devnet up` in the foreground as a child of the test run and returns
    (process, its state) once it runs. Not --detach: a detached devnet outlives whatever
    started it, so a killed test run would leave a swarm behind; this one ends with the run
    (its parts die with it in turn). Stop it with `stop_devnet` or `sapo devnet down`."""
    from client.devnet.state import read_state

    log = (Path(data_dir).parent / f"{Path(data_dir).name}-devnet.out").open("w")
    # not killed after the test that started it: a module's devnet serves all its tests
    proc = _spawn(
        "devnet",
        "up",
        "--data-dir",
        str(data_dir),
        "--json",
        *args,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    deadline = time.monotonic() + timeout_s
    while (state := read_state(data_dir)) is None or not state.running:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"devnet up did not start: {Path(log.name).read_text()[-3000:]}")
        time.sleep(0.2)
    return proc, state.public()  # as JSON, what `devnet up --json` prints


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
