"""Appeals and judged votes on the real path (issue 40, item 2; issue 57's voter appeals): two
honest nodes, a whale (`--adversary whale`: a griefer registered with `[devnet].whale_share` of
all stake) and a bait set (`--adversary baiters`) on a real anvil ledger and IPFS daemon, the
nodes' own intake and publisher, the adversaries' own transactions.

The first committee's verdict is the whale's: the honest checker is not running in its window
(the checkers a real swarm seats are sometimes offline, slow or few), so the whale's dispute
stands alone. The producer's client appeals by itself once the window closes (its re-check of its
batch agrees with its claim); the checker, back, is drawn on the appeal's committee, fetches the
batch, proves it and votes; the appeal credits it; once the round is final, the producer's client
settles it and has the whale's disputes judged, which costs the whale slashBps of its stake.

A bait batch: one baiter submits an honest batch, the honest checker agrees with it, and the other
baiter, out-seating that agreement, disputes it in the window's last round; the producer does not
appeal. The checker's client appeals the verdict that judges its honest vote lost (`appealVote`);
the appeal's committee, with the large honest node back, credits the batch, and the checker
settles it and has the baiter's disputes judged.

Time moves by warping (anvil's evm_increaseTime and the nodes' WarpClock together)."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.chain.events import EventReader
from client.chain.models import VoteSide
from client.config import load_config
from client.config.roles import Role, partners
from client.devnet.adversary import Adversary
from client.node.assemble import open_node, signing_ledger
from client.node.eventlog import Event, read_events
from tests.harness.processes import wait_until
from tests.harness.warp import finish_node as finish
from tests.harness.warp import start_node as start
from tests.harness.warp import warp_world

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROUND_S = 8
W, C, A = 1, 1, 2  # submission, challenge and appeal rounds


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    root = tmp_path_factory.mktemp("appeals")
    roles = [Role.WHALE, Role.BAITER, Role.BAITER]
    with warp_world(root, seed_test, ROUND_S, W, C, adversaries=roles) as w:
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
    assert stakes[whale.address] == params.min_stake  # 10% of 8 ETH is below minStake

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
        # the node marks it sent once it has read the receipt, a moment after the chain shows it
        wait_until(
            lambda: outbox(producer).get(f"appeal:{round_}") == "done", what="its outbox entry"
        )
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
        wait_until(
            lambda: (
                outbox(checker).get(f"appeal-vote:{round_}:{producer.address.lower()}") == "done"
            ),
            what="the checker's outbox entry for its vote",
        )

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


def test_a_bait_batch_is_appealed_by_its_honest_agreer_and_the_baits_disputes_lose(world) -> None:
    swarm, warp = world["swarm"], world["warp"]
    small, large = (
        open_node(load_config(path), clock=warp.clock) for path in swarm.node_configs[:2]
    )
    pairs = partners(swarm.roles, swarm.addresses)
    producer, baiter = (
        Adversary(cfg, signing_ledger(cfg), Role.BAITER, partners=pairs[i])
        for i, cfg in ((i, load_config(swarm.node_configs[i])) for i in (3, 4))
    )
    ledger, params = small.ledger, small.params
    eth = 10**18
    # an honest majority of stake: the large node 10 ETH and the small one 2 against the bait
    # set's 2 + 4 (and the idle whale's 1); the large node is down in the first window, so the
    # bait's 4 ETH of seats out-seat the small node's agreement
    large.ledger.add_stake(8 * eth)
    baiter.ledger.add_stake(2 * eth)
    stakes = {a: ledger.node_info(a).active_stake for a in swarm.addresses}
    bait_share = (stakes[producer.address] + stakes[baiter.address]) / sum(stakes.values())
    assert bait_share < 1 / 3, stakes

    round_ = small.current_round() + 1
    warp.to(params, round_, 0.05)
    producer.step(round_)  # an honest batch with learning signal, on chain
    sub = ledger.submission(round_, producer.address)
    assert sub.exists and sub.signal > 0, sub
    thread, stop = start(small)
    large_thread = large_stop = None
    try:
        wait_until(lambda: ledger.beacon(round_, producer.address).ready, what="the beacon")
        wait_until(
            lambda: ledger.submission(round_, producer.address).agrees >= 1,
            timeout_s=120,
            what="the small node's agreement with the bait batch",
        )
        warp.to(params, params.close(round_), 0.05)  # the first window's last round
        baiter.bait(params.close(round_))
        first = ledger.submission(round_, producer.address)
        assert (first.agrees, first.disputes, first.credited) == (1, 1, 0), first
        assert first.dispute_seats > first.agree_seats  # the bait fired: the agreement loses

        # the window closes; the small node's client appeals the verdict on its vote
        warp.to(params, params.close(round_) + 1, 0.05)
        wait_until(
            lambda: ledger.submission(round_, producer.address).appealed,
            what="the agreer's appeal",
        )
        key = f"appeal-of:{round_}:{producer.address.lower()}"
        wait_until(lambda: outbox(small).get(key) == "done", what="the agreer's outbox entry")
        appealed = list(EventReader(ledger).read(["Appealed"], round=round_, node=producer.address))
        assert [e.args["appellant"].lower() for e in appealed] == [small.address.lower()]
        large_thread, large_stop = start(large)  # back: drawn on the appeal's committee
        wait_until(
            lambda: (ledger.submission(round_, producer.address).appeal or first).agrees >= 1,
            timeout_s=120,
            what="an honest vote on the appeal",
        )
        wait_until(lambda: ledger.appeal_of(round_, producer.address).ready, what="its beacon")
        baiter.bait(params.close(round_) + 1)  # disputes the appeal too, where seated
        wait_until(
            lambda: ledger.submission(round_, producer.address).credited > 0,
            timeout_s=120,
            what="the appeal's committee crediting the bait batch",
        )

        # final: the agreer settles the batch its producer never would, and has the bait's
        # disputes judged
        warp.to(params, params.final_after(round_) + 1, 0.05)
        wait_until(
            lambda: outbox(small).get(f"settle:{round_}:{producer.address.lower()}") == "done",
            what="the agreer's settlement of the bait batch",
        )
    finally:
        finish(thread, stop)
        if large_thread is not None:
            finish(large_thread, large_stop)
    after = {a: ledger.node_info(a).active_stake for a in swarm.addresses}
    slash = stakes[baiter.address] * params.slash_bps // 10_000
    assert after[baiter.address] == stakes[baiter.address] - slash  # its dispute lost, once
    assert after[small.address] == stakes[small.address]  # the honest agreement stands
    assert after[producer.address] == stakes[producer.address]  # credited on appeal
    first_side, _, judged = ledger.vote_of(baiter.address, round_, producer.address)
    assert first_side == VoteSide.DISPUTED and judged
    kinds = [  # (the small node's own batch of the round may be appealed and judged too)
        e
        for e in read_events(small.events.path)
        if e.get("round") == round_ and (e.get("node") or "").lower() == producer.address.lower()
    ]
    appeals = [e for e in kinds if e["kind"] == str(Event.ROUND_APPEALED)]
    assert len(appeals) == 1 and appeals[0]["appealed"], appeals
    judged_events = [e for e in kinds if e["kind"] == str(Event.VOTES_SETTLED)]
    assert [[v.lower() for v in e["voters"]] for e in judged_events] == [[baiter.address.lower()]]
