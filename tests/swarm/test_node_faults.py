"""A node under real faults: the chain's RPC and the IPFS API cut off (a TCP gate in front of the
real anvil and js-ipfs, closed and reopened), and peers that publish bad batches (real ledger
accounts submitting tampered, foreign or never-pinned batches).

Time moves by warping: the chain (anvil's evm_increaseTime) and the nodes' clock jump together
to the round a test needs, instead of the test sleeping through rounds."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from eth_account import Account

from client.chain import Ledger, connect
from client.chain.events import EventReader
from client.config import load_config, with_sections
from client.devnet import rpc_call
from client.devnet.provision import provision
from client.node.assemble import NodeConfigError, base_policy_path, open_node
from client.node.eventlog import Event, read_events
from client.node.rollouts import make_batch, task_seed
from client.policy import load_policy
from client.store import IpfsStore, Item, Sampling, publish_batch
from client.tasks import load_catalog
from tests.harness.batches import local_round
from tests.harness.gate import TcpGate
from tests.harness.processes import wait_until
from tests.harness.warp import finish_node as finish
from tests.harness.warp import start_node as start
from tests.harness.warp import warp_world

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROUND_S = 8
W, C = 2, 3  # the world ledger's submission and challenge windows (rounds)
A = 2  # its appeal rounds (configs/devnet.toml): a round is final after W + C + A


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    with warp_world(tmp_path_factory.mktemp("faults"), seed_test, ROUND_S, W, C) as w:
        yield w


def gated_config(world, index: int, chain: TcpGate | None = None, ipfs: TcpGate | None = None):
    cfg = load_config(world["swarm"].node_configs[index])
    changes = {}
    if chain:
        changes["chain"] = {"rpc_url": f"http://127.0.0.1:{chain.port}"}
    if ipfs:
        changes["store"] = {"ipfs_api": f"/ip4/127.0.0.1/tcp/{ipfs.port}/http"}
    return with_sections(cfg, **changes)


def outbox(node) -> dict[str, tuple[str, str | None]]:
    return {e.key: (e.status, e.error) for e in node.journal.outbox_entries()}


def played(node, round_: int, local_rounds: int = 2) -> bool:
    return len(node.journal.local_rounds(round_)) >= local_rounds


def next_round(world, node) -> int:
    """Warps to the next round's start; returns it."""
    round_ = node.current_round() + 1
    world["warp"].to(node.params, round_, 0.05)
    return round_


def cut_off(world, index: int, part: str):
    """Starts node `index` at a round's start with the chain or IPFS ("chain", "ipfs") cut
    off; returns (gate, node, that round, thread, stop) once it played two local rounds."""
    gate = TcpGate(world["anvil"].port if part == "chain" else world["daemon"].api_port)
    node = open_node(gated_config(world, index, **{part: gate}), clock=world["warp"].clock)
    first = next_round(world, node)
    gate.close()
    thread, stop = start(node)
    wait_until(lambda: played(node, first), what=f"two local rounds with {part} cut off")
    return gate, node, first, thread, stop


def test_chain_outage_queues_and_misses_only_what_closed(world) -> None:
    gate, node, first, thread, stop = cut_off(world, 0, "chain")
    world["warp"].to(node.params, first + 1, 0.05)
    # the node notices the outage after its RPC time-outs and retries (real seconds)
    wait_until(lambda: not node.health.chain_ok, timeout_s=60, what="the chain seen as down")
    wait_until(lambda: played(node, first + 1), what="the next round's local rounds")
    # first's window closes at first + W: open the gate after it, in first + W + 1
    world["warp"].to(node.params, first + W + 1, 0.05)
    wait_until(lambda: played(node, first + W + 1), what="local rounds after the window")
    gate.open()
    wait_until(lambda: outbox(node)[f"submit:{first + 1}"][0] == "done", what="first+1 submitted")
    finish(thread, stop)
    box = outbox(node)
    assert box[f"submit:{first}"][0] == "dropped" and "window closed" in box[f"submit:{first}"][1]
    assert node.journal.round(first).phase == "missed"
    assert node.journal.round(first + 2).phase == "skipped"  # no local round started in it
    kinds = [(e["kind"], e.get("ok")) for e in read_events(node.events.path)]
    assert ("chain.status", False) in kinds and ("chain.status", True) in kinds
    on_chain = node.ledger.submission(first + 1, node.address)
    assert on_chain.digest == node.journal.round(first + 1).digest
    assert node.journal.round(first + 1).local_rounds == 2  # both local rounds, trained cut off


