"""Proof of generation's core (docs/proof-of-generation.md): checking that one completion is the
seeded draw of a model. `check_draws` teacher-forces the prompt and the completion's token ids
through the model once, recompute each position's sampling distribution, and test that the draw u
the seed gives that position (client.policy.sampling.Draws) falls in the cumulative-probability
interval of the token the completion has. A completion sampled by `TransformersBackend` from these
weights with this seed passes up to numerics (`eps`); text written by hand or by another model fails
at its first token that is not the draw. The batch-level check (openings, which rows, a checker's
model) is client.node.proving.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from client.policy.policy import Policy
from client.policy.sampling import Draws
from client.sapo.distribution import distribution, sampled_logprobs
from client.units import LOGPROB_FLOOR

# the largest difference a checker accepts between a batch's claimed log-probability of a
# token (sapo.rollouts/5, in nats) and the one it re-computes: the claim's rounding to
# 1/LOGPROB_SCALE (5e-5) plus the numerics of two machines (scripts/bench_logprobs.py measures
# them). What a lie within it moves: a learner's importance weight of that token by 0.1%.
LOGPROB_TOLERANCE = 1e-3
# numeric tolerance of a draw against its interval's edges. float32 interval edges computed on
# two CPUs agreed exactly and on a CPU and an H100 within 1.5e-6 (docs/results/numerics:
# scripts/bench_numerics.py), over the 1e-6 this was; 1e-5 covers that with room, and lets a
# forger move off the draw only where u falls within 1e-5 of an edge, to the token beside it
EPS = 1e-5


@dataclass(frozen=True)
class DrawCheck:
    tokens: int
    outside: int  # tokens whose u lies outside their interval by more than eps
    first_outside: int | None  # the position of the first one
    min_margin: float  # the smallest distance of a u inside its interval from the interval's edge
    # the largest difference between a claimed log-prob and ours (nats; 0 when none claimed),
    # and the first token where it is over the tolerance
    logprob_gap: float = 0.0
    first_logprob_off: int | None = None

    @property
    def passed(self) -> bool:
        return self.outside == 0 and self.first_logprob_off is None


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
    logprobs: list[float] | None = None,
    logprob_tolerance: float = LOGPROB_TOLERANCE,
) -> DrawCheck:
    """Whether `completion_ids` are row `row`'s seeded draws of `seed` from the policy's weights
    at `temperature` and `top_p` (see Draws for rows) and, given the log-probs the batch claims
    for them (nats), whether each is the token's log-probability under the distribution it was
    drawn from, within `logprob_tolerance`."""
    if not completion_ids:
        return DrawCheck(0, 0, None, 1.0)
    if temperature <= 0:  # greedy: every token is the argmax
        steps = _step_logits(policy, prompt, completion_ids)
        finite = torch.isfinite(steps).all(-1)  # argmax of a row with a NaN is that NaN's index
        wrong = [
            t
            for t, tok in enumerate(completion_ids)
            if not bool(finite[t]) or int(steps[t].argmax()) != tok
        ]
        return DrawCheck(len(completion_ids), len(wrong), wrong[0] if wrong else None, 0.0)
    gaps, ours = redraw(
        policy, prompt, completion_ids, seed=seed, row=row, temperature=temperature, top_p=top_p
    )
    # written so that a NaN fails: weights or logits that are not finite give NaN gaps and
    # differences, and `nan > eps` is false, so "over the tolerance" would pass anything
    outside = [t for t, gap in enumerate(gaps) if not gap <= eps]
    inside = [-gap for gap in gaps if gap <= eps]
    differences = logprob_differences(logprobs, ours) if logprobs is not None else []
    off = [t for t, d in enumerate(differences) if not d <= logprob_tolerance]
    return DrawCheck(
        len(gaps),
        len(outside),
        outside[0] if outside else None,
        min(inside, default=1.0),
        max((math.inf if math.isnan(d) else d for d in differences), default=0.0),
        off[0] if off else None,
    )


def logprob_differences(claimed: list[float], ours: list[float]) -> list[float]:
    """Each token's |claimed - ours| in nats, ours floored as a batch floors a claim (a claim of
    another length differs everywhere: inf)."""
    if len(claimed) != len(ours):
        return [math.inf] * max(len(claimed), len(ours))
    return [abs(c - max(o, LOGPROB_FLOOR)) for c, o in zip(claimed, ours, strict=True)]


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
    the checker's hardware (scripts/bench_numerics.py)."""
    return redraw(
        policy, prompt, completion_ids, seed=seed, row=row, temperature=temperature, top_p=top_p
    )[0]


