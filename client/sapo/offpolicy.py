"""Peers' completions as the off-policy samples they are: truncated importance weights (TIS) and
the F-TIS filter (Chen, Blagoev, Ersoy et al., "F-TIS: Harnessing Diverse Models in
Collaborative GRPO", arXiv 2605.22537).

A peer's completion was drawn from the producer's policy mu, not from the learner's pi_old, so
the clipped objective of client.sapo.loss (ratio pi_theta / pi_old, 1 at the first update)
treats it as if the learner had sampled it. With the producer's log-probs in the batch
(sapo.rollouts/5), each external token is weighted by how likely the learner, before its
update, was to draw it, against how likely the producer was:

    learner   (B, T)  log pi_old(token) under the producer's temperature and top-p
    producer  (B, T)  log mu(token), as the batch claims it (a checker re-computes it)
    w         (B, T)  = min(exp(learner - producer), cap)       truncated importance weight
    kl        (B,)    = mean over the sequence's tokens of (producer - learner)
                       (a sample estimate of KL(mu || pi_old))
    keep      (B,)    f-tis: False for an external sequence with advantage < 0 and kl > kl_max

Local sequences, and external ones the learner cannot weigh (another tokenizer, a v4 batch),
get w = 1 and are always kept. With the producer's log-probs equal to the learner's, w is
exactly 1 and the update is the uncorrected one. A producer that lies about its log-probs moves
a weight by at most the cap (and a drawn checker disputes the lie).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

Correction = Literal["none", "tis", "f-tis"]


@dataclass(frozen=True)
class OffPolicyStats:
    """What the correction did to the external sequences it could weigh; plain numbers."""

    sequences: int  # external sequences weighed (same tokenizer, log-probs given)
    tokens: int
    ratio_mean: float | None  # mean untruncated exp(learner - producer) over their tokens
    truncated: float | None  # share of their tokens whose ratio was over the cap
    filtered: float | None  # share of them the filter dropped (f-tis)


def importance_weights(
    learner: torch.Tensor,
    producer: torch.Tensor,
    mask: torch.Tensor,
    corrected: torch.Tensor,
    advantages: torch.Tensor,
    *,
    correction: Correction,
    cap: float,
    kl_max: float,
) -> tuple[torch.Tensor, torch.Tensor, OffPolicyStats]:
    """Returns (weights (B, T), keep (B,) bool, stats). `mask` (B, T) marks completion tokens,
    `corrected` (B,) the sequences to weigh; shapes as in the module docstring."""
    if correction not in ("none", "tis", "f-tis"):
        raise ValueError(f"unknown external correction {correction!r}: none, tis or f-tis")
    b = mask.shape[0]
    weights = torch.ones_like(mask, dtype=torch.float32)
    keep = torch.ones(b, dtype=torch.bool, device=mask.device)
    rows = corrected & (mask.sum(1) > 0)
    tokens = mask.bool() & rows[:, None]  # (B, T)
    n_tokens = int(tokens.sum())
    if correction == "none" or not bool(rows.any()):
        return weights, keep, OffPolicyStats(int(rows.sum()), n_tokens, None, None, None)
    log_ratio = learner.double() - producer.double()  # (B, T)
    ratio = torch.exp(log_ratio).masked_fill(~tokens, 1.0)
    weights = torch.where(tokens, ratio.clamp(max=cap), weights.double()).float()
    filtered = None
    if correction == "f-tis":
        per_seq = (-log_ratio).masked_fill(~tokens, 0.0).sum(1) / mask.sum(1).clamp(min=1)  # (B,)
        drop = rows & (advantages < 0) & (per_seq > kl_max)
        keep = ~drop
        filtered = float(drop.sum()) / float(rows.sum())
    stats = OffPolicyStats(
        sequences=int(rows.sum()),
        tokens=n_tokens,
        ratio_mean=float(ratio[tokens].mean()),
        truncated=float((ratio[tokens] > cap).double().mean()),
        filtered=filtered,
    )
    return weights, keep, stats
