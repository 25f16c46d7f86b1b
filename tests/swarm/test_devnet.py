"""A devnet's life as an operator meets it, on the real parts: nothing of it outlives whatever
owns it (a foreground `devnet up`, a test run), `devnet ps` finds every devnet of this user,
and a first start shows the seed build's progress wherever one looks and keeps its work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from client.devnet.process import die_with_parent
from client.pids import pid_alive
from client.policy import SeedSpec, ensure_seed_policy, seed_policy_dir
from client.policy.seed import read_progress
from tests.harness.devnets import CAPPED_LOCAL_ROUNDS, start_devnet
from tests.harness.policies import cached_seed_test
from tests.harness.processes import REPO, sapo_process, sapo_run, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

POLICY = "seed-tiny-0-h64l2"  # SeedSpec.tiny_test(0)'s directory name


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory, seed_test: Path) -> Path:
    """A seed-policy cache with the test policy in it (the session's build)."""
    return cached_seed_test(seed_test, tmp_path_factory.mktemp("cache"))


def env_for(cache: Path) -> dict[str, str]:
    return {
        "SAPO_POLICY__MODEL": "seed-test",
        "SAPO_POLICY__CACHE_DIR": str(cache),
        # tests.harness.devnets.MECHANICS_ENV says why
        "SAPO_SAPO__MAX_LOCAL_ROUNDS": CAPPED_LOCAL_ROUNDS,
    }


def devnet_pids(state: dict) -> list[int]:
    pids = [state["supervisor_pid"], state["anvil_pid"], *(n["pid"] for n in state["nodes"])]
    return pids + [d["pid"] for d in state["ipfs"]]  # one IPFS daemon per node


def listed(data_dir: Path, env: dict[str, str] | None = None) -> bool:
    ps = sapo_run("devnet", "ps", "--json", env=env)
    assert ps.returncode == 0, ps.stderr
    return str(data_dir) in {d["data_dir"] for d in json.loads(ps.stdout)["devnets"]}


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[store]\nallow_private_peers = false\n", "[store].allow_private_peers"),
        ('[chain]\nrpc_url = "http://127.0.0.1:8545"\n', "[chain].rpc_url"),
        ("[chain]\nchain_id = 1\n", "[chain].chain_id"),
        ('[store]\nipfs_api = "/ip4/127.0.0.1/tcp/5001/http"\n', "[store].ipfs_api"),
    ],
)
def test_a_config_that_contradicts_the_devnet_is_refused_naming_the_key(
    tmp_path: Path, toml: str, named: str
) -> None:
    config = tmp_path / "node.toml"
    config.write_text(toml)
    up = sapo_run("devnet", "up", "--config", str(config), "--data-dir", str(tmp_path / "d"))
    assert up.returncode == 2, up.stdout + up.stderr
    assert named in up.stderr and "does not fit a devnet" in up.stderr, up.stderr
    assert not (tmp_path / "d").exists(), "nothing is started or written for a refused config"


# A foreground devnet killed hard takes every part along (its nodes, their daemons, anvil, a root
# lane's aggregator): tests/swarm/test_devnet_rootlane.py ends its devnet that way.


