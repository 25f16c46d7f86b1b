"""Slow hardware still earns: a devnet whose node 2 is many times slower than the others (a
per-node override of the devnet: more questions and completions per local round), so slow that
one of its local rounds outlasts a chain round. It keeps submitting, late but within the
ledger's submission window, and every batch it submits is attested by its peers and credited for
every local round it holds; the chain rounds in which it started no local round are journaled
as skipped.

The chain round is set from a measured local round of the slow node's size on this machine
(half of it), so the test holds on a fast machine and on a loaded one alike."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from client.chain import Ledger, connect
from client.chain.events import EventReader
from client.config import with_sections
from client.node.journal.states import RoundPhase
from client.node.view.journal import NodeView
from client.policy import SeedSpec, ensure_seed_policy, load_policy
from tests.harness.batches import local_round
from tests.harness.devnets import start_devnet, stop_devnet
from tests.harness.policies import cached_seed_test
from tests.harness.processes import wait_progressing

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FAST = {"local_items": 2, "completions": 4}
SLOW = {"local_items": 64, "completions": 24}
MAX_NEW_TOKENS = 16
W = 8  # the submission window, in chain rounds
A = 2  # the appeal rounds (configs/devnet.toml): a round is final after W + C + A
CHALLENGE_S = 16  # the least challenge window, in seconds: to fetch, prove and vote in
SUBMISSIONS = 2  # slow batches checked (a third one waited ~5 more rounds to be final)
FAST_CAP = 4  # local rounds a fast node plays a chain round (the slow one: under 1)


def measured_slow_local_round(cache: Path) -> float:
    """Seconds one local round of the slow node's size (generation, then its GRPO step) takes
    here on one thread, as a devnet node runs it (alone: in the devnet three nodes share the
    cores, so it takes longer there)."""
    import torch

    from client.config import NodeConfig
    from client.node.assemble import make_trainer
    from client.policy.encode import Group

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        path = ensure_seed_policy(cache, SeedSpec.tiny_test())
        policy = load_policy(path, device="cpu")
        cfg = with_sections(NodeConfig(), sapo=SLOW, train={"rounds_per_update": 1})
        optimizer = torch.optim.Adam(policy.model.parameters(), lr=cfg.train.learning_rate)
        trainer = make_trainer(cfg, policy, optimizer, 0, lambda: None)

        def once(k: int) -> float:
            began = time.perf_counter()
            done = local_round(
                policy,
                seed=bytes(32),
                round_=0,
                node="0x" + "11" * 20,
                k=k,
                items=SLOW["local_items"],
                completions=SLOW["completions"],
                max_new_tokens=MAX_NEW_TOKENS,
            )
            groups = [
                Group(t.question, list(i.completions), [1.0, *rs[1:]], False)
                for t, i, rs in zip(done.tasks, done.part.items, done.rewards, strict=True)
            ]
            trainer.step(groups)
            return time.perf_counter() - began

        once(0)  # warm-up
        return once(1)
    finally:
        torch.set_num_threads(threads)


def test_a_node_slower_than_a_chain_round_keeps_submitting_and_is_credited(
    tmp_path: Path, seed_test: Path
) -> None:
    cache = cached_seed_test(seed_test, tmp_path / "policies")
    slow_s = measured_slow_local_round(cache)
    # a slow local round outlasts a chain round (in the devnet it takes longer than alone)
    round_s = max(2, int(slow_s * 0.6))
    # a batch submitted at the end of its window still leaves its checkers CHALLENGE_S to fetch,
    # re-draw and vote, however short the round came out (at 2-s rounds a 2-round challenge
    # window left a checker 5 s: it proved the batch and missed the vote by a second, CI stop 34)
    challenge = max(2, math.ceil(CHALLENGE_S / round_s))
    env = {
        "SAPO_POLICY__MODEL": "seed-test",
        "SAPO_POLICY__CACHE_DIR": str(cache),
        "SAPO_POLICY__MAX_NEW_TOKENS": str(MAX_NEW_TOKENS),
        "SAPO_TRAIN__ROUNDS_PER_UPDATE": "1",
        "SAPO_TRAIN__CHECKPOINT_EVERY": "1000",
        "SAPO_LEDGER__SUBMIT_ROUNDS": str(W),
        "SAPO_LEDGER__CHALLENGE_ROUNDS": str(challenge),
        # the file's 60-s rounds must be valid too before --round-length shortens them
        "SAPO_LEDGER__UNBONDING_PERIOD_S": str((W + 2 * challenge + A + 1) * 60),
        "SAPO_SAPO__LOCAL_ITEMS": str(FAST["local_items"]),
        "SAPO_SAPO__COMPLETIONS": str(FAST["completions"]),
        # the fast nodes play FAST_CAP local rounds a chain round, not as many as fit: they
        # leave the cores to the slow node (and the other test worker) instead of filling them
        "SAPO_SAPO__MAX_LOCAL_ROUNDS": str(FAST_CAP),
        "SAPO_DEVNET__NODE_OVERRIDES": json.dumps({"2": {"sapo": SLOW | {"max_local_rounds": 0}}}),
    }
    data_dir = tmp_path / "devnet"
    proc, state = start_devnet(
        data_dir,
        "--config",
        "configs/devnet.toml",
        "--nodes",
        "3",
        "--round-length",
        str(round_s),
        env=env,
    )
    try:
        ledger = Ledger(connect(state["rpc_url"]), state["ledger"])
        params = ledger.params()
        assert (params.submit_rounds, params.round_length) == (W, round_s)
        slow, fast = state["nodes"][2], state["nodes"][:2]
        slow_view = NodeView(Path(slow["data_dir"]))

        def final_slow_rounds() -> list[int]:
            current = params.round_at(time.time())
            return [r for r in slow_view.confirmed_rounds() if params.is_final(r, current)]

        # its pace is the machine's (a loaded CPU slows its local rounds): wait as long as its
        # batches keep coming and becoming final, and fail only when that stops
        wait_progressing(
            lambda: len(final_slow_rounds()) >= SUBMISSIONS,
            lambda: len(slow_view.confirmed_rounds()) + len(final_slow_rounds()),
            stall_s=(W + challenge + A + 4) * round_s + 240,
            what=f"{SUBMISSIONS} final submissions of the slow node",
        )
        checked = final_slow_rounds()[:SUBMISSIONS]
        records = {r.round: r for r in slow_view.rounds()}
        events = list(EventReader(ledger).read(["Submitted", "Attested"]))
        submitted_in = {
            e.args["round"]: params.round_at(ledger.block_time(e.block_number))
            for e in events
            if e.name == "Submitted" and e.args["node"].lower() == slow["address"].lower()
        }
        attesters = {
            (e.args["round"], e.args["attester"].lower(), e.args["agrees"])
            for e in events
            if e.name == "Attested" and e.args["node"].lower() == slow["address"].lower()
        }
        for round_ in checked:
            sub = ledger.submission(round_, slow["address"])
            record = records[round_]
            # the batch holds every local round the slow node finished in its round
            assert record.local_rounds >= 1 and sub.digest.lower() == record.digest.lower()
            assert (
                sub.rollouts
                == record.rollouts
                == (record.local_rounds * SLOW["local_items"] * SLOW["completions"])
            )
            for peer in fast:
                assert (round_, peer["address"].lower(), True) in attesters, (
                    f"round {round_}: {peer['address']} did not attest the slow batch in agreement"
                )
            assert (sub.score, sub.signal) == (record.claimed, record.signal)
            assert sub.credited == sub.signal, f"round {round_}: not credited: " + str(
                sub.why_not_credited(params.quorum)
            )
        assert any(submitted_in[r] > r for r in checked), (
            f"the slow node submitted every checked batch in its own round ({submitted_in}): "
            "its local rounds did not outlast a chain round"
        )
        skipped = [r for r in slow_view.rounds() if r.phase == RoundPhase.SKIPPED]
        seconds = [m["seconds"] for _, _, m in slow_view.local_metrics()]
        assert skipped, (
            f"no chain round skipped: round {round_s} s (a slow local round measured "
            f"{slow_s:.1f} s alone); its local rounds took {seconds} s; rounds "
            f"{[(r.round, r.phase, r.local_rounds) for r in slow_view.rounds()]}"
        )
        assert all("no local round started in it" in r.reason for r in skipped)
        fast_pace = [
            NodeView(Path(n["data_dir"])).summary(params.genesis, round_s, time.time())
            for n in fast
        ]
        slow_pace = slow_view.summary(params.genesis, round_s, time.time())
        assert all(
            (f.local_rounds_per_round or 0) >= 3 * (slow_pace.local_rounds_per_round or 0)
            for f in fast_pace
        ), (fast_pace, slow_pace)
    finally:
        if proc.poll() is None:
            stop_devnet(proc)
