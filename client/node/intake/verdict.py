"""The verdict on a peer's batch, from what its fetch worker found: a pure function of the
fetch, the re-verification and the proof of generation, with no journal, chain or clock, so
every branch is testable on its own (tests/unit/test_node.py) the way client.sapo.loss is.

The verdicts, and the vote each leads to (client.node.intake.voting):
- `Missing`: nobody gave us the batch, or (`withheld`) the batch but not the checkpoints its
  beacon opened; fetched again later, and after `[sapo].unavailable_after` such attempts in a row
  an unavailable vote, or a dispute (findings WITHHELD) when the batch itself was had: a producer
  that withholds its openings would otherwise forge unopened-looking rounds at no risk.
- `Rejected`: available and not valid (malformed, foreign tasks, a failed proof of generation):
  attested 0 with the findings bits, which disputes it.
- `Deferred`: our own disk stopped the check (the spool): no verdict, nothing counted against the
  producer.
- `Accepted`: valid; its items may be trained on, and our vote attests what we recomputed
  (agreeing when the claims hold, disputing when they do not).
"""

from __future__ import annotations

from dataclasses import dataclass

from client.credit import GENERATION, MALFORMED
from client.node.journal.peers import PeerSubmission, item_record
from client.node.proving import GenerationCheck
from client.node.rollouts import Verification
from client.store import StoreError
from client.store.batch import RolloutBatch, Sampled
from client.store.errors import SpoolError
from client.store.exchange import NOT_THE_PRODUCERS_FAULT
from client.store.weights import WeightsError


@dataclass(frozen=True)
class Proof:
    """What a drawn checker's proof of generation came to, on a fetch worker."""

    started: float
    ended: float
    outcome: GenerationCheck | StoreError  # a StoreError: the checkpoints could not be had
    manifests: list  # the fetched checkpoints' manifests (to pin them)


@dataclass(frozen=True)
class Fetched:
    """What a fetch worker found: the batch and whose node gave it, or the StoreError that
    stopped the fetch; with a batch, our re-verification of it (and when it ran); drawn to
    check it, the proof of generation."""

    started: float
    ended: float
    result: tuple[RolloutBatch, str] | StoreError
    proof: Proof | None = None
    verified: tuple[Verification, float, float] | None = None


@dataclass(frozen=True)
class Missing:
    error: StoreError
    took: float  # seconds the attempt took (its retry is spread over what is left)
    withheld: int | None = None  # the batch was had, not its openings: our recomputed score


@dataclass(frozen=True)
class Rejected:
    reason: str
    claimed: int
    findings: int


@dataclass(frozen=True)
class Deferred:
    error: SpoolError


@dataclass(frozen=True)
class Accepted:
    batch: RolloutBatch
    source: str
    check: Verification
    proof: GenerationCheck | None  # None: not drawn, or its claims are wrong whatever its weights
    manifests: list  # the opened checkpoints fetched (pinned, like the batch, for later checkers)

    @property
    def reason(self) -> str | None:
        """Why our vote disputes it (None: its claims hold)."""
        check = self.check
        if check.agrees:
            return None
        return (
            f"claimed score {check.claimed} and signal {check.claimed_signal} but our "
            f"verifier gives {check.recomputed} and {check.recomputed_signal}"
            + (
                f"; {check.rewards_differ} item(s) claim rewards that are not their completions'"
                if check.rewards_differ
                else ""
            )
        )

    def items(self) -> list[dict]:
        """Its items as the journal keeps them, with OUR verifier's rewards."""
        return [
            item_record(
                item.question, list(item.completions), c.rewards, Sampled.of(self.batch, item)
            )
            for item, c in zip(self.batch.items, self.check.items, strict=True)
        ]

    def proof_summary(self) -> dict | None:
        p = self.proof
        if p is None:
            return None
        return {
            "completions": p.completions,
            "redrawn": p.redrawn,
            "tokens": p.tokens,
            "min_margin": p.min_margin,
            "logprob_gap": p.logprob_gap,
        }


Judgement = Missing | Rejected | Deferred | Accepted


def judge(sub: PeerSubmission, fetched: Fetched) -> Judgement:
    """The verdict on `sub`'s batch from what its fetch found."""
    if isinstance(fetched.result, StoreError):
        if isinstance(fetched.result, NOT_THE_PRODUCERS_FAULT):
            return Missing(fetched.result, fetched.ended - fetched.started)
        # the peer published something that is not a valid batch
        return Rejected(str(fetched.result), sub.score, MALFORMED)
    batch, source = fetched.result
    assert fetched.verified is not None  # a fetched batch is verified on its worker
    check = fetched.verified[0]
    if not check.valid:
        return Rejected(check.reason or "invalid batch", check.claimed, check.findings)
    proof, manifests = fetched.proof, []
    outcome = None if proof is None else proof.outcome
    if isinstance(outcome, SpoolError):  # our disk, not the producer: again later
        return Deferred(outcome)
    if isinstance(outcome, WeightsError):  # a checkpoint that is not one
        return Rejected(f"proof of generation: {outcome}", check.claimed, GENERATION)
    if isinstance(outcome, StoreError):  # the opened checkpoints could not be had
        if check.agrees:  # the batch could: once in a row too often, a withheld proof
            return Missing(outcome, proof.ended - proof.started, withheld=check.recomputed)
        outcome = None  # its claims are wrong whatever its weights: attest ours
    elif outcome is not None:
        if not outcome.passed:
            reason = (
                f"proof of generation: {outcome.failed} of {outcome.completions} completions "
                f"failed ({outcome.redrawn} re-drawn): {outcome.reason}"
            )
            return Rejected(reason, check.claimed, GENERATION)
        manifests = proof.manifests
    return Accepted(batch, source, check, outcome, manifests)
