"""client.chain.odds, the exact arithmetic behind scripts/odds_credit.py, against the rule itself:
the committee distribution against enumeration, and the seat rule's odds against draws made with
`Beacon.seats` (the client's copy of the ledger's draw, which test_ledger checks against
`seatsOf` on anvil) from random beacons."""

from __future__ import annotations

import itertools
import random
from math import comb, sqrt

from client.chain import odds
from client.chain.models import Beacon


def test_the_committee_distribution_is_the_enumerated_one() -> None:
    # 3 checkers of share 0.3, K = 2 trials each: every seat count (0..2) of each, enumerated
    k, share, quorum = 2, 0.3, 2
    pmf = [comb(k, x) * share**x * (1 - share) ** (k - x) for x in range(k + 1)]
    want: dict[tuple[int, int], float] = {}
    for seats in itertools.product(range(k + 1), repeat=3):
        key = (min(quorum, sum(s > 0 for s in seats)), sum(seats))
        want[key] = want.get(key, 0.0) + pmf[seats[0]] * pmf[seats[1]] * pmf[seats[2]]
    got = odds.committee(3, share, k, quorum)
    for (d, h), p in want.items():
        assert abs(got[d, h] - p) < 1e-12, (d, h, got[d, h], p)
    assert abs(got.sum() - 1.0) < 1e-12


def test_the_v3_rule_gives_the_issue_s_measured_figures() -> None:
    # issue 40: at 10,000 equal honest nodes, K = 10, Q = 3, an address with 1% of stake cancels
    # about 10% of honest batches, and with 10% nearly every one
    assert 0.09 < odds.v3_honest_batch_lost(10_000, 0.01, True, 10, 3) < 0.11
    assert odds.v3_honest_batch_lost(10_000, 0.10, True, 10, 3) > 0.99
    # seats: the same address holds about 1 seat of 10, and cancels nearly none
    assert odds.seats_honest_batch_lost(10_000, 0.10, True, 10, 3) < 1e-3


def _simulate(trials: int, rng: random.Random) -> tuple[float, float]:
    """Draws of the real rule on 12 nodes, K = 6, Q = 2: (P(an honest batch is cancelled by one
    address holding half the stake), P(a free claim of 6 equal stakes of 12 is credited))."""
    k, quorum = 6, 2
    names = [f"0x{rng.getrandbits(160):040x}" for _ in range(13)]
    lost = credited = 0
    for _ in range(trials):
        beacon = Beacon(round=1, node=names[0], beacon=rng.getrandbits(88), block=1, ready=True)
        # one address with half of the stake, 11 honest nodes with the rest; names[0] produces
        whale = beacon.seats(names[12], 550, 1_100, k)
        honest = [beacon.seats(n, 50, 1_100, k) for n in names[1:11]]  # (the 11th produces)
        if sum(s > 0 for s in honest) >= quorum and whale > sum(honest):
            lost += 1
        # 12 equal stakes, 6 of them a sybil set whose member names[0] makes a free claim
        friends = [beacon.seats(n, 1, 12, k) for n in names[1:6]]
        others = [beacon.seats(n, 1, 12, k) for n in names[6:12]]
        if sum(s > 0 for s in friends) >= quorum and sum(friends) >= sum(others):
            credited += 1
    return lost / trials, credited / trials


def test_the_seat_odds_match_draws_of_the_ledger_s_rule() -> None:
    trials = 800
    lost, credited = _simulate(trials, random.Random(40))
    for seen, want in (
        (lost, odds.seats_honest_batch_lost(12, 0.5, True, 6, 2)),
        (credited, odds.seats_free_claim_credited(12, 0.5, 6, 2)),
    ):
        sigma = sqrt(want * (1 - want) / trials)
        assert abs(seen - want) < 4 * sigma, f"simulated {seen:.3f}, exact {want:.3f}"


def test_a_small_family_s_unfilled_committee_matches_the_ledger_s_draw() -> None:
    """A model family of N equal nodes (ledger v4 draws a batch's committee from its family
    alone): the odds that fewer than Q distinct checkers are drawn, against draws of the real
    rule (`Beacon.seats`) from random beacons."""
    rng = random.Random(41)
    n, k, q, trials = 5, 10, 3, 3_000
    others = [f"0x{i:040x}" for i in range(1, n)]
    short = 0
    for _ in range(trials):
        beacon = Beacon(
            round=1, node="0x" + "ab" * 20, beacon=rng.getrandbits(88), block=2, ready=True
        )
        drawn = sum(beacon.seats(c, 1, n, k) > 0 for c in others)
        short += drawn < q
    p = odds.unfilled_committee(n, k, q)
    assert abs(short / trials - p) < 4 * sqrt(p * (1 - p) / trials) + 1e-3, (short / trials, p)
    # a family of Q nodes or fewer never fills its committee; one with many rarely misses it
    assert odds.unfilled_committee(q, 255, q) == 1.0
    assert odds.unfilled_committee(1_000, 40, q) < 1e-12


def test_forging_any_share_of_a_batch_loses_and_did_not_before() -> None:
    # issue 57: scripts/odds_forging.py, exact and measured on the real openings; before, a forged
    # round beside many small honest rounds escaped 99% of the time whatever its share
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "scripts.odds_forging", "--beacons", "300"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| 1/")]
    assert len(rows) == 8
    for phi, layout, _, _, _, before_gain, _, _, after_gain in (map(str.strip, r) for r in rows):
        assert float(after_gain) < 0, (phi, layout, after_gain)
        if layout == "concentrated" and phi != "1/512":
            assert float(before_gain) > 0, (phi, before_gain)  # the attack the issue found


def test_the_hand_packed_draw_is_seatdraws_abi_encoded_one() -> None:
    """Beacon.seats packs abi.encode(beacon, round, node, checker) and abi.encode(base, j) by
    hand (a node draws it for every peer batch of its family each round): the same seats as
    the encoding eth_abi makes, which is SeatDraw's, on random draws at every stake share."""
    from eth_abi import encode
    from eth_utils import keccak

    def reference(b: Beacon, checker: str, stake: int, total: int, k: int) -> int:
        words = encode(
            ["uint256", "uint64", "address", "address"], [b.beacon, b.round, b.node, checker]
        )
        base = keccak(words)
        return sum(
            (int.from_bytes(keccak(encode(["bytes32", "uint256"], [base, j]))) >> 128) * total
            < stake << 128
            for j in range(k)
        )

    rng = random.Random(59)
    held = 0
    for _ in range(400):
        b = Beacon(
            round=rng.randrange(2**64),
            node="0x" + rng.randbytes(20).hex(),
            beacon=rng.randrange(1, 2**88),
            block=1,
            ready=True,
        )
        checker = "0x" + rng.randbytes(20).hex().upper()  # any case: the bytes are the same
        stake = rng.randrange(1, 10**20)
        total = stake + rng.randrange(0, 10**20)
        got = b.seats(checker, stake, total, 10)
        assert got == reference(b, checker.lower(), stake, total, 10)
        held += got
    assert 400 < held < 4_000  # both outcomes of a trial were drawn many times
