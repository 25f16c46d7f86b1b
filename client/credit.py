"""What a batch earns: its learning signal, re-computable by anyone from the batch and a verifier.

The ledger splits a round's reward pro rata to the credited *signal* of each batch, not to its
score. A score pays for correct answers, and correct answers are free: a round's questions and
their reference answers are regenerated from the public task seed. What a SAPO learner gains from
a group of L completions of one question is the spread of their rewards: GRPO's advantage of a
completion is its reward minus the group's mean (divided by the group's spread), so a group whose
rewards are all equal has advantage 0 everywhere, adds nothing to the gradient, and SAPO's sampler
drops it (SAPO.md: "the paper drops items whose completions all got the same reward").

Rule (integers only, so every checker computes the same number). For a group with rewards
r_1..r_L in score units (SCORE_SCALE = 1.0) and S = r_1 + ... + r_L:

    signal(group) = floor( sum_i |L * r_i - S| / L )        = sum_i |r_i - mean(r)|, floored

and a batch's signal is the sum over its groups. It is the L1 norm of the group's un-normalised
advantages (Dr. GRPO's r_i - mean): 0 for an all-correct or all-wrong group; for binary rewards
with k of L correct it is 2 k (L - k) / L * SCORE_SCALE, largest at k = L/2 (L/2 * SCORE_SCALE),
where the group tells a learner most about which answers to prefer (a Bernoulli outcome's variance
p(1 - p) is largest at p = 1/2). A near-tie (one completion a hair better) earns a hair, not a
whole group: the learner's std-normalised advantage would amplify it, but its information is small.

Gaming surface, and what closes it:
- All-correct batches (reference answers typed in) earn 0 by the rule itself.
- Mixed batches written by hand (half reference answers, half wrong) would earn the maximum:
  the rule alone does not stop that; the proof of generation does (client.node.proving:
  completions must be the seeded draws of the checkpoints the batch names, or it is disputed).
- Choosing easy or hard questions is impossible: tasks are drawn from the seed.
- A node may pick its temperature or completion length; both change what it samples, honestly:
  a temperature that yields more mixed groups is one whose rollouts carry more signal.
- More completions per question or more local rounds earn more: that is more sampling work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def group_signal(rewards: Sequence[int]) -> int:
    """Returns a group's learning signal in score units (see the module docstring)."""
    n = len(rewards)
    if n < 2:
        return 0
    total = sum(rewards)
    return sum(abs(n * r - total) for r in rewards) // n


def batch_signal(groups: Iterable[Sequence[int]]) -> int:
    """Returns the summed signal of a batch's groups (each a list of rewards in score units)."""
    return sum(group_signal(g) for g in groups)


# What a checker found wrong with a batch: the `findings` bits of its on-chain attestation (the
# ledger stores none of them; they are in the Attested event for audits). 0: nothing.
FOREIGN_TASKS = 1  # a task, question or catalog is not the one the round's seed draws
SCORE_DIFFERS = 2  # our verifier's summed score differs from the claim
SIGNAL_DIFFERS = 4  # the learning signal recomputed from our rewards differs from the claim
MALFORMED = 8  # the bytes behind the digest are not a valid batch of this round and node
GENERATION = 16  # completions that are not the seeded draws of the checkpoints the batch names
# the batch could be fetched but the checkpoints its beacon opened could not, `unavailable_after`
# attempts in a row: its proof is withheld, a dispute (a batch nobody can fetch stays unavailable)
WITHHELD = 32
FINDINGS = {
    FOREIGN_TASKS: "foreign tasks",
    SCORE_DIFFERS: "score differs",
    SIGNAL_DIFFERS: "signal differs",
    MALFORMED: "malformed batch",
    GENERATION: "not the seeded draws of its checkpoints",
    WITHHELD: "opened checkpoints withheld",
}


def describe_findings(bits: int) -> str:
    """The findings bits in words ('' for none; unknown bits by number)."""
    words = [name for bit, name in FINDINGS.items() if bits & bit]
    unknown = bits & ~sum(FINDINGS)
    if unknown:
        words.append(f"bits {unknown:#x}")
    return ", ".join(words)
