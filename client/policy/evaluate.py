"""Evaluating a policy: mean verifier reward per dataset on fresh questions, greedy and sampled."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

from client.policy.generate import TransformersBackend
from client.policy.policy import Policy
from client.tasks import Catalog, draw, render_prompt, reward

EVAL_DOMAIN = b"sapo.eval/1"


def eval_seed(seed: int) -> bytes:
    """Returns the task seed of evaluation set `seed` (disjoint from ledger task seeds)."""
    return hashlib.sha256(EVAL_DOMAIN + seed.to_bytes(8, "big")).digest()


def evaluate(
    policy: Policy,
    catalog: Catalog,
    questions: int = 100,
    seed: int = 0,
    samples: int = 4,
    max_new_tokens: int = 24,
) -> dict:
    """Returns {"greedy", "sampled", "per_dataset", "questions", "seen_in_pretraining"}."""
    tasks = draw(eval_seed(seed), questions, catalog)
    prompts = [render_prompt(t.question, policy.tokenizer) for t in tasks]
    backend = TransformersBackend(policy)
    greedy = backend.generate(prompts, 1, max_new_tokens, 0.0, 1.0, seed)
    sampled = backend.generate(prompts, samples, max_new_tokens, 1.0, 1.0, seed)
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"greedy": [], "sampled": []})
    for task, g, s in zip(tasks, greedy.texts, sampled.texts, strict=True):
        per[task.entry]["greedy"].append(reward(task, g[0]))
        per[task.entry]["sampled"].extend(reward(task, c) for c in s)
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    seen = _seen_in_pretraining(policy, prompts)
    return {
        "questions": questions,
        "greedy": mean([r for d in per.values() for r in d["greedy"]]),
        "sampled": mean([r for d in per.values() for r in d["sampled"]]),
        "per_dataset": {
            k: {
                "greedy": mean(v["greedy"]),
                "sampled": mean(v["sampled"]),
                "questions": len(v["greedy"]),
            }
            for k, v in sorted(per.items())
        },
        "seen_in_pretraining": seen,
    }


def _seen_in_pretraining(policy: Policy, prompts: list[str]) -> int | None:
    path = Path(str(getattr(policy.tokenizer, "name_or_path", ""))) / "seed-build.json"
    if not path.is_file():
        return None
    corpus = set(json.loads(path.read_text())["corpus_questions"])
    return sum(p in corpus for p in prompts)
