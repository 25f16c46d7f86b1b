"""Policies: model loading, generation backends, checkpoints, and the CPU seed policy."""

from transformers.utils import logging as _hf_logging

from client.policy.adapter import AdapterSpec
from client.policy.evaluate import evaluate
from client.policy.generate import (
    Completions,
    GenerationBackend,
    TransformersBackend,
    make_backend,
)
from client.policy.policy import (
    Policy,
    PolicyError,
    adapt,
    load_checkpoint,
    load_policy,
    save_checkpoint,
)
from client.policy.seed import SeedSpec, build_seed_policy, ensure_seed_policy, seed_policy_dir

# transformers' own progress bars and warnings would interleave with the CLI's output
_hf_logging.disable_progress_bar()
_hf_logging.set_verbosity_error()

__all__ = [
    "AdapterSpec",
    "Completions",
    "GenerationBackend",
    "Policy",
    "PolicyError",
    "SeedSpec",
    "TransformersBackend",
    "adapt",
    "build_seed_policy",
    "ensure_seed_policy",
    "evaluate",
    "load_checkpoint",
    "load_policy",
    "make_backend",
    "save_checkpoint",
    "seed_policy_dir",
]
