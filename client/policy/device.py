"""Where a policy runs: cuda, then mps, then cpu; in float32 (what proofs of generation check)."""

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


def pick_dtype(requested: str) -> torch.dtype:
    """Returns the dtype: float32 when "auto", on every device. Proofs of generation re-draw a
    node's completions in float32, and draws sampled in bfloat16 miss their float32 intervals
    (1-5% of completions, CPU and H100 alike: scripts/bench_numerics.py), so a node samples in
    float32; half precision stays available to code that proves nothing (benchmarks)."""
    if requested == "auto":
        return torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        requested
    ]
