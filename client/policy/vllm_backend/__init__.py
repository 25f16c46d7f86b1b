"""The vLLM generation backend (`[policy].backend = "vllm"`), with the transformers backend's
interface and its draws, so that a checker proves a vLLM node's batch as it proves any other.

- `backend`: `VllmBackend`, in the node's process: starts the engine from a copy of the policy,
  hands it the trainer's weights after each step, and asks it for seeded completions;
- `engine`: what runs in vLLM's processes, loaded there by name: the worker extension that
  loads weights in place, and the logits processor that makes each token the protocol's draw;
- `shape`: the head sizes and KV cache a policy asks of vLLM;
- `environment`: whether vLLM is installed, and the variables its processes start with.
"""

from client.policy.vllm_backend.backend import VllmBackend
from client.policy.vllm_backend.engine import EXTRA_ARG, SapoWorker, SeededDraws
from client.policy.vllm_backend.environment import (
    INSTALL,
    OWNER_ENV,
    SCRATCH_ENV,
    VllmUnavailable,
    vllm_available,
)
from client.policy.vllm_backend.shape import (
    CONCURRENT_SEQUENCES,
    KV_CACHE_MAX,
    KV_CACHE_MIN,
    check_shape,
    cpu_head_sizes,
    head_size,
    kv_cache_bytes,
)

__all__ = [
    "CONCURRENT_SEQUENCES",
    "EXTRA_ARG",
    "INSTALL",
    "KV_CACHE_MAX",
    "KV_CACHE_MIN",
    "OWNER_ENV",
    "SCRATCH_ENV",
    "SapoWorker",
    "SeededDraws",
    "VllmBackend",
    "VllmUnavailable",
    "check_shape",
    "cpu_head_sizes",
    "head_size",
    "kv_cache_bytes",
    "vllm_available",
]
