"""The seed policy: a tiny Qwen2 model pretrained locally on `tiny` catalog tasks, no download.

CPU swarms start from it. It is built once per seed and cached:
1. a corpus of questions from the catalog with their reference answers, drawn with seeds from
   `random.Random(seed)` (far from the ledger's seeds, so evaluation questions stay fresh);
2. a byte-level BPE tokenizer trained on that corpus, digits split one per token, with the
   special tokens <pad>, <eos>, <answer>, </answer>;
3. a Qwen2ForCausalLM trained with AdamW (cosine schedule) on prompt -> "<answer>A</answer>",
   the loss on the answer tokens only, for a fixed number of steps (deterministic for a seed).
The `--minutes` cap can end a build early; the build's record then says it was cut short.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from client.tasks import load_catalog, regenerate
from client.tasks.verify import plain_prompt, reference_answer

SPECIAL = ["<pad>", "<eos>", "<answer>", "</answer>"]


@dataclass(frozen=True)
class SeedSpec:
    """Everything that determines a seed policy; its JSON is stored beside the weights."""

    seed: int = 0
    catalog: str = "tiny"
    vocab_size: int = 512
    hidden: int = 192
    layers: int = 4
    heads: int = 4
    intermediate: int = 512
    corpus: int = 40_000  # (question, answer) pairs
    steps: int = 600
    batch: int = 64
    lr: float = 2e-3
    warmup: int = 30
    # pretrain on these catalog entries only (a specialist); empty: every entry
    entries: tuple[str, ...] = ()

    @classmethod
    def tiny_test(cls, seed: int = 0) -> SeedSpec:
        """An even smaller policy that builds in seconds, by the same code (for tests)."""
        # ~0.1M parameters, ~10 s on 2 cores; enough to answer a few percent of questions, so
        # that a devnet of test policies has groups with signal to share
        return cls(
            seed=seed,
            vocab_size=320,
            hidden=64,
            layers=2,
            heads=2,
            intermediate=128,
            corpus=4_000,
            steps=150,
            batch=32,
        )


def corpus(spec: SeedSpec) -> list[tuple[str, str]]:
    """Returns (prompt, answer) pairs from the catalog for the spec's seed."""
    catalog = load_catalog(spec.catalog)
    known = [e.id for e in catalog.entries]
    if unknown := sorted(set(spec.entries) - set(known)):
        raise ValueError(f"no entries {unknown} in catalog {spec.catalog!r} (it has {known})")
    entries = [e for e in catalog.entries if not spec.entries or e.id in spec.entries]
    rng = random.Random(spec.seed)
    pairs = []
    per_entry = math.ceil(spec.corpus / len(entries))
    for entry in entries:
        for _ in range(math.ceil(per_entry / 64)):
            seed = rng.getrandbits(62)
            for index in range(64):
                task = regenerate(catalog, entry.id, seed, index)
                pairs.append((plain_prompt(task.question), str(reference_answer(task))))
    rng.shuffle(pairs)
    return pairs[: spec.corpus]


def train_tokenizer(pairs: list[tuple[str, str]], vocab_size: int):
    """Returns a PreTrainedTokenizerFast trained on the corpus (byte-level BPE)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator((p + a for p, a in pairs), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="<pad>",
        eos_token="<eos>",
        additional_special_tokens=["<answer>", "</answer>"],
    )
    fast.padding_side = "left"
    return fast


def _examples(tokenizer, pairs: list[tuple[str, str]]) -> list[tuple[list[int], int]]:
    """Returns (token ids, prompt length) for prompt + "<answer>A</answer><eos>"."""
    out = []
    for prompt, answer in pairs:
        p = tokenizer.encode(prompt, add_special_tokens=False)
        a = tokenizer.encode(f"<answer>{answer}</answer><eos>", add_special_tokens=False)
        out.append((p + a, len(p)))
    return out


def build_seed_policy(
    spec: SeedSpec,
    directory: Path,
    *,
    minutes: float | None = None,
    progress: Callable[[int, int, float], None] | None = None,
) -> dict:
    """Builds the seed policy into `directory`; returns its build record (also saved)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    began = time.perf_counter()
    torch.manual_seed(spec.seed)
    random.seed(spec.seed)
    pairs = corpus(spec)
    tokenizer = train_tokenizer(pairs, spec.vocab_size)
    examples = _examples(tokenizer, pairs)
    longest = max(len(ids) for ids, _ in examples)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.heads,
        intermediate_size=spec.intermediate,
        max_position_embeddings=max(256, longest + 64),
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    model = Qwen2ForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.01)

    def lr_at(step: int) -> float:
        if step < spec.warmup:
            return spec.lr * (step + 1) / spec.warmup
        progress_ = (step - spec.warmup) / max(1, spec.steps - spec.warmup)
        return spec.lr * 0.5 * (1 + math.cos(math.pi * progress_))

    order = random.Random(spec.seed)
    model.train()
    tokens_seen, steps_done, cut_short, loss_value = 0, 0, False, float("nan")
    for step in range(spec.steps):
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
        if progress:
            progress(step + 1, spec.steps, loss_value)

    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    record = {
        "spec": asdict(spec),
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": steps_done,
        "tokens": tokens_seen,
        "final_loss": loss_value,
        "seconds": round(time.perf_counter() - began, 1),
        "cut_short": cut_short,
        "corpus_questions": sorted({p for p, _ in pairs}),
    }
    (directory / "seed-build.json").write_text(json.dumps(record))
    (directory / "sapo.json").write_text(json.dumps({"name": directory.name, "step": 0}))
    return record


def seed_policy_dir(data_root: Path, spec: SeedSpec) -> Path:
    """Returns where the seed policy of `spec` is cached."""
    name = f"seed-{spec.catalog}-{spec.seed}-h{spec.hidden}l{spec.layers}"
    if spec.entries:
        name += "-on-" + "+".join(sorted(spec.entries))
    return data_root / "policies" / name


def ensure_seed_policy(data_root: Path, spec: SeedSpec, **kwargs) -> Path:
    """Returns the cached seed policy's directory, building it first if absent.

    Processes sharing a cache (a devnet's nodes) build it once: the first holds a lock while the
    others wait, then find it built."""
    import fcntl

    directory = seed_policy_dir(data_root, spec)
    if (directory / "seed-build.json").is_file():
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (directory / "seed-build.json").is_file():
            build_seed_policy(spec, directory, **kwargs)
    return directory
