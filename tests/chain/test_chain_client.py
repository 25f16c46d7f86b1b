"""The chain client around the contract: artifacts, RPC faults, nonces, fees, event scans."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from client.chain import Ledger, NoSigner, RpcUnavailable, connect
from client.chain.artifacts import load_artifact
from client.chain.events import EventCursor, EventReader
from client.chain.ledger_events import EVENTS, ChainEvent, Submitted, field_name, typed
from client.chain.tx import FeeCapExceeded
from client.devnet import Anvil, free_loopback_port, rpc_call
from tests.harness.ledger_swarm import ETH, FAMILY, Swarm, digest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_committed_artifacts_match_the_sources() -> None:
    result = subprocess.run(
        ["node", "scripts/build-contracts", "--check"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, f"stale artifacts: {result.stderr}"


def test_a_read_only_ledger_reads_but_refuses_to_send(swarm: Swarm) -> None:
    reader = Ledger(swarm.w3, swarm.ledger.address)
    assert reader.current_round() == 0
    with pytest.raises(NoSigner, match="read-only"):
        reader.submit(0, digest(0), 8, 0, 0)


def test_unreachable_rpc_is_retried_then_named(swarm: Swarm) -> None:
    dead = connect(f"http://127.0.0.1:{free_loopback_port()}", request_timeout_s=1)
    ledger = Ledger(dead, swarm.ledger.address, attempts=2)
    with pytest.raises(RpcUnavailable, match=r"currentRound\(\): RPC unavailable after 2 attempts"):
        ledger.current_round()


def test_a_stopped_chain_is_named_and_a_restarted_one_answers_again(tmp_path: Path) -> None:
    anvil = Anvil(tmp_path).start()
    swarm = Swarm(anvil)
    node = swarm.node()
    anvil.stop()
    with pytest.raises(RpcUnavailable, match="submit: RPC unavailable"):
        node.submit(0, digest(0), 8, 0, 0)
    restarted = Anvil(tmp_path, port=anvil.port).start()  # same endpoint, fresh chain
    try:
        assert node.tx.rpc(lambda: node.w3.eth.chain_id, "eth_chainId") == 31_337
    finally:
        restarted.stop()


def test_nonce_resyncs_after_another_client_used_the_account(swarm: Swarm) -> None:
    account = swarm.account()
    first, second = swarm.bind(account), swarm.bind(account)
    first.register("{}", ETH, FAMILY)  # first caches nonce 1
    second.add_stake(ETH)  # nonce 1 used behind first's back
    first.add_stake(ETH)  # "nonce too low": resync and succeed
    assert first.node_info(account.address).active_stake == 3 * ETH


def test_a_stuck_transaction_is_replaced_with_a_higher_fee(swarm: Swarm) -> None:
    account = swarm.account()
    ledger = Ledger(swarm.w3, swarm.ledger.address, account=account, receipt_timeout_s=1.0)
    rpc_call(swarm.url, "evm_setAutomine", [False])  # the chain stops including transactions

    def mine_after_the_replacement() -> None:
        deadline = time.monotonic() + 30
        while ledger.tx.replaced == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        rpc_call(swarm.url, "evm_mine")

    miner = threading.Thread(target=mine_after_the_replacement)
    miner.start()
    try:
        result = ledger.register("{}", ETH, FAMILY)
    finally:
        miner.join()
        rpc_call(swarm.url, "evm_setAutomine", [True])
    assert ledger.tx.replaced >= 1
    mined = swarm.w3.eth.get_transaction(result.tx_hash)
    assert mined["nonce"] == 0 and mined["maxPriorityFeePerGas"] > 10**9  # the bumped version
    assert swarm.w3.eth.get_transaction_count(account.address) == 1  # one of them, once
    assert ledger.node_info(account.address).registered


def test_fee_cap_refuses_to_send_into_a_base_fee_above_it(swarm: Swarm) -> None:
    rpc_call(swarm.url, "anvil_setNextBlockBaseFeePerGas", [hex(500 * 10**9)])
    rpc_call(swarm.url, "evm_mine")
    capped = Ledger(swarm.w3, swarm.ledger.address, account=swarm.account(), max_fee_gwei=100)
    with pytest.raises(FeeCapExceeded, match=r"exceeds the cap of 100\.000 gwei"):
        capped.register("{}", ETH, FAMILY)
    rpc_call(swarm.url, "anvil_setNextBlockBaseFeePerGas", [hex(10**9)])
    rpc_call(swarm.url, "evm_mine")


def test_event_scan_in_small_chunks_with_filters_and_a_cursor(swarm: Swarm, tmp_path: Path) -> None:
    nodes = [swarm.node() for _ in range(3)]
    start = swarm.deploy_tx.block_number
    for round_ in range(3):
        for node in nodes:
            node.submit(round_, digest(f"{round_}-{node.account_address}"), 8, 100 * round_, 0)
        swarm.advance()
    reader = EventReader(swarm.ledger, chunk_blocks=2, start_block=start)
    submitted = list(reader.read(["Submitted"]))
    assert [(e.args["round"], e.args["node"]) for e in submitted] == [
        (r, n.account_address) for r in range(3) for n in nodes
    ]
    assert [e.args["round"] for e in reader.read(["Submitted"], round=1)] == [1, 1, 1]
    mine = list(reader.read(["Submitted", "Registered"], node=nodes[0].account_address))
    assert [e.name for e in mine] == ["Registered", "Submitted", "Submitted", "Submitted"]

    path = tmp_path / "cursor.json"
    cursor = EventCursor.load(path, default_block=start)
    assert len(reader.poll(cursor, ["Submitted"])) == 9
    cursor.save(path)
    nodes[0].submit(3, digest("late"), 8, 0, 0)
    resumed = EventCursor.load(path)
    assert [e.args["round"] for e in reader.poll(resumed, ["Submitted"])] == [3]
    with pytest.raises(ValueError, match="unknown event"):
        list(reader.read(["Submited"]))
    # the same events as typed records: snake-case fields, lower-case addresses, hex digests
    typed = list(reader.events(Submitted, round=2))
    assert [(e.round, e.node) for e in typed] == [(2, n.account_address.lower()) for n in nodes]
    assert typed[0].digest == "0x" + digest(f"2-{nodes[0].account_address}").hex()


def test_every_event_of_the_ledger_has_its_typed_record_field_for_field() -> None:
    """A contract whose events change fails here, not in a node decoding them in the field."""
    abi = load_artifact("SwarmLedger")["abi"]
    events = {e["name"]: e for e in abi if e["type"] == "event"}
    assert set(events) == set(EVENTS)
    for name, cls in EVENTS.items():
        fields = [field_name(i["name"]) for i in events[name]["inputs"]]
        own = [f for f in cls.model_fields if f not in ChainEvent.model_fields]
        assert own == fields, name
    with pytest.raises(ValueError, match="not an address"):
        typed("Withdrawn", {"node": "0x12", "amount": 1}, block_number=1, tx_hash="0x", log_index=0)


def test_every_event_decodes_as_web3_decodes_it_and_a_garbled_log_is_named(swarm: Swarm) -> None:
    """The reader decodes logs itself (web3's process_log was ~250 us a log); every event of the
    ABI, with values at the edges of their types, reads the same as through web3."""
    import random

    from eth_abi import encode
    from eth_utils import event_abi_to_log_topic

    rng = random.Random(7)
    reader = EventReader(swarm.ledger)

    def value(kind: str):
        if kind == "address":
            return "0x" + rng.randbytes(20).hex()
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "bytes32":
            return rng.randbytes(32)
        if kind == "string":
            return "ipfs://x/ünïcode"
        if kind.endswith("[]"):
            return [value(kind[:-2]) for _ in range(rng.randrange(4))]
        bits = int(kind[4:])
        return rng.choice([0, 1, (1 << bits) - 1, rng.randrange(1 << bits)])

    for name, abi in reader._events.items():
        indexed = [i["type"] for i in abi["inputs"] if i["indexed"]]
        data = [i["type"] for i in abi["inputs"] if not i["indexed"]]
        log = {
            "address": swarm.ledger.address,
            "topics": [event_abi_to_log_topic(abi)] + [encode([t], [value(t)]) for t in indexed],
            "data": encode(data, [value(t) for t in data]),
            "blockNumber": 5,
            "logIndex": 2,
            "transactionHash": rng.randbytes(32),
            "blockHash": rng.randbytes(32),
            "transactionIndex": 0,
            "removed": False,
        }
        by_web3 = swarm.ledger.contract.events[name]().process_log(log)["args"]
        ours = reader._decode(log)
        assert ours.name == name
        assert ours.args == {
            k: "0x" + v.hex() if isinstance(v, bytes) else list(v) if isinstance(v, tuple) else v
            for k, v in by_web3.items()
        }, name
        assert name == ours.typed().NAME
    submitted = reader._events["Submitted"]
    garbled = {"topics": [event_abi_to_log_topic(submitted), b"\x00" * 32], "data": b""}
    with pytest.raises(ValueError, match="Submitted log that does not decode"):
        reader._decode(garbled | {"blockNumber": 1, "logIndex": 0, "transactionHash": b""})
