"""A policy's weights as the bytes proof of generation commits to.

`weights_bytes` writes every committed parameter in float32, little-endian, in parameter-name
order (tied parameters once); `load_weights` reads such bytes back into a model of the same
architecture. Their id (client.store.weights) is what each local round of a batch names. A model
with a LoRA adapter (client.policy.adapter) commits to its adapter's parameters only: the base is
frozen and named once by its own id, so snapshots, published checkpoints and what a checker
fetches are megabytes, not the model's gigabytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from client.policy.policy import PolicyError


def _parameters(model) -> list[tuple[str, torch.nn.Parameter]]:
    """The committed parameters in name order: the adapter's of an adapted model, else all."""
    from client.policy.adapter import is_adapted

    named = model.named_parameters()
    if is_adapted(model):
        named = [(n, p) for n, p in named if "lora_" in n]
    return sorted(named, key=lambda item: item[0])


def weights_bytes(model) -> bytes:
    """The canonical bytes of a model's weights (float32, little-endian, by parameter name)."""
    with torch.no_grad():
        flat = torch.cat(
            [p.detach().to("cpu", torch.float32).reshape(-1) for _, p in _parameters(model)]
        )
    return flat.numpy().astype("<f4", copy=False).tobytes()


def parameter_count(model) -> int:
    return sum(p.numel() for _, p in _parameters(model))


def load_weights(model, source: bytes | Path) -> None:
    """Loads canonical weight bytes into `model` (same architecture), from memory or from a file
    (read through a memory map: a parameter at a time is copied, so a checkpoint on disk is never
    held whole in memory beside the model); PolicyError if the size is not the model's, or if a
    value is not finite (NaN or ±inf: no sampler draws from such weights, and a NaN turns every
    comparison of a proof of generation false, so one would pass whatever it is asked). The
    parameters before the one that failed are left loaded: a checker loads a whole checkpoint
    before every use."""
    wanted = 4 * parameter_count(model)
    on_disk = isinstance(source, Path)
    size = source.stat().st_size if on_disk else len(source)
    if size != wanted:
        raise PolicyError(f"{size} bytes of weights for a model of {wanted} bytes")
    flat = np.memmap(source, dtype="<f4", mode="r") if on_disk else np.frombuffer(source, "<f4")
    offset = 0
    with torch.no_grad():
        for name, p in _parameters(model):
            n = p.numel()
            piece = torch.from_numpy(np.array(flat[offset : offset + n]))  # one parameter's copy
            finite = torch.isfinite(piece)
            if not bool(finite.all()):
                bad = n - int(finite.sum())
                raise PolicyError(
                    f"parameter {name} holds {bad} value(s) that are not finite (NaN or ±inf), "
                    f"the first at index {int((~finite).nonzero()[0])}"
                )
            p.copy_(piece.view_as(p).to(p.device, p.dtype))
            offset += n
