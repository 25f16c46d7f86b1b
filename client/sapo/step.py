"""One GRPO update over a round's mixed items, micro-batched so memory is bounded by config.

Input is already tokenized (the policy layer re-encodes every item, local or external, with the
node's own tokenizer): N sequences of prompt + completion, right-padded.

    input_ids        (N, S)   prompt then completion tokens
    attention_mask   (N, S)   1 on real tokens
    completion_mask  (N, S)   1 on completion tokens (the ones the loss is about)
    advantages       (N,)     group advantage of each sequence (own verifier's rewards)
    behaviour        (N, S-1) a peer's sequence: the producer's log-prob of each completion
                              token, at the positions that predict it (0 elsewhere)
    corrected        (N,)     the sequences `behaviour` holds (weighed by client.sapo.offpolicy)
    temperature, top_p (N,)   how their producers sampled

The log-probs of the policy before the update (pi_old) are taken first, without gradients (and
for the corrected sequences, in the same pass, pi_old's log-probs under their producer's
temperature and top-p); then each micro-batch's loss is scaled by its share of the batch (tokens
for token-mean, sequences for seq-mean), gradients accumulate, are clipped, and Adam takes one
step.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

import torch

from client.sapo.distribution import sampled_logprobs
from client.sapo.loss import grpo_loss, token_logprobs
from client.sapo.offpolicy import OffPolicyStats


@dataclass(frozen=True)
class TokenBatch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor
    advantages: torch.Tensor
    rewards: torch.Tensor  # (N,) each sequence's reward, for reporting
    external: torch.Tensor  # (N,) bool, for reporting the local/external mix
    behaviour: torch.Tensor | None = None  # (N, S-1) float64; None: no sequence has them
    corrected: torch.Tensor | None = None  # (N,) bool
    temperature: torch.Tensor | None = None  # (N,) float64
    top_p: torch.Tensor | None = None  # (N,) float64

    def to(self, device: torch.device) -> TokenBatch:
        """The batch on `device` (itself when it is there already): a policy on a GPU takes its
        batch from the CPU-side encoder."""
        if self.input_ids.device == device:
            return self
        moved = (getattr(self, f.name) for f in fields(self))
        return TokenBatch(*(None if t is None else t.to(device) for t in moved))


def model_device(model) -> torch.device:
    return next(model.parameters()).device


@dataclass(frozen=True)
class StepStats:
    loss: float
    clip_fraction: float
    grad_norm: float
    tokens: int
    sequences: int
    reward_local: float | None
    reward_external: float | None
    kl: float
    offpolicy: OffPolicyStats | None = None  # what the external correction did (Trainer's)


def sequence_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Returns log p(token t+1 | tokens <= t): (N, S) -> (N, S-1)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits  # (N, S, V)
    return token_logprobs(logits[:, :-1], input_ids[:, 1:])


def _chunks(n: int, size: int) -> list[slice]:
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


@torch.no_grad()
def batch_logprobs(model, batch: TokenBatch, micro_batch: int = 16) -> torch.Tensor:
    """Returns the model's next-token log-probs for the whole batch, (N, S-1), no gradients.

    Take them once, before a round's first update, to make them pi_old for several steps.
    """
    return old_logprobs(model, batch, micro_batch)[0]


@torch.no_grad()
def old_logprobs(
    model, batch: TokenBatch, micro_batch: int = 16, *, sampling: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Returns batch_logprobs and (with `sampling`, when the batch has corrected sequences) the
    model's log-prob of each of their completion tokens under its producer's temperature and
    top-p ((N, S-1) float64, 0 elsewhere), from the same forward passes."""
    model.eval()
    batch = batch.to(model_device(model))
    n, width = batch.input_ids.shape
    weigh = sampling and batch.corrected is not None and bool(batch.corrected.any())
    sampling = (
        torch.zeros((n, width - 1), dtype=torch.float64, device=batch.input_ids.device)
        if weigh
        else None
    )
    old = []
    for p in _chunks(n, micro_batch):
        logits = model(
            input_ids=batch.input_ids[p], attention_mask=batch.attention_mask[p]
        ).logits  # (n, S, V)
        targets = batch.input_ids[p, 1:]
        old.append(token_logprobs(logits[:, :-1], targets))
        if sampling is None:
            continue
        for i in range(p.start, p.stop):
            if not bool(batch.corrected[i]):
                continue
            at = batch.completion_mask[i, 1:].nonzero().squeeze(-1)  # positions predicting one
            sampling[i, at] = sampled_logprobs(
                logits[i - p.start, at],
                targets[i - p.start, at],
                float(batch.temperature[i]),
                float(batch.top_p[i]),
            )
    return torch.cat(old), sampling


def grpo_step(
    model,
    optimizer: torch.optim.Optimizer,
    batch: TokenBatch,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    agg: Literal["token-mean", "seq-mean"] = "token-mean",
    micro_batch: int = 16,
    grad_clip: float = 1.0,
    ref_model=None,
    kl_coef: float = 0.0,
    old_logprobs: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
) -> StepStats:
    """Takes one optimizer step on `batch`; returns what happened.

    `old_logprobs` (from batch_logprobs before the round's first step) makes later steps of the
    same round clip against the policy that generated the rollouts; without it, pi_old is the
    model as it is now (ratio 1: a plain policy-gradient step). `weights` (N, S-1) and `keep`
    (N,) are client.sapo.offpolicy's: each token's importance weight, and the sequences left in.
    """
    batch = batch.to(model_device(model))
    n = batch.input_ids.shape[0]
    target_mask = batch.completion_mask[:, 1:].float()  # (N, S-1)
    if keep is not None:  # a dropped sequence is as if it were not in the batch
        target_mask = target_mask * keep.to(target_mask.device)[:, None].float()
    total_tokens = target_mask.sum().clamp(min=1)
    parts = _chunks(n, micro_batch)
    if weights is not None:
        weights = weights.to(target_mask.device)

    model.eval()  # dropout off for both passes: pi_old and pi_theta must agree at the start
    old = batch_logprobs(model, batch, micro_batch) if old_logprobs is None else old_logprobs
    ref = None
    if ref_model is not None and kl_coef > 0:
        ref = batch_logprobs(ref_model, batch, micro_batch)

    optimizer.zero_grad(set_to_none=True)
    loss_sum, clipped, kl_sum = 0.0, 0.0, 0.0
    for p in parts:
        new = sequence_logprobs(model, batch.input_ids[p], batch.attention_mask[p])
        loss, stats = grpo_loss(
            new,
            old[p],
            batch.advantages[p],
            target_mask[p],
            eps_low=eps_low,
            eps_high=eps_high,
            agg=agg,
            logp_ref=None if ref is None else ref[p],
            kl_coef=kl_coef,
            weights=None if weights is None else weights[p],
        )
        share = (
            (target_mask[p].sum() / total_tokens)
            if agg == "token-mean"
            else ((p.stop - p.start) / n)
        )
        (loss * share).backward()
        loss_sum += stats.loss * float(share)
        clipped += stats.clip_fraction * stats.tokens
        kl_sum += stats.kl * stats.tokens
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip))
    optimizer.step()

    def mean_of(selector: torch.Tensor) -> float | None:
        return float(batch.rewards[selector].mean()) if bool(selector.any()) else None

    tokens = int(total_tokens)
    return StepStats(
        loss=loss_sum,
        clip_fraction=clipped / max(tokens, 1),
        grad_norm=grad_norm,
        tokens=tokens,
        sequences=n,
        reward_local=mean_of(~batch.external),
        reward_external=mean_of(batch.external),
        kl=kl_sum / max(tokens, 1),
    )