@torch.no_grad()
def redraw(
    policy: Policy,
    prompt: str,
    completion_ids: list[int],
    *,
    seed: int,
    row: int,
    temperature: float,
    top_p: float,
) -> tuple[list[float], list[float]]:
    """draw_gaps, and each token's log-probability under the distribution it is drawn from
    (float64 nats; -inf for a token outside the top-p nucleus)."""
    if not completion_ids:
        return [], []
    steps = _step_logits(policy, prompt, completion_ids)
    probs = distribution(steps, temperature, top_p)  # (T, V) float64
    cdf = probs.cumsum(-1)
    draws = Draws(seed)
    gaps = []
    for t, token in enumerate(completion_ids):
        u = draws.uniform(row, t)
        low = float(cdf[t, token - 1]) if token > 0 else 0.0
        high = float(cdf[t, token])
        gaps.append(max(low - u, u - high))
    chosen = probs.gather(-1, torch.tensor(completion_ids, device=probs.device)[:, None])
    return gaps, chosen.squeeze(-1).log().tolist()


@torch.no_grad()
def draw_gaps_batch(
    policy: Policy,
    prompts: list[str | list[int]],
    completions: list[list[int]],
    *,
    seed: int,
    rows: list[int],
    temperature: float,
    top_p: float,
) -> list[list[float]]:
    """draw_gaps of many completions (completion i is row rows[i] of the seed's draws) in one
    teacher-forced pass: sequences right-padded, so causal attention never sees a pad before a
    real token. A prompt is its text or its token ids (a caller re-drawing many completions of
    one prompt tokenizes it once). The batched pass runs other kernels than one sequence at a
    time, so its gaps differ from draw_gaps' by numerics only (scripts/bench_numerics.py checks in
    batches)."""
    if temperature <= 0:
        raise ValueError("draw gaps need temperature > 0 (a greedy draw has no intervals)")
    steps = _teacher_forced(policy, prompts, completions)
    if steps is None:
        return [[] for _ in completions]
    cdf = distribution(steps, temperature, top_p).cumsum(-1)  # (N, V) float64
    tokens = torch.tensor([t for c in completions for t in c], device=cdf.device)
    high = cdf.gather(1, tokens[:, None]).squeeze(1)
    low = torch.where(
        tokens > 0,
        cdf.gather(1, (tokens - 1).clamp(min=0)[:, None]).squeeze(1),
        torch.zeros_like(high),
    )
    draws = Draws(seed)
    u = torch.tensor(
        [
            draws.uniform(r, t)
            for r, c in zip(rows, completions, strict=True)
            for t in range(len(c))
        ],
        dtype=cdf.dtype,
        device=cdf.device,
    )
    return _split(torch.maximum(low - u, u - high).tolist(), completions)


@torch.no_grad()
def logprobs_batch(
    policy: Policy,
    prompts: list[str | list[int]],
    completions: list[list[int]],
    *,
    temperature: float,
    top_p: float,
    sequences: int = 16,
) -> list[list[float]]:
    """Each completion token's log-probability under the distribution it is drawn from (nats),
    from teacher-forced passes of `sequences` completions at a time: what a sampler that does
    not report them (vLLM's engine draws in its own process) writes into its batch."""
    out: list[list[float]] = []
    for start in range(0, len(completions), sequences):
        part = completions[start : start + sequences]
        steps = _teacher_forced(policy, prompts[start : start + sequences], part)
        if steps is None:
            out += [[] for _ in part]
            continue
        tokens = torch.tensor([t for c in part for t in c], device=steps.device)
        out += _split(sampled_logprobs(steps, tokens, temperature, top_p).tolist(), part)
    return out


