"""Proof of generation (docs/credit.md): checking that a batch's completions are the seeded draws
of the checkpoints it names.

`check_draws` is the core: teacher-force the prompt and the completion's token ids through the
model once, recompute each position's sampling distribution, and test that the draw u the seed
gives that position (client.policy.generate.Draws) falls in the cumulative-probability interval of
the token the completion has. A completion sampled by `TransformersBackend` from these weights
with this seed passes up to numerics (`eps`); text written by hand or by another model fails at
its first token that is not the draw.

`check_generation` is what a drawn checker runs on a whole batch:
1. every completion, without weights: its text is the decoding of its token ids, and the ids end
   where the sampler ends (a stop, or max_new_tokens) — so text cannot be edited or cut short;
2. the submission's beacon, unknown when it was sent, opens OPEN_ROUNDS of its local rounds
   (`opened`: the same for every checker, so the producer knows which checkpoints to publish);
   each checker loads those checkpoints and runs `check_draws` on CHECKED completions of each,
   drawn for it from the beacon and its address (`checked_rows`).
"""

from __future__ import annotations

import copy
import hashlib
import threading
from dataclasses import dataclass

import torch

from client.policy.generate import Draws, Stopping, distribution
from client.policy.policy import Policy
from client.policy.weights import load_weights, parameter_count
from client.store.batch import RolloutBatch
from client.store.weights import WeightsError

OPEN_ROUNDS = 2  # local rounds of a batch whose checkpoints its beacon opens
CHECKED = 4  # completions a checker re-draws in each opened local round
EPS = 1e-6  # numeric tolerance of a draw against its interval's edges (scripts/bench-proof)


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
    eps: float = 1e-6,
) -> DrawCheck:
    """Whether `completion_ids` are row `row`'s seeded draws of `seed` from the policy's weights
    at `temperature` and `top_p` (see Draws for rows)."""
    if not completion_ids:
        return DrawCheck(0, 0, None, 1.0)
    prompt_ids = policy.tokenizer(prompt)["input_ids"]
    ids = torch.tensor([prompt_ids + list(completion_ids)], device=policy.device)
    logits = policy.model(input_ids=ids).logits[0]
    start = len(prompt_ids) - 1  # the logits at position p predict token p + 1
    steps = logits[start : start + len(completion_ids)]
    if temperature <= 0:  # greedy: every token is the argmax
        wrong = [t for t, tok in enumerate(completion_ids) if int(steps[t].argmax()) != tok]
        return DrawCheck(len(completion_ids), len(wrong), wrong[0] if wrong else None, 0.0)
    cdf = distribution(steps, temperature, top_p).cumsum(-1)
    draws = Draws(seed)
    outside, first, margin = 0, None, 1.0
    for t, token in enumerate(completion_ids):
        u = draws.uniform(row, t)
        low = float(cdf[t, token - 1]) if token > 0 else 0.0
        high = float(cdf[t, token])
        if low - eps <= u < high + eps:
            margin = min(margin, u - low, high - u)
        else:
            outside += 1
            first = t if first is None else first
    return DrawCheck(len(completion_ids), outside, first, margin)


def _pick(domain: bytes, key: bytes, count: int, size: int) -> list[int]:
    """`count` distinct numbers in [0, size), drawn from sha256(domain, key, i) (all of them when
    size <= count), in the order drawn."""
    if size <= count:
        return list(range(size))
    picked: list[int] = []
    i = 0
    while len(picked) < count:
        h = hashlib.sha256(domain + key + i.to_bytes(4, "big")).digest()
        n = int.from_bytes(h[:8], "big") % size
        if n not in picked:
            picked.append(n)
        i += 1
    return picked


def opened(beacon: int, local_rounds: int, count: int = OPEN_ROUNDS) -> list[int]:
    """The local rounds (k) whose checkpoints a submission with this beacon must publish."""
    return sorted(_pick(b"sapo.open/1", beacon.to_bytes(32, "big"), count, local_rounds))


def checked_rows(beacon: int, checker: str, k: int, rows: int, count: int = CHECKED) -> list[int]:
    """The rows of local round k that `checker` re-draws (item i's completion j is row i*L + j)."""
    key = beacon.to_bytes(32, "big") + bytes.fromhex(checker.lower().removeprefix("0x"))
    return sorted(_pick(b"sapo.check/1", key + k.to_bytes(4, "big"), count, rows))


@dataclass(frozen=True)
class GenerationCheck:
    """A checker's verdict on a batch's generation: what it looked at and the first failure."""

    completions: int  # completions whose text and ending were checked (all of them)
    redrawn: int  # completions re-drawn against an opened checkpoint
    tokens: int  # tokens re-drawn
    failed: int  # completions that failed either check
    reason: str | None  # the first failure, in words
    min_margin: float  # the smallest margin of a re-drawn token inside its interval

    @property
    def passed(self) -> bool:
        return self.failed == 0


