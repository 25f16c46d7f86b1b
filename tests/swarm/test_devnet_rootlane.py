"""A devnet in the root lane (`sapo devnet up --root-lane`): anvil, the ledger deployed with its
round book, an aggregator (`sapo aggregate run`, a registered node of its own with its own
js-ipfs daemon) and three real training nodes, each with its own daemon, that submit their
batches to the aggregator and vote on each other's off chain; beside them, four light nodes
(`--light 4`: staked identities in a family of their own that sign a submission and their seat
votes every round, client.devnet.light), sent to the same aggregator.

What an operator would notice: every node's batch, and the light nodes', is credited in one
verdict root of the book, which `sapo devnet status` counts; no node, light or real, sends a
transaction to the ledger after registering (its submissions and votes travel to the
aggregator, and the aggregator draws the beacons it needs before any producer's own delay runs
out); `sapo audit book` finds no lie in a round that credits them all; each real node relays its
receipted votes to the producers it checks over libp2p pubsub, and keeps those its own checkers
relay; an aggregator that lies ([devnet].aggregator_lies, each once, about a real node) is
caught by the real nodes and pays for it: the receipted quorum it drops is proven by the
producer with the votes relayed to it, the vote it signs with a seatless key by a producer of the
round, the verdict list it withholds by a producer's data challenge, the receipted submission
it leaves out of a submission root by its producer, the round it receipted and never posted by
a producer with its receipt (its roster bond), and the submission it
censors goes on the ledger (force inclusion), where the other real nodes vote on it; a light
node that signs two votes on one
batch ([devnet].light_equivocators) is proven by the aggregator and slashed by the ledger, once;
and the devnet killed hard (SIGKILL) takes every part along, its aggregator and the aggregator's
IPFS daemon too.

Short windows (W = 1, C = 2: a round's verdict root is posted 5 rounds later) and 10-s rounds
keep the wait near a minute."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from client.chain import Ledger, connect
from client.chain.artifacts import selectors
from client.chain.book import RoundBook
from client.chain.events import EventReader
from client.config import load_config
from client.node.aggregation.claims import Claimant
from client.node.eventlog import read_events
from client.pids import pid_alive
from client.store import open_store
from tests.harness.devnets import MECHANICS_ENV, start_mechanics_devnet, stop_devnet
from tests.harness.policies import cached_seed_test
from tests.harness.processes import sapo_run, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROUND_S = 10
# one light node signs a second, different vote on the first batch it is seated on
ENV = MECHANICS_ENV | {
    "SAPO_LEDGER__SUBMIT_ROUNDS": "1",
    "SAPO_LEDGER__CHALLENGE_ROUNDS": "2",
    "SAPO_DEVNET__LIGHT_EQUIVOCATORS": "1",
    # the aggregator tells each lie once, about a real node (client.devnet.liar)
    "SAPO_DEVNET__AGGREGATOR_LIES": json.dumps(
        ["withhold", "drop-quorum", "invent-signer", "leave-out", "censor", "abandon"]
    ),
}


FUNCTIONS = selectors("SwarmLedger")  # the ledger's functions by selector
LIGHT = 4  # light nodes: one family of 4, each batch's checkers the other 3 (Q = 2)


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    data_dir = tmp_path_factory.mktemp("rootlane")
    env = ENV | {"SAPO_POLICY__CACHE_DIR": str(cached_seed_test(seed_test, data_dir / "cache"))}
    proc, state = start_mechanics_devnet(
        data_dir / "devnet", 3, ROUND_S, "--root-lane", "--light", str(LIGHT), env=env
    )
    yield proc, state, env
    if proc.poll() is None:
        stop_devnet(proc)


def book_reader(state: dict) -> Claimant:
    """What reads the book's verdict lists as `devnet status` reads them."""
    cfg = load_config(Path(state["config"]))
    ledger = Ledger(connect(state["rpc_url"]), state["ledger"])
    book = RoundBook(ledger.w3, state["aggregator"]["book"])
    return Claimant(ledger, book, open_store(cfg.store), allow_private_peers=True)