HOLDER = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    from tests.harness.devnets import start_devnet
    _, state = start_devnet(
        __import__("pathlib").Path(sys.argv[2]), "--nodes", "1", "--round-length", "10",
        env=json.loads(sys.argv[3]),
    )
    print(json.dumps(state), flush=True)
    time.sleep(600)
    """
)


def test_a_killed_test_run_leaves_nothing_of_its_devnet(cache: Path, tmp_path) -> None:
    """The e2e suite's devnets (tests.harness.devnets.start_devnet) end with the test process
    that holds them, whatever kills it: a CI time-out, Ctrl-C twice, the OOM killer."""
    data_dir = tmp_path / "devnet"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOLDER,
            str(REPO),
            str(data_dir),
            json.dumps(env_for(cache)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        preexec_fn=die_with_parent(os.getpid()),
    )
    line = holder.stdout.readline()
    assert line, holder.stderr.read()
    state = json.loads(line)
    assert all(pid_alive(p) for p in devnet_pids(state))
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    wait_until(
        lambda: not any(pid_alive(p) for p in devnet_pids(state)),
        timeout_s=20,
        what="the devnet (supervisor, anvil, IPFS, node) to die with the test process",
    )
    assert not listed(data_dir)


def test_devnet_down_all_stops_every_devnet_of_this_user(cache: Path, tmp_path) -> None:
    # a registry of this test's own (XDG_STATE_HOME), so that --all spares the developer's
    own = {"XDG_STATE_HOME": str(tmp_path / "state")}
    first, a = start_devnet(tmp_path / "a", "--nodes", "0", env=env_for(cache) | own)
    second, b = start_devnet(tmp_path / "b", "--nodes", "0", env=env_for(cache) | own)
    assert listed(tmp_path / "a", own) and listed(tmp_path / "b", own)
    assert not listed(tmp_path / "a"), "another user state dir has a registry of its own"
    down = sapo_run("devnet", "down", "--all", env=own)
    assert down.returncode == 0, down.stderr
    assert first.wait(timeout=60) == 0 and second.wait(timeout=60) == 0
    assert not any(pid_alive(p) for p in devnet_pids(a) + devnet_pids(b))
    assert not listed(tmp_path / "a", own) and not listed(tmp_path / "b", own)


def test_a_first_detached_start_shows_the_build_it_waits_for(tmp_path: Path) -> None:
    """A first start used to say nothing for the whole build (an empty devnet.log), time out
    after 15 minutes and throw the build away."""
    cache, data_dir = tmp_path / "cache", tmp_path / "devnet"
    paused, release = threading.Event(), threading.Event()

    def hold_at_step_60(p) -> None:  # another builder of the same policy, paused mid-way
        if p.step == 60 and not release.is_set():
            paused.set()
            release.wait(600)  # until the test releases it (the finally below, at the latest)

    builder = threading.Thread(
        target=ensure_seed_policy,
        args=(cache, SeedSpec.tiny_test()),
        kwargs={"progress": hold_at_step_60},
    )
    builder.start()
    assert paused.wait(120), "the builder never reached step 60"
    up = sapo_process(
        "devnet",
        "up",
        "--data-dir",
        str(data_dir),
        "--nodes",
        "1",
        "--round-length",
        "10",
        "--detach",
        env=env_for(cache),
    )
    try:
        began, seen = time.monotonic(), []  # (seconds, stage): printed if the wait fails

        def waiting_in_status() -> bool:
            status = sapo_run("devnet", "status", "--data-dir", str(data_dir), "--json")
            view = json.loads(status.stdout) if status.returncode == 0 else {}
            build = view.get("build") or {}
            stage = view.get("stage") or f"(status exited {status.returncode})"
            if not seen or seen[-1][1] != stage:
                seen.append((round(time.monotonic() - began, 1), stage))
                print(f"{seen[-1][0]:7.1f} s  {stage}  build={build}")
            return (
                view.get("stage") == "building the seed policy"
                and build.get("step") == 60
                and build.get("builder_pid") == os.getpid()
            )

        # a loaded machine (the other worker's module beside this one) stretches anvil's and
        # js-ipfs's starts; the build waits at step 60 for as long as this takes
        wait_until(waiting_in_status, timeout_s=300, what="devnet status to show the build")
        log = data_dir / "devnet.log"
        wait_until(
            lambda: (
                f"waiting for the build of seed policy {POLICY} by pid {os.getpid()}: "
                "step 60/150" in log.read_text()
            ),
            timeout_s=30,
            what="devnet.log to say whose build it waits for, and where that build is",
        )
        release.set()
        builder.join(timeout=120)
        output, errors = up.communicate(timeout=300)
        assert up.returncode == 0, errors + output
        assert f"building the seed policy {POLICY}: step 60/150" in output, output
        assert "running in the background" in output
    finally:
        release.set()
        sapo_run("devnet", "down", "--data-dir", str(data_dir))


def test_a_stopped_seed_build_resumes_and_never_leaves_half_a_policy(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    directory = seed_policy_dir(cache, SeedSpec.tiny_test())
    # every build on one torch thread: a build is deterministic at a given thread count, and two
    # threads on a machine whose other core runs another test module spin on each other (a
    # build took 26 s beside a busy core, 17 s on one thread; 12.6 s on two idle cores)
    one_thread = {"OMP_NUM_THREADS": "1"}
    seed = ("policy", "seed", "--size", "test", "--data-dir")
    first = sapo_process(*seed, str(cache), env=one_thread)
    wait_until(
        lambda: (p := read_progress(directory)) is not None and p.saved_step >= 30,
        timeout_s=300,
        what="the build to save its state at step 30 or later",
    )
    first.kill()
    first.wait(timeout=30)
    assert not directory.exists(), "a stopped build must leave no policy where one is expected"
    saved = read_progress(directory).saved_step
    again = sapo_run(*seed, str(cache), "--json", env=one_thread)
    assert again.returncode == 0, again.stderr
    record = json.loads(again.stdout)
    assert record["resumed_from"] >= saved >= 30 and record["steps"] == 150
    assert f"(resumed at step {record['resumed_from']})" in again.stderr
    # the uninterrupted build runs as the resumed one did, in a process of its own on one thread
    # (this test process's count is whatever an earlier in-process node set)
    fresh_cache = tmp_path / "fresh"
    whole_build = sapo_run(*seed, str(fresh_cache), env=one_thread)
    assert whole_build.returncode == 0, whole_build.stderr
    fresh = seed_policy_dir(fresh_cache, SeedSpec.tiny_test())
    from safetensors.torch import load_file

    resumed, whole = (
        load_file(directory / "model.safetensors"),
        load_file(fresh / "model.safetensors"),
    )
    assert all(torch.equal(resumed[k], whole[k]) for k in whole), "resumed != uninterrupted"


def test_status_names_a_devnet_that_is_gone_and_a_state_file_that_is_not_one(
    tmp_path: Path,
) -> None:
    from client.devnet.state import DevnetState, DevnetStatus, write_state

    def status() -> subprocess.CompletedProcess[str]:
        return sapo_run("devnet", "status", "--data-dir", str(tmp_path))

    nothing = status()
    assert nothing.returncode == 1 and "no devnet runs in" in nothing.stderr, nothing.stderr
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    starting = DevnetState(
        status=DevnetStatus.STARTING,
        stage="starting anvil",
        supervisor_pid=ended.pid,
        data_dir=tmp_path,
        started_at=0.0,
    )
    write_state(tmp_path, starting)
    gone = status()
    assert gone.returncode == 1, gone.stdout + gone.stderr
    assert f"its supervisor (pid {ended.pid}) is gone" in gone.stderr
    (tmp_path / "devnet.json").write_text(json.dumps({"status": "running", "nodes": "three"}))
    other = status()
    assert other.returncode == 1 and "is not a devnet's state file" in other.stderr, other.stderr
    assert "Traceback" not in other.stderr


def test_status_reads_progress_and_credit_only_from_the_devnets_own_chain(
    swarm, tmp_path: Path
) -> None:
    """`devnet status` reads a node's rounds and credit through the ledger its config names only
    when that chain is the one the config says (Ledger.check, as a node starts): an RPC that
    answers for another chain shows no progress and no credit instead of another chain's."""
    from client.config.roles import Role
    from client.devnet.state import DevnetState, DevnetStatus, NodeEntry
    from client.devnet.status import node_rows

    def rows(chain_id: int) -> list[dict]:
        config = tmp_path / f"node-{chain_id}.toml"
        config.write_text(
            f'[chain]\nrpc_url = "{swarm.url}"\nledger_address = "{swarm.ledger.address}"\n'
            f"chain_id = {chain_id}\n"
        )
        node = NodeEntry(
            index=0,
            role=Role.HONEST,
            address=swarm.account().address,
            pid=os.getpid(),
            config=config,
            data_dir=tmp_path / "node-0",
        )
        state = DevnetState(
            status=DevnetStatus.RUNNING,
            supervisor_pid=os.getpid(),
            data_dir=tmp_path,
            started_at=0.0,
            config=config,
            nodes=[node],
        )
        return node_rows(state)

    ours = rows(31_337)
    assert "window_s" in ours[0] and ours[0]["credited"] == 0, ours
    other = rows(1)
    assert "window_s" not in other[0] and other[0]["credited"] == 0, other
