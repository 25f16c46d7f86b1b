"""The GRPO objective SAPO trains with: token-level PPO-clip, asymmetric clipping, optional KL.

Notation (B sequences, T completion tokens, padded):
    logp_new  (B, T)  log pi_theta(token)      the policy being updated
    logp_old  (B, T)  log pi_old(token)        the policy that generated the rollouts (no grad)
    A         (B,)    group advantage of each sequence, broadcast over its tokens
    mask      (B, T)  1 for completion tokens, 0 for prompt and padding

    w         (B, T)  importance weight of each token (optional; client.sapo.offpolicy)

    ratio     = exp(logp_new - logp_old)
    objective = w * min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)  per token
    loss      = -objective (+ kl_coef * KL(pi_theta || pi_ref), k3 estimator)  per token

then aggregated over masked tokens: "token-mean" (every token of the batch weighs the same, as in
DAPO) or "seq-mean" (mean per sequence, then over sequences, as in the original GRPO). The paper
uses eps_low 0.2, eps_high 0.28 and no KL term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch


@dataclass(frozen=True)
class GrpoStats:
    """What a step reports; plain floats."""

    loss: float
    clip_fraction: float  # share of tokens whose gradient the clip removed
    ratio_mean: float
    kl: float
    tokens: int


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Returns log p(target) per position: logits (B, T, V), targets (B, T) -> (B, T)."""
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)


def grpo_loss(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    agg: Literal["token-mean", "seq-mean"] = "token-mean",
    logp_ref: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, GrpoStats]:
    """Returns (scalar loss to minimise, stats). Shapes as in the module docstring."""
    if logp_new.shape != logp_old.shape or logp_new.shape != mask.shape:
        raise ValueError(
            f"shape mismatch: new {tuple(logp_new.shape)}, old {tuple(logp_old.shape)}, "
            f"mask {tuple(mask.shape)}"
        )
    mask = mask.to(logp_new.dtype)
    adv = advantages.to(logp_new.dtype).unsqueeze(1)  # (B, 1)
    ratio = torch.exp(logp_new - logp_old.detach())  # (B, T)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped)  # (B, T)
    if weights is not None:  # peers' tokens weighed as off-policy samples (w = 1 elsewhere)
        per_token = per_token * weights.detach().to(per_token.dtype)

    kl = torch.zeros_like(per_token)
    if logp_ref is not None and kl_coef > 0:
        # k3 estimator of KL(pi_theta || pi_ref): exp(d) - d - 1 with d = log pi_ref - log pi_theta
        d = logp_ref.detach() - logp_new
        kl = torch.exp(d) - d - 1.0
        per_token = per_token + kl_coef * kl

    tokens = mask.sum()
    if agg == "token-mean":
        loss = (per_token * mask).sum() / tokens.clamp(min=1)
    elif agg == "seq-mean":
        per_seq = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)  # (B,)
        loss = per_seq.mean()
    else:
        raise ValueError(f"unknown loss aggregation {agg!r}")

    with torch.no_grad():
        # the clip removes the gradient where the clipped branch is the smaller (active) one
        was_clipped = ((ratio < 1 - eps_low) & (adv < 0)) | ((ratio > 1 + eps_high) & (adv > 0))
        n = tokens.clamp(min=1)
        stats = GrpoStats(
            loss=float(loss.detach()),
            clip_fraction=float((was_clipped.to(mask.dtype) * mask).sum() / n),
            ratio_mean=float((ratio * mask).sum() / n),
            kl=float((kl * mask).sum() / n),
            tokens=int(tokens),
        )
    return loss, stats
