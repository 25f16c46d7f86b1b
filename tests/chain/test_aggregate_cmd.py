"""`sapo chain deploy-book` and `sapo aggregate run` as an operator runs them: real processes
against a real anvil and a real js-ipfs daemon. The book is deployed as the ledger names it (by
the account whose next creation the ledger named; any other account is refused); the
aggregator lists its endpoint in its node's on-chain metadata, producers and checkers send their
signed messages there over HTTP, and it posts a round's submission root and verdict root on the
book's clock (the roots every auditor check holds against) and takes its bond back; killed
(SIGKILL) between the two roots and started again, it goes on with everything it had taken, and
SIGTERM stops it between passes (exit 0); `sapo aggregate resign` takes it off the roster of
aggregators it enlisted on."""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path

import pytest
from eth_account import Account

from client.chain.artifacts import load_artifact
from client.chain.keystore import write_keystore
from client.chain.messages import Domain
from client.chain.roots import SubmissionRoot, open_verdict_list
from client.devnet import rpc_call
from client.node.aggregation.endpoint import AggregatorClient
from client.node.aggregation.lists import fetch_list
from client.store import IpfsStore, digest_to_cid
from tests.harness.ledger_swarm import ETH, FAMILY, Swarm
from tests.harness.processes import sapo_process, sapo_run, wait_until
from tests.harness.roundbook import Book, K, Q, audit, seats, sign_submissions, signed_vote

pytestmark = pytest.mark.slow
PASSWORD = "aggregator test password"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(path: Path, swarm: Swarm, keystore: Path, api: str, port: int, book: str = ""):
    (path.parent / "password").write_text(PASSWORD)
    lines = [
        "[node]",
        f'data_dir = "{path.parent / "agg"}"',
        "[chain]",
        f'rpc_url = "{swarm.url}"',
        f'ledger_address = "{swarm.ledger.address}"',
        f'keystore = "{keystore}"',
        f'password_file = "{path.parent / "password"}"',
        "[store]",
        'backend = "ipfs"',
        f'ipfs_api = "{api}"',
        "[aggregator]",
        f'listen = "127.0.0.1:{port}"',
    ]
    if book:
        lines[7:7] = [f'round_book_address = "{book}"']
    path.write_text("\n".join(lines) + "\n")


