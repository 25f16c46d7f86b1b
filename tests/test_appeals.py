"""Appeals and judged votes on the real path (issue 40, item 2): two honest nodes and a whale
(`--adversary whale`: a griefer registered with `[devnet].whale_share` of all stake) on a real
anvil ledger and IPFS daemon, the nodes' own intake and publisher, the whale's own transactions.

The first committee's verdict is the whale's: the honest checker is not running in its window
(the checkers a real swarm seats are sometimes offline, slow or few), so the whale's dispute
stands alone. The producer's client appeals by itself once the window closes (its re-check of its
batch agrees with its claim); the checker, back, is drawn on the appeal's committee, fetches the
batch, proves it and votes; the appeal credits it; once the round is final, the producer's client
settles it and has the whale's disputes judged, which costs the whale slashBps of its stake.

Time moves by warping (anvil's evm_increaseTime and the nodes' WarpClock together)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import finish_node as finish
from conftest import start_node as start
from conftest import wait_until, warp_world

from client.chain.events import EventReader
from client.config import load_config
from client.config.roles import Role
from client.devnet.adversary import Adversary
from client.node.assemble import open_node, signing_ledger
from client.node.eventlog import Event, read_events

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROUND_S = 8
W, C, A = 1, 1, 2  # submission, challenge and appeal rounds


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    root = tmp_path_factory.mktemp("appeals")
    with warp_world(root, seed_test, ROUND_S, W, C, adversaries=[Role.WHALE]) as w:
        yield w


def outbox(node) -> dict[str, str]:
    return {e.key: e.status for e in node.journal.outbox_entries()}


def test_a_whales_verdict_is_appealed_overturned_and_its_disputes_judged(world) -> None:
    swarm, warp = world["swarm"], world["warp"]
    producer, checker = (
        open_node(load_config(path), clock=warp.clock) for path in swarm.node_configs[:2]
    )
    whale_cfg = load_config(swarm.node_configs[2])
    whale = Adversary(whale_cfg, signing_ledger(whale_cfg), Role.WHALE)
    ledger, params = producer.ledger, producer.params
    stakes = {a: ledger.node_info(a).active_stake for a in swarm.addresses}
    assert stakes[whale.address] == params.min_stake  # 10% of 4 ETH is below minStake

    round_ = producer.current_round() + 1
    warp.to(params, round_, 0.05)
    thread, stop = start(producer)
    checker_thread = checker_stop = None
    try:
        for _ in range(4):  # a batch that claims some learning signal (most do), so it can earn
            wait_until(lambda r=round_: len(producer.journal.local_rounds(r)) >= 2, what="rounds")
            warp.to(params, round_ + 1, 0.05)  # sealed and submitted
            wait_until(
                lambda r=round_: (
                    ledger.submission(r, producer.address).exists
                    and ledger.beacon(r, producer.address).ready
                ),
                what="the producer's batch on chain, its beacon known",
            )
            if ledger.submission(round_, producer.address).signal > 0:
                break
            round_ += 1
        whale.step(round_ + 1)  # disputes what it is drawn for, fetching nothing
        first = ledger.submission(round_, producer.address)
        assert (first.agrees, first.disputes, first.credited) == (0, 1, 0), first

        # the first committee's window closes; the producer's client appeals by itself
        warp.to(params, params.close(round_) + 1, 0.05)
        wait_until(
            lambda: ledger.submission(round_, producer.address).appealed,
            what="the producer's appeal",
        )
        assert outbox(producer)[f"appeal:{round_}"] == "done"
        checker_thread, checker_stop = start(checker)  # back: drawn on the appeal's committee
        wait_until(
            lambda: (ledger.submission(round_, producer.address).appeal or first).agrees >= 1,
            timeout_s=120,
            what="the checker's vote on the appeal",
        )
        whale.step(params.close(round_) + 1)  # disputes the appeal too
        sub = ledger.submission(round_, producer.address)
        assert sub.appeal is not None and (sub.appeal.agrees, sub.appeal.disputes) == (1, 1)
        assert sub.appeal.agree_seats > sub.appeal.dispute_seats  # 2 ETH of seats against 1
        assert sub.credited == sub.signal > 0
        assert outbox(checker)[f"appeal-vote:{round_}:{producer.address.lower()}"] == "done"

        # final: the producer settles its batch and has the losing votes judged
        warp.to(params, params.final_after(round_) + 1, 0.05)
        wait_until(
            lambda: outbox(producer).get(f"settle:{round_}") == "done",
            what="the producer's settlement",
        )
    finally:
        finish(thread, stop)
        if checker_thread is not None:
            finish(checker_thread, checker_stop)
    assert ledger.submission(round_, producer.address).settled
    after = {a: ledger.node_info(a).active_stake for a in swarm.addresses}
    slash = stakes[whale.address] * params.slash_bps // 10_000
    assert after[whale.address] == stakes[whale.address] - slash
    # credited on appeal: its settlement slashed nothing (a batch of a round skipped above, with
    # no signal, that the whale disputed and nobody appealed in time, may have been)
    settled = list(EventReader(ledger).read(["Settled"], round=round_, node=producer.address))
    assert [(e.args["disputed"], e.args["slashed"]) for e in settled] == [(False, 0)]
    assert after[checker.address] == stakes[checker.address]  # on the winning side
    assert ledger.vote_of(whale.address, round_, producer.address) == (2, 2, True)
    kinds = [e for e in read_events(producer.events.path) if e.get("round") == round_]
    appealed = [e for e in kinds if e["kind"] == str(Event.ROUND_APPEALED)]
    judged = [e for e in kinds if e["kind"] == str(Event.VOTES_SETTLED)]
    assert len(appealed) == 1 and appealed[0]["appealed"] and appealed[0]["dispute_seats"] > 0
    assert len(judged) == 1 and judged[0]["voters"] == [whale.address]
    assert judged[0]["settler_cut"] == slash // 10  # the judge's cut of the whale's slash
    # the checker's proof streamed the opened checkpoints through its spool, and cleared it
    assert any(stage == "prove" for _, _, stage in checker.journal.spans(0))
    assert checker.data_dir.spool.is_dir() and not any(checker.data_dir.spool.iterdir())
