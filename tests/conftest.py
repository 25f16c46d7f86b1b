"""The test run's hooks and shared fixtures: real parts only (anvil from the project's
node_modules, real processes). What tests build their worlds with is tests/harness."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.devnet import Anvil
from tests.harness.processes import kill_started

# Every test is in one group, the folder it is in (select one with -m or the path while
# editing; CI runs all):
#   unit   nothing outside the test process but files: tiny models, verifiers, batches, config
#   chain  an anvil chain (and foundry's tools), no other process of ours
#   swarm  a swarm of processes: IPFS daemons, devnets, nodes, engines beside the test
GROUPS = ("unit", "chain", "swarm")


# The modules whose nodes play rounds on the wall clock (devnets, a node process beside anvil's
# 1-s blocks). Two of them side by side starve each other's nodes on two cores, and a starved node
# needs more rounds for what its test waits for: the p2p module took 1,027 worker-seconds beside
# the end-to-end devnet in a whole run (fresh17) and 333 s alone. So they are one xdist work unit,
# run one after another on one worker, while the other workers compute through the rest.
WALL_CLOCK = frozenset(
    {
        "test_swarm_e2e",
        "test_swarm_p2p",
        "test_devnet_netns",
        "test_metrics_alerts",
        "test_devnet",
        "test_slow_node",
        "test_tui",
        "test_devnet_rootlane",
    }
)
WALL_CLOCK_UNIT = "wall-clock"

# The order work units are handed out in under xdist (scripts/test: -n 3 --dist loadgroup
# --no-loadscope-reorder; a unit is a module, or the wall-clock modules together, in collection
# order): the long ones first, so that the short ones fill in after instead of one long module
# running alone at the end (xdist's own order, by number of tests, hands them out last). The
# wall-clock unit comes first; beside it, the modules that compute (forge's campaigns, the
# stateful ledger, the experiment), then the rest.
LONGEST_FIRST = (
    "test_swarm_e2e",  # ~5.5 min of one worker (measured under -n 3, fresh clone)
    "test_swarm_p2p",  # ~3.5 (its devnet, then started again in the same dir)
    "test_devnet_netns",  # ~2.3
    "test_metrics_alerts",  # ~2 (its node under test uncapped: the busy-share alert stays silent)
    "test_devnet",  # ~3
    "test_slow_node",  # ~2
    "test_tui",  # ~2.2
    "test_devnet_rootlane",  # ~1.8
    "test_ledger_forge",  # ~10 (beside the devnets and another worker; ~5 alone)
    "test_ledger_stateful",  # ~2.5
    "test_experiment",  # ~6
    "test_cli",  # ~1
    "test_adversaries",
    "test_hostile",  # ~0.1 (100 hostile batches through the checker, verifier and learner)
    "test_appeals",  # ~1.2
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
    if worker != "main" and "OMP_NUM_THREADS" not in os.environ:
        # One CPU thread for torch (and OpenMP) in each xdist worker and what it starts: three
        # workers on two cores, each with torch's default of a thread per core, spent their
        # surplus threads spinning in OpenMP's barriers. On the four CPU-bound unit modules
        # test_families, test_policy, test_adapter and test_proof under -n 3: 297-313 s and
        # 503-538 CPU-s with the default, 136 s and 174 CPU-s with one thread. A node a test
        # starts still takes [policy].cpu_threads where its config sets it.
        os.environ["OMP_NUM_THREADS"] = "1"
        if torch := sys.modules.get("torch"):  # read at its import: too late for this process
            torch.set_num_threads(1)


def pytest_unconfigure(config: pytest.Config) -> None:
    if state_home := getattr(config, "_sapo_state_home", None):
        shutil.rmtree(state_home, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.module.__name__ if item.module else "", 99))
        for item in items:  # a module is a work unit, but the wall-clock ones are one together
            module = item.module.__name__ if item.module else item.nodeid
            unit = WALL_CLOCK_UNIT if module in WALL_CLOCK else module
            item.add_marker(pytest.mark.xdist_group(unit))
    for item in items:
        group = item.path.parent.name
        if group not in GROUPS:
            raise pytest.UsageError(
                f"{item.path}: a test module lives in tests/{{{','.join(GROUPS)}}}/"
            )
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


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Anvil]:
    """One anvil shared by a test module; each test deploys its own ledger on it."""
    with Anvil(tmp_path_factory.mktemp("chain")) as anvil:
        yield anvil


@pytest.fixture
def swarm(chain: Anvil):
    """A freshly deployed SwarmLedger with funded accounts (see ledger_swarm.Swarm)."""
    from tests.harness.ledger_swarm import Swarm

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


@pytest.fixture(autouse=True)
def _no_sapo_process_outlives_its_test() -> Iterator[None]:
    """Kills what `sapo_process` started and a failed test left running."""
    yield
    kill_started()
