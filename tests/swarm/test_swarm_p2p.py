"""The data plane across hosts: a devnet whose 3 nodes each have their own js-ipfs daemon on
their own loopback address, checked by `sapo doctor`, and a producer that leaves after its batch
was fetched.

`sapo doctor` with a node's config passes every check on the healthy devnet, and fails (exit 1,
naming the fix) on a wrong chain id, a keystore others can read, and swarm addresses that peers
on the internet could not dial.

Node 2 is really stopped (SIGSTOP) while node 1 fetches and attests node 0's batch of a round;
node 0's daemon is then killed (SIGKILL) and node 2 resumed: it gets the batch from node 1 (the
journal says so) and attests it, `sapo audit verify` with node 2's config re-scores it, and node
0 rides out its store outage, journals it, and submits again once its daemon is back, on
another port: it writes its new swarm address on chain and its peers fetch from there.

Started again in the same data dir, the devnet is a new chain with new node data (the first
run's kept in previous/), credits every node as the first did, and a node given the first run's
data dir refuses it.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
from pathlib import Path

import pytest

from client.chain import Ledger, connect
from client.chain.events import EventReader
from client.devnet import IpfsDaemon
from client.node.eventlog import read_events
from client.node.journal import Journal
from client.node.view.journal import NodeView
from client.pids import pid_alive
from client.store import IpfsStore
from tests.harness.devnets import (
    MECHANICS_ENV,
    credited_nodes,
    credited_on_chain,
    start_readme_devnet,
    stop_devnet,
)
from tests.harness.policies import cached_seed_test
from tests.harness.processes import sapo_run, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROUND_S = 10
ENV = dict(MECHANICS_ENV)


def verdicts(node_dir: Path) -> dict[tuple[int, str], dict]:
    rows = Journal.read_only(node_dir / "journal.sqlite").peers.peer_verdicts()
    return {(v["round"], v["node"]): v for v in rows}


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    data_dir = tmp_path_factory.mktemp("p2p")
    ENV["SAPO_POLICY__CACHE_DIR"] = str(cached_seed_test(seed_test, data_dir / "policies"))
    # as README writes it: no --config (a node's defaults are a public node's)
    proc, state = start_readme_devnet(data_dir / "devnet", 3, ROUND_S, env=ENV)
    yield proc, state
    if proc.poll() is None:
        stop_devnet(proc)


def test_a_devnet_started_without_a_config_credits_every_node(devnet) -> None:
    """Without --config the devnet used to write a public node's store defaults: no node would
    dial its peers' daemons on 127.0.0.N, every batch was unavailable and nobody was credited."""
    _, state = devnet
    data_dir = Path(state["data_dir"])
    for node in state["nodes"]:
        assert "allow_private_peers = true" in Path(node["config"]).read_text(), node["config"]
    addresses = {n["address"] for n in state["nodes"]}
    ledger = Ledger(connect(state["rpc_url"]), state["ledger"])
    wait_until(
        lambda: credited_on_chain(ledger) == {a.lower() for a in addresses},
        timeout_s=ROUND_S * 12 + 120,
        what="every node to be credited",
    )
    assert set(credited_nodes(data_dir, ENV)) == addresses, "devnet status disagrees"
    for daemon in state["ipfs"]:  # the daemons are peers of each other while batches move
        peers = IpfsStore(daemon["api"], index_dir=data_dir).swarm_peers()
        assert peers, f"IPFS daemon {daemon['api']} has no swarm peers"
    rows = credited_nodes(data_dir, ENV).values()
    assert not any(r["peer_outage"] for r in rows), "status reports a peer outage"


def doctor(config: str, *flags: str, **env: str) -> tuple[int, dict[str, dict]]:
    result = sapo_run("doctor", "--config", config, "--json", *flags, env=ENV | env, timeout=300)
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    return result.returncode, checks