def _split(flat: list[float], completions: list[list[int]]) -> list[list[float]]:
    out, start = [], 0
    for c in completions:
        out.append(flat[start : start + len(c)])
        start += len(c)
    return out


def _teacher_forced(
    policy: Policy, prompts: list[str | list[int]], completions: list[list[int]]
) -> torch.Tensor | None:
    """The logits (N, V) that predict every completion token, in order, from one pass over the
    right-padded sequences (None when the completions are all empty)."""
    tok = policy.tokenizer
    prompt_ids = [p if isinstance(p, list) else tok(p)["input_ids"] for p in prompts]
    lengths = [len(p) + len(c) for p, c in zip(prompt_ids, completions, strict=True)]
    width = max(lengths)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for b, (p, c) in enumerate(zip(prompt_ids, completions, strict=True)):
        _checked_ids(policy, p + list(c))
        ids[b, : len(p) + len(c)] = torch.tensor(p + list(c), dtype=torch.long)
        mask[b, : len(p) + len(c)] = 1
    logits = policy.model(
        input_ids=ids.to(policy.device), attention_mask=mask.to(policy.device)
    ).logits  # (B, L, V)
    # the logits at position p predict token p + 1: row b's completion tokens are predicted at
    # positions len(prompt_b) - 1 ... len(prompt_b) + len(completion_b) - 2
    batch = torch.cat(
        [torch.full((len(c),), b, dtype=torch.long) for b, c in enumerate(completions)]
    )
    positions = torch.cat(
        [
            torch.arange(len(p) - 1, len(p) - 1 + len(c))
            for p, c in zip(prompt_ids, completions, strict=True)
        ]
    )
    if positions.numel() == 0:
        return None
    return logits[batch.to(policy.device), positions.to(policy.device)]  # (N, V)


def within_model(policy: Policy, ids: list[int]) -> str | None:
    """Why `ids` cannot go through the policy's model (None when they can): a token id outside
    its vocabulary (an embedding lookup past the table: IndexError on a CPU, a device-side
    assert that poisons the CUDA context on a GPU), or a sequence longer than its positions."""
    vocab = model_vocabulary(policy)
    for t, token in enumerate(ids):
        if not 0 <= token < vocab:
            return f"token {t} is id {token}, outside the model's vocabulary of {vocab}"
    positions = model_positions(policy)
    if positions is not None and len(ids) > positions:
        return f"{len(ids)} tokens with its prompt, over the model's {positions} positions"
    return None


def model_vocabulary(policy: Policy) -> int:
    """The ids the policy's model embeds and predicts: its embedding table's rows (which may be
    more than the tokenizer's tokens: a sampler can draw any of them)."""
    return int(policy.model.get_input_embeddings().num_embeddings)


def model_positions(policy: Policy) -> int | None:
    """The longest sequence the model's position embeddings hold (None when it has no such bound
    in its config)."""
    config = policy.model.config
    for name in ("n_positions", "max_position_embeddings"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _checked_ids(policy: Policy, ids: list[int]) -> None:
    if problem := within_model(policy, ids):
        raise ValueError(problem)


def _step_logits(policy: Policy, prompt: str, completion_ids: list[int]) -> torch.Tensor:
    """The logits that predict each completion token, from one teacher-forced pass."""
    prompt_ids = policy.tokenizer(prompt)["input_ids"]
    _checked_ids(policy, prompt_ids + list(completion_ids))
    ids = torch.tensor([prompt_ids + list(completion_ids)], device=policy.device)
    logits = policy.model(input_ids=ids).logits[0]
    start = len(prompt_ids) - 1  # the logits at position p predict token p + 1
    return logits[start : start + len(completion_ids)]
