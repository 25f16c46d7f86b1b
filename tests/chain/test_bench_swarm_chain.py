"""`python -m scripts.bench_swarm_chain`, small: its figures are the chain's own (receipts of
honest rounds that all went through), its local draw is the ledger's, and the observer's reads
go through the node's discovery and seat code and find exactly the committees it sits on."""

from __future__ import annotations

import subprocess
import sys

from scripts.bench_swarm_chain import play_one


def test_a_small_swarm_plays_honest_rounds_and_the_observer_finds_its_seats() -> None:
    nodes, rounds = 12, 2
    play, gas, txs, observed, _, sampled = play_one(
        nodes, rounds, checkers=10, quorum=3, claim_every=10, full_max=1_000, sample=100
    )
    assert not sampled and play.gas.reverted == 0
    # every node submitted and settled each round, and claimed once what it earned; the drawn
    # checkers voted
    assert txs["submit"] == txs["settle"] == nodes * rounds
    earners = [a for a in play.addresses if any(play.credited(r, a) for r in play.committees)]
    assert txs["claim"] == len(earners) > 0
    seats = sum(len(c) for committees in play.committees.values() for c in committees.values())
    assert txs["attest"] == seats > 0
    assert 50_000 < gas["submit"] / txs["submit"] < 120_000
    # the observer's local draw (Seats.prepare) finds exactly the committees it sits on, in
    # both rounds; its first round looks up the peers' families, the next one does not (what
    # else it reads depends on how many committees the beacons gave it a seat on)
    me = play.addresses[0]
    assert len(observed) == 2
    for reads, round_ in zip(observed, sorted(play.committees), strict=True):
        assert reads.peers == nodes - 1
        assert reads.drawn == sum(me in c for c in play.committees[round_].values())
        assert reads.answered_bytes > 0
    assert observed[0].node_infos >= nodes - 1 and observed[1].node_infos == 0


def test_above_the_full_draw_the_sample_is_voted_and_scaled() -> None:
    nodes, sample = 10, 4
    play, _, txs, _, _, sampled = play_one(
        nodes, 1, checkers=10, quorum=3, claim_every=10, full_max=5, sample=sample
    )
    assert sampled and play.gas.reverted == 0
    voted = next(iter(play.committees.values()))
    assert len(voted) == sample
    # the sample's votes and claims, scaled to every producer
    assert txs["attest"] == sum(len(c) for c in voted.values()) * nodes // sample
    earners = sum(play.credited(min(play.committees), p) for p in voted)
    assert txs["claim"] == earners * nodes // sample


def test_the_script_prints_its_tables() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scripts.bench_swarm_chain", "--nodes", "8", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Chain cost per node per round" in done.stdout
    assert "| 8 |" in done.stdout.replace("  ", " ")