def test_doctor_passes_on_a_healthy_node_and_names_the_fix_for_each_fault(
    devnet, tmp_path: Path
) -> None:
    _, state = devnet
    config = state["nodes"][2]["config"]
    code, checks = doctor(config)
    assert code == 0 and all(c["ok"] for c in checks.values()), checks
    assert "dialled" in checks["peers"]["detail"]
    # three nodes of one family, equal stakes: a quorum of 2 can be filled, nobody above a third
    assert "2 other staked node(s)" in checks["family"]["detail"], checks["family"]
    assert not checks["family"]["warning"]
    assert "bound to ledger" in checks["data dir"]["detail"], checks["data dir"]

    # three faults at once (each check reads its own part; --no-model: the policy is not what
    # they are about): a wrong chain id, a keystore others can read, and an IPFS node peers could
    # not reach (its swarm addresses are loopback, and private ones are not allowed, as on the
    # internet)
    keystore = Path(state["nodes"][2]["data_dir"]) / "keystore.json"
    keystore.chmod(0o644)
    try:
        code, checks = doctor(
            config,
            "--no-model",
            SAPO_CHAIN__CHAIN_ID="1",
            SAPO_STORE__ALLOW_PRIVATE_PEERS="false",
        )
    finally:
        keystore.chmod(0o600)
    assert code == 1 and checks["rpc"]["ok"] is False and "chain_id" in checks["rpc"]["fix"]
    assert checks["ledger"]["ok"] is None  # skipped, saying why
    assert checks["keystore"]["ok"] is False
    assert checks["keystore"]["fix"] == f"chmod 600 {keystore}"
    assert checks["ipfs"]["ok"] is False and "private" in checks["ipfs"]["detail"]
    assert "Addresses.Swarm" in checks["ipfs"]["fix"]
    assert checks["data dir"]["ok"] is None  # skipped with the ledger

    # a data dir of another deployment of the ledger (its round 0 elsewhere): named, not touched
    other = tmp_path / "other-deployment"
    other.mkdir()
    recorded = json.loads((Path(state["nodes"][2]["data_dir"]) / "deployment.json").read_text())
    (other / "deployment.json").write_text(json.dumps(recorded | {"genesis": 1}))
    before = (other / "deployment.json").read_bytes()
    code, checks = doctor(config, "--no-model", SAPO_NODE__DATA_DIR=str(other))
    assert code == 1 and checks["data dir"]["ok"] is False, checks["data dir"]
    assert "another deployment" in checks["data dir"]["detail"]
    assert "new [node].data_dir" in checks["data dir"]["fix"]
    assert [p.name for p in other.iterdir()] == ["deployment.json"]
    assert (other / "deployment.json").read_bytes() == before


