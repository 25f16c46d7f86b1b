"""Low-rank adapters over a frozen, content-addressed base model (PEFT's LoRA).

A node that trains an adapter commits to, snapshots, publishes and proves the adapter's
parameters only (client.policy.weights); the base never changes, so it is named once by a content
hash of its weights, `base_id`: a checker needs that exact base to re-draw a batch, and a batch
names it in its model descriptor (client.store.batch.ModelDescriptor). Two bases are two model
families, even of one architecture (Qwen2.5 0.5B and 1.5B; two seeds of the seed policy).

The base id is the id a checkpoint of the base's float32 bytes would have (client.store.weights:
sha256 of its `sapo.weights/1` manifest), computed a parameter at a time: the bytes are never
held whole, so a 7B base hashes in the memory of its largest parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

# the seven linear layers of a Qwen2 / Llama block: attention and MLP
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class AdapterError(Exception):
    """An adapter cannot be built on this model; the message says what to set."""


@dataclass(frozen=True)
class AdapterSpec:
    """A LoRA adapter's shape: what a checker must build over the base to load its weights."""

    rank: int = 16
    alpha: int = 32
    targets: tuple[str, ...] = LORA_TARGETS

    def __post_init__(self) -> None:
        # one adapter, one spelling: the order modules are named in changes nothing PEFT builds,
        # so two nodes that list them in other orders still prove each other's batches
        object.__setattr__(self, "targets", tuple(sorted(self.targets)))

    def describe(self) -> dict[str, Any]:
        """The adapter as a batch's model descriptor records it."""
        return {
            "kind": "lora",
            "rank": self.rank,
            "alpha": self.alpha,
            "targets": list(self.targets),
        }

    @classmethod
    def from_description(cls, data: dict[str, Any]) -> AdapterSpec:
        return cls(rank=int(data["rank"]), alpha=int(data["alpha"]), targets=tuple(data["targets"]))


def attach_lora(model, spec: AdapterSpec):
    """Returns `model` wrapped in a fresh LoRA adapter (PEFT): the base's parameters frozen, the
    adapter's B matrices zero (so it starts as the base), no dropout (a proof re-runs the
    forward pass exactly)."""
    from peft import LoraConfig, get_peft_model

    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    missing = [t for t in spec.targets if t not in present]
    if missing:
        have = sorted(n for n in present if n.endswith("_proj"))
        raise AdapterError(
            f"[policy].lora_targets {missing} are not modules of this model (its linear layers: "
            f"{', '.join(have) or 'none named *_proj'})"
        )
    config = LoraConfig(
        r=spec.rank,
        lora_alpha=spec.alpha,
        target_modules=list(spec.targets),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def is_adapted(model) -> bool:
    """Whether `model` carries a LoRA adapter (its checkpoints are the adapter only)."""
    from peft import PeftModel

    return isinstance(model, PeftModel)


def base_model(model):
    """The base model under an adapter (its frozen weights), or `model` itself."""
    return model.get_base_model() if is_adapted(model) else model


def base_parameters(model) -> list[tuple[str, torch.nn.Parameter]]:
    """The base's parameters in name order (tied ones once), as the base id hashes them."""
    base = base_model(model)
    if is_adapted(model):
        named = [(n, p) for n, p in base.named_parameters() if "lora_" not in n]
        # PEFT renames a wrapped layer's weight `<layer>.base_layer.weight`: hash it by the
        # name it has in the plain model, so an adapted and a plain base have one id
        named = [(n.replace(".base_layer.", "."), p) for n, p in named]
    else:
        named = list(base.named_parameters())
    return sorted(named, key=lambda item: item[0])


def base_id(model) -> str:
    """The content id of the base's weights: the id (client.store.weights) of their float32
    bytes, computed a parameter at a time."""
    from client.store.weights import stream_id

    with torch.no_grad():
        return stream_id(
            p.detach().to("cpu", torch.float32).reshape(-1).numpy().astype("<f4").tobytes()
            for _, p in base_parameters(model)
        )
