"""Re-encoding rollouts with the node's own tokenizer for training (local and external alike,
as the paper does): prompt (own template) + completion text -> a right-padded TokenBatch.

A completion reaches the loss whole, never cut: its reward was computed on the whole text, so
training on a prefix would credit (or blame) tokens for an answer they never contained. What
bounds the trainer's memory is the choice of groups (the node leaves out peers' completions
longer than it would generate itself: `completion_tokens`), not truncation here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from client.sapo.advantages import group_advantages
from client.sapo.step import TokenBatch
from client.tasks import render_prompt


@dataclass(frozen=True)
class Group:
    """One question's completions with this node's own rewards (in [0, 1])."""

    question: str
    completions: list[str]
    rewards: list[float]
    external: bool


def completion_tokens(tokenizer, group: Group) -> int:
    """Returns the length of the group's longest completion in this tokenizer's tokens."""
    ids = tokenizer(list(group.completions), add_special_tokens=False)["input_ids"]
    return max((len(x) for x in ids), default=0)


def encode_groups(tokenizer, groups: list[Group]) -> TokenBatch:
    """Returns the TokenBatch of every whole completion of every group (advantages per group)."""
    rows: list[tuple[list[int], int]] = []
    advantages, rewards, external = [], [], []
    for group in groups:
        prompt = tokenizer.encode(
            render_prompt(group.question, tokenizer), add_special_tokens=False
        )
        adv = group_advantages(torch.tensor([group.rewards]))[0]  # (L,)
        for text, a, r in zip(group.completions, adv.tolist(), group.rewards, strict=True):
            completion = tokenizer.encode(text, add_special_tokens=False)
            if not completion:
                completion = [tokenizer.eos_token_id]
            rows.append((prompt + completion, len(prompt)))
            advantages.append(a)
            rewards.append(r)
            external.append(group.external)
    width = max(len(ids) for ids, _ in rows)
    n = len(rows)
    input_ids = torch.full((n, width), tokenizer.pad_token_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    completion_mask = torch.zeros((n, width), dtype=torch.long)
    for i, (ids, prompt_len) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention[i, : len(ids)] = 1
        completion_mask[i, prompt_len : len(ids)] = 1
    return TokenBatch(
        input_ids=input_ids,
        attention_mask=attention,
        completion_mask=completion_mask,
        advantages=torch.tensor(advantages, dtype=torch.float32),
        rewards=torch.tensor(rewards, dtype=torch.float32),
        external=torch.tensor(external, dtype=torch.bool),
    )
