"""The vote a verdict makes, as an outbox message: a pure function of what we found, so that the
intake's decision to vote and the publisher's sending of it share one type, not a string key.

Only a drawn checker votes (the intake asks client.node.intake.seats), at most
`[sapo].attest_budget` times a chain round: an attestation of our recomputed score and learning
signal (0 for a batch whose tasks are not the seed's, with the findings bits saying what was
wrong), or, once `[sapo].unavailable_after` fetches in a row found the batch nowhere (retried at
intervals spread over what is left of its window: client.node.intake.retries), an unavailable
vote, which cancels credit but never slashes; when the last of those fetches had the batch but
not the checkpoints its beacon opened, a dispute (findings WITHHELD). On an appealed batch the
appeal's committee votes again, under its own key.
"""

from __future__ import annotations

from client.credit import WITHHELD
from client.node.journal.outbox import Attest, Unavailable, vote_key
from client.node.journal.peers import PeerSubmission, VoteBasis
from client.node.journal.states import Verdict


def ballot(
    sub: PeerSubmission, basis: VoteBasis, *, appealed: bool, unavailable_after: int
) -> Attest | Unavailable | None:
    """Our vote on `sub`'s batch from what we found (None: not yet, too few attempts found it
    nowhere). `appealed`: on its appeal's committee."""
    if basis.verdict == Verdict.UNAVAILABLE:
        if basis.failures < unavailable_after:
            return None
        if basis.findings & WITHHELD:  # the batch, but never its openings
            return Attest(
                round=sub.round,
                node=sub.node,
                score=basis.score,
                signal=0,
                findings=WITHHELD,
                appeal=appealed,
            )
        return Unavailable(round=sub.round, node=sub.node, appeal=appealed)
    return Attest(
        round=sub.round,
        node=sub.node,
        score=basis.score,
        signal=basis.signal,
        findings=basis.findings,
        appeal=appealed,
    )


def disputes(vote: Attest | Unavailable, sub: PeerSubmission) -> bool:
    """Whether `vote` disputes the batch (findings, or a learning signal other than claimed): we
    then settle it once final unless someone did first, so that its slash lands (its producer
    would rather never settle it)."""
    return isinstance(vote, Attest) and bool(vote.findings or vote.signal != sub.signal)


def key_of(sub: PeerSubmission, appealed: bool) -> str:
    """The outbox key of our vote on the committee voting now on `sub`."""
    return vote_key(sub.round, sub.node, appealed)
