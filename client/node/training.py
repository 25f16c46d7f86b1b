"""The node's trainer: GRPO steps on whole completions, against a reference policy when
`[train].kl_coef` > 0, with the bookkeeping a checkpoint needs.

Completions are never cut (client.policy.encode). The node's own completions fit by
construction (generated under `[policy].max_new_tokens`); a peer's group whose completions are
longer than that in our tokens is left out (`fits`): it bounds the trainer's memory as the
node's own generation does.

pi_old is the policy that generated the rollouts: its log-probs are taken once before a step's
first update and kept for `[train].updates_per_round` clipped updates (TRL's num_iterations).
The reference policy of the KL term is the base model the node started from (`[policy].model`,
or the seed policy), frozen, as in TRL's GRPOTrainer: the policy may drift from it only as far as
the KL penalty allows. With kl_coef = 0 (the paper's setting) no reference is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from client.config.models import TrainSection
from client.policy import Policy
from client.policy.encode import Group, completion_tokens, encode_groups
from client.sapo import StepStats, batch_logprobs, grpo_step


@dataclass
class Trainer:
    """Takes GRPO steps on groups; counts steps and what is not checkpointed yet."""

    policy: Policy
    optimizer: torch.optim.Optimizer
    train: TrainSection
    max_completion_tokens: int
    reference: Policy | None = None
    steps: int = 0
    since_checkpoint: int = 0

    def __post_init__(self) -> None:
        if self.train.kl_coef > 0 and self.reference is None:
            raise ValueError(
                f"[train].kl_coef = {self.train.kl_coef} needs a reference policy; load the base "
                "model as one, or set kl_coef = 0"
            )
        if self.reference is not None:
            self.reference.model.eval()
            self.reference.model.requires_grad_(False)

    def fits(self, group: Group) -> bool:
        """Returns whether a peer's group is within the trainer's completion length."""
        return completion_tokens(self.policy.tokenizer, group) <= self.max_completion_tokens

    def step(self, groups: list[Group]) -> StepStats | None:
        """Takes one GRPO step (`updates_per_round` updates) on `groups`; returns the last
        update's stats, or None when there is nothing to learn from."""
        if not groups:
            return None
        train = self.train
        batch = encode_groups(self.policy.tokenizer, groups)
        old = batch_logprobs(self.policy.model, batch, train.micro_batch)
        stats = None
        for _ in range(train.updates_per_round):
            stats = grpo_step(
                self.policy.model,
                self.optimizer,
                batch,
                eps_low=train.eps_low,
                eps_high=train.eps_high,
                agg=train.loss_agg,
                micro_batch=train.micro_batch,
                grad_clip=train.grad_clip,
                ref_model=self.reference.model if self.reference is not None else None,
                kl_coef=train.kl_coef,
                old_logprobs=old,
            )
        self.steps += 1
        self.since_checkpoint += 1
        return stats
