"""Shared fixtures: real parts only (anvil from the project's node_modules, real processes)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from client.config import with_sections
from client.devnet import Anvil
from client.devnet.process import die_with_parent

REPO = Path(__file__).resolve().parents[1]

# Every test is in one group, by what it needs (select one with -m while editing; CI runs all):
#   unit   nothing outside the test process but files: tiny models, verifiers, batches, config
#   chain  an anvil chain (and foundry's tools), no other process of ours
#   swarm  a swarm of processes: IPFS daemons, devnets, nodes, engines beside the test
# A module whose tests start those parts themselves is named here; a test elsewhere that asks
# for a chain fixture is in `chain`.
SWARM_MODULES = {
    "test_adversaries",
    "test_appeals",
    "test_devnet",
    "test_devnet_netns",
    "test_metrics_alerts",
    "test_node_faults",
    "test_slow_node",
    "test_store",
    "test_store_cli",
    "test_swarm_e2e",
    "test_swarm_p2p",
    "test_tui",
    "test_vllm",
}
CHAIN_MODULES = {
    "test_anvil",
    "test_audit_cast",
    "test_chain_cli",
    "test_chain_client",
    "test_ledger",
    "test_ledger_forge",
    "test_ledger_stateful",
    "test_operator_doc",
    "test_outbox",
}
CHAIN_FIXTURES = {"anvil", "chain", "swarm"}


# The order modules are handed out in under xdist (scripts/test: -n 2 --dist loadfile
# --no-loadscope-reorder, a module to a worker, in collection order): the long ones first, so
# that the short ones fill in after instead of one long module running alone at the end (xdist's
# own order, by number of tests, hands them out last). The end-to-end devnet's uncapped nodes and
# vLLM engine fill both cores for its whole run: beside it go the devnets whose nodes are capped
# (MECHANICS_ENV), which mostly wait on chain rounds, and the modules that compute (forge's
# campaigns, the stateful ledger, the experiment) come after, two at a time.
LONGEST_FIRST = (
    "test_swarm_e2e",  # ~14 min of one worker (measured under -n 2)
    "test_swarm_p2p",  # ~7 (its devnet, then started again in the same dir)
    "test_devnet_netns",  # ~3
    "test_metrics_alerts",  # ~3 (two uncapped nodes: the busy-share alert must stay silent)
    "test_ledger_forge",  # ~12 (beside the end-to-end devnet; ~5 alone)
    "test_ledger_stateful",  # ~4
    "test_experiment",  # ~5
    "test_devnet",  # ~5
    "test_cli",  # ~3.5
    "test_slow_node",  # ~2.7
    "test_tui",  # ~2
    "test_adversaries",
    "test_hostile",  # ~1.5 (100 hostile batches through the checker, verifier and learner)
    "test_appeals",  # ~1.5
    "test_vllm",
    "test_node_faults",
    "test_policy",
    "test_store",
)


def pytest_configure(config: pytest.Config) -> None:
    # Devnets the tests start register in a registry of this test process's own (each xdist
    # worker has one), never the user's: `sapo devnet down --all` under test must not stop a
    # devnet the user runs, nor one of another worker.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    config._sapo_state_home = tempfile.mkdtemp(prefix=f"sapo-tests-{worker}-state-")
    os.environ["XDG_STATE_HOME"] = config._sapo_state_home


def pytest_unconfigure(config: pytest.Config) -> None:
    if state_home := getattr(config, "_sapo_state_home", None):
        shutil.rmtree(state_home, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.module.__name__ if item.module else "", 99))
    for item in items:
        module = item.module.__name__ if item.module else ""
        if module in SWARM_MODULES:
            group = "swarm"
        elif module in CHAIN_MODULES or CHAIN_FIXTURES & set(item.fixturenames):
            group = "chain"
        else:
            group = "unit"
        item.add_marker(group)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch):
    """A typer CliRunner with no SAPO_* variable leaking in from the caller's environment."""
    from typer.testing import CliRunner

    for name in list(os.environ):
        if name.startswith("SAPO_"):
            monkeypatch.delenv(name)
    from client.cli import console

    # One width for every test, wide enough for a round's table to show its CIDs whole. The
    # CLI's rich consoles are made once, at import, and keep a COLUMNS they saw then: a test
    # that set COLUMNS for one command got another width once in a full run, so their
    # size is set here (and typer's help reads COLUMNS).
    monkeypatch.setenv("COLUMNS", "220")
    for stream in (console.out, console.err):
        monkeypatch.setattr(stream, "size", (220, 50))
    return CliRunner()


