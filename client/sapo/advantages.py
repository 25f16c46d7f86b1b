"""Group-relative advantages (GRPO): each completion is judged against its siblings.

For one question with L completions and rewards r_1..r_L:
    A_i = (r_i - mean(r)) / (std(r) + eps)
std is the sample standard deviation (Bessel-corrected, as TRL computes it). A group whose
rewards are all equal has no spread and carries no learning signal: its advantages are 0, and
SAPO's sampler drops such groups.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

EPS = 1e-4


def group_advantages(rewards: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Returns advantages of the same shape as rewards (G, L): G groups of L completions."""
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"expected rewards of shape (groups, L >= 2), got {tuple(rewards.shape)}")
    rewards = rewards.to(torch.float32)
    mean = rewards.mean(dim=1, keepdim=True)  # (G, 1)
    std = rewards.std(dim=1, keepdim=True)  # (G, 1), unbiased
    advantages = (rewards - mean) / (std + eps)
    return torch.where(std > 0, advantages, torch.zeros_like(advantages))


def has_signal(rewards: Sequence[float]) -> bool:
    """Returns whether a group's rewards differ at all (a non-zero advantage somewhere)."""
    return len(rewards) >= 2 and max(rewards) > min(rewards)
