"""The exact odds of the ledger's credit rule when stake is unequal: what a holder of a share f of
all stake can do to honest batches and get for its own free claims, under the seat rule of
SwarmLedger and under the stake-weighted vote it replaced. No sampling: binomial arithmetic on
the rules as the ledger's contracts write them (the draw: contracts/lib/SeatDraw.sol; the
verdict: contracts/lib/Tally.sol; scripts/odds_credit.py prints the tables;
tests/unit/test_odds.py checks them against draws of `Beacon.seats`).

The rules, for one batch with K = `checkers` and Q = `quorum`:
- seats (now): each staked node other than the producer holds Binomial(K, its share of stake)
  seats; credited iff at least Q distinct checkers agreed and agreeing seats >= disputing +
  unavailable seats.
- v3: each node is drawn with probability min(1, K * its share) and its vote weighs its stake;
  credited iff at least Q drawn checkers agreed and agreeing stake >= disputing + unavailable stake.

The adversary is either one address holding f (a "whale"; the honest stake is split equally over
the other N - 1 nodes) or round(f * N) addresses of one equal stake each (a sybil set; N - that
many honest). Every honest drawn checker votes as the evidence says (agrees with an honest batch,
votes unavailable on a free claim, in time); every adversary checker votes against honest
batches (a dispute or an unavailable vote: both count against credit) and for its own claims.
"""

from __future__ import annotations

from math import lgamma, log, log1p

import numpy as np


def _cap(checkers: int) -> int:
    """Seat tallies are tracked up to this many; more lands in the last bucket (its mass is far
    below what the tables print: a tally that large is many standard deviations above K)."""
    return 4 * checkers + 40


def binom_pmf(n: int, p: float, top: int) -> np.ndarray:
    """P(X = k) for X ~ Binomial(n, p), k = 0..top, the mass above `top` added to `top`."""
    out = np.zeros(top + 1)
    if n <= 0 or p <= 0.0:
        out[0] = 1.0
        return out
    if p >= 1.0:
        out[min(n, top)] = 1.0
        return out
    k = np.arange(min(n, top) + 1)
    log_pmf = (
        lgamma(n + 1)
        - np.array([lgamma(x + 1) + lgamma(n - x + 1) for x in k])
        + k * log(p)
        + (n - k) * log1p(-p)
    )
    out[: len(k)] = np.exp(log_pmf)
    out[top] += max(0.0, 1.0 - out.sum())  # the tail above top (0 when n <= top)
    return out


def _combine(a: np.ndarray, b: np.ndarray, quorum: int, cap: int) -> np.ndarray:
    """The (distinct checkers capped at Q, seats capped at `cap`) distribution of two independent
    groups of checkers, from theirs."""
    out = np.zeros_like(a)
    for d1 in range(quorum + 1):
        for d2 in range(quorum + 1):
            if not a[d1].any() or not b[d2].any():
                continue
            seats = np.convolve(a[d1], b[d2])
            seats[cap] += seats[cap + 1 :].sum()
            out[min(quorum, d1 + d2)] += seats[: cap + 1]
    return out


def committee(count: int, share: float, checkers: int, quorum: int) -> np.ndarray:
    """P[d, h]: `count` checkers of one stake `share` each, under the seat rule: d of them hold
    a seat (capped at Q) and they hold h seats in all (capped at the tally cap)."""
    cap = _cap(checkers)
    one = np.zeros((quorum + 1, cap + 1))
    pmf = binom_pmf(checkers, share, cap)
    one[0, 0] = pmf[0]
    one[min(1, quorum), 1:] = pmf[1:]
    result = np.zeros_like(one)
    result[0, 0] = 1.0
    power = one
    while count:
        if count & 1:
            result = _combine(result, power, quorum, cap)
        count >>= 1
        if count:
            power = _combine(power, power, quorum, cap)
    return result


