"""What a seed policy is pretrained on: a corpus of questions from the catalog with their reference
answers, drawn with seeds from `random.Random(seed)` (far from the ledger's seeds, so evaluation
questions stay fresh); a byte-level BPE tokenizer trained on that corpus, digits split one per
token, with the special tokens <pad>, <eos>, <answer>, </answer>; and the examples, prompt ->
"<answer>A</answer>", as token ids. A built policy's record lists the prompts it saw."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from client.policy.seed.spec import SeedSpec
from client.tasks import load_catalog, regenerate
from client.tasks.verify import plain_prompt, reference_answer

SPECIAL = ["<pad>", "<eos>", "<answer>", "</answer>"]


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


def _examples(
    tokenizer, pairs: list[tuple[str, str]], tagged: float = 1.0, seed: int = 0
) -> list[tuple[list[int], int]]:
    """Returns (token ids, prompt length) for prompt + "<answer>A</answer><eos>", or, for a
    seeded draw of 1 - `tagged` of the pairs, prompt + "Answer: A<eos>"."""
    out = []
    untagged = random.Random(f"seed-policy-format:{seed}")
    for prompt, answer in pairs:
        p = tokenizer.encode(prompt, add_special_tokens=False)
        tag = tagged >= 1.0 or untagged.random() < tagged
        text = f"<answer>{answer}</answer><eos>" if tag else f"Answer: {answer}<eos>"
        a = tokenizer.encode(text, add_special_tokens=False)
        out.append((p + a, len(p)))
    return out


def pretraining_prompts(directory: Path | str) -> set[str] | None:
    """The prompts a seed policy at `directory` was pretrained on (its build record lists them);
    None for a model that is not a seed policy, whose training data is not known here."""
    record = Path(directory) / "seed-build.json"
    if not record.is_file():
        return None
    return set(json.loads(record.read_text())["corpus_questions"])