def test_a_batch_outlives_its_producers_ipfs_node(devnet) -> None:
    proc, state = devnet
    resumed, nodes = None, state["nodes"]
    try:
        dirs = [Path(n["data_dir"]) for n in nodes]
        addr = [n["address"].lower() for n in nodes]
        ledger = Ledger(connect(state["rpc_url"]), state["ledger"])
        # the swarm works across daemons: node 2 has verified one of node 0's batches
        wait_until(
            lambda: any(
                k[1] == addr[0] and v["verdict"] == "verified" for k, v in verdicts(dirs[2]).items()
            ),
            timeout_s=ROUND_S * 12 + 120,
            what="node 2 to verify a batch of node 0",
        )
        os.kill(nodes[2]["pid"], signal.SIGSTOP)
        # node 2 may have been stopped between fetching a batch and journaling its verdict, so
        # only a round that began after it stopped is one it cannot have fetched from node 0
        stopped_in = ledger.current_round()

        def attested_by_1() -> int | None:
            events = EventReader(ledger).read(["Attested"], node=addr[0])
            rounds = {e.args["round"] for e in events if e.args["attester"].lower() == addr[1]}
            fresh = sorted(r for r in rounds if r > stopped_in)
            return fresh[-1] if fresh else None

        wait_until(
            lambda: attested_by_1() is not None,
            timeout_s=ROUND_S * 10,
            what="node 1 to attest a batch of node 0 that node 2 has not fetched",
        )
        round_ = attested_by_1()
        os.kill(state["ipfs"][0]["pid"], signal.SIGKILL)  # node 0's IPFS node is gone
        wait_until(lambda: not pid_alive(state["ipfs"][0]["pid"]), what="daemon 0 to die")
        os.kill(nodes[2]["pid"], signal.SIGCONT)

        wait_until(
            lambda: verdicts(dirs[2]).get((round_, addr[0]), {}).get("verdict") == "verified",
            timeout_s=ROUND_S * 6 + 60,
            what=f"node 2 to fetch and verify node 0's batch of round {round_}",
        )
        got = verdicts(dirs[2])[(round_, addr[0])]
        assert got["source"] == addr[1], got  # from node 1, who fetched it and pins it
        audit = sapo_run(
            "audit",
            "verify",
            str(round_),
            nodes[0]["address"],
            "--config",
            nodes[2]["config"],
            "--json",
            env=ENV,
            timeout=300,
        )
        assert audit.returncode == 0, audit.stdout + audit.stderr
        report = json.loads(audit.stdout)
        assert report["ok"] and report["source"].lower() != addr[0], report

        # node 0 kept running through the outage and says so
        assert pid_alive(nodes[0]["pid"])
        wait_until(
            lambda: any(
                e["kind"] == "store.status" and not e.get("ok", True)
                for e in read_events(dirs[0] / "events.jsonl")
            ),
            timeout_s=ROUND_S * 4,
            what="node 0 to journal its store outage",
        )
        before = NodeView(dirs[0]).confirmed_rounds()
        old_swarm = state["ipfs"][0]["swarm"]
        with socket.socket() as squatter:  # its old swarm port is taken now: the daemon moves
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            squatter.bind(("127.0.0.2", int(old_swarm.split("/")[4])))
            squatter.listen()
            resumed = IpfsDaemon(dirs[0], host="127.0.0.2", swarm=True).start()  # same repo
        assert resumed.api == state["ipfs"][0]["api"] and resumed.swarm_address != old_swarm
        wait_until(
            lambda: len(NodeView(dirs[0]).confirmed_rounds()) >= len(before) + 2,
            timeout_s=ROUND_S * 6 + 60,
            what="node 0 to submit again once its daemon is back",
        )
        # it told the swarm where its IPFS node is now, and peers fetch its new batches there
        wait_until(
            lambda: (
                json.loads(ledger.node_info(addr[0]).metadata)["ipfs"]["addresses"]
                == [resumed.swarm_address]
            ),
            timeout_s=ROUND_S * 3,
            what="node 0 to write its new swarm address on chain",
        )
        wait_until(
            lambda: any(
                r > round_
                and n == addr[0]
                and v["verdict"] == "verified"
                and v["source"] == addr[0]
                for (r, n), v in verdicts(dirs[1]).items()
            ),
            timeout_s=ROUND_S * 6 + 60,
            what="node 1 to fetch a new batch of node 0 from node 0's moved daemon",
        )
        # nothing it had submitted is lost: every confirmed round is still fetchable
        for r in before:
            assert (r, addr[0]) in verdicts(dirs[1]) or (r, addr[0]) in verdicts(dirs[2])
    finally:
        if pid_alive(nodes[2]["pid"]):
            os.kill(nodes[2]["pid"], signal.SIGCONT)  # so that it can stop
        if proc.poll() is None:
            stop_devnet(proc)  # before the daemon this test started
        if resumed is not None:
            resumed.stop()


RESTART_ROUND_S = 12


