"""Where a policy runs: cuda, then mps, then cpu; bf16 where the device supports it."""

from __future__ import annotations

import torch


def pick_device(requested: str = "auto") -> torch.device:
    """Returns the device for `requested` ("auto", "cpu", "cuda", "mps"); refuses absent ones."""
    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "[policy].device = 'cuda' but no CUDA device is available (check the driver with "
            'nvidia-smi, or set device = "auto" or "cpu")'
        )
    if requested == "mps" and not (
        getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()
    ):
        raise RuntimeError(
            '[policy].device = \'mps\' but MPS is not available (set device = "auto" or "cpu")'
        )
    return torch.device(requested)


def pick_dtype(requested: str, device: torch.device) -> torch.dtype:
    """Returns the dtype: bf16 on CUDA devices that support it when "auto", else float32."""
    if requested != "auto":
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
            requested
        ]
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32
