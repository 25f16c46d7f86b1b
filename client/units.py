"""What every layer shares with the contract, defined here once: the score unit (a verifier
reward of 1.0 on one rollout is SCORE_SCALE units: SwarmLedger.SCORE_SCALE, the batch format and
the verifiers agree on it) and the ledger's clock (SwarmLedger.currentRound)."""

SCORE_SCALE = 10_000


def format_score(units: int) -> str:
    """Returns score units as the summed verifier reward they stand for (10,000 = 1.0)."""
    return f"{units / SCORE_SCALE:.4f}"


def round_at(t: float, genesis: float, round_length: float) -> int:
    """Returns the ledger's round at unix time t: (t - genesis) // round_length."""
    return int((t - genesis) // round_length)