def test_ipfs_outage_holds_the_submission_until_the_batch_is_pinned(world) -> None:
    gate, node, first, thread, stop = cut_off(world, 1, "ipfs")
    next_round(world, node)
    wait_until(lambda: node.journal.round(first).phase == "sealed", what="the batch sealed")
    wait_until(lambda: not node.health.store_ok, timeout_s=60, what="IPFS seen as down")
    assert outbox(node)[f"submit:{first}"][0] == "pending"  # never a digest nobody can fetch
    gate.open()
    wait_until(lambda: outbox(node)[f"submit:{first}"][0] == "done", what="pin, then submit")
    finish(thread, stop)
    assert outbox(node)[f"pin:{first}"][0] == "done"
    kinds = [(e["kind"], e.get("ok")) for e in read_events(node.events.path)]
    assert ("store.status", False) in kinds and ("store.status", True) in kinds


def cheater(world, metadata: str = '{"model":"cheat"}') -> Ledger:
    account = Account.create()
    rpc_call(world["anvil"].url, "anvil_setBalance", [account.address, hex(100 * 10**18)])
    ledger = Ledger(connect(world["anvil"].url), world["swarm"].ledger, account=account)
    # in the swarm's family: drawn for its batches, and checked by them
    ledger.register(metadata, world["base"].ledger.min_stake, ledger.params().families[0])
    return ledger


def test_bad_peer_batches_are_skipped_recorded_and_attested_for_what_they_are(world) -> None:
    base, daemon = world["base"], world["daemon"]
    policy = load_policy(base_policy_path(base), device="cpu", dtype="float32")
    catalog = load_catalog("tiny")
    store = IpfsStore(daemon.api, index_dir=Path(world["swarm"].config_path).parent / "cheats")
    # the never-pinned batch's producer names a dead address, a malformed one and a flood
    dead = {
        "id": "12D3KooWMc5B3DpRBc8mPmZrC3cMXpjDYCV1mQynS2GnE3jgSv2h",
        "addresses": ["/ip4/127.0.0.9/tcp/9", "/ip4/127.0.0.9/udp/9/quic", "x" * 250]
        + [f"/ip4/127.0.0.{i}/tcp/9" for i in range(10, 25)],
    }
    foreign, inflated = cheater(world), cheater(world)
    missing = cheater(world, json.dumps({"model": "cheat", "ipfs": dead}))
    # two fetches in a row that find the never-pinned batch nowhere make an unavailable vote
    node = open_node(
        with_sections(gated_config(world, 0), sapo={"unavailable_after": 2}),
        clock=world["warp"].clock,
    )
    round_ = next_round(world, node)

    def honest(address: str, as_node: str | None = None):
        seed = task_seed(31_337, node.ledger.address, round_, as_node or address)
        part = local_round(
            policy, seed=seed, round_=round_, node=as_node or address, k=0, items=2, completions=4
        )
        part = part.part
        return make_batch(
            chain_id=31_337,
            ledger=node.ledger.address,
            round_=round_,
            node=address,
            catalog=catalog,
            model=policy.descriptor(),
            sampling=Sampling.of(1.0, 1.0, 12),
            local_rounds=[part],
        )

    def all_correct(batch):  # every completion claimed right
        rounds = [
            lr.model_copy(
                update={
                    "items": [
                        Item(**{**i.model_dump(), "rewards": [10_000] * len(i.completions)})
                        for i in lr.items
                    ]
                }
            )
            for lr in batch.local_rounds
        ]
        return batch.model_copy(update={"local_rounds": rounds})

    # tasks drawn from someone else's seed (easy ones picked), relabelled as its own
    stolen = all_correct(honest(foreign.account_address, as_node=node.address))
    lie = all_correct(honest(inflated.account_address))  # its own tasks, answers claimed right
    for ledger, published in ((foreign, stolen), (inflated, lie)):
        _, digest = publish_batch(store, published)
        ledger.submit(round_, digest, published.rollouts, published.score, published.signal)
    never_pinned = honest(missing.account_address)
    missing.submit(
        round_,
        never_pinned.digest(),
        never_pinned.rollouts,
        never_pinned.score,
        never_pinned.signal or 1,
    )

    thread, stop = start(node)

    def verdicts() -> dict:
        return {
            v["node"]: v for v in node.journal.peers.peer_verdicts(round_) if v["round"] == round_
        }

    cheats = {c.account_address.lower() for c in (foreign, inflated, missing)}
    wait_until(lambda: cheats <= set(verdicts()), timeout_s=60, what="every cheat checked")
    wait_until(lambda: not node.journal.pending("attest"), timeout_s=60, what="attestations sent")

    def reported() -> bool:
        return node.ledger.submission(round_, missing.account_address).unavailable == 1

    wait_until(reported, timeout_s=90, what="the never-pinned batch voted unavailable")
    finish(thread, stop)
    found = verdicts()
    bad = found[foreign.account_address.lower()]
    assert bad["verdict"] == "bad" and "not the seed's task" in bad["reason"]
    wrong = found[inflated.account_address.lower()]
    assert wrong["verdict"] == "verified" and wrong["recomputed"] < wrong["claimed"]
    gone = found[missing.account_address.lower()]
    assert gone["verdict"] == "unavailable" and "not dialled" in gone["reason"], gone
    attested = {
        e.args["node"].lower(): e.args
        for e in EventReader(node.ledger).read(["Attested"], round=round_)
        if e.args["attester"].lower() == node.address.lower()
    }
    assert attested[foreign.account_address.lower()]["score"] == 0
    assert attested[inflated.account_address.lower()]["score"] == wrong["recomputed"]
    assert not attested[inflated.account_address.lower()]["agrees"]
    assert missing.account_address.lower() not in attested  # unavailable: no attestation...
    gone_on_chain = node.ledger.submission(round_, missing.account_address)
    assert (gone_on_chain.unavailable, gone_on_chain.credited) == (1, 0)  # ...but a vote
    voters = EventReader(node.ledger).read(["Unavailable"], round=round_)
    assert [e.args["attester"].lower() for e in voters] == [node.address.lower()]
    assert found[missing.account_address.lower()]["failures"] >= 2
    for cheat in (foreign, inflated):
        info = node.ledger.submission(round_, cheat.account_address)
        assert info.dispute_seats > 0 and info.credited == 0, cheat.account_address
    # after the submission and challenge windows anyone may settle: a disputed one is slashed
    world["warp"].to(node.params, round_ + W + C + A + 1)
    for cheat in (foreign, inflated):
        stake = node.ledger.node_info(cheat.account_address).active_stake
        node.ledger.settle(round_, cheat.account_address)
        after = node.ledger.node_info(cheat.account_address).active_stake
        assert after == stake - stake * node.params.slash_bps // 10_000 < stake
    stake = node.ledger.node_info(missing.account_address).active_stake
    node.ledger.settle(round_, missing.account_address)  # unavailable: not slashed
    assert node.ledger.node_info(missing.account_address).active_stake == stake


