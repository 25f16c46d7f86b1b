"""The SAPO algorithm, pure: group advantages, the swarm sampler, the GRPO loss (torch only)."""

from client.sapo.advantages import group_advantages, has_signal
from client.sapo.loss import GrpoStats, grpo_loss, token_logprobs
from client.sapo.offpolicy import Correction, OffPolicyStats, importance_weights
from client.sapo.sampler import Candidate, Selection, UniformSampler, training_set
from client.sapo.step import StepStats, TokenBatch, batch_logprobs, grpo_step, old_logprobs

__all__ = [
    "Candidate",
    "Correction",
    "GrpoStats",
    "OffPolicyStats",
    "Selection",
    "StepStats",
    "TokenBatch",
    "UniformSampler",
    "batch_logprobs",
    "group_advantages",
    "grpo_loss",
    "grpo_step",
    "has_signal",
    "importance_weights",
    "old_logprobs",
    "token_logprobs",
    "training_set",
]