def test_every_node_is_credited_through_the_book_and_sends_nothing_to_the_ledger(devnet) -> None:
    proc, state, env = devnet
    addresses = {n["address"].lower() for n in state["nodes"]}
    aggregator = state["aggregator"]
    assert aggregator["address"].lower() not in addresses
    roster = json.loads(Path(state["light"]["roster"]).read_text())
    lights = {a.lower() for a in roster["addresses"]}
    assert len(lights) == LIGHT and not lights & (addresses | {aggregator["address"].lower()})
    found: dict[str, int] = {}
    reader = book_reader(state)

    def all_credited() -> bool:
        """A verdict root credits every node's batch and every light node's, and some real
        node's credit carries learning signal (a batch whose groups all scored alike is credited
        0: a seed policy's first often is)."""
        # a list not fetched yet, or withheld (`withhold`), is skipped; a void root credits none
        rounds = reader.credits(0, reader.ledger.current_round(), unreadable=[])
        real = [
            c for credits in rounds.values() for c in credits if c.producer.lower() in addresses
        ]
        if not any(c.signal for c in real):
            return False
        for q, credits in rounds.items():
            if {c.producer.lower() for c in credits} == addresses | lights:
                found["round"] = q
                return True
        return False

    wait_until(all_credited, timeout_s=ROUND_S * 16 + 120, what="a verdict root crediting all")

    # the aggregator censored one real node's submission of one round (`censor`): that node,
    # with no receipt by the window's last round, submitted it on the ledger (force inclusion),
    # the one submission the ledger holds; the book credits it nowhere in that round
    ledger_events = EventReader(reader.ledger)
    escalated = {(e.args["round"], e.args["node"]) for e in ledger_events.read(["Escalated"])}
    # (a round whose draw ran while the liar was off the roster, `abandon` proven and before it
    # enlisted again, has no aggregator: its batches go on the ledger, as they should)
    current = reader.ledger.current_round()
    nobody = {r for r in range(current + 1) if reader.book.drawn(r).drawn} - {
        r for r in range(current + 1) if reader.book.drawn(r).aggregator
    }
    forced = [
        e
        for e in ledger_events.read(["Submitted"])
        if (e.args["round"], e.args["node"]) not in escalated and e.args["round"] not in nobody
    ]
    data_dir = {n["address"].lower(): Path(n["data_dir"]) for n in state["nodes"]}

    def why_unsent(node: str, round_: int) -> list[str]:
        said = read_events(data_dir[node] / "events.jsonl")
        return [
            e["message"]
            for e in said
            if e["kind"] == "rootlane.unsent" and e["round"] == round_ and "ledger" in e["message"]
        ]

    # the censored batch: its node was refused by the liar until the window's last round. On a
    # loaded machine a real node may seal so late that its one try falls in that last round
    # and finds the endpoint busy (a full-suite run saw "not reachable"): it takes the escape
    # hatch too, as it should
    late = {}
    for e in forced:
        node, round_ = e.args["node"].lower(), int(e.args["round"])
        assert node in addresses, e.args
        reasons = why_unsent(node, round_)
        assert any("in the window's last round" in m for m in reasons), (node, round_, reasons)
        if not any("refused it" in m for m in reasons):
            late[node] = round_
    [(censored, censored_round)] = [
        (e.args["node"].lower(), int(e.args["round"]))
        for e in forced
        if e.args["node"].lower() not in late or late[e.args["node"].lower()] != e.args["round"]
    ]
    credited = reader.credits(0, reader.ledger.current_round(), unreadable=[])
    assert censored not in {c.producer.lower() for c in credited.get(censored_round, [])}

    # no light node sent the ledger anything but its registration; no real node anything but its
    # registration and the censored batch's submission and votes (the escape hatch): no other
    # submission, no other vote
    w3 = connect(state["rpc_url"])
    ledger = state["ledger"].lower()
    sent, escaped = [], []
    for n in range(w3.eth.block_number + 1):
        for tx in w3.eth.get_block(n, full_transactions=True).transactions:
            if tx["from"].lower() in addresses | lights and (tx["to"] or "").lower() == ledger:
                name = FUNCTIONS.get(bytes(tx.input[:4]), "?")
                if name == "register":
                    sent.append(name)
                    continue
                _, args = reader.ledger.contract.decode_function_input(tx.input)
                rounds = set(args["roundList"]) if "roundList" in args else {args.get("round")}
                escaped.append((tx["from"].lower(), name, rounds))
    assert sent == ["register"] * (len(addresses) + LIGHT), sent
    escaped = [x for x in escaped if not x[2] <= nobody]
    allowed = {censored_round, *late.values()}
    assert all(who in addresses and rounds <= allowed for who, _, rounds in escaped), escaped
    submitted = sorted(who for who, name, _ in escaped if name == "submit")
    assert submitted == sorted([censored, *late]), escaped

    # a real node reads the whole list but journals only its own family's entries: the other
    # real nodes' batches, none of the light nodes'
    node = state["nodes"][0]
    with sqlite3.connect(f"file:{node['data_dir']}/journal.sqlite?mode=ro", uri=True) as db:
        peers = {n for (n,) in db.execute("SELECT DISTINCT node FROM peer_submissions")}
    assert peers == addresses - {node["address"].lower()}, peers

    # the real nodes relay their receipted votes to each other's producers over their daemons'
    # pubsub ([root_lane].relay_votes, on in a devnet's root lane): each producer keeps its
    # seated checkers' votes, what proves a quorum an aggregator drops (none is dropped here)
    def relayed() -> dict[str, tuple[int, int]]:
        counts = {}
        for n in state["nodes"]:
            path = f"file:{n['data_dir']}/journal.sqlite?mode=ro"
            with sqlite3.connect(path, uri=True) as db:
                [(sent,)] = db.execute(
                    "SELECT COUNT(*) FROM outbox WHERE kind = 'relay' AND status = 'done'"
                )
                [(kept,)] = db.execute("SELECT COUNT(*) FROM relayed_votes")
            counts[n["address"]] = (sent, kept)
        return counts

    deadline = time.monotonic() + ROUND_S * 6
    while not all(sent and kept for sent, kept in relayed().values()):
        assert time.monotonic() < deadline, f"(relays sent, votes kept) per node: {relayed()}"
        time.sleep(1)

    # the aggregator's lies, each in a round of its own, each proven by a real node,
    # which took half the round's bond: the credit it left out although it receipted its
    # checkers' quorum (drop-quorum: the producer, with the votes they relayed to it), the vote
    # signed by a key with no seat (invent-signer: a producer of the round, from its audit), the
    # verdict list never published (withhold: a producer's data challenge, claimed unanswered);
    # and the receipted submission it left out of a submission root (leave-out: the producer)
    book_events = EventReader(reader.book)
    lies = {
        "a receipted quorum left uncredited",
        "a vote from a node without a seat",
        "data withheld",
        "a receipted submission left out",
    }

    def proven() -> dict[str, dict]:
        return {str(e.args["what"]): dict(e.args) for e in book_events.read(["LieProven"])}

    wait_until(lambda: set(proven()) == lies, timeout_s=ROUND_S * 12, what="the lies proven")
    assert len(list(book_events.read(["LieProven"]))) == len(lies)
    assert len({lie["round"] for lie in proven().values()}) == len(lies)
    for what, lie in proven().items():
        assert lie["aggregator"].lower() == aggregator["address"].lower(), lie
        prover = lie["prover"].lower()
        assert prover in addresses, lie
        assert reader.book.round_of(lie["round"]).void, lie
        [prover_node] = [n for n in state["nodes"] if n["address"].lower() == prover]
        said = read_events(Path(prover_node["data_dir"]) / "events.jsonl")
        assert lie["round"] in [e["round"] for e in said if e["kind"] == "rootlane.proven"], what
    assert all_credited()  # read again: a root it credited them all in may have been a lie
    round_ = found["round"]

    # the round it abandoned (`abandon`: receipted a real node's submission, posted no root) is
    # proven by a real producer of it with its receipt: the liar's roster bond, half to it, the
    # liar off the roster; it enlisted again, with a new bond, and went on
    draw = reader.book.aggregators()
    wait_until(
        lambda: draw.events.UnpostedProven().get_logs(from_block=0),
        timeout_s=ROUND_S * 4,
        what="the abandoned round proven",
    )
    [unposted] = draw.events.UnpostedProven().get_logs(from_block=0)
    abandoned, prover = int(unposted.args["round"]), unposted.args["prover"].lower()
    assert unposted.args["aggregator"].lower() == aggregator["address"].lower()
    assert prover in addresses and not reader.book.round_of(abandoned).posted
    [prover_node] = [n for n in state["nodes"] if n["address"].lower() == prover]
    said = read_events(Path(prover_node["data_dir"]) / "events.jsonl")
    assert any(
        e["kind"] == "rootlane.proven" and e.get("lie") == "a receipted round left unposted"
        for e in said
    )
    assert abandoned not in {lie["round"] for lie in proven().values()}
    wait_until(
        lambda: reader.book.enlisted(aggregator["address"]),
        timeout_s=ROUND_S,
        what="the liar enlisted again",
    )

    # the equivocating light node's second vote was kept as evidence and proven on chain by the
    # aggregator: the ledger slashed it its stake's slash share, once
    equivocator = roster["addresses"][0]
    events = EventReader(reader.ledger)

    def slashes() -> list[int]:
        return [int(e.args["amount"]) for e in events.read(["Slashed"], node=equivocator)]

    wait_until(lambda: slashes(), timeout_s=ROUND_S * 4, what="the light equivocator slashed")
    params = reader.ledger.params()
    assert slashes() == [params.min_stake * params.slash_bps // 10_000]
    status = sapo_run("devnet", "status", "--data-dir", state["data_dir"], "--json", env=env)
    assert status.returncode == 0, status.stderr
    view = json.loads(status.stdout)
    assert view["book"] == aggregator["book"] and view["aggregator"]["running"]
    # it names what was proven on the book: each lie, by whom; the light equivocator's slash
    told = {p["what"]: p["prover"].lower() for p in view["aggregator"]["lies_proven"]}
    assert told == {
        **{what: lie["prover"].lower() for what, lie in proven().items()},
        "a receipted round left unposted": prover,
    }
    doubles = view["aggregator"]["equivocations_proven"]
    assert [(p["signer"].lower(), p["what"]) for p in doubles] == [
        (equivocator.lower(), "voted twice")
    ]
    rows = {r["address"].lower(): r for r in view["nodes"]}
    assert set(rows) == addresses
    # all of it in the book, but the censored batch's (and any of a round drawn to nobody)
    on_ledger = {e.args["node"].lower() for e in ledger_events.read(["Submitted"])}
    for address, row in rows.items():
        if address != censored and address not in on_ledger:
            assert row["credited"] == row["credited_in_book"], row
    assert sum(r["credited_in_book"] for r in rows.values()) > 0
    assert view["book_unreadable_rounds"] == []
    light = view["light"]
    assert light["count"] == LIGHT and light["running"] and light["credited_nodes"] == LIGHT
    assert light["refused"] == 0 and light["submitted"] >= LIGHT and light["voted"] > 0
    assert light["problem"] is None, light
    assert light["credited_in_book"] > 0
    assert light["equivocated"] == 1, light  # kept as evidence, in its status

    audit = sapo_run("audit", "book", str(round_), "--config", state["config"], env=env)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    every = len(addresses) + LIGHT
    assert f"{every} submissions, {every} credits" in audit.stdout, audit.stdout
    assert "every rule the book proves holds" in audit.stdout, audit.stdout

    # a foreground devnet killed hard (SIGKILL: no Python code of its supervisor runs) takes
    # every part along: anvil, the nodes, every IPFS daemon, the aggregator, the light nodes
    parts = [state["anvil_pid"], aggregator["pid"], *(n["pid"] for n in state["nodes"])]
    parts += [state["light"]["pid"], *(d["pid"] for d in state["ipfs"])]
    assert len(state["ipfs"]) == len(addresses) + 2  # one for the aggregator, one for the lights
    assert all(pid_alive(p) for p in parts)
    ps = sapo_run("devnet", "ps", "--json", env=env)
    assert state["data_dir"] in {d["data_dir"] for d in json.loads(ps.stdout)["devnets"]}
    proc.kill()
    proc.wait(timeout=30)
    wait_until(
        lambda: not any(pid_alive(p) for p in parts),
        timeout_s=20,
        what="every part of the devnet to die with its supervisor",
    )
    status = sapo_run("devnet", "status", "--data-dir", state["data_dir"], env=env)
    assert status.returncode == 1 and "is not running" in status.stderr, status.stderr
