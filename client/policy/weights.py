"""A policy's weights as the bytes proof of generation commits to.

`weights_bytes` writes every parameter in float32, little-endian, in parameter-name order (tied
parameters once); `load_weights` reads such bytes back into a model of the same architecture.
Their id (client.store.weights) is what each local round of a batch names.
"""

from __future__ import annotations

import numpy as np
import torch

from client.policy.policy import PolicyError


def _parameters(model) -> list[tuple[str, torch.nn.Parameter]]:
    return sorted(model.named_parameters(), key=lambda item: item[0])


def weights_bytes(model) -> bytes:
    """The canonical bytes of a model's weights (float32, little-endian, by parameter name)."""
    with torch.no_grad():
        flat = torch.cat(
            [p.detach().to("cpu", torch.float32).reshape(-1) for _, p in _parameters(model)]
        )
    return flat.numpy().astype("<f4", copy=False).tobytes()


def parameter_count(model) -> int:
    return sum(p.numel() for _, p in _parameters(model))


def load_weights(model, data: bytes) -> None:
    """Loads canonical weight bytes into `model` (same architecture); PolicyError if the size is
    not the model's."""
    wanted = 4 * parameter_count(model)
    if len(data) != wanted:
        raise PolicyError(f"{len(data)} bytes of weights for a model of {wanted} bytes")
    flat = torch.from_numpy(np.frombuffer(data, dtype="<f4").copy())
    offset = 0
    with torch.no_grad():
        for _, p in _parameters(model):
            n = p.numel()
            p.copy_(flat[offset : offset + n].view_as(p).to(p.device, p.dtype))
            offset += n
