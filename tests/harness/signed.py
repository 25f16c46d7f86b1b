"""Signed messages for tests of the root lane's aggregation: one deployment's domain (and
another's), a round, nine keys, and a producer's submission and a checker's vote as a node signs
them (client.chain.messages)."""

from __future__ import annotations

from eth_account import Account

from client.chain.messages import Domain, Signed, Submission, Vote
from client.units import SCORE_SCALE

DOMAIN = Domain(chain_id=31337, contract="0x5FbDB2315678afecb367f032d93F642f64180aa3")
OTHER = Domain(chain_id=31337, contract="0x" + "11" * 20)
ROUND = 7
KEYS = [Account.from_key(bytes([i + 1]) * 32) for i in range(9)]


def batch_digest(key) -> str:
    """The digest a test producer's batch has: its address, padded."""
    return "0x" + key.address[2:].lower().rjust(64, "0")


def signed_submission(
    key,
    signal: int = SCORE_SCALE,
    domain: Domain = DOMAIN,
    round_: int = ROUND,
    rollouts: int = 8,
) -> Signed:
    message = Submission(
        round=round_,
        digest=batch_digest(key),
        rollouts=rollouts,
        score=4 * SCORE_SCALE,
        signal=signal,
    )
    return Signed.sign(message, domain, key.key)


def signed_vote(
    key,
    producer,
    *,
    score: int = 4 * SCORE_SCALE,
    signal: int = SCORE_SCALE,
    domain: Domain = DOMAIN,
    digest: str | None = None,
    unavailable: bool = False,
) -> Signed:
    message = Vote(
        round=ROUND,
        producer=producer.address,
        digest=digest or batch_digest(producer),
        unavailable=unavailable,
        score=score,
        signal=signal,
        findings=0,
    )
    return Signed.sign(message, domain, key.key)
