"""The local chain's process control: anvil starts on loopback, answers, and never outlives us."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from client.devnet import (
    Anvil,
    AnvilNotFound,
    ServerStartError,
    find_anvil,
    pid_alive,
    port_is_listening,
    rpc_call,
)
from client.devnet.process import ServerProcess, start_together
from tests.harness.processes import REPO, listening_addresses, sapo_process, wait_until

pytestmark = pytest.mark.slow


def test_anvil_answers_on_loopback_only(anvil: Anvil) -> None:
    assert int(rpc_call(anvil.url, "eth_chainId"), 16) == 31_337
    assert anvil.url.startswith("http://127.0.0.1:")
    # 0100007F is 127.0.0.1 as /proc/net/tcp spells it; nothing on 0.0.0.0 or ::
    assert listening_addresses(anvil.port) == {"0100007F"}


def test_dev_accounts_are_funded(anvil: Anvil) -> None:
    accounts = rpc_call(anvil.url, "eth_accounts")
    assert len(accounts) == 10
    assert (
        int(rpc_call(anvil.url, "eth_getBalance", [accounts[0], "latest"]), 16) == 10_000 * 10**18
    )


def test_stop_reaps_the_process_and_frees_the_port(tmp_path: Path) -> None:
    chain = Anvil(tmp_path).start()
    pid, port = chain.pid, chain.port
    assert pid_alive(pid)
    assert (tmp_path / "anvil.pid").read_text().strip() == str(pid)
    chain.stop()
    assert not pid_alive(pid)
    assert not port_is_listening(port)
    assert not (tmp_path / "anvil.pid").exists()
    chain.stop()  # idempotent


def test_two_chains_side_by_side(tmp_path: Path) -> None:
    with Anvil(tmp_path / "a") as a, Anvil(tmp_path / "b", chain_id=1337) as b:
        assert a.port != b.port
        assert int(rpc_call(b.url, "eth_chainId"), 16) == 1337


def test_busy_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ServerStartError, match=f"127.0.0.1:{port}: the port is in use"):
            Anvil(tmp_path, port=port, ready_timeout_s=10).start()


def test_missing_binary_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAPO_ANVIL", "/nonexistent/anvil")
    with pytest.raises(AnvilNotFound, match="SAPO_ANVIL=/nonexistent/anvil"):
        find_anvil()
    monkeypatch.delenv("SAPO_ANVIL")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.chdir("/")
    with pytest.raises(AnvilNotFound, match="run scripts/setup"):
        find_anvil(root=Path("/nonexistent"))


def test_a_program_that_exits_early_reports_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "anvil"
    fake.write_text("#!/bin/sh\necho 'boom: cannot start' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(ServerStartError, match=r"exited with code 3(.|\n)*boom: cannot start"):
        Anvil(tmp_path, binary=fake).start()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from client.devnet import Anvil
    chain = Anvil(Path(sys.argv[1])).start()
    print(chain.pid, chain.port, flush=True)
    if sys.argv[2] == "exit":
        sys.exit(0)          # no stop(): the atexit hook must do it
    time.sleep(600)
    """
)


def start_holder(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], int, int]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    line = holder.stdout.readline()
    assert line, f"holder printed nothing: {holder.stderr.read()}"
    pid, port = map(int, line.split())
    return holder, pid, port


def test_no_orphan_after_a_normal_exit(tmp_path: Path) -> None:
    holder, pid, port = start_holder(tmp_path, "exit")
    assert holder.wait(timeout=30) == 0
    wait_until(lambda: not pid_alive(pid), what=f"anvil pid {pid} to be gone")
    assert not port_is_listening(port)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_no_orphan_when_the_parent_is_killed(tmp_path: Path, sig: signal.Signals) -> None:
    holder, pid, port = start_holder(tmp_path, "hold")
    assert pid_alive(pid) and port_is_listening(port)
    os.kill(holder.pid, sig)
    holder.wait(timeout=30)
    wait_until(lambda: not pid_alive(pid), what=f"anvil pid {pid} to die with its parent")
    assert not port_is_listening(port)


# A devnet without nodes deploys its ledger for nodes registered later, whose model families
# it must list: a stand-in here (these devnets register nobody), so no seed policy is built.
NO_NODES_ENV = {"SAPO_LEDGER__FAMILIES": '["0x' + "11" * 32 + '"]'}


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_devnet_up_stops_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    proc = sapo_process(
        "devnet",
        "up",
        "--config",
        "configs/devnet.toml",
        "--data-dir",
        str(tmp_path),
        "--json",
        "--nodes",
        "0",
        env=NO_NODES_ENV,
    )
    ready = json.loads(proc.stdout.readline() or "null") or pytest.fail(proc.stderr.read())
    assert ready["rpc_url"].startswith("http://127.0.0.1:")
    assert int(rpc_call(ready["rpc_url"], "eth_chainId"), 16) == 31_337
    assert ready["ledger"].startswith("0x") and ready["nodes"] == []
    import ipfshttpclient

    assert ipfshttpclient.Client(ready["ipfs"][0]["api"], timeout=5).version()["Version"]
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == 0, proc.stderr.read()
    assert not pid_alive(ready["anvil_pid"]) and not pid_alive(ready["ipfs"][0]["pid"])
    assert (tmp_path / "anvil.log").exists() and (tmp_path / "node-0" / "ipfs.log").exists()


