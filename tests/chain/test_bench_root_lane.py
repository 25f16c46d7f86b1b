"""`python -m scripts.bench_root_lane`, small: light nodes play the root lane through the real
signing, collector and RoundBook; the chain carries the same six transactions a round whatever
the swarm's size, and a claim per node that earned; and each lie of an aggregator is found by a
light node auditing the published lists and proven on chain, half the bond to the auditor and
half to the ledger's pool; a forging producer is escalated to the v4 lane and slashed there;
over HTTP and IPFS (--transport http) as in memory."""

from __future__ import annotations

import subprocess
import sys

import pytest

from scripts.bench_root_lane import (
    BOND,
    LIES,
    STAKE,
    play,
    play_equivocators,
    play_forgers,
    play_lie,
)

POSTS = ("postSubmissions", "drawBeacon", "postVerdicts", "release")
DRAW = "drawAggregator"  # the round's aggregator: its request, then its draw


def test_the_chain_carries_six_transactions_a_round_whatever_the_swarm() -> None:
    rounds = 2
    small, small_costs, _, _ = play(12, rounds, family_size=6, checkers=10, quorum=3, sample_size=3)
    large, large_costs, _, _ = play(36, rounds, family_size=6, checkers=10, quorum=3, sample_size=3)
    for light, costs, n in ((small, small_costs, 12), (large, large_costs, 36)):
        assert light.gas.reverted == 0
        # each node that earned claimed (every claim went through, or the play would raise)
        assert light.gas.txs == {
            **dict.fromkeys(POSTS, rounds),
            DRAW: 2 * rounds,
            "fund": 1,
            "claim": light.claimants,
        }
        assert n // 2 < light.claimants <= n
        # the claims paid at most every round's reward (they leave the last rounds' shares to
        # the next claim)
        assert 0 < light.claimed <= light.swarm.params.reward_per_round * rounds
        for cost in costs.values():
            # every node submitted; the seated checkers voted and most batches were credited
            assert cost.submissions == n and cost.votes > 0 and 0 < cost.credits <= n
            assert cost.list_bytes == 384 * n
            assert len(cost.node_cpu) == 3  # the sampled nodes' work was timed
    # three times the nodes, the same gas a round (a longer list, a deeper tree: a few %)
    ratio = sum(large.gas.gas[k] for k in (*POSTS, DRAW)) / sum(
        small.gas.gas[k] for k in (*POSTS, DRAW)
    )
    assert 0.95 < ratio < 1.1, ratio


@pytest.mark.parametrize("lie", list(LIES))
def test_each_lie_of_the_aggregator_is_found_by_an_auditor_and_proven(lie) -> None:
    caught = play_lie(12, lie, family_size=12, checkers=10, quorum=3)
    assert caught.proven == [LIES[lie]]
    assert caught.pool_gain == BOND - BOND // 2
    assert caught.prover_net > 0  # half the bond (and its challenge bond back), net of gas


def test_forging_producers_are_escalated_slashed_and_paid_nothing() -> None:
    """--forgers: the seated checkers of a forged batch sign nothing; one escalates it, all of
    them dispute it in the v4 lane, the verdict root (which stands: an auditor finds no lie)
    leaves it out, and settling it once final slashes its producer its stake's slash share."""
    forged = play_forgers(12, 2, family_size=12, checkers=10, quorum=3)
    assert forged.forger_credit == 0 and forged.finding == ""
    assert forged.slashed == 2 * STAKE // 10  # 10% (slashBps 1,000) of each forger's 2 ETH
    assert forged.disputes >= 2 and forged.escalate_gas > 0 and forged.settle_gas > 0
    assert forged.honest == 10 and forged.honest_credited > 5


