"""What a policy's shape asks of vLLM: an attention head size its CPU kernels implement, and a KV
cache sized for the sequences a node samples at once."""

from __future__ import annotations

import torch

from client.policy.policy import Policy, PolicyError

KV_CACHE_MIN = 64 << 20
KV_CACHE_MAX = 4 << 30
CONCURRENT_SEQUENCES = 256  # what the KV cache is sized for (a node samples 8 x 8 at a time)


def cpu_head_sizes() -> list[int] | None:
    """The head sizes vLLM's CPU attention accepts (None: vLLM does not say)."""
    try:
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
    except ImportError:
        return None
    return list(CPUAttentionBackend.get_supported_head_sizes())


def head_size(config) -> int:
    return int(
        getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    )


def check_shape(policy: Policy) -> None:
    """Refuses, before an engine starts, a policy whose attention head size vLLM's CPU attention
    does not implement (the default seed policy's is 48; its CPU kernels take 32, 64, 80, ...)."""
    if policy.device.type != "cpu":
        return
    sizes = cpu_head_sizes()
    size = head_size(policy.model.config)
    if sizes is not None and size not in sizes:
        config = policy.model.config
        raise PolicyError(
            f"vLLM's CPU attention does not implement head size {size} (policy {policy.name!r}: "
            f"hidden {config.hidden_size} / {config.num_attention_heads} heads); it takes "
            f"{', '.join(map(str, sizes))}. Use a policy with one of those, e.g. a seed policy "
            'built with [policy].seed_heads = 3 (head size 64), or backend = "transformers"'
        )


def kv_cache_bytes(config, max_model_len: int, dtype: torch.dtype) -> int:
    """KV cache for CONCURRENT_SEQUENCES sequences of max_model_len tokens, within bounds."""
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    per_token = 2 * config.num_hidden_layers * kv_heads * head_size(config)
    per_token *= torch.finfo(dtype).bits // 8
    wanted = per_token * max_model_len * CONCURRENT_SEQUENCES
    return int(min(KV_CACHE_MAX, max(KV_CACHE_MIN, wanted)))
