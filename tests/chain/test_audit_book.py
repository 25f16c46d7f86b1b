"""`sapo audit book ROUND`: anyone audits a round of the root lane as an operator runs it, a real
process against a real anvil and a real js-ipfs daemon holding the round's published lists. An
honest round holds (exit 0); a lie in it is named (exit 1) and, with --prove, proven on chain
from the auditor's own keystore (the round void, half the bond to the auditor); a list that
cannot be fetched is asked for on chain only with --challenge, since a challenge bonds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from client.chain.keystore import write_keystore
from client.chain.roots import VerdictRoot, verdict_list
from client.node.aggregation.earnings import EarningsBook
from client.node.aggregation.lists import ListIndex, publish_list
from client.store import IpfsStore, cid_to_digest
from tests.harness.processes import sapo_process, sapo_run, wait_until
from tests.harness.roundbook import (
    balances,
    honest_round,
    open_book,
    post_verdicts,
    seats,
    stranger,
)

pytestmark = pytest.mark.slow
PASSWORD = "auditor test password"


@pytest.fixture
def world(chain, daemon, tmp_path):
    swarm, nodes, book = open_book(chain)
    store = IpfsStore(daemon.api, index_dir=tmp_path / "index")
    prover = stranger(book)
    keystore = tmp_path / "auditor.json"
    write_keystore(keystore, prover.key, PASSWORD)
    (tmp_path / "password").write_text(PASSWORD)
    config = tmp_path / "auditor.toml"
    config.write_text(
        "\n".join(
            [
                "[chain]",
                f'rpc_url = "{swarm.url}"',
                f'ledger_address = "{swarm.ledger.address}"',
                f'round_book_address = "{book.contract.address}"',
                f'keystore = "{keystore}"',
                f'password_file = "{tmp_path / "password"}"',
                "[store]",
                'backend = "ipfs"',
                f'ipfs_api = "{daemon.api}"',
            ]
        )
        + "\n"
    )

    def publish(kind: str, round_: int, data: bytes) -> bytes:
        return cid_to_digest(publish_list(store, kind, round_, data, keep_round=round_ + 100))

    return swarm, nodes, book, store, prover, config, publish


def audit_book(config: Path, round_: int, *flags: str):
    done = sapo_run("audit", "book", str(round_), "--config", str(config), "--json", *flags)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


def test_anyone_audits_a_round_and_proves_the_lie_it_finds(world) -> None:
    swarm, nodes, book, _, prover, config, publish = world
    r = swarm.ledger.current_round()
    aggregator, _, credits, votes = honest_round(book, nodes, r, publish=publish)
    honest = VerdictRoot(credits, votes=votes)
    post_verdicts(book, aggregator, honest, r, publish("verdicts", r, verdict_list(honest)))
    code, found = audit_book(config, r)
    assert code == 0, found
    assert found["finding"] is None and found["submissions"] == 4 and found["credits"] == 4
    assert found["lists"]["verdicts"].endswith("bytes")

    # the next round's aggregator inflates a credit's amount
    r2 = swarm.ledger.current_round() + 1
    aggregator, _, credits, votes = honest_round(book, nodes, r2, publish=publish)
    amounts = [c.signal for c in credits]
    amounts[1] *= 100
    lying = VerdictRoot(credits, amounts, votes=votes, presorted=True)
    post_verdicts(book, aggregator, lying, r2, publish("verdicts", r2, verdict_list(lying)))
    code, found = audit_book(config, r2)
    assert code == 1 and found["finding"]["what"] == "a credit's amount is not its signal"
    assert found["tx_hash"] is None and not book.view(r2)[9]  # named, not proven
    before = balances(book, prover.address)
    code, found = audit_book(config, r2, "--prove")
    assert code == 0 and found["tx_hash"], found
    assert book.view(r2)[9]  # the verdict root is void
    assert balances(book, prover.address)[1] > before[1]  # half the bond into the pool


def test_earnings_are_judged_against_every_credit_folded_from_the_rounds_before(world) -> None:
    """--earnings folds every credit of the standing rounds --since..ROUND - lag (each list
    fetched through IPFS by its posted digest) and judges every credit's earnings: a round whose
    earnings carry the credits before holds; one whose earnings leave them out is named only
    with --earnings (without, the lists alone show nothing wrong), and proven."""
    swarm, nodes, book, _, prover, config, publish = world
    lag = book.contract.functions.lag().call()
    r0 = swarm.ledger.current_round()
    aggregator, _, credits, votes = honest_round(book, nodes, r0, publish=publish)
    first = VerdictRoot(credits, votes=votes)
    post_verdicts(book, aggregator, first, r0, publish("verdicts", r0, verdict_list(first)))
    earned = EarningsBook(swarm.params.reward_per_round, lag, folded=r0 - 1)
    for q in range(r0, r0 + lag):  # round r0 is settled for round r0 + lag
        earned.fold(q, first if q == r0 else None, 0)
    r1 = r0 + lag
    earnings = lambda p: earned.earnings(p, r1)  # noqa: E731
    _, _, credits, votes = honest_round(book, nodes, r1, publish=publish, earnings=earnings)
    second = VerdictRoot(credits, votes=votes)
    assert all(c.earnings.anchor == r0 for c in second.credits)
    post_verdicts(book, aggregator, second, r1, publish("verdicts", r1, verdict_list(second)))
    code, found = audit_book(config, r1, "--earnings", "--since", str(r0))
    assert code == 0 and found["finding"] is None, found
    assert found["earnings_folded"] == [r0, r1 - lag]

    # a later round's aggregator leaves every earlier credit out of its credits' earnings
    r2 = swarm.ledger.current_round()
    _, _, credits, votes = honest_round(book, nodes, r2, publish=publish)
    skipping = VerdictRoot(credits, votes=votes)
    post_verdicts(book, aggregator, skipping, r2, publish("verdicts", r2, verdict_list(skipping)))
    code, found = audit_book(config, r2)
    assert code == 0 and found["earnings_folded"] is None, found  # the lists alone hold
    code, found = audit_book(config, r2, "--earnings", "--since", str(r0))
    assert code == 1 and found["finding"]["what"] == "earnings that skip a credit", found
    before = balances(book, prover.address)
    code, found = audit_book(config, r2, "--earnings", "--since", str(r0), "--prove")
    assert code == 0 and found["tx_hash"], found
    assert book.view(r2)[9]  # the verdict root is void
    assert balances(book, prover.address)[1] > before[1]  # half the bond into the pool
    code, said = audit_book(config, r2, "--since", str(r0))
    assert code == 2 and "--since goes with --earnings" in said
    code, said = audit_book(config, r2, "--earnings", "--since", str(r2))
    assert code == 2 and "no round is settled for round" in said


def test_a_list_nobody_can_fetch_is_asked_for_only_with_challenge(world) -> None:
    swarm, nodes, book, store, _, config, publish = world
    r = swarm.ledger.current_round()
    aggregator, _, credits, votes = honest_round(book, nodes, r, publish=publish)
    verdicts = VerdictRoot(credits, votes=votes)
    # its index published, its chunks never: the list cannot be had
    index, _ = ListIndex.of("verdicts", r, verdict_list(verdicts))
    withheld = cid_to_digest(store.put(index.encode(), r + 100))
    post_verdicts(book, aggregator, verdicts, r, withheld)
    code, found = audit_book(config, r, "--prove")
    assert code == 1 and found["finding"]["challenge"] and found["tx_hash"] is None
    assert found["lists"]["verdicts"].startswith("not fetched")
    assert book.view(r)[11] == 0  # nothing asked for without --challenge
    code, found = audit_book(config, r, "--prove", "--challenge")
    assert code == 0 and found["tx_hash"], found
    assert book.view(r)[11] == 1  # the aggregator must now post the leaf on chain


def test_a_checker_escalates_a_batch_it_disputes_from_the_published_list(world, tmp_path) -> None:
    """--escalate: a checker drawn on a batch's committee takes it to the ledger from the
    round's submission list (fetched by its posted digest, its place and path found there); a
    stranger without stake is refused by the ledger, an escalation without the checker's vote, a
    producer the list does not hold and a malformed address are named, and so is a round past
    its escalation window."""
    swarm, nodes, book, _, _, config, publish = world
    r = swarm.ledger.current_round()
    _, subs, _, _ = honest_round(book, nodes, r, publish=publish)  # the submission root posted
    producer = subs.signed[1].signer
    checker = next(n for n in nodes if n.tx.account.address in seats(book, nodes, producer, r))
    own = tmp_path / "checker.toml"
    write_keystore(tmp_path / "checker.json", checker.tx.account.key, PASSWORD)
    own.write_text(
        config.read_text().replace(str(tmp_path / "auditor.json"), str(tmp_path / "checker.json"))
    )
    signal = subs.signed[1].message.signal
    dispute = ("--score", "0", "--signal", str(signal), "--findings", "2")
    code, said = audit_book(config, r, "--escalate", producer, "--unavailable")  # the stranger's
    assert code != 0 and "StakeTooLow" in said, said
    code, said = audit_book(own, r, "--escalate", producer)
    assert code == 2 and "needs the checker's vote" in said, said
    code, said = audit_book(own, r, "--escalate", producer, "--score", "0")
    assert code == 2 and "both --score and --signal" in said, said
    code, said = audit_book(own, r, "--escalate", "0x" + "ab" * 20, *dispute)
    assert code == 2 and "holds no batch of" in said, said
    code, said = audit_book(own, r, "--escalate", "checker-7", "--unavailable")
    assert code == 2 and "is not an address" in said, said
    code, found = audit_book(own, r, "--escalate", producer, *dispute)
    assert code == 0 and found["tx_hash"] and found["index"] == 1, found
    assert found["vote"] == "dispute"
    voter = checker.tx.account.address
    assert swarm.ledger.vote_of(voter, r, producer)[0] == 2  # its dispute, recorded with it
    record = swarm.ledger.submission(r, producer)
    assert record.exists and record.digest == subs.signed[1].message.digest
    assert record.snapshot_block == book.view(r)[1]  # the book's committee, on the ledger
    # once the ledger's committee can no longer vote, no batch escalates: said before sending
    other = subs.signed[2].signer
    late = next(n for n in nodes if n.tx.account.address in seats(book, nodes, other, r))
    write_keystore(tmp_path / "late.json", late.tx.account.key, PASSWORD)
    (tmp_path / "late.toml").write_text(
        config.read_text().replace(str(tmp_path / "auditor.json"), str(tmp_path / "late.json"))
    )
    swarm.goto(book.window("voteClose", r))
    code, said = audit_book(tmp_path / "late.toml", r, "--escalate", other, "--unavailable")
    assert code == 1 and "escalates in rounds" in said, said
    assert not swarm.ledger.submission(r, other).exists


def test_a_watcher_proves_the_earnings_lie_no_training_node_checks(world) -> None:
    """`sapo audit watch --since R0 --prove`, a real process left running: it folds the standing
    rounds from R0 (their lists fetched through IPFS), audits each verdict root in its window,
    and proves the round whose earnings leave every earlier credit out (each producer checks
    only its own credit's earnings), until it is stopped (SIGTERM)."""
    swarm, nodes, book, _, prover, config, publish = world
    lag = book.contract.functions.lag().call()
    r0 = swarm.ledger.current_round()
    aggregator, _, credits, votes = honest_round(book, nodes, r0, publish=publish)
    first = VerdictRoot(credits, votes=votes)
    post_verdicts(book, aggregator, first, r0, publish("verdicts", r0, verdict_list(first)))
    r2 = r0 + lag  # round r0 is settled for it
    _, _, credits, votes = honest_round(book, nodes, r2, publish=publish)
    skipping = VerdictRoot(credits, votes=votes)  # no earnings: round r0's credits left out
    post_verdicts(book, aggregator, skipping, r2, publish("verdicts", r2, verdict_list(skipping)))
    watcher = sapo_process("audit", "watch", "--since", str(r0), "--prove", "--config", str(config))
    wait_until(lambda: book.view(r2)[9], timeout_s=120, what="the watcher's proof")
    watcher.terminate()
    said, logged = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, logged
    assert f"watching round book {book.contract.address} from round {r0}" in said, said
    assert f"round {r2}: LIE: earnings that skip a credit (proveSkippedCredit); sent" in said, said
    assert balances(book, prover.address)[1] > 0