def test_a_producer_whose_batches_never_come_holds_one_fetch_worker(world) -> None:
    """A producer with a batch open in three rounds, none of them pinned anywhere (each fetch
    ends at its time-outs), holds at most `[store].fetches_per_producer` of the node's fetch
    workers at once; its batches are all tried, one after the other."""
    dead = {"id": "12D3KooWMc5B3DpRBc8mPmZrC3cMXpjDYCV1mQynS2GnE3jgSv2h", "addresses": []}
    slow = cheater(world, json.dumps({"model": "cheat", "ipfs": dead}))
    node = open_node(
        with_sections(gated_config(world, 0), store={"fetches_per_producer": 1}),
        clock=world["warp"].clock,
    )
    now = next_round(world, node)
    while now < 2:
        now = next_round(world, node)
    rounds = [now - 2, now - 1, now]  # all still accepted (W = 2), all open to attestation
    for r in rounds:
        slow.submit(r, f"0x{r + 1:064x}", 8, 40_000, 20_000)
    who = slow.account_address.lower()
    seen: list[int] = []
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            seen.append(node.intake.in_flight().get(who, 0))
            sampling.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    thread, stop = start(node)
    try:

        def tried() -> set[int]:
            verdicts = node.journal.peers.peer_verdicts(rounds[0])
            return {v["round"] for v in verdicts if v["node"] == who}

        wait_until(lambda: tried() == set(rounds), timeout_s=120, what="every batch tried")
    finally:
        sampling.set()
        sampler.join()
        finish(thread, stop)
    assert max(seen) == 1, "one producer held more than its quota of fetch workers"


