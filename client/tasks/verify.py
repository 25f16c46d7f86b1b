"""Prompts and verification: ask for the answer inside <answer>…</answer>, score it with the
dataset's own verifier. A reward is a float in [0, 1]; a malformed completion scores 0, never
raises."""

from __future__ import annotations

import math
import re
from typing import Any

from client.tasks.draw import Task
from client.units import SCORE_SCALE

INSTRUCTION = "Give only the final answer, inside <answer></answer>."
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def messages(question: str) -> list[dict[str, str]]:
    """Returns the chat messages for a question (for tokenizers with a chat template)."""
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": question}]


def plain_prompt(question: str) -> str:
    """Returns the prompt for models without a chat template (the seed policy's format)."""
    return f"Question: {question}\n{INSTRUCTION}\nAnswer: "


def render_prompt(question: str, tokenizer: Any | None = None) -> str:
    """Returns the prompt text: the tokenizer's chat template when it has one, else plain."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            messages(question), tokenize=False, add_generation_prompt=True
        )
    return plain_prompt(question)


def extract_answer(completion: str) -> str | None:
    """Returns the text of the last complete <answer>…</answer>, stripped; None without one."""
    found = _ANSWER.findall(completion)
    return found[-1].strip() if found else None


def reward(task: Task, completion: str) -> float:
    """Returns the dataset verifier's reward for a completion, in [0, 1]."""
    answer = extract_answer(completion)
    if answer is None:
        return 0.0
    try:
        value = float(task.dataset.score_answer(answer=answer, entry=task.item))
    except Exception:  # a verifier must never take the node down over a strange answer
        return 0.0
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


def to_units(value: float) -> int:
    """Returns a [0, 1] reward in SCORE_SCALE units (what batches and the ledger carry)."""
    return round(min(1.0, max(0.0, value)) * SCORE_SCALE)


def reference_answer(task: Task) -> str | None:
    """Returns an answer the verifier accepts (some datasets keep it in metadata)."""
    if task.answer is not None:
        return task.answer
    metadata = task.item.get("metadata", {})
    example = metadata.get("example_answer")
    return None if example is None else str(example)