class Prover:
    """A checker's own copy of the model (and tokenizer), into which opened checkpoints are
    loaded; one check at a time (the intake's fetch workers share it)."""

    def __init__(self, policy: Policy):
        self.policy = Policy(
            policy.name,
            copy.deepcopy(policy.model).eval(),
            copy.deepcopy(policy.tokenizer),
            policy.device,
        )
        for p in self.policy.model.parameters():
            p.requires_grad_(False)
        self.stopping = Stopping(self.policy.tokenizer)
        self.parameters = parameter_count(self.policy.model)
        self.lock = threading.Lock()

    def model_problem(self, batch: RolloutBatch) -> str | None:
        """Why this checker cannot re-draw the batch's model (None when it can): its parameter
        count and vocabulary must be ours (the descriptor's tokenizer label is `name:vocab`; its
        name part is a local path's, e.g. `checkpoint` after a restart, so only the vocabulary
        is compared)."""
        mine = (self.parameters, len(self.policy.tokenizer))
        vocab = batch.model.tokenizer.rsplit(":", 1)[-1]
        theirs = (batch.model.parameters, int(vocab) if vocab.isdigit() else None)
        if mine != theirs:
            return (
                f"declares a model of {theirs[0]} parameters and a vocabulary of {theirs[1]}; "
                f"this swarm's has {mine[0]} and {mine[1]}"
            )
        return None

    def check(
        self,
        batch: RolloutBatch,
        *,
        beacon: int,
        checker: str,
        weights: dict[str, bytes] | None,
        generation_seed,
        eps: float = EPS,
    ) -> GenerationCheck:
        """Checks `batch` as drawn checker `checker` under `beacon`, with the opened checkpoints'
        bytes in `weights` (by id; None: only what needs no weights). `generation_seed(k)` is
        local round k's sampling seed. A batch that fails without weights is not re-drawn."""
        from client.tasks import render_prompt

        limit = batch.sampling.max_new_tokens
        completions = failed = 0
        reasons: list[str] = []
        problem = self.model_problem(batch)
        if problem:
            return GenerationCheck(batch.rollouts, 0, 0, batch.rollouts, problem, 0.0)
        for lr in batch.local_rounds:
            sizes = {len(item.completions) for item in lr.items}
            if len(sizes) > 1:
                reasons.append(
                    f"local round {lr.k}: groups of sizes {sorted(sizes)} (rows unclear)"
                )
                failed += sum(len(item.completions) for item in lr.items)
                continue
            for i, item in enumerate(lr.items):
                for j, (text, ids) in enumerate(zip(item.completions, item.token_ids, strict=True)):
                    completions += 1
                    bad = self.stopping.problem(ids, limit)
                    if bad is None and self.stopping.text_of(ids) != text:
                        bad = "its text is not the decoding of its token ids"
                    if bad:
                        failed += 1
                        reasons.append(f"local round {lr.k} item {i} completion {j}: {bad}")
        redrawn = tokens = 0
        margin = 1.0
        if failed or weights is None:
            return GenerationCheck(completions, 0, 0, failed, _summary(reasons), margin)
        with self.lock, torch.no_grad():
            for k in opened(beacon, len(batch.local_rounds)):
                lr = batch.local_rounds[k]
                data = weights.get(lr.weights)
                if data is None:
                    raise WeightsError(f"checkpoint {lr.weights[:12]}… of local round {k} missing")
                load_weights(self.policy.model, data)
                n = len(lr.items[0].completions)
                for row in checked_rows(beacon, checker, k, n * len(lr.items)):
                    item = lr.items[row // n]
                    draw = check_draws(
                        self.policy,
                        render_prompt(item.question, self.policy.tokenizer),
                        item.token_ids[row % n],
                        seed=generation_seed(k),
                        row=row,
                        temperature=batch.sampling.temperature_value,
                        top_p=batch.sampling.top_p_value,
                        eps=eps,
                    )
                    redrawn += 1
                    tokens += draw.tokens
                    margin = min(margin, draw.min_margin)
                    if not draw.passed:
                        failed += 1
                        reasons.append(
                            f"local round {k} row {row}: token {draw.first_outside} is not the "
                            f"seeded draw of checkpoint {lr.weights[:12]}…"
                        )
        return GenerationCheck(completions, redrawn, tokens, failed, _summary(reasons), margin)


def _summary(reasons: list[str]) -> str | None:
    if not reasons:
        return None
    return "; ".join(reasons[:3]) + (f" (and {len(reasons) - 3} more)" if reasons[3:] else "")