def tree(directory: Path) -> dict[str, tuple[int, str]]:
    """Every file under `directory`: relative path -> (size, sha256)."""
    return {
        str(p.relative_to(directory)): (
            p.stat().st_size,
            hashlib.sha256(p.read_bytes()).hexdigest(),
        )
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def first_credit_rounds(ledger: Ledger) -> dict[str, int]:
    """Node (lower-case address) -> the chain round in which its first batch was credited (the
    block time of its first CreditChanged to credited, in the ledger's rounds)."""
    params = ledger.params()
    first: dict[str, int] = {}
    for event in EventReader(ledger).read(["CreditChanged"]):
        node = event.args["node"].lower()
        if event.args["credited"] and node not in first:
            at = ledger.w3.eth.get_block(event.block_number)["timestamp"]
            first[node] = (at - params.genesis) // params.round_length
    return first


def test_a_second_devnet_up_in_the_same_dir_credits_every_node_as_the_first(devnet) -> None:
    """The devnet started again in its data dir, as README's command run twice in a row (issue
    56: the nodes resumed the first chain's journals, whose rounds ran far ahead of the new
    chain's, and submitted nothing). Its chain ended with it, so the second start is a new chain
    with the ledger at the same address (anvil's first deploy) and new node data, the first
    run's moved to previous/ and named; every node is credited within 5 chain rounds of the
    second start, and `devnet status` (at 80 columns too), the TUI's read model and the chain
    agree on rounds. A node pointed at the first run's data dir is refused in one line naming
    both deployments, and nothing there changes."""
    from client.config import load_config
    from client.node.view import Watcher

    first, first_state = devnet
    if first.poll() is None:  # the test before stops it; alone, this one does
        stop_devnet(first)
    data_dir = Path(first_state["data_dir"])
    old_rounds = NodeView(data_dir / "node-0").confirmed_rounds()
    proc, state = start_readme_devnet(data_dir, 3, RESTART_ROUND_S, env=ENV)
    try:
        ledger = Ledger(connect(state["rpc_url"]), state["ledger"])
        started = ledger.current_round()
        assert state["ledger"] == first_state["ledger"], "the new chain reuses the address"
        assert old_rounds and old_rounds[-1] > started + 5, (old_rounds, started)
        # the first run's files, kept aside and named; the new nodes start afresh
        previous = data_dir / "previous"
        assert state["previous"] == str(previous), state
        assert (previous / "node-0" / "deployment.json").is_file()
        assert NodeView(previous / "node-0").confirmed_rounds() == old_rounds
        addresses = {n["address"].lower() for n in state["nodes"]}
        wait_until(
            lambda: credited_on_chain(ledger) == addresses,
            timeout_s=RESTART_ROUND_S * 8 + 60,
            what="every node credited after the second start",
        )
        assert {a.lower() for a in credited_nodes(data_dir, ENV)} == addresses
        credited_in = first_credit_rounds(ledger)
        late = {a[:10]: r for a, r in credited_in.items() if r > started + 5}
        assert set(credited_in) == addresses and not late, (started, credited_in)

        # status, the TUI's read model and the chain agree on rounds
        status = sapo_run("devnet", "status", "--data-dir", str(data_dir), "--json", env=ENV)
        assert status.returncode == 0, status.stderr
        submitted: dict[str, set[int]] = {}
        for event in EventReader(ledger).read(["Submitted"]):
            submitted.setdefault(event.args["node"].lower(), set()).add(event.args["round"])
        now = ledger.current_round()
        for row, node in zip(json.loads(status.stdout)["nodes"], state["nodes"], strict=True):
            assert started <= row["round"] <= now, (row, started, now)
            assert row["last_submission"] in submitted[row["address"].lower()], row
            snap = Watcher(load_config(Path(node["config"])), node["address"]).snapshot()
            assert snap.round is not None and abs(snap.round - now) <= 1, (snap.round, now)
            assert snap.training is not None and started <= snap.training.round <= snap.round
            assert snap.rounds and max(p.round for p in snap.rounds) <= snap.round

        # readable at 80 columns: every line fits (but the data dir's own path), every header
        # and short address whole
        table = sapo_run(
            "devnet", "status", "--data-dir", str(data_dir), env=ENV | {"COLUMNS": "80"}
        )
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert not [line for line in lines if len(line) > 80 and str(data_dir) not in line], (
            table.stdout
        )
        for header in ("address", "last sub.", "credited", "local/round", "peers used"):
            assert header in table.stdout, table.stdout
        assert table.stdout.count("…") == 3, (
            f"a cell was cut (only addresses have …):\n{table.stdout}"
        )
        for node in state["nodes"]:
            assert f"{node['address'][:10]}…{node['address'][-4:]}" in table.stdout

        # a node given the first run's data dir: the same ledger address, another chain
        old = previous / "node-0"
        before = tree(old)
        refused = sapo_run(
            "node",
            "run",
            "--config",
            state["nodes"][0]["config"],
            env=ENV | {"SAPO_NODE__DATA_DIR": str(old)},
            timeout=120,
        )
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, refused.stderr
        assert str(old) in errors[0] and "another deployment" in errors[0], errors[0]
        assert errors[0].count(state["ledger"]) == 2 and "new [node].data_dir" in errors[0]
        assert tree(old) == before, "the refusal changed the data dir"
    finally:
        stop_devnet(proc)