def _survival(pmf: np.ndarray) -> np.ndarray:
    """P(X > h) for h = 0..len-1."""
    return 1.0 - np.cumsum(pmf)


def seats_honest_batch_lost(
    nodes: int, share: float, one_address: bool, checkers: int, quorum: int
) -> float:
    """Seat rule: P(an honest batch that its honest checkers would credit loses its credit to
    the adversary's votes), i.e. P(at least Q honest checkers hold seats and the adversary's
    seats exceed theirs)."""
    cap = _cap(checkers)
    if one_address:
        honest_n = nodes - 1
        honest = committee(honest_n - 1, (1 - share) / honest_n, checkers, quorum)
        adversary = binom_pmf(checkers, share, cap)
    else:
        bad = max(1, round(share * nodes))
        honest = committee(nodes - bad - 1, 1 / nodes, checkers, quorum)
        adversary = binom_pmf(checkers * bad, 1 / nodes, cap)
    return float(honest[quorum] @ _survival(adversary))


def seats_free_claim_credited(nodes: int, share: float, checkers: int, quorum: int) -> float:
    """Seat rule: P(a free claim of a sybil set holding `share` of stake in equal stakes is
    credited): at least Q of its other addresses hold seats and agree, and their seats are at
    least those of every honest checker (all voting unavailable)."""
    cap = _cap(checkers)
    bad = max(1, round(share * nodes))
    friends = committee(bad - 1, 1 / nodes, checkers, quorum)
    honest = binom_pmf(checkers * (nodes - bad), 1 / nodes, cap)
    at_most = np.cumsum(honest)  # P(H <= a)
    return float(friends[quorum] @ at_most)


def v3_honest_batch_lost(
    nodes: int, share: float, one_address: bool, checkers: int, quorum: int
) -> float:
    """v3's rule: the same chance, with draws of probability min(1, K * stake share) and votes
    weighed by stake."""
    if one_address:
        honest_n = nodes - 1
        each = (1 - share) / honest_n
        drawn = binom_pmf(honest_n - 1, min(1.0, checkers * each), honest_n - 1)
        whale = min(1.0, checkers * share)
        # lost when the whale is drawn and its stake exceeds the d drawn honest checkers' stake
        return float(
            whale * sum(p for d, p in enumerate(drawn) if d >= quorum and share > d * each)
        )
    bad = max(1, round(share * nodes))
    p = min(1.0, checkers / nodes)
    honest = binom_pmf(nodes - bad - 1, p, nodes - bad - 1)
    adversary = binom_pmf(bad, p, bad)
    over = _survival(adversary)  # P(C_a > d)
    return float(sum(honest[d] * over[d] for d in range(quorum, min(len(honest), bad))))


def v3_free_claim_credited(nodes: int, share: float, checkers: int, quorum: int) -> float:
    """v3's rule: P(a sybil set's free claim is credited): at least Q of its other addresses
    drawn, and no more honest checkers drawn than them (equal stakes)."""
    bad = max(1, round(share * nodes))
    p = min(1.0, checkers / nodes)
    friends = binom_pmf(bad - 1, p, max(0, bad - 1))
    honest = binom_pmf(nodes - bad, p, nodes - bad)
    at_most = np.cumsum(honest)
    return float(
        sum(friends[a] * at_most[min(a, len(at_most) - 1)] for a in range(quorum, len(friends)))
    )


def unfilled_committee(nodes: int, checkers: int, quorum: int) -> float:
    """P(fewer than Q distinct checkers are drawn for a batch) among `nodes` equal stakes (the
    producer one of them): each other node holds a seat with 1 - (1 - 1/N)^K. A family's own
    size sets it: its batches draw only its nodes."""
    from math import comb

    drawn = 1 - (1 - 1 / nodes) ** checkers
    others = nodes - 1
    return sum(
        comb(others, i) * drawn**i * (1 - drawn) ** (others - i)
        for i in range(min(quorum, others + 1))
    )
