"""When a batch nobody gave us is fetched again: the attempts owed before an unavailable vote,
spread over what is left of its window."""

from __future__ import annotations

from client.chain.models import LedgerParams

RETRY_MIN_S = 2.0  # the shortest wait between fetches of a batch nobody gave us


def retry_delay(
    params: LedgerParams,
    unavailable_after: int,
    round_: int,
    failures: int,
    took: float,
    now: float,
    appealed: bool = False,
) -> float:
    """Seconds to wait before fetching again a batch of `round_` that `failures` attempts in a
    row (the last took `took` s, ending at unix time `now`) found nowhere. The attempts still
    owed before an unavailable vote (`unavailable_after` in all) are spread over what is left of
    its attestation window, less a quarter round for the vote's transaction and one gap of slack
    for the queue: a producer whose node is briefly down gets the most time to come back, and a
    batch nobody has still gets its vote before the window closes (a fixed half-round spacing
    left most free claims unvoted at 20-s rounds). Between RETRY_MIN_S and half a round; once the
    vote is owed, half a round (a batch we are not drawn to check is fetched to learn from; one
    we voted on is not fetched again). An `appealed` batch's window is its appeal's."""
    half = max(RETRY_MIN_S, params.round_length / 2)
    owed = unavailable_after - failures
    if owed <= 0:
        return half
    last = params.final_after(round_) if appealed else params.close(round_)
    closes = params.round_start(last + 1) - params.round_length / 4
    spare = closes - now - owed * took  # the time not spent in the attempts themselves
    return min(half, max(RETRY_MIN_S, spare / (owed + 1)))
