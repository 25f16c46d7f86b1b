"""A policy: a Hugging Face causal LM and its tokenizer, loaded offline, checkpointed exactly."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from client.policy.adapter import AdapterError, AdapterSpec, attach_lora, base_id
from client.policy.device import pick_device, pick_dtype

CHECKPOINT_STATE = "trainer_state.pt"


class PolicyError(Exception):
    """A policy cannot be loaded or saved; the message says what to do."""


@dataclass
class Policy:
    name: str
    model: Any  # transformers PreTrainedModel (a PEFT model when it trains an adapter)
    tokenizer: Any  # transformers PreTrainedTokenizerBase
    device: torch.device
    version: int = 0  # bumped by each optimizer step: what a generation engine syncs to
    source: str | None = None  # where the base was loaded from (a directory or a HF name)
    adapter: AdapterSpec | None = None  # the LoRA adapter it trains, or None: every weight
    base: str | None = None  # the adapter's frozen base's content id (client.policy.adapter)

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def descriptor(self) -> dict[str, Any]:
        """Returns (name, parameter count, tokenizer, base, adapter) as a rollout batch records
        them. The tokenizer is `label:vocabulary size:fingerprint` (see tokenizer_fingerprint)."""
        tok = self.tokenizer
        label = getattr(tok, "name_or_path", "") or type(tok).__name__
        fingerprint = tokenizer_fingerprint(tok)
        return {
            "name": self.name,
            "parameters": self.parameters,
            "tokenizer": f"{Path(str(label)).name or label}:{len(tok)}:{fingerprint}",
            "base": self.base,
            "adapter": self.adapter.describe() if self.adapter else None,
        }


def adapt(policy: Policy, spec: AdapterSpec) -> Policy:
    """Returns `policy` training a fresh LoRA adapter of `spec` over its weights, frozen as the
    base (named by its content id, hashed before the adapter is attached)."""
    if policy.adapter is not None:
        raise PolicyError(f"policy {policy.name} already trains an adapter")
    ident = base_id(policy.model)
    try:
        model = attach_lora(policy.model, spec)
    except AdapterError as exc:
        raise PolicyError(str(exc)) from None
    return Policy(
        policy.name,
        model,
        policy.tokenizer,
        policy.device,
        policy.version,
        source=policy.source,
        adapter=spec,
        base=ident,
    )


FINGERPRINT_CHARS = 16


def tokenizer_fingerprint(tokenizer) -> str:
    """The first 16 hex digits of sha256 over the tokenizer's vocabulary (every token string
    with its id): two tokenizers of one size but other merges (BPE trained on other corpora, e.g.
    two specialists' seed policies) decode the same ids to different text, so a checker compares
    this, not the size. Cached on the tokenizer object."""
    cached = getattr(tokenizer, "_sapo_fingerprint", None)
    if cached is None:
        import hashlib

        vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        text = json.dumps(vocab, ensure_ascii=False, separators=(",", ":"))
        cached = hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_CHARS]
        tokenizer._sapo_fingerprint = cached
    return cached


def parse_tokenizer_label(label: str) -> tuple[int | None, str | None]:
    """(vocabulary size, fingerprint) of a batch's tokenizer label; None for a part it lacks
    (a label written before fingerprints: `label:size`)."""
    parts = label.rsplit(":", 2)
    fingerprint = None
    if len(parts) == 3 and len(parts[2]) == FINGERPRINT_CHARS:
        try:
            int(parts[2], 16)
            fingerprint = parts.pop()
        except ValueError:
            pass
    size = parts[-1]
    return (int(size) if size.isdigit() else None), fingerprint


def load_policy(name_or_path: str | Path, device: str = "auto", dtype: str = "auto") -> Policy:
    """Returns a policy from a local directory or a Hugging Face name (cached, offline-first)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        target = pick_device(device)
    except RuntimeError as exc:  # a device this machine does not have: the message says what to set
        raise PolicyError(str(exc)) from None
    torch_dtype = pick_dtype(dtype)
    source = str(name_or_path)
    local = Path(source).is_dir()
    offline = local or os.environ.get("HF_HUB_OFFLINE") == "1"
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=offline)
        model = AutoModelForCausalLM.from_pretrained(
            source, local_files_only=offline, dtype=torch_dtype
        )
    except OSError as exc:
        raise PolicyError(
            f"cannot load policy {source!r}: {str(exc).splitlines()[0]} (a local directory, a "
            "cached Hugging Face model, or `sapo policy seed` for the CPU seed policy)"
        ) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model.to(target)
    return Policy(
        name=Path(source).name if local else source,
        model=model,
        tokenizer=tokenizer,
        device=target,
        source=str(Path(source).resolve()) if local else source,
    )


def save_checkpoint(
    policy: Policy, optimizer: torch.optim.Optimizer | None, step: int, directory: Path
) -> Path:
    """Writes model (safetensors), tokenizer, optimizer and step to `directory` atomically."""
    tmp = directory.with_name(directory.name + ".partial")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    policy.model.save_pretrained(tmp, safe_serialization=True)
    policy.tokenizer.save_pretrained(tmp)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict() if optimizer else None,
        "rng": torch.get_rng_state(),
    }
    torch.save(state, tmp / CHECKPOINT_STATE)
    meta: dict[str, Any] = {"name": policy.name, "step": step}
    if policy.adapter is not None:  # the adapter only was saved: name the base it goes over
        meta |= {
            "base": policy.base,
            "base_source": policy.source,
            "adapter": policy.adapter.describe(),
        }
    (tmp / "sapo.json").write_text(json.dumps(meta))
    if directory.exists():
        import shutil

        old = directory.with_name(directory.name + ".old")
        if old.exists():
            shutil.rmtree(old)
        directory.rename(old)
        tmp.rename(directory)
        shutil.rmtree(old)
    else:
        tmp.rename(directory)
    return directory


def load_checkpoint(
    directory: Path, optimizer_factory, device: str = "cpu", dtype: str = "float32"
) -> tuple[Policy, torch.optim.Optimizer, int]:
    """Returns (policy, optimizer with its state, step) from a checkpoint directory. An
    adapter's checkpoint holds the adapter only: its base is loaded from where it was, and
    must still have the content id the checkpoint names."""
    meta = json.loads((directory / "sapo.json").read_text())
    if "adapter" in meta:
        policy = _load_adapter_checkpoint(directory, meta, device, dtype)
    else:
        policy = load_policy(directory, device=device, dtype=dtype)
    policy.name = meta["name"]
    state = torch.load(directory / CHECKPOINT_STATE, map_location=policy.device, weights_only=False)
    optimizer = optimizer_factory(policy.model)
    if state["optimizer"] is not None:
        optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"].cpu())  # map_location put it on the policy's device
    return policy, optimizer, int(state["step"])


def _load_adapter_checkpoint(directory: Path, meta: dict, device: str, dtype: str) -> Policy:
    from peft import PeftModel

    base = load_policy(meta["base_source"], device=device, dtype=dtype)
    if (found := base_id(base.model)) != meta["base"]:
        raise PolicyError(
            f"checkpoint {directory} trains an adapter over base {meta['base'][:12]}…, but "
            f"{meta['base_source']} now holds {found[:12]}…: restore that base, or start a new "
            "data_dir"
        )
    model = PeftModel.from_pretrained(base.model, directory, is_trainable=True)
    model.to(base.device)
    return Policy(
        meta["name"],
        model,
        base.tokenizer,
        base.device,
        source=meta["base_source"],
        adapter=AdapterSpec.from_description(meta["adapter"]),
        base=meta["base"],
    )
