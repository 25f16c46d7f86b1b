"""Builds one seed policy: the corpus and tokenizer (see pretraining), then a Qwen2ForCausalLM (or
LlamaForCausalLM) trained with AdamW (cosine schedule) on prompt -> "<answer>A</answer>", the loss
on the answer tokens only, for a fixed number of steps (deterministic for a seed). The `--minutes`
cap can end a build early; the build's record then says it was cut short.

A build reports its progress (stage, step, loss) to a file beside the policy, keeps what it has
done in `<name>.partial/` so that a stopped build resumes where it last saved (to the same
weights), and publishes the finished policy by one rename. The resume restores every piece of
state (corpus, tokenizer, model, optimizer, sampling order, torch RNG) as it was saved."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import torch

from client.policy.seed.pretraining import _examples, corpus, train_tokenizer
from client.policy.seed.progress import BuildProgress, progress_path
from client.policy.seed.spec import SeedSpec


def _write_json(path: Path, data: dict) -> None:
    """Writes `data` whole or not at all (temp file, rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _save_torch(path: Path, state: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def build_seed_policy(
    spec: SeedSpec,
    directory: Path,
    *,
    minutes: float | None = None,
    progress: Callable[[BuildProgress], None] | None = None,
) -> dict:
    """Builds the seed policy into `directory`; returns its build record (also saved).

    The build works in `<directory>.partial/` and keeps what it has done there (the corpus, the
    tokenizer, and every `save_every` training steps the model, optimizer and sampling state),
    so a build that is stopped resumes where it was saved and ends with the same weights as an
    uninterrupted one. The finished policy appears in `directory` by one rename: a reader never
    sees half a policy.
    """
    from transformers import PreTrainedTokenizerFast

    began = time.perf_counter()
    work = directory.with_name(directory.name + ".partial")
    work.mkdir(parents=True, exist_ok=True)
    spec_json = json.dumps(asdict(spec), sort_keys=True)
    if (work / "spec.json").is_file() and (work / "spec.json").read_text() != spec_json:
        shutil.rmtree(work)  # a leftover of another spec under this name: start over
        work.mkdir(parents=True)
    (work / "spec.json").write_text(spec_json)
    state = {"stage": "corpus", "step": 0, "loss": None, "resumed_from": 0, "saved_step": 0}

    def report(**changes) -> None:
        state.update(changes)
        update = BuildProgress(
            policy=directory.name,
            stage=state["stage"],
            step=state["step"],
            steps=spec.steps,
            loss=state["loss"],
            elapsed_s=round(time.perf_counter() - began, 1),
            builder_pid=os.getpid(),
            resumed_from=state["resumed_from"],
            saved_step=state["saved_step"],
        )
        _write_json(progress_path(directory), asdict(update))
        if progress:
            progress(update)

    report()
    torch.manual_seed(spec.seed)
    random.seed(spec.seed)
    if (work / "corpus.json").is_file():
        pairs = [tuple(p) for p in json.loads((work / "corpus.json").read_text())]
    else:
        pairs = corpus(spec)
        _write_json(work / "corpus.json", pairs)
    report(stage="tokenizer")
    if (work / "tokenizer" / "tokenizer.json").is_file():
        tokenizer = PreTrainedTokenizerFast.from_pretrained(work / "tokenizer")
    else:
        # a shared tokenizer is trained on the generalist's corpus (the same recipe on every entry)
        text = corpus(replace(spec, entries=())) if spec.shared_tokenizer else pairs
        tokenizer = train_tokenizer(text, spec.vocab_size)
        tokenizer.save_pretrained(work / "tokenizer.tmp")
        shutil.rmtree(work / "tokenizer", ignore_errors=True)
        os.replace(work / "tokenizer.tmp", work / "tokenizer")
    examples = _examples(tokenizer, pairs, spec.tagged, spec.seed)
    longest = max(len(ids) for ids, _ in examples)
    model = _model(spec, tokenizer, max(256, longest + 64))
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.01)

    def lr_at(step: int) -> float:
        if step < spec.warmup:
            return spec.lr * (step + 1) / spec.warmup
        progress_ = (step - spec.warmup) / max(1, spec.steps - spec.warmup)
        return spec.lr * 0.5 * (1 + math.cos(math.pi * progress_))

    order = random.Random(spec.seed)
    tokens_seen, first, loss_value = 0, 0, float("nan")
    if (work / "train-state.pt").is_file():
        saved = torch.load(work / "train-state.pt", weights_only=False)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        order.setstate(saved["order"])
        torch.set_rng_state(saved["torch_rng"])
        first, tokens_seen, loss_value = saved["step"], saved["tokens"], saved["loss"]
        state.update(resumed_from=first, saved_step=first)
    save_every = max(10, spec.steps // 20)
    model.train()
    steps_done, cut_short = first, False
    report(stage="training", step=first, loss=None if first == 0 else loss_value)
    for step in range(first, spec.steps):
        if minutes is not None and time.perf_counter() - began > minutes * 60:
            cut_short = True
            break
        batch = [examples[order.randrange(len(examples))] for _ in range(spec.batch)]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id)  # right padded
        labels = torch.full((len(batch), width), -100)  # loss on the answer only
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, prompt_len) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, prompt_len : len(ids)] = torch.tensor(ids[prompt_len:])
            attention[row, : len(ids)] = 1
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        tokens_seen += int(attention.sum())
        steps_done, loss_value = step + 1, float(loss.detach())
        if steps_done % save_every == 0 and steps_done < spec.steps:
            _save_torch(
                work / "train-state.pt",
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "order": order.getstate(),
                    "torch_rng": torch.get_rng_state(),
                    "step": steps_done,
                    "tokens": tokens_seen,
                    "loss": loss_value,
                },
            )
            state["saved_step"] = steps_done
        report(step=steps_done, loss=loss_value)

    report(stage="saving")
    out = work / "policy"
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    record = {
        "spec": asdict(spec),
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": steps_done,
        "tokens": tokens_seen,
        "final_loss": loss_value,
        "seconds": round(time.perf_counter() - began, 1),
        "cut_short": cut_short,
        "resumed_from": state["resumed_from"],
        "corpus_questions": sorted({p for p, _ in pairs}),
    }
    (out / "seed-build.json").write_text(json.dumps(record))
    (out / "sapo.json").write_text(json.dumps({"name": directory.name, "step": 0}))
    if directory.exists():  # a forced rebuild: the old policy stays in place until the new one is
        old = directory.with_name(directory.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(directory, old)
        os.replace(out, directory)
        shutil.rmtree(old)
    else:
        os.replace(out, directory)
    shutil.rmtree(work)
    report(stage="done")
    progress_path(directory).unlink(missing_ok=True)
    return record


def _model(spec: SeedSpec, tokenizer, positions: int):
    """A freshly initialised model of the spec's architecture (seeded by the caller)."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    shape = {
        "vocab_size": len(tokenizer),
        "hidden_size": spec.hidden,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.heads,
        "intermediate_size": spec.intermediate,
        "max_position_embeddings": positions,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": tokenizer.eos_token_id,
    }
    if spec.arch == "llama":
        return LlamaForCausalLM(LlamaConfig(**shape, tie_word_embeddings=False))
    return Qwen2ForCausalLM(Qwen2Config(**shape, tie_word_embeddings=True))
