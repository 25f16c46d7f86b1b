"""What every layer shares with the contract, defined here once: the score unit (a verifier
reward of 1.0 on one rollout is SCORE_SCALE units: SwarmLedger.SCORE_SCALE, the batch format and
the verifiers agree on it) and the ledger's clock (SwarmLedger.currentRound)."""

SCORE_SCALE = 10_000
BPS = 10_000  # basis points in a whole (the ledger's bps parameters)
MAX_ROLLOUTS = 65_536  # SwarmLedger.MAX_ROLLOUTS: the most rollouts a submission may claim


def format_score(units: int) -> str:
    """Returns score units as the summed verifier reward they stand for (10,000 = 1.0)."""
    return f"{units / SCORE_SCALE:.4f}"


def round_at(t: float, genesis: float, round_length: float) -> int:
    """Returns the ledger's round at unix time t: (t - genesis) // round_length."""
    return int((t - genesis) // round_length)


# A sampled token's log-probability in a batch (sapo.rollouts/5): nats in 1/LOGPROB_SCALE,
# rounded, at most 0 and no lower than LOGPROB_FLOOR nats (an honest draw's u lies on a 2^-64
# grid, so no drawn token is below about -44.4 nats; the floor only bounds what a decoder takes)
LOGPROB_SCALE = 10_000
LOGPROB_FLOOR = -100


def to_logprob_units(logprob: float) -> int:
    """Returns a log-probability (nats, <= 0) in batch units, clamped to [LOGPROB_FLOOR, 0]."""
    if logprob != logprob or logprob < LOGPROB_FLOOR:  # NaN, -inf (a token of probability 0)
        return LOGPROB_FLOOR * LOGPROB_SCALE
    return max(LOGPROB_FLOOR * LOGPROB_SCALE, min(0, round(logprob * LOGPROB_SCALE)))


def logprob_value(units: int) -> float:
    """Returns batch units as nats."""
    return units / LOGPROB_SCALE