@pytest.fixture(scope="session")
def seed_test(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test-size seed policy, built once a session (~8 s of pretraining here) instead of
    once a module. Its build is deterministic (test_policy.py checks it), so a copy of it is the
    policy a build would have left; the tests of the build itself build their own."""
    from client.policy import SeedSpec, ensure_seed_policy

    return ensure_seed_policy(tmp_path_factory.mktemp("seed-test"), SeedSpec.tiny_test())


def cached_seed_test(built: Path, cache_dir: Path) -> Path:
    """Puts the session's seed-test policy (`built`) where a node whose [policy].cache_dir is
    `cache_dir` looks for it; returns `cache_dir`."""
    from client.policy import SeedSpec, seed_policy_dir

    target = seed_policy_dir(cache_dir, SeedSpec.tiny_test())
    if not target.exists():
        shutil.copytree(built, target)
    return cache_dir


def copied_seed_test(built: Path, directory: Path) -> Path:
    """A copy of the session's seed-test policy at `directory` (a module's own, to load)."""
    shutil.copytree(built, directory)
    return directory


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


def start_node(node) -> tuple[threading.Thread, threading.Event]:
    """Runs an in-process node (client.node.assemble.open_node) on a thread of its own."""
    stop = threading.Event()
    thread = threading.Thread(target=node.run, args=(stop,))
    thread.start()
    return thread, stop


def finish_node(thread: threading.Thread, stop: threading.Event) -> None:
    """Stops a node start_node runs; fails the test if it does not stop within a minute."""
    stop.set()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the node did not stop"


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
    background (tests/test_devnet.py), and a detached devnet would outlive a killed test run."""
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


def warp_world_config(root: Path, round_s: int, w: int, c: int, **sections: dict):
    """configs/devnet.toml for in-process nodes under a Warp: `round_s`-second rounds with
    windows of `w` and `c` rounds, a quorum of 1 (two honest nodes: each batch has one honest
    checker), the seed-test policy cached under `root`, two local rounds of 2 questions x 4
    completions a chain round (a node then idles until a warp starts the next), and short
    time-outs. `sections` change more keys of a section."""
    from client.config import load_config

    changes: dict[str, dict] = {
        "ledger": {
            "round_length_s": round_s,
            "submit_rounds": w,
            "challenge_rounds": c,
            "unbonding_period_s": (w + 2 * c + 2 + 1) * round_s,
            "quorum": 1,
        },
        "policy": {"model": "seed-test", "cache_dir": root / "policies", "max_new_tokens": 12},
        "sapo": {"local_items": 2, "external_items": 2, "completions": 4, "max_local_rounds": 2},
        "chain": {"request_timeout_s": 2.0, "receipt_timeout_s": 15.0},
        "store": {"timeout_s": 2.0},
        "train": {"rounds_per_update": 1},
    }
    for name, values in sections.items():
        changes[name] = {**changes.get(name, {}), **values}
    return with_sections(load_config(REPO / "configs" / "devnet.toml"), **changes)


@contextlib.contextmanager
def warp_world(
    root: Path,
    seed_test: Path,
    round_s: int,
    w: int,
    c: int,
    *,
    nodes: int = 2,
    adversaries: list | None = None,
    **sections: dict,
) -> Iterator[dict]:
    """A chain (anvil, 1 s blocks) and one IPFS daemon under `root`, the seed-test policy cached
    there and built into its base policy, and a devnet of `nodes` honest nodes (and `adversaries`,
    roles) provisioned on warp_world_config(...): for in-process nodes that a Warp moves through
    rounds. Yields anvil, daemon, swarm, base and warp; stops the daemon and the chain after."""
    from client.config import with_sections
    from client.devnet import Anvil, IpfsDaemon
    from client.devnet.provision import provision
    from client.node.assemble import base_policy_path

    cached_seed_test(seed_test, root / "policies")
    base = warp_world_config(root, round_s, w, c, **sections)
    # the most seat trials the ledger takes, so that every node holds a seat on every batch
    # (more surely than `devnet up`'s seats_for_every_node), peers that a test registers later
    # included: (1 - 1/18)^255 < 1e-6
    base = with_sections(base, ledger={"checkers": 255, "appeal_checkers": 255})
    anvil = Anvil(root, block_time_s=1, accounts=base.devnet.accounts).start()  # all funded
    try:
        daemon = IpfsDaemon(root / "ipfs").start()
        try:
            base_policy_path(base)
            swarm = provision(
                base,
                root / "swarm",
                rpc_url=anvil.url,
                chain_id=31_337,
                ipfs_api=daemon.api,
                nodes=nodes,
                adversaries=adversaries or [],
            )
            warp = Warp(anvil)
            yield {"anvil": anvil, "daemon": daemon, "swarm": swarm, "base": base, "warp": warp}
        finally:
            daemon.stop()
    finally:
        anvil.stop()


class Warp:
    """Moves a test's chain and its in-process nodes' clock forward together, so that a test
    jumps rounds instead of sleeping through them (anvil's evm_increaseTime + WarpClock)."""

    def __init__(self, anvil: Anvil):
        from client.node.clock import WarpClock

        self.anvil = anvil
        self.clock = WarpClock()

    def to(self, params, round_: int, fraction: float = 0.2) -> None:
        """Moves to `fraction` into `round_` (never backwards)."""
        import math

        target = params.round_start(round_) + fraction * params.round_length
        seconds = math.ceil(target - self.clock.now())
        if seconds > 0:
            self.anvil.warp(seconds)
            self.clock.warp(seconds)