def test_checkers_that_sign_twice_are_slashed_and_the_round_is_credited_as_before() -> None:
    """--equivocators: each checker's second vote is refused and kept; the aggregator proves
    each pair, the ledger slashes each checker its stake's slash share and pays the aggregator
    the settler's cut; the first votes stand, and the root does too. As many producers that
    signed a second submission of the round are slashed alike."""
    twice = play_equivocators(12, 2, family_size=12, checkers=10, quorum=3)
    assert twice.slashed == 2 * STAKE // 10  # 10% (slashBps 1,000) of each one's 2 ETH
    assert twice.prover_paid == twice.slashed // 10  # SETTLER_CUT_BPS
    assert twice.double_slashed == twice.slashed and twice.double_paid == twice.prover_paid
    assert twice.double_gas > 0
    assert twice.proof_gas > 0 and twice.finding == "" and twice.credited > 5


def test_over_http_and_ipfs_the_nodes_play_the_same_rounds() -> None:
    """Every message crosses the aggregator's HTTP endpoint (its address read from its on-chain
    metadata) and every list goes through IPFS by the CID the book holds: the rounds credit
    and pay as in memory."""
    light, costs, _, _ = play(
        12, 2, family_size=6, checkers=10, quorum=3, sample_size=3, transport="http"
    )
    assert light.gas.reverted == 0 and 6 < light.claimants <= 12
    assert light.http is not None and light.http.origin == light.http.server.url
    for cost in costs.values():
        assert cost.submissions == 12 and cost.votes > 0 and 0 < cost.credits <= 12
        # one POST a node for its submission, one for its votes (a node without a seat: none)
        assert 12 < cost.requests <= 24 and cost.sent_bytes > 12 * 300
        # the nodes read the list fetched through IPFS by the CID the root's post named
        assert cost.fetch_s > 0 and cost.list_cid.startswith("bafkrei")


def test_the_aggregator_service_a_node_runs_plays_the_same_rounds() -> None:
    """--aggregator service: the honest rounds aggregated by the service `sapo aggregate run`
    runs (its endpoint, its store, its own reads and transactions, pass by pass): the same four
    posts a round, and the draws of its rounds, from its own receipts, and the claims its folded
    earnings name are paid."""
    light, costs, _, _ = play(
        12,
        2,
        family_size=6,
        checkers=10,
        quorum=3,
        sample_size=3,
        transport="http",
        aggregator="service",
    )
    assert light.gas.reverted == 0 and 6 < light.claimants <= 12
    assert all(light.gas.txs[k] == 2 for k in POSTS)
    # it drew each round's aggregator (itself, the only one enlisted) as the clock reached it
    assert light.gas.txs[DRAW] >= 2 * 2
    assert 0 < light.claimed <= light.swarm.params.reward_per_round * 2
    for cost in costs.values():
        assert cost.submissions == 12 and cost.votes > 0 and 0 < cost.credits <= 12
        assert cost.aggregator_cpu > 0 and cost.list_cid.startswith("bafkrei")


@pytest.mark.parametrize(
    "lie", ["a forged submission", "a withheld verdict list", "a censored submission"]
)
def test_an_auditor_reading_the_lists_through_ipfs_proves_the_lie(lie) -> None:
    """The forged submission is found in the list fetched by its posted CID; the withheld list
    (its index published, its blocks never) cannot be fetched, and is challenged and claimed;
    the censored producer proves with the receipt the endpoint answered its POST with."""
    caught = play_lie(12, lie, family_size=12, checkers=10, quorum=3, transport="http")
    assert caught.proven == [LIES[lie]]
    assert caught.pool_gain == BOND - BOND // 2 and caught.prover_net > 0


def test_the_script_prints_its_tables() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.bench_root_lane",
            *("--nodes", "8", "--rounds", "1", "--family-size", "8", "--sample", "2"),
            *("--lies", "too few votes"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Root lane: chain cost per node per round" in done.stdout
    assert "a credit with fewer votes than quorum" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "scripts.bench_root_lane", "--lies", "bribery"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "unknown lie 'bribery'" in bad.stderr
