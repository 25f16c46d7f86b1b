"""[policy]: the model being trained (a seed policy, a Hugging Face model, or a base bundle fetched
over IPFS), its adapter, and how it generates."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
    model_validator,
)

from client.config.models.section import Section


def _check_backend(value: str) -> str:
    if value in ("transformers", "vllm"):
        return value
    raise ValueError(f"expected 'transformers' or 'vllm', got {value!r}")


def _check_bundle_id(value: str | None) -> str | None:
    if value is None or re.fullmatch(r"0x[0-9a-f]{64}", value):
        return value
    raise ValueError(
        "expected a base bundle id, 0x and 64 lowercase hex digits (`sapo policy id --bundle` "
        "prints a model's)"
    )


def _check_dtype(value: str) -> str:
    if value in ("auto", "float32"):
        return value
    if value in ("bfloat16", "float16"):
        raise ValueError(
            f"{value!r} is refused: peers prove a node's batches by re-drawing them in float32, "
            "and draws sampled in half precision miss their float32 intervals (measured: 1-5% of "
            "completions, on CPU and on an H100; docs/proof-of-generation.md), so its batches "
            'would be disputed and its stake slashed; set dtype = "float32" (or "auto", the same)'
        )
    raise ValueError(f"expected 'auto' or 'float32', got {value!r}")


class PolicySection(Section):
    """The model being trained and how it generates."""

    model: str = Field(
        "seed",
        min_length=1,
        description="HF name, local dir, 'seed' (the CPU seed policy), 'seed-test' (smaller); "
        "'seed-llama' and 'seed-llama-test': their Llama-architecture siblings with a tokenizer "
        "of their own (another model family)",
    )
    seed: int = Field(0, ge=0, description="which seed policy ('seed' models only)")
    seed_datasets: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="pretrain the seed policy on these catalog entries only (a specialist)",
    )
    seed_steps: int = Field(
        0,
        ge=0,
        le=100_000,
        description="pretraining steps of the seed policy (0: its recipe's: 600 for 'seed', 150 "
        "for 'seed-test'); more steps pretrain on a larger corpus, cached under their own name",
    )
    seed_tagged: float = Field(
        1.0,
        gt=0,
        le=1,
        description="share of the seed policy's pretraining answers in the verifiers' "
        "<answer></answer> format (the others read 'Answer: A', which scores 0): below 1, a "
        "policy that must learn the format, cached under its own name",
    )
    seed_heads: int = Field(
        0,
        ge=0,
        le=64,
        description="attention heads of the seed policy (0: its recipe's: 4 for 'seed', head "
        "size 48; 2 for 'seed-test', head size 32); vLLM's CPU attention needs a head size of "
        "32, 64, 80, ...: 3 heads make 'seed' head size 64; cached under its own name",
    )
    seed_shared_tokenizer: bool = Field(
        False,
        description="a specialist seed policy (seed_datasets) takes the tokenizer of its recipe's "
        "generalist (trained on every entry's questions) instead of training its own: then "
        "specialists of one recipe are one model family, whose checkers can prove each other's "
        "batches on a devnet; cached under its own name",
    )
    base: Annotated[str | None, AfterValidator(_check_bundle_id)] = Field(
        None,
        description="the base bundle the node runs (`sapo policy id --bundle` prints a model's): "
        "[policy].model is used when it is that base, else the base is fetched over IPFS from "
        "the nodes of its family that pin it, checked block by block and cached under "
        "cache_dir/bases; unset: [policy].model as it is",
    )
    share_base: bool = Field(
        True,
        description="with adapter = 'lora' and an IPFS store: pin the base (kept while the node "
        "runs it) and name its bundle in the node's metadata, so the family's next node can "
        "fetch it from this one",
    )
    cache_dir: Path = Field(
        Path(".sapo"), description="where seed policies are built and fetched bases cached"
    )
    backend: Annotated[str, AfterValidator(_check_backend)] = Field(
        "transformers",
        description="generation backend: transformers, or vllm (needs the vllm extra: "
        "scripts/setup --vllm; the same seeded draws, so peers prove its batches)",
    )
    adapter: Literal["none", "lora"] = Field(
        "none",
        description="lora: train a low-rank adapter (PEFT) over the frozen model; snapshots, "
        "published checkpoints and what checkers fetch are the adapter only (megabytes, not the "
        "model's gigabytes), and checkers need the same base (its content hash is the model "
        "family). none: train every weight (tiny seed policies)",
    )
    lora_rank: int = Field(16, ge=1, le=1_024, description="the adapter's rank r")
    lora_alpha: int = Field(32, ge=1, le=65_536, description="LoRA's scale numerator (alpha / r)")
    lora_targets: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]] = Field(
        default_factory=lambda: [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ],
        min_length=1,
        max_length=16,
        description="the linear layers the adapter wraps (module names; Qwen2 and Llama: the "
        "seven of attention and MLP)",
    )
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    dtype: Annotated[str, AfterValidator(_check_dtype)] = Field(
        "auto",
        description="float32 on every device ('auto' is float32 too): proofs of generation "
        "re-draw completions in float32, which half-precision sampling does not match",
    )
    max_new_tokens: int = Field(64, gt=0, le=8_192)
    cpu_threads: int = Field(
        0,
        ge=0,
        le=1_024,
        description="torch CPU threads (0: torch's default, one per core); several nodes on one "
        "machine each taking every core slow each other down",
    )
    temperature: float = Field(1.0, gt=0, le=5)
    top_p: float = Field(1.0, gt=0, le=1)

    @model_validator(mode="after")
    def _adapter_backend(self) -> PolicySection:
        if self.adapter == "lora" and self.backend == "vllm":
            raise ValueError(
                'adapter = "lora" with backend = "vllm" is not supported yet: the vLLM backend '
                'samples from full weights it is sent each step; use backend = "transformers" '
                'or adapter = "none"'
            )
        if len(set(self.lora_targets)) != len(self.lora_targets):
            raise ValueError(f"lora_targets names a module twice: {self.lora_targets}")
        return self
