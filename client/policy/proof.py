"""Proof of generation's core (docs/credit.md): checking that one completion is the seeded draw of a
model. `check_draws` teacher-forces the prompt and the completion's token ids through the
model once, recompute each position's sampling distribution, and test that the draw u the seed
gives that position (client.policy.sampling.Draws) falls in the cumulative-probability interval of
the token the completion has. A completion sampled by `TransformersBackend` from these weights
with this seed passes up to numerics (`eps`); text written by hand or by another model fails at
its first token that is not the draw.
The batch-level check (openings, which rows, a checker's model) is client.node.proving.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from client.policy.policy import Policy
from client.policy.sampling import Draws, distribution

# numeric tolerance of a draw against its interval's edges. float32 interval edges computed on
# two CPUs agreed exactly and on a CPU and an H100 within 1.5e-6 (docs/results/numerics:
# scripts/bench-numerics), over the 1e-6 this was; 1e-5 covers that with room, and lets a
# forger move off the draw only where u falls within 1e-5 of an edge, to the token beside it
EPS = 1e-5


@dataclass(frozen=True)
class DrawCheck:
    tokens: int
    outside: int  # tokens whose u lies outside their interval by more than eps
    first_outside: int | None  # the position of the first one
    min_margin: float  # the smallest distance of a u inside its interval from the interval's edge

    @property
    def passed(self) -> bool:
        return self.outside == 0


@torch.no_grad()
def check_draws(
    policy: Policy,
    prompt: str,
    completion_ids: list[int],
    *,
    seed: int,
    row: int,
    temperature: float,
    top_p: float,
    eps: float = EPS,
) -> DrawCheck:
    """Whether `completion_ids` are row `row`'s seeded draws of `seed` from the policy's weights
    at `temperature` and `top_p` (see Draws for rows)."""
    if not completion_ids:
        return DrawCheck(0, 0, None, 1.0)
    if temperature <= 0:  # greedy: every token is the argmax
        steps = _step_logits(policy, prompt, completion_ids)
        wrong = [t for t, tok in enumerate(completion_ids) if int(steps[t].argmax()) != tok]
        return DrawCheck(len(completion_ids), len(wrong), wrong[0] if wrong else None, 0.0)
    gaps = draw_gaps(
        policy, prompt, completion_ids, seed=seed, row=row, temperature=temperature, top_p=top_p
    )
    outside = [t for t, gap in enumerate(gaps) if gap > eps]
    inside = [-gap for gap in gaps if gap <= eps]
    return DrawCheck(
        len(gaps), len(outside), outside[0] if outside else None, min(inside, default=1.0)
    )


@torch.no_grad()
def draw_gaps(
    policy: Policy,
    prompt: str,
    completion_ids: list[int],
    *,
    seed: int,
    row: int,
    temperature: float,
    top_p: float,
) -> list[float]:
    """Each sampled token's distance outside its cumulative-probability interval: how far the
    seed's u lies below the interval's low edge or above its high edge under these weights (a
    negative gap is a u inside, by that margin). A draw passes at tolerance eps when every gap is
    at most eps; the largest gap of honest draws is the numeric error between the sampler's and
    the checker's hardware (scripts/bench-numerics)."""
    if not completion_ids:
        return []
    steps = _step_logits(policy, prompt, completion_ids)
    cdf = distribution(steps, temperature, top_p).cumsum(-1)
    draws = Draws(seed)
    gaps = []
    for t, token in enumerate(completion_ids):
        u = draws.uniform(row, t)
        low = float(cdf[t, token - 1]) if token > 0 else 0.0
        high = float(cdf[t, token])
        gaps.append(max(low - u, u - high))
    return gaps


def _step_logits(policy: Policy, prompt: str, completion_ids: list[int]) -> torch.Tensor:
    """The logits that predict each completion token, from one teacher-forced pass."""
    prompt_ids = policy.tokenizer(prompt)["input_ids"]
    ids = torch.tensor([prompt_ids + list(completion_ids)], device=policy.device)
    logits = policy.model(input_ids=ids).logits[0]
    start = len(prompt_ids) - 1  # the logits at position p predict token p + 1
    return logits[start : start + len(completion_ids)]