def test_rounds_per_update_gathers_local_rounds_into_one_step(world) -> None:
    # not a fault: a training knob, checked here on the same devnet (a real local-round loop)
    node = open_node(
        with_sections(gated_config(world, 1), train={"rounds_per_update": 2}),
        clock=world["warp"].clock,
    )
    steps = node.steps
    first = next_round(world, node)
    thread, stop = start(node)
    wait_until(lambda: played(node, first), what="two local rounds")
    next_round(world, node)
    wait_until(lambda: played(node, first + 1), what="two more")
    finish(thread, stop)
    local = [m for r, _, m in node.journal.all_metrics() if first <= r <= first + 1]
    assert [m["gathered_rounds"] for m in local[:4]] == [1, 0, 1, 0], local
    assert all(m["loss"] is None for m in local[:4:2]), "no step before the second local round"
    assert "gathering (1/2 local rounds)" in next(
        e["message"]
        for e in read_events(node.events.path)
        if e["kind"] == Event.LOCAL_ROUND and e["round"] == first
    )
    with_signal = sum(
        1
        for a, b in zip(local[:4:2], local[1:4:2], strict=True)
        if a["local_items"] + a["external_items"] + b["local_items"] + b["external_items"]
    )
    assert node.steps - steps == with_signal, "one step per two local rounds with signal"


def test_a_node_stores_its_own_beacon_and_settles_its_own_submission(world) -> None:
    """No vote stores the beacon (node 1 is not running): 128 blocks on, node 0 stores its own
    (`drawBeacon`), so that it cannot lapse and its batch stays checkable; once the round is
    final, node 0 settles its submission itself (its stake could not leave otherwise)."""
    node = open_node(load_config(world["swarm"].node_configs[0]), clock=world["warp"].clock)
    first = next_round(world, node)
    thread, stop = start(node)
    key = f"draw:{first}:{node.address}"
    try:
        wait_until(lambda: played(node, first), what="two local rounds")
        next_round(world, node)  # the batch is sealed and submitted; its beacon comes a block on
        wait_until(lambda: key in outbox(node), what="the beacon's storing queued")
        beacon = node.ledger.beacon(first, node.address)
        assert beacon.ready and not beacon.drawn and outbox(node)[key][0] == "pending"
        # 130 blocks in one go, at the same timestamp (the round does not move)
        rpc_call(world["anvil"].url, "anvil_mine", [hex(130), hex(0)])
        wait_until(lambda: outbox(node)[key][0] == "done", what="the beacon stored")
        assert node.ledger.node_info(node.address).unsettled >= 1
        assert outbox(node)[f"settle:{first}"][0] == "pending"  # until the round is final
        world["warp"].to(node.params, first + W + C + A + 1, 0.05)
        wait_until(lambda: outbox(node)[f"settle:{first}"][0] == "done", what="settled by itself")
    finally:
        finish(thread, stop)
    assert node.ledger.submission(first, node.address).settled
    beacon = node.ledger.beacon(first, node.address)
    assert beacon.drawn and not beacon.lapsed(node.ledger.head() + 1_000)
    events = read_events(node.events.path)
    # (it also stored the beacons of its batches of earlier tests, and of those it was drawn
    # to check, that nobody had voted on: the same 130 blocks passed for them)
    mine = [e for e in events if e.get("node") == node.address]
    drawn = [e["round"] for e in mine if e["kind"] == str(Event.BEACON_DRAWN)]
    settled = [e for e in mine if e["kind"] == str(Event.ROUND_SETTLED) and e["round"] == first]
    assert drawn.count(first) == 1 and len(settled) == 1 and not settled[0]["disputed"]