@pytest.mark.e2e
def test_devnet_up_killed_hard_leaves_no_chain(tmp_path: Path) -> None:
    proc = sapo_process(
        "devnet", "up", "--data-dir", str(tmp_path), "--json", "--nodes", "0", env=NO_NODES_ENV
    )
    ready = json.loads(proc.stdout.readline() or "null") or pytest.fail(proc.stderr.read())
    proc.kill()
    proc.wait(timeout=30)
    wait_until(lambda: not pid_alive(ready["anvil_pid"]), what="anvil to die with devnet up")
    wait_until(lambda: not pid_alive(ready["ipfs"][0]["pid"]), what="ipfs to die with devnet up")


@pytest.mark.e2e
def test_devnet_up_with_a_bad_config_starts_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[devnet]\nnodes = 0\n")
    proc = sapo_process("devnet", "up", "--config", str(bad), "--data-dir", str(tmp_path / "d"))
    assert proc.wait(timeout=60) == 2
    assert "[devnet].nodes" in proc.stderr.read()
    assert not (tmp_path / "d").exists()
    # a root lane in network namespaces is not built: refused before anything starts, detached
    # or not
    for detach in ([], ["--detach"]):
        args = ["devnet", "up", "--netns", "--root-lane", "--data-dir", str(tmp_path / "d")]
        proc = sapo_process(*args, *detach)
        assert proc.wait(timeout=60) == 2
        assert "--netns with the root lane is not built" in " ".join(proc.stderr.read().split())
        assert not (tmp_path / "d").exists()


@pytest.mark.e2e
def test_devnet_up_with_a_local_store_starts_no_ipfs_daemon(tmp_path: Path) -> None:
    proc = sapo_process(
        "devnet",
        "up",
        "--data-dir",
        str(tmp_path),
        "--json",
        "--nodes",
        "0",
        env={"SAPO_STORE__BACKEND": "local"} | NO_NODES_ENV,
    )
    ready = json.loads(proc.stdout.readline() or "null") or pytest.fail(proc.stderr.read())
    assert ready["ipfs"] == []
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0


def _starter(tmp_path: Path, name: str, code: str) -> ServerProcess:
    """A process that writes its ready-file after a moment (as a node writes its first event)."""
    ready = tmp_path / f"{name}.ready"
    script = (
        f"import time, sys; time.sleep(0.5); {code}; open({str(ready)!r}, 'w'); time.sleep(600)"
    )
    return ServerProcess(
        name,
        [sys.executable, "-c", script],
        log_path=tmp_path / f"{name}.log",
        ready=ready.exists,
        ready_timeout_s=60,
    )


def test_processes_started_together_are_all_ready(tmp_path: Path) -> None:
    procs = [_starter(tmp_path, f"p{i}", "pass") for i in range(3)]
    try:
        start_together(procs)
        assert all(p.running for p in procs)
    finally:
        for p in procs:
            p.stop()
    assert not any(p.running for p in procs)


def test_one_that_dies_before_ready_stops_the_others_and_is_named(tmp_path: Path) -> None:
    procs = [
        _starter(tmp_path, "good", "pass"),
        _starter(tmp_path, "bad", "print('no config', file=sys.stderr); sys.exit(2)"),
        _starter(tmp_path, "late", "time.sleep(1)"),
    ]
    with pytest.raises(ServerStartError, match=r"bad exited with code 2(.|\n)*no config"):
        start_together(procs)
    assert not any(p.running for p in procs), "a process was left running"


@pytest.mark.e2e
def test_devnet_up_without_nodes_or_families_says_what_to_set(tmp_path: Path) -> None:
    """A devnet without nodes deploys its ledger for nodes registered later: without
    [ledger].families and with no seed policy built to name one, it stops with what to do
    (and stops what it started)."""
    env = {"SAPO_POLICY__CACHE_DIR": str(tmp_path / "empty-cache")}
    proc = sapo_process(
        "devnet", "up", "--data-dir", str(tmp_path / "d"), "--json", "--nodes", "0", env=env
    )
    assert proc.wait(timeout=120) == 2
    err = proc.stderr.read()
    assert "set [ledger].families" in err and "sapo policy seed" in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "empty-cache" / "policies").exists(), "no seed was built for it"
