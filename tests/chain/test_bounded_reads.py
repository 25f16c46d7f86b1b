"""Reads that follow what they ask about, not the ledger's age: a report on some rounds reads the
blocks of those rounds, and the TUI's view of the ledger starts a window back, not at the deploy
block. The chain is a real anvil; what a read asked the chain is recorded from the JSON-RPC
requests its own web3 session sent."""

from __future__ import annotations

import json
from pathlib import Path

import requests
from eth_account import Account
from typer.testing import CliRunner
from web3 import Web3

from client.chain import Ledger
from client.chain.audit import Auditor
from client.chain.events import EventReader
from client.cli.main import app
from client.node.intake.discovery import discover, window_start
from client.node.journal import Journal
from client.node.view.ledger import LedgerView
from tests.harness.ledger_swarm import ETH, Swarm, digest

PASSWORD = "correct horse battery staple"


class LogRanges(requests.Session):
    """A requests session that records the block range of every eth_getLogs it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: list[tuple[int, int]] = []

    def post(self, url, *args, **kwargs):  # type: ignore[override]
        body = kwargs.get("data") or b""
        calls = json.loads(body) if body else []
        for call in calls if isinstance(calls, list) else [calls]:
            if call.get("method") == "eth_getLogs":
                query = call["params"][0]
                self.ranges.append((int(query["fromBlock"], 16), int(query["toBlock"], 16)))
        return super().post(url, *args, **kwargs)


def watched(swarm: Swarm) -> tuple[Ledger, LogRanges]:
    session = LogRanges()
    w3 = Web3(Web3.HTTPProvider(swarm.url, session=session))
    return Ledger(w3, swarm.ledger.address), session


def play(swarm: Swarm, rounds: list[int]) -> tuple[list[Ledger], dict[int, int]]:
    """Three nodes submit in each of `rounds`; the third credits the first two's batches, the
    second's only in even rounds. Returns the nodes and each round's first block."""
    a, b, c = nodes = [swarm.node() for _ in range(3)]
    swarm.bind(swarm.deployer).fund(100 * ETH)
    first_block: dict[int, int] = {}
    for round_ in rounds:
        if round_:
            swarm.goto(round_)  # mines the round's first block
        first_block[round_] = swarm.w3.eth.block_number if round_ else 0
        for i, node in enumerate(nodes):
            node.submit(round_, digest(f"{round_}-{i}"), 8, 1_000 * (i + 1), 100 * (i + 1))
        swarm.await_beacon(round_)
        c.attest(round_, a.account_address, 1_000, 100)
        if round_ % 2 == 0:
            c.attest(round_, b.account_address, 2_000, 200)
    return nodes, first_block


def test_block_at_finds_the_first_block_of_a_round(swarm) -> None:
    """Bisecting block timestamps finds each round's first block, and the block after the head
    for a time no block has reached."""
    ledger = swarm.ledger
    params = swarm.bind(swarm.deployer).params()
    for round_ in (1, 2, 5):
        swarm.goto(round_)
        swarm.mine(3)
    head = ledger.head()
    for round_ in range(7):
        block = ledger.block_at(params.round_start(round_))
        if block <= head:
            assert ledger.block_time(block) >= params.round_start(round_)
        if 0 < block <= head + 1:
            assert ledger.block_time(block - 1) < params.round_start(round_)
    assert ledger.block_at(params.round_start(4)) == ledger.block_at(params.round_start(5))
    assert ledger.block_at(params.round_start(6)) == head + 1


def test_the_leaderboard_reads_only_the_blocks_of_its_rounds(swarm) -> None:
    """A leaderboard of recent rounds asks the chain for the logs of those rounds' blocks, not
    for any block of the ledger's early rounds, and ranks what the ledger credited there; a
    range over every round ranks every round; each row says what its node was paid."""
    (a, b, c), first_block = play(swarm, [0, 1, 40, 41])
    params = a.params()
    swarm.goto(params.final_after(41) + 1)
    a.claim([40])
    ledger, session = watched(swarm)
    auditor = Auditor(ledger, EventReader(ledger, start_block=swarm.deploy_tx.block_number))

    recent = auditor.leaderboard(40, 41)
    assert session.ranges and min(low for low, _ in session.ranges) >= first_block[40]
    rows = {r.node: r for r in recent}
    assert rows[a.account_address].submissions == 2
    assert rows[a.account_address].credited == 200
    assert rows[b.account_address].credited == 200  # round 40's, not 41's
    assert rows[b.account_address].uncredited == 1
    assert rows[a.account_address].paid == a.node_info(a.account_address).total_paid > 0
    assert recent[-1].node == c.account_address and recent[-1].credited == 0

    every = {r.node: r for r in auditor.leaderboard(0, 41)}
    assert every[a.account_address].submissions == 4
    assert every[a.account_address].credited == 400
    assert every[b.account_address].credited == 400
    assert auditor.leaderboard(42, 41) == []


def test_the_cli_leaderboard_ranks_the_last_day_of_rounds_by_default(swarm, tmp_path: Path) -> None:
    """`sapo audit leaderboard` with no range ranks the rounds of the last day (1,000-s rounds:
    87 of them) and says which; --from 0 ranks every round."""
    (a, _, _), _ = play(swarm, [0, 200])
    account = Account.create()
    keystore = tmp_path / "k.json"
    keystore.write_text(
        json.dumps(Account.encrypt(account.key, PASSWORD, kdf="scrypt", iterations=2**10))
    )
    config = tmp_path / "node.toml"
    config.write_text(
        f'[chain]\nrpc_url = "{swarm.url}"\nchain_id = 31337\n'
        f'ledger_address = "{swarm.ledger.address}"\nkeystore = "{keystore.name}"\n'
    )
    cli = CliRunner()
    args = ["audit", "leaderboard", "--config", str(config)]
    result = cli.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    board = json.loads(result.output)
    current = a.current_round()
    assert (board["from"], board["to"]) == (current - 86, current)
    assert [r["submissions"] for r in board["nodes"]] == [1, 1, 1]
    result = cli.invoke(app, [*args, "--from", "0", "--json"])
    assert [r["submissions"] for r in json.loads(result.output)["nodes"]] == [2, 2, 2]
    result = cli.invoke(app, args)
    assert result.exit_code == 0 and f"rounds {current - 86}-{current}" in result.output


def test_the_view_starts_a_window_back_and_says_since_when(swarm) -> None:
    """A view given a lookback reads from the first block of the round that many rounds back:
    our rounds in the window are whole (their credit and votes), the peers' totals count since
    that round, and nothing of the early rounds is asked for."""
    (a, b, _), first_block = play(swarm, [0, 1, 2, 30, 31, 32])
    ledger, session = watched(swarm)
    clock, lookback = swarm.now, 3
    view = LedgerView(
        ledger,
        a.account_address,
        start_block=swarm.deploy_tx.block_number,
        keep_rounds=lookback,
        lookback_rounds=lookback,
        clock=clock,
    )
    view.refresh()
    current = a.params().round_at(clock())
    assert view.since_round == current - lookback
    assert min(low for low, _ in session.ranges) == first_block[30]
    assert set(view.our_submissions()) == {30, 31, 32}
    assert all(credited for _, credited in view.our_submissions().values())
    assert view.our_votes(31) == (1, 0, 0)
    row = {p.address: p for p in view.peers({})}[b.account_address]
    assert row.submissions == 3 and row.credited == 400  # rounds 30 and 32 (even)

    from_deploy = LedgerView(ledger, a.account_address, start_block=swarm.deploy_tx.block_number)
    from_deploy.refresh()
    assert from_deploy.since_round is None
    row = {p.address: p for p in from_deploy.peers({})}[b.account_address]
    assert row.submissions == 6 and row.credited == 800


def test_a_first_start_discovers_from_the_oldest_round_it_keeps(swarm, tmp_path: Path) -> None:
    """A node's first discovery on an old ledger starts at the first block of the oldest round
    it keeps peers' batches of, not at the deploy block: it journals the peers' recent
    submissions and asks for no log of the early rounds; a restart goes on from its cursor."""
    (a, b, c), first_block = play(swarm, [0, 1, 30, 31])
    ledger, session = watched(swarm)
    params = a.params()
    current = params.round_at(swarm.now())
    retain = 1
    first = params.first_kept(current, retain)
    assert 1 < first <= 30
    reader = EventReader(ledger, start_block=swarm.deploy_tx.block_number)
    journal = Journal(tmp_path / "journal.sqlite")

    def start() -> int:
        return window_start(ledger, params, current, retain, reader.start_block)

    me = a.account_address.lower()
    discover(reader, journal, me, start)
    assert min(low for low, _ in session.ranges) == first_block[30]
    found = {(s.round, s.node) for s in journal.peers.peer_submissions(0)}
    peers = {b.account_address.lower(), c.account_address.lower()}
    assert found == {(r, p) for r in (30, 31) for p in peers}
    session.ranges.clear()
    swarm.mine(2)
    discover(reader, journal, me, start)
    assert min(low for low, _ in session.ranges) > first_block[31]
    journal.close()
