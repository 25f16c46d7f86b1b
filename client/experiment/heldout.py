"""Held-out evaluation of an experiment's nodes, the same on both swarms.

A fixed set of questions is drawn from an evaluation seed (client.policy.evaluate.eval_seed),
disjoint from every ledger task seed: `validation` to choose settings on, `test` to report. Each
node's greedy answer to every question is scored by the verifiers. A cell's record keeps the
per-question rewards and names the questions that are not held out for it: those some node of the
cell drew for training (`trained`) and those in a node's pretraining corpus (`pretrained`), so
that the report scores only questions no node has seen.

The in-process swarm evaluates at the start, every `eval_every` rounds and at the end. A devnet
cell evaluates the nodes' starting policies and, once the nodes have stopped, the checkpoints
they saved; its `trained` set is every question a node could have drawn as its own in any chain
round up to the one in which it stopped (a superset of what it drew: the draw is seeded by the
ledger, so it is recomputed here rather than read back from the batches).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from client.node.rollouts import task_seed
from client.node.training import last_checkpoint
from client.policy import load_policy
from client.policy.evaluate import eval_seed, greedy_rewards
from client.policy.seed import pretraining_prompts
from client.tasks import Catalog, Task, draw, local_round_seed
from client.tasks.verify import plain_prompt

# the evaluation seeds of the two fixed sets: settings are chosen on `validation`, results
# reported on `test`
EVAL_SETS = {"validation": 23, "test": 24}


def evaluation_set(catalog: Catalog, questions: int, which: str = "test") -> list[Task]:
    """The fixed held-out questions of set `which` (the same for every cell and seed)."""
    return draw(eval_seed(EVAL_SETS[which]), questions, catalog)


def pretrained_questions(tasks: list[Task], paths: Iterable) -> list[int] | None:
    """The indices of `tasks` whose prompt is in the pretraining corpus of any of the seed
    policies at `paths`; None when a model is not a seed policy."""
    corpora: set[str] = set()
    for path in dict.fromkeys(str(p) for p in paths):
        if (prompts := pretraining_prompts(path)) is None:
            return None
        corpora |= prompts
    return [i for i, t in enumerate(tasks) if plain_prompt(t.question) in corpora]


def greedy(policies: list, tasks: list[Task], max_new_tokens: int) -> list[list[float]]:
    """Every policy's verifier reward for its greedy answer to each task (rounded as recorded)."""
    return [[round(x, 6) for x in greedy_rewards(p, tasks, max_new_tokens)] for p in policies]


def drawable(
    catalog: Catalog,
    chain_id: int,
    ledger: str,
    nodes: list[str],
    rounds: range,
    local_rounds: int,
    items: int,
) -> set[str]:
    """Every question one of `nodes` draws as its own in local rounds 0..local_rounds-1 of
    chain rounds `rounds` on `ledger` (client.node.rollouts.generate_local_round's draw)."""
    return {
        t.question
        for node in nodes
        for r in rounds
        for k in range(local_rounds)
        for t in draw(local_round_seed(task_seed(chain_id, ledger, r, node), k), items, catalog)
    }


def held_out_record(
    which: str,
    tasks: list[Task],
    drawn: set[str],
    starts: list,
    evaluations: list[dict[str, Any]],
) -> dict[str, Any]:
    """A cell record's `held_out` section: the set, its questions, which are not held out for
    this cell (`drawn` for training; in the corpus of the seed policies at `starts`) and the
    evaluations ({"round", "greedy": per node, per question})."""
    return {
        "set": which,
        "questions": len(tasks),
        "entries": [t.entry for t in tasks],
        "trained": [i for i, t in enumerate(tasks) if t.question in drawn],
        # None: a model whose training data is not known here
        "pretrained": pretrained_questions(tasks, starts),
        "evaluations": evaluations,
    }


def checkpoint_evaluation(
    node_dirs: list[Path], max_new_tokens: int, tasks: list[Task]
) -> dict[str, Any]:
    """The evaluation of the checkpoints devnet nodes saved when they stopped, with each one's
    step count."""
    policies, steps = [], []
    for node_dir in node_dirs:
        if (path := last_checkpoint(node_dir)) is None:
            raise FileNotFoundError(f"{node_dir}: the node saved no checkpoint to evaluate")
        policies.append(load_policy(path, device="cpu", dtype="float32"))
        steps.append(int(json.loads((path / "sapo.json").read_text())["step"]))
    return {"greedy": greedy(policies, tasks, max_new_tokens), "steps": steps}
