"""Evaluating a policy: mean verifier reward per dataset on fresh questions, greedy and sampled."""

from __future__ import annotations

import hashlib
from collections import defaultdict

from client.policy.generate import TransformersBackend
from client.policy.policy import Policy
from client.policy.seed import pretraining_prompts
from client.tasks import Catalog, Task, draw, render_prompt, reward

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
    trained: set[str] | None = None,
) -> dict:
    """Returns mean rewards overall, per dataset, and on questions unseen in pretraining (and,
    given the questions RL trained on, on the ones it never trained on: `untrained`)."""
    tasks = draw(eval_seed(seed), questions, catalog)
    prompts = [render_prompt(t.question, policy.tokenizer) for t in tasks]
    backend = TransformersBackend(policy)
    greedy = backend.generate(prompts, 1, max_new_tokens, 0.0, 1.0, seed)
    sampled = backend.generate(prompts, samples, max_new_tokens, 1.0, 1.0, seed)
    corpus = _pretraining_prompts(policy)
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"greedy": [], "sampled": []})
    unseen: dict[str, list[float]] = {"greedy": [], "sampled": []}
    untrained: dict[str, list[float]] = {"greedy": [], "sampled": []}
    for task, prompt, g, s in zip(tasks, prompts, greedy.texts, sampled.texts, strict=True):
        g_reward, s_rewards = reward(task, g[0]), [reward(task, c) for c in s]
        per[task.entry]["greedy"].append(g_reward)
        per[task.entry]["sampled"].extend(s_rewards)
        if corpus is not None and prompt not in corpus:
            unseen["greedy"].append(g_reward)
            unseen["sampled"].extend(s_rewards)
        if trained is not None and task.question not in trained:
            untrained["greedy"].append(g_reward)
            untrained["sampled"].extend(s_rewards)
    result = {
        "questions": questions,
        "greedy": _mean([r for d in per.values() for r in d["greedy"]]),
        "sampled": _mean([r for d in per.values() for r in d["sampled"]]),
        "per_dataset": {
            k: {
                "greedy": _mean(v["greedy"]),
                "sampled": _mean(v["sampled"]),
                "questions": len(v["greedy"]),
            }
            for k, v in sorted(per.items())
        },
        # tiny catalogs have tiny problem spaces: count the questions the seed policy was
        # pretrained on, and score the others on their own
        "seen_in_pretraining": None if corpus is None else questions - len(unseen["greedy"]),
        "unseen": None
        if corpus is None
        else {
            "questions": len(unseen["greedy"]),
            "greedy": _mean(unseen["greedy"]),
            "sampled": _mean(unseen["sampled"]),
        },
    }
    if trained is not None:
        result["untrained"] = {
            "questions": len(untrained["greedy"]),
            "greedy": _mean(untrained["greedy"]),
            "sampled": _mean(untrained["sampled"]),
        }
    return result


def greedy_rewards(
    policy: Policy, tasks: list[Task], max_new_tokens: int, batch: int = 256
) -> list[float]:
    """Returns the verifier's reward of the policy's greedy answer to each task, in order (the
    held-out evaluation of `sapo experiment`: pass@1 counts the rewards of 1)."""
    backend = TransformersBackend(policy)
    rewards: list[float] = []
    for start in range(0, len(tasks), batch):
        part = tasks[start : start + batch]
        prompts = [render_prompt(t.question, policy.tokenizer) for t in part]
        out = backend.generate(prompts, 1, max_new_tokens, 0.0, 1.0, 0)
        rewards += [reward(t, texts[0]) for t, texts in zip(part, out.texts, strict=True)]
    return rewards


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _pretraining_prompts(policy: Policy) -> set[str] | None:
    return pretraining_prompts(str(getattr(policy.tokenizer, "name_or_path", "")))