def test_a_running_node_unpins_what_is_older_than_retain_rounds(world) -> None:
    """`[store].retain_rounds` used to be read by nothing: a node kept every batch forever."""
    base = with_sections(
        world["base"],
        ledger={"challenge_rounds": 1, "submit_rounds": 1, "unbonding_period_s": 6 * ROUND_S},
        store={"retain_rounds": 3},
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
    with pytest.raises(NodeConfigError, match=r"retain_rounds \(2\) must exceed .*\(2 rounds\)"):
        open_node(with_sections(cfg, store={"retain_rounds": 2}))
    node = open_node(cfg, clock=world["warp"].clock)
    first = next_round(world, node)
    thread, stop = start(node)
    for round_ in range(first, first + 6):
        wait_until(lambda r=round_: played(node, r), what=f"round {round_}'s local rounds")
        next_round(world, node)
    last = first + 5
    wait_until(
        lambda: (r := node.journal.round(last)) is not None and r.cid is not None,
        what="the last batch pinned",
    )
    wait_until(
        lambda: node.journal.round(last - 3).cid not in node.store.pins.all(),
        what="the oldest batches unpinned",
    )
    finish(thread, stop)
    pinned = {r.round: r.cid for r in node.journal.rounds() if r.cid}
    import ipfshttpclient
    from multiformats import CID

    daemon = ipfshttpclient.Client(world["daemon"].api, timeout=10)
    # js-ipfs lists CIDv1 in base58btc (zb2…): compare what they name, not how they are spelt
    on_daemon = {
        str(CID.decode(k).set(base="base32")) for k in daemon.pin.ls(type="recursive")["Keys"]
    }
    index = node.store.pins.all()
    unpinned = [e for e in read_events(node.events.path) if e["kind"] == Event.STORE_UNPINNED]
    current = max(e["round"] for e in unpinned)  # the round of the last retention pass
    for round_, cid in pinned.items():
        kept = round_ >= current - 3  # gc(current, 3) keeps rounds current-3 .. current
        assert (cid in index) == kept, f"round {round_} (now {current}): pin index {cid in index}"
        assert (cid in on_daemon) == kept, f"round {round_} (now {current}): daemon pin {cid}"
    # every batch older than the window was unpinned by a pass, and none in it; a pass also
    # unpins the checkpoints pinned for an old round (the local rounds its beacon opened for the
    # checkers: a chunk and a manifest each, when the beacon came in time, which a loaded
    # machine decides)
    gone = {cid for e in unpinned for cid in e["cids"]}
    assert {cid for r, cid in pinned.items() if r < current - 3} <= gone
    assert not gone & {cid for r, cid in pinned.items() if r >= current - 3}
    # The journal forgets peers' rows once no window can judge them (votes are judged until
    # W + 2C + A = 5 rounds after the batch's round here, later than retain_rounds' 3), keeping
    # their counts. This node has no peer, so a peer's rows are written here, as the intake
    # writes them, for the rounds either side of that horizon.
    from client.node.journal.peers import PeerSubmission
    from client.node.journal.states import Verdict

    now = node.ledger.current_round()
    horizon = now - 5
    peers = node.journal.peers
    for round_ in (horizon - 1, horizon):
        sub = PeerSubmission(
            round=round_, node="0xfeed", digest="0xd", rollouts=1, score=0, signal=0
        )
        peers.discovered([sub], next_block=peers.event_cursor() or 0)
        peers.peer_batch(round_, "0xfeed", "0xd", Verdict.BAD, findings=1)
    node.publisher.upkeep.prune_journal(now)
    assert [(v["round"], v["verdict"]) for v in peers.peer_verdicts() if v["node"] == "0xfeed"] == [
        (horizon, "bad")
    ]
    assert [s.round for s in peers.peer_submissions(0) if s.node == "0xfeed"] == [horizon]
    assert peers.per_peer()["0xfeed"] == {"used": 0, "bad": 2, "unavailable": 0}


def test_a_stage_that_dies_stops_the_node_and_says_why(world) -> None:
    """Fail-stop: a node whose intake died would go on training without learning or voting,
    and its peers' batches would go unchecked (attack-table run 5 met it). A real fault no stage
    handles, the journal's table of peer submissions dropped under the node, must stop it."""
    import sqlite3

    from client.node.node import StageFailed

    node = open_node(load_config(world["swarm"].node_configs[1]), clock=world["warp"].clock)
    with sqlite3.connect(node.journal.path) as db:
        db.execute("DROP TABLE peer_submissions")
    failures: list[StageFailed] = []

    def run(stop: threading.Event) -> None:
        try:
            node.run(stop)
        except StageFailed as exc:
            failures.append(exc)

    stop = threading.Event()
    thread = threading.Thread(target=run, args=(stop,))
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the node went on without its intake"
    assert failures and "intake stage failed" in str(failures[0]), failures
    assert "no such table: peer_submissions" in str(failures[0])
    events = read_events(node.events.path)
    errors = [e for e in events if e["kind"] == Event.NODE_ERROR]
    assert errors and errors[-1]["stage"] == "intake"
    assert Event.NODE_STOPPED in [e["kind"] for e in events]  # it shut down in order