def test_an_operator_deploys_a_book_and_runs_an_aggregator(chain, daemon, tmp_path) -> None:
    aggregator = Account.create()  # its first transaction creates the book the ledger names
    swarm = Swarm(chain, quorum=Q, checkers=K, book_from=aggregator.address)
    rpc_call(swarm.url, "anvil_setBalance", [aggregator.address, hex(100 * ETH)])
    nodes = [swarm.node(2 * ETH) for _ in range(7)]
    keystore = tmp_path / "aggregator.json"
    write_keystore(keystore, aggregator.key, PASSWORD)
    config = tmp_path / "aggregator.toml"
    port = free_port()
    write_config(config, swarm, keystore, daemon.api, port)

    # no book configured: a clear error, exit 2
    done = sapo_run("aggregate", "run", "--config", str(config))
    assert done.returncode == 2 and "round_book_address" in done.stderr

    # a challenge bond over the aggregator's would make a challenge cost more than a lie pays
    bad = sapo_run("chain", "deploy-book", "--config", str(config), "--challenge-bond", "2 ether")
    assert bad.returncode == 2 and "challenge bond above" in bad.stderr
    # a node's keystore: its next creation is not the book the ledger names
    other = tmp_path / "other.toml"
    write_keystore(tmp_path / "other.json", nodes[0].tx.account.key, PASSWORD)
    write_config(other, swarm, tmp_path / "other.json", daemon.api, port)
    refused = sapo_run("chain", "deploy-book", "--config", str(other))
    assert refused.returncode == 2 and "names the round book" in refused.stderr, refused.stderr
    deployed = sapo_run("chain", "deploy-book", "--config", str(config), "--json")
    assert deployed.returncode == 0, deployed.stderr
    address = json.loads(deployed.stdout)["address"]
    assert address == swarm.ledger.book()
    swarm.bind(aggregator).register('{"model":"test"}', 2 * ETH, FAMILY)  # a node of its own
    write_config(config, swarm, keystore, daemon.api, port, book=address)
    contract = swarm.w3.eth.contract(address=address, abi=load_artifact("RoundBook")["abi"])
    book = Book(swarm, contract, Domain(chain_id=swarm.w3.eth.chain_id, contract=address))
    book.send(swarm.deployer, "fund", value=ETH)

    proc = sapo_process("aggregate", "run", "--config", str(config))
    origin = f"http://127.0.0.1:{port}"
    client = AggregatorClient(origin, book.domain, aggregator=aggregator.address, timeout_s=2)

    def serving(round_: int | None = None) -> bool:
        """Whether the endpoint answers (and collects `round_`, if given)."""
        try:
            rounds = client.status()
        except Exception:
            return False
        return bool(rounds) if round_ is None else round_ in rounds

    wait_until(lambda: serving() or proc.poll() is not None, 120, "the endpoint")
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    listed = json.loads(swarm.ledger.node_info(aggregator.address).metadata)
    assert listed["aggregator"] == origin and listed["model"] == "test"  # the rest kept

    r = client.status()[-1]
    sent = sign_submissions(book, nodes[:4], r)
    answers = client.send(sent)
    assert all(a.receipt is not None for a in answers), answers
    swarm.goto(book.window("postRound", r))
    wait_until(lambda: book.view(r)[0] == aggregator.address, 60, "the submission root")
    assert book.view(r)[3] == SubmissionRoot(sent).root
    swarm.mine()
    wait_until(lambda: book.view(r)[7] != 0, 60, "the beacon")

    for signed in sent:
        held = seats(book, nodes, signed.signer, r)
        votes = [signed_vote(book, n, signed) for n in nodes if n.tx.account.address in held]
        assert all(a.refused is None for a in client.send(votes))

    # killed (SIGKILL: no chance to clean up) and started again, it has every vote it took
    proc.kill()
    proc.wait(timeout=60)
    proc = sapo_process("aggregate", "run", "--config", str(config))
    # it serves before its start has restored every round: wait for round r's
    wait_until(
        lambda: serving(r) or proc.poll() is not None, 120, "the endpoint again, with round r"
    )
    assert proc.poll() is None and r in client.status()  # its votes are still collected

    swarm.goto(book.window("verdictRound", r))
    wait_until(lambda: book.view(r)[4] != bytes(32), 60, "the verdict root")
    view = book.view(r)
    events = contract.events.VerdictsPosted().get_logs(from_block=0)
    store = IpfsStore(daemon.api, index_dir=tmp_path / "reader")
    data = fetch_list(
        store,
        digest_to_cid(events[-1].args["list"]),
        "verdicts",
        r,
        view[5],
        keep_round=None,
    )
    verdicts = open_verdict_list(data, view[4], view[5], view[6])
    assert {c.producer for c in verdicts.credits} == {s.signer for s in sent}
    assert audit(book, SubmissionRoot(sent), verdicts, round_=r) is None

    swarm.goto(book.window("challengeEnd", r) + 1)
    wait_until(lambda: book.view(r)[10], 60, "the bond's release")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    said = proc.stderr.read()  # the book's terms, before it enlists
    terms = said.find("a round's bond 1 ETH, its pay 100 bps of the round's reward")
    enlisted = said.find(f"aggregator {aggregator.address}: collecting at")
    assert -1 < terms < enlisted, said[-2000:]

    # the node leaves the roster: drawn no more (the only one enlisted: rounds of nobody)
    assert book.aggregators.functions.enlisted(aggregator.address).call()
    left = sapo_run("aggregate", "resign", "--config", str(config))
    assert left.returncode == 0 and "left the roster" in left.stdout, left.stderr
    assert not book.aggregators.functions.enlisted(aggregator.address).call()
    assert "is held through round" in left.stdout  # the proofs of its last drawn round
    held = book.aggregators.functions.heldUntil(aggregator.address).call()
    swarm.goto(held + 1)
    balance = swarm.w3.eth.get_balance(aggregator.address)
    back = sapo_run("aggregate", "resign", "--config", str(config))
    assert back.returncode == 0 and "came back" in back.stdout, back.stderr
    assert swarm.w3.eth.get_balance(aggregator.address) > balance + ETH * 9 // 10  # the bond
    again = sapo_run("aggregate", "resign", "--config", str(config))
    assert again.returncode == 2 and "is not on the round book's roster" in again.stderr
