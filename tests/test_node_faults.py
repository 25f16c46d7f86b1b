"""A node under real faults: the chain's RPC and the IPFS API cut off (a TCP gate in front of the
real anvil and js-ipfs, closed and reopened), and peers that publish bad batches (real ledger
accounts submitting tampered, foreign or never-pinned batches)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, wait_until
from eth_account import Account
from gate import TcpGate

from client.chain import Ledger, connect
from client.chain.events import EventReader
from client.config import load_config
from client.devnet import Anvil, IpfsDaemon, rpc_call
from client.node.assemble import base_policy_path, open_node
from client.node.devnet import _with, provision
from client.node.eventlog import read_events
from client.node.rollouts import generate_round
from client.policy import TransformersBackend, load_policy
from client.store import IpfsStore, Item, publish_batch
from client.tasks import load_catalog

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROUND_S = 8


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("faults")
    anvil = Anvil(root, block_time_s=1).start()
    daemon = IpfsDaemon(root / "ipfs").start()
    base = _with(
        load_config(REPO / "configs" / "devnet.toml"),
        ledger={"round_length_s": ROUND_S, "unbonding_period_s": 7 * ROUND_S},
        policy={"model": "seed-test", "cache_dir": root / "policies", "max_new_tokens": 12},
        sapo={"local_items": 2, "external_items": 2, "completions": 4},
        chain={"request_timeout_s": 2.0, "receipt_timeout_s": 15.0},
        store={"timeout_s": 2.0},
        train={"rounds_per_update": 1},
    )
    base_policy_path(base)
    swarm = provision(
        base, root / "swarm", rpc_url=anvil.url, chain_id=31_337, ipfs_api=daemon.api, nodes=2
    )
    yield {"anvil": anvil, "daemon": daemon, "swarm": swarm, "base": base}
    daemon.stop()
    anvil.stop()


def gated_config(world, index: int, chain: TcpGate | None = None, ipfs: TcpGate | None = None):
    cfg = load_config(world["swarm"].node_configs[index])
    changes = {}
    if chain:
        changes["chain"] = {"rpc_url": f"http://127.0.0.1:{chain.port}"}
    if ipfs:
        changes["store"] = {"ipfs_api": f"/ip4/127.0.0.1/tcp/{ipfs.port}/http"}
    return _with(cfg, **changes)


def run_in_thread(node, rounds: int) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=node.run, args=(stop,), kwargs={"rounds": rounds})
    thread.start()
    return thread, stop


def outbox(node) -> dict[str, tuple[str, str | None]]:
    return {
        key: (status, error)
        for key, status, error in node.journal._all("SELECT key, status, error FROM outbox")
    }


def test_chain_outage_queues_and_misses_only_what_closed(world) -> None:
    gate = TcpGate(world["anvil"].port)
    node = open_node(gated_config(world, 0, chain=gate))
    first = node.current_round()
    if node.round_ends_at(first) - time.time() < 3:  # start at a round's beginning
        time.sleep(node.round_ends_at(first) - time.time() + 0.2)
        first = node.current_round()
    gate.close()
    thread, _ = run_in_thread(node, rounds=3)
    wait_until(lambda: node.current_round() >= first + 2, timeout_s=3 * ROUND_S, what="2 rounds")
    gate.open()  # in round first+2: first's submission window has closed, first+1's has not
    thread.join(timeout=6 * ROUND_S)
    assert not thread.is_alive()
    box = outbox(node)
    assert box[f"submit:{first}"][0] == "dropped" and "closed" in box[f"submit:{first}"][1]
    assert node.journal.round(first).phase == "missed"
    assert box[f"submit:{first + 1}"][0] == "done" and box[f"submit:{first + 2}"][0] == "done"
    assert set(node.journal.all_metrics()) >= {first, first + 1}  # trained while cut off
    kinds = [(e["kind"], e.get("ok")) for e in read_events(node.events.path)]
    assert ("chain.status", False) in kinds and ("chain.status", True) in kinds
    on_chain = node.ledger.submission(first + 1, node.address)
    assert on_chain.digest == node.journal.round(first + 1).digest


def test_ipfs_outage_holds_the_submission_until_the_batch_is_pinned(world) -> None:
    gate = TcpGate(world["daemon"].api_port)
    node = open_node(gated_config(world, 1, ipfs=gate))
    first = node.current_round()
    if node.round_ends_at(first) - time.time() < 5:
        time.sleep(node.round_ends_at(first) - time.time() + 0.2)
        first = node.current_round()
    gate.close()
    thread, _ = run_in_thread(node, rounds=2)  # the wait for the 2nd round flushes the outbox
    wait_until(lambda: first in node.journal.all_metrics(), what="a round trained while cut off")
    assert outbox(node)[f"submit:{first}"][0] == "pending"  # never a digest nobody can fetch
    gate.open()
    thread.join(timeout=4 * ROUND_S)
    assert outbox(node)[f"pin:{first}"][0] == "done"
    assert outbox(node)[f"submit:{first}"][0] == "done"
    kinds = [(e["kind"], e.get("ok")) for e in read_events(node.events.path)]
    assert ("store.status", False) in kinds and ("store.status", True) in kinds


def cheater(world) -> Ledger:
    account = Account.create()
    rpc_call(world["anvil"].url, "anvil_setBalance", [account.address, hex(100 * 10**18)])
    ledger = Ledger(connect(world["anvil"].url), world["swarm"].ledger, account=account)
    ledger.register('{"model":"cheat"}', world["base"].ledger.min_stake)
    return ledger


def test_bad_peer_batches_are_skipped_recorded_and_attested_for_what_they_are(world) -> None:
    base, daemon = world["base"], world["daemon"]
    policy = load_policy(base_policy_path(base), device="cpu", dtype="float32")
    catalog = load_catalog("tiny")
    store = IpfsStore(daemon.api, index_dir=Path(world["swarm"].config_path).parent / "cheats")
    foreign, inflated, missing = cheater(world), cheater(world), cheater(world)
    node = open_node(gated_config(world, 0))
    round_ = node.current_round()
    if node.round_ends_at(round_) - time.time() < 5:
        time.sleep(node.round_ends_at(round_) - time.time() + 0.2)
        round_ = node.current_round()
    # the cheaters submit directly: wait for the round's first block (a block a second)
    wait_until(lambda: node.ledger.current_round() >= round_, what="the round's first block")

    def honest(address: str, as_node: str | None = None):
        return generate_round(
            policy,
            TransformersBackend(policy),
            catalog,
            chain_id=31_337,
            ledger=node.ledger.address,
            round_=round_,
            node=as_node or address,
            items=2,
            completions=4,
            max_new_tokens=12,
            temperature=1.0,
            top_p=1.0,
        ).batch

    # tasks drawn from someone else's seed (easy ones picked), relabelled as its own
    def all_correct(batch):  # every completion claimed right
        items = [
            Item(**{**i.model_dump(), "rewards": [10_000] * len(i.completions)})
            for i in batch.items
        ]
        return batch.model_copy(update={"items": items})

    stolen = honest(foreign.account_address, as_node=node.address)
    stolen = all_correct(stolen.model_copy(update={"node": foreign.account_address.lower()}))
    lie = all_correct(honest(inflated.account_address))  # its own tasks, answers claimed right
    for ledger, published in ((foreign, stolen), (inflated, lie)):
        _, digest = publish_batch(store, published)
        ledger.submit(round_, digest, published.rollouts, published.score)
    never_pinned = honest(missing.account_address)
    missing.submit(round_, never_pinned.digest(), never_pinned.rollouts, never_pinned.score)

    thread, _ = run_in_thread(node, rounds=1)
    thread.join(timeout=4 * ROUND_S)
    verdicts = {v["node"]: v for v in node.journal.peer_verdicts(round_) if v["round"] == round_}
    bad = verdicts[foreign.account_address.lower()]
    assert bad["verdict"] == "bad" and "not the seed's task" in bad["reason"]
    wrong = verdicts[inflated.account_address.lower()]
    assert wrong["verdict"] == "verified" and wrong["recomputed"] < wrong["claimed"]
    assert verdicts[missing.account_address.lower()]["verdict"] == "unavailable"
    attested = {
        e.args["node"].lower(): e.args
        for e in EventReader(node.ledger).read(["Attested"], round=round_)
        if e.args["attester"].lower() == node.address.lower()
    }
    assert attested[foreign.account_address.lower()]["score"] == 0
    assert attested[inflated.account_address.lower()]["score"] == wrong["recomputed"]
    assert not attested[inflated.account_address.lower()]["agrees"]
    assert missing.account_address.lower() not in attested  # unavailable: no attestation
    for cheat in (foreign, inflated):
        info = node.ledger.submission(round_, cheat.account_address)
        assert info.dispute_stake > 0 and info.credited == 0, cheat.account_address
    # after the challenge window anyone may settle: a disputed submission is slashed
    final = round_ + node.params.challenge_rounds + 1
    time.sleep(max(0.0, node.params.genesis + final * ROUND_S - time.time() + 1.5))
    for cheat in (foreign, inflated):
        stake = node.ledger.node_info(cheat.account_address).active_stake
        node.ledger.settle(round_, cheat.account_address)
        after = node.ledger.node_info(cheat.account_address).active_stake
        assert after == stake - stake * node.params.slash_bps // 10_000 < stake


def test_rounds_per_update_gathers_rounds_into_one_step(world) -> None:
    # not a fault: a training knob, checked here on the same devnet (a real round loop)
    node = open_node(_with(gated_config(world, 1), train={"rounds_per_update": 2}))
    steps = node.steps
    thread, _ = run_in_thread(node, rounds=2)
    thread.join(timeout=6 * ROUND_S)
    assert not thread.is_alive()
    played = [
        e for e in read_events(node.data_dir / "events.jsonl") if e["kind"] == "round.trained"
    ]
    first, second = played[-2:]
    assert first["gathered_rounds"] == 1 and first["loss"] is None, first
    assert "gathering (1/2 rounds)" in first["message"]
    assert second["gathered_rounds"] == 0, second
    assert node.steps - steps <= 1, "two rounds gathered make at most one step"


def test_a_running_node_unpins_what_is_older_than_retain_rounds(world) -> None:
    """`[store].retain_rounds` used to be read by nothing: a node kept every batch forever."""
    from client.node.assemble import NodeConfigError

    base = _with(
        world["base"],
        ledger={"challenge_rounds": 1, "unbonding_period_s": 3 * ROUND_S},
        store={"retain_rounds": 2},
    )
    swarm = provision(
        base,
        Path(world["swarm"].config_path).parent.parent / "retain",
        rpc_url=world["anvil"].url,
        chain_id=31_337,
        ipfs_api=world["daemon"].api,
        nodes=1,
    )
    cfg = load_config(swarm.node_configs[0])
    with pytest.raises(
        NodeConfigError, match=r"retain_rounds \(1\) must exceed .*window \(1 round\)"
    ):
        open_node(_with(cfg, store={"retain_rounds": 1}))
    node = open_node(cfg)
    thread, _ = run_in_thread(node, rounds=5)
    thread.join(timeout=10 * ROUND_S)
    assert not thread.is_alive()
    pinned = {r.round: r.cid for r in node.journal.rounds() if r.cid}
    assert len(pinned) >= 5, pinned
    last = max(pinned)
    import ipfshttpclient
    from multiformats import CID

    daemon = ipfshttpclient.Client(world["daemon"].api, timeout=10)
    # js-ipfs lists CIDv1 in base58btc (zb2…): compare what they name, not how they are spelt
    on_daemon = {
        str(CID.decode(k).set(base="base32")) for k in daemon.pin.ls(type="recursive")["Keys"]
    }
    index = node.store.pins.all()
    for round_, cid in pinned.items():
        kept = round_ >= last - 2  # gc(last, 2) keeps rounds last-2 .. last
        assert (cid in index) == kept, f"round {round_} of {last}: pin index {cid in index}"
        assert (cid in on_daemon) == kept, f"round {round_} of {last}: daemon pin {cid}"
    unpinned = [e for e in read_events(node.events.path) if e["kind"] == "store.unpinned"]
    assert sum(len(e["cids"]) for e in unpinned) == sum(r < last - 2 for r in pinned)
