"""Two model families in one swarm, on the real path (issue 41): Qwen2-style and Llama-style
test-size seed policies with tokenizers of their own, LoRA adapters on, two honest nodes and an
answer-farmer in each, on a real anvil ledger (ledger v4: families fixed at deployment) and a
real IPFS daemon, the nodes in process under a Warp.

What an operator of a mixed swarm needs to be true: every honest batch is checked by nodes of its
own family only (who can run its model) and agreed with; learning crosses families (each honest
node trains on the other family's rollouts, re-tokenized by its own tokenizer); each farmer is
disputed by its own family's checkers; and the preflight says a family of one cannot earn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from client.chain import Ledger
from client.chain.audit import Auditor
from client.chain.events import EventReader
from client.chain.families import family_standing
from client.config import load_config
from client.config.roles import HONEST
from client.credit import GENERATION
from client.devnet.adversary import Adversary
from client.node.assemble import open_node, signing_ledger
from client.node.journal.states import RoundPhase
from client.store import IpfsStore
from client.store.base import fetch_bundle
from tests.harness.processes import wait_until
from tests.harness.warp import finish_node, start_node, warp_world

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROUND_S = 8
W, C = 2, 3
LLAMA = {"policy": {"model": "seed-llama-test"}}
# honest nodes 0, 1 (Qwen2-style) and 2, 3 (Llama-style), then an answer-farmer of each: 4, 5
FAMILY_OF = ["qwen", "qwen", "llama", "llama", "qwen", "llama"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    root = tmp_path_factory.mktemp("families")
    farmers = ["answer-farmer", "answer-farmer"]
    extra = {
        "policy": {"adapter": "lora", "lora_rank": 4, "lora_alpha": 8},
        # J above the pool: a local round trains on every eligible peer item (a handful: the
        # tiny policy gives few groups with spread), so which family a node learns from is not
        # left to a draw of 2 (a fresh-clone CI run saw one node draw only its own family's
        # items in 10 local rounds)
        "sapo": {"unavailable_after": 2, "external_items": 16},
        "devnet": {
            "nodes": 4,
            "adversaries": farmers,
            "accounts": 8,
            "node_overrides": {2: LLAMA, 3: LLAMA, 5: LLAMA},
        },
    }
    with warp_world(root, seed_test, ROUND_S, W, C, nodes=4, adversaries=farmers, **extra) as w:
        yield w


def test_each_family_checks_its_own_batches_and_learning_crosses_families(world) -> None:
    swarm, warp = world["swarm"], world["warp"]
    assert swarm.roles == [HONEST] * 4 + ["answer-farmer"] * 2
    cfgs = [load_config(path) for path in swarm.node_configs]
    ledger: Ledger = signing_ledger(cfgs[0])
    families = [ledger.node_info(a).family for a in swarm.addresses]
    qwen, llama = families[0], families[2]
    assert qwen != llama and set(ledger.params().families) == {qwen, llama}
    assert families == [qwen if f == "qwen" else llama for f in FAMILY_OF]
    honest = [open_node(cfg, clock=warp.clock) for cfg in cfgs[:4]]
    tokenizers = {n.publisher.sealer.model["tokenizer"] for n in honest}
    assert len(tokenizers) == 2, f"one tokenizer per family: {tokenizers}"
    assert all(n.publisher.sealer.model["adapter"] for n in honest), "every node trains an adapter"
    farmers = [Adversary(cfg, signing_ledger(cfg), "answer-farmer") for cfg in cfgs[4:]]
    params = honest[0].params
    round_ = honest[0].current_round() + 1
    warp.to(params, round_, 0.05)
    running = [start_node(node) for node in honest]
    addr = [a.lower() for a in swarm.addresses]
    family_of = dict(zip(addr, families, strict=True))
    try:
        for farmer in farmers:
            farmer.step(round_)
        wait_until(
            lambda: all(len(n.journal.local_rounds(round_)) >= 2 for n in honest),
            what="two local rounds on each honest node",
        )
        warp.to(params, round_ + 1, 0.05)  # the honest nodes seal and submit their batches

        def voted() -> bool:
            subs = [ledger.submission(round_, a) for a in addr]
            return all(s.agrees >= 1 for s in subs[:4]) and all(s.disputes >= 2 for s in subs[4:])

        wait_until(voted, timeout_s=150, what="each family's votes on each batch")

        def used_across(i: int) -> int:
            """Items node i trained on from the other family's honest nodes."""
            rows = honest[i].journal.peers.peer_verdicts()
            return sum(
                int(r["used"] or 0)
                for r in rows
                if r["node"].lower() in addr[:4] and family_of[r["node"].lower()] != families[i]
            )

        # learning crosses families, both ways: a later local round of a node of each family
        # samples the other family's rollouts. Which node samples them is the draw's (a batch
        # holds few groups with spread), so the test asks it of each family, not of each node.
        # anvil mines in real time, so a loaded machine may be rounds further than a warp: wait
        # for a local round in the round warped to or any later one, never in one exact round.
        # Each try waits for every node's batch of the round before to be confirmed or given up
        # before it warps again: warped as soon as each played a local round, loaded nodes fell
        # rounds behind the clock, and their batches came too late for the ledger (fresh16).
        def caught_up(later: int) -> bool:
            done = [n.journal.round(later - 1) for n in honest]
            return all(r is None or r.ended or r.reached(RoundPhase.CONFIRMED) for r in done)

        def fetched(later: int) -> bool:
            """Every honest node has its verdict on each other honest node's confirmed batch of
            round later-1: sealed at the start of round later, a batch is trained on only in
            the local rounds of round later+1 (lookback_rounds = 2: a node's local rounds run
            as a round starts), so a warp before its peers fetched it loses it for learning
            (a qwen node used none of the llama batches' items in 20 rounds, fresh20)."""
            made = set()
            for j, n in enumerate(honest):
                r = n.journal.round(later - 1)
                if r is not None and r.reached(RoundPhase.CONFIRMED):
                    made.add(addr[j])
            for i, n in enumerate(honest):
                seen = {
                    row["node"].lower()
                    for row in n.journal.peers.peer_verdicts(later - 1)
                    if row["round"] == later - 1
                }
                if not (made - {addr[i]}) <= seen:
                    return False
            return True

        def crossed() -> dict[str, int]:
            """Items each family's nodes trained on from the other family's honest nodes."""
            used = [used_across(i) for i in range(4)]
            return {
                f: sum(u for u, g in zip(used, families, strict=False) if g == f)
                for f in (qwen, llama)
            }

        # each try waits for the peers' batches to be fetched before it warps (fetched); up to
        # 40 tries (it breaks as soon as learning crossed both ways)
        for _ in range(40):
            if all(crossed().values()):
                break
            later = honest[0].current_round() + 1
            warp.to(params, later, 0.05)
            wait_until(
                lambda later=later: (
                    all(n.journal.local_round_counts(later) for n in honest)
                    and caught_up(later)
                    and fetched(later)
                ),
                timeout_s=120,
                what="a local round after the peers' batches were fetched",
            )
        used = [used_across(i) for i in range(4)]
        across = crossed()
    finally:
        for thread, stop in running:
            finish_node(thread, stop)
    assert all(across.values()), f"items of the other family each honest node trained on: {used}"

    # each honest node shares its base: its metadata names the bundle a newcomer to its family
    # fetches ([policy].base), and the bundle is that family's base, pinned in the store
    store = IpfsStore(world["daemon"].api, index_dir=swarm.config_path.parent / "check-blocks")
    named = [json.loads(ledger.node_info(a).metadata).get("base") for a in addr[:4]]
    assert named[0] == named[1] and named[2] == named[3] and named[0] != named[2], named
    assert [fetch_bundle(store, b, network=False).weights for b in named] == families[:4]

    auditor = Auditor(ledger, EventReader(ledger))
    for i, producer in enumerate(addr):
        report = auditor.submission(round_, producer)
        voters = {v.attester.lower() for v in report.attestations}
        assert voters, (i, report)
        # only its own family sat on its committee: the other family's nodes hold no seat
        assert {family_of[v] for v in voters} == {families[i]}, (i, voters)
        others = [a for a in addr if family_of[a] != families[i]]
        assert all(ledger.seats_of(round_, producer, a) == 0 for a in others)
        if i < 4:  # honest: the other honest node of its family agreed (its farmer never votes)
            assert [v.vote for v in report.attestations] == ["agree"], (i, report)
        else:  # a farmer: typed-in answers are not its adapter's seeded draws
            assert len(report.attestations) == 2
            assert all(
                v.vote == "dispute" and v.findings & GENERATION for v in report.attestations
            ), (i, report)

    # each family of this swarm can fill its quorum; a family of one could not (its batches
    # would draw nobody): the preflight's rule, read from this ledger
    for i in (0, 2):
        standing = family_standing(ledger, families[i])
        assert standing.can_credit(addr[i], params.quorum)
        assert len(standing.members) == 3  # two honest nodes and the farmer
