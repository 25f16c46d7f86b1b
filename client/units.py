"""The score unit every layer shares: a verifier reward of 1.0 on one rollout is SCORE_SCALE
units. The contract (SwarmLedger.SCORE_SCALE), the batch format and the verifiers agree on it;
it is defined here once."""

SCORE_SCALE = 10_000


def format_score(units: int) -> str:
    """Returns score units as the summed verifier reward they stand for (10,000 = 1.0)."""
    return f"{units / SCORE_SCALE:.4f}"
