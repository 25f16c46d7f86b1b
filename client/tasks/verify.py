"""Prompts and verification: ask for the answer inside <answer>…</answer>, score it with the
dataset's own verifier. A reward is a float in [0, 1]; a malformed completion scores 0, never
raises.

Every answer a node scores may be a stranger's (a peer's batch, re-scored by its checkers, its
learners and `sapo audit verify`), so only verifiers read for what such an answer can make them
do are run (client.tasks.catalog.AUDITED, held at load), an answer longer than MAX_ANSWER_CHARS
scores 0 unread, and where reasoning-gym's verifier evaluates the answer as Python
(binary_matrix calls `eval` on it: any code a peer wrote ran in every checker, and `9**9**9**9`
never returned) or grows exponentially with it (propositional_logic's truth table over the
answer's atoms), this module bounds it first or scores it itself (SCORERS)."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
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


# the longest answer any verifier reads: the catalogs' longest reference answer is 199
# characters (binary_matrix, 10 x 10); one of 10,000 parentheses took propositional_logic's
# verifier 0.6 s, and at this cap the slowest answer found takes binary_matrix's 1.7 ms
MAX_ANSWER_CHARS = 1_024
MAX_LOGIC_CHARS = 64  # a propositional_logic answer (its longest reference answer drawn: 8)
MAX_LITERAL_NODES = 4_096  # a literal answer's syntax nodes (a 10 x 10 matrix has 211)


def literal(answer: str) -> Any:
    """The Python literal `answer` spells (numbers, strings, lists, tuples, ...), never
    evaluating anything else: ValueError for an expression, a call or a name, and for more than
    MAX_LITERAL_NODES syntax nodes."""
    try:
        tree = ast.parse(answer, mode="eval")
    except (SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not a literal: {type(exc).__name__}") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_LITERAL_NODES:
        raise ValueError(f"a literal of more than {MAX_LITERAL_NODES} syntax nodes")
    return ast.literal_eval(tree)


def _binary_matrix(task: Task, answer: str) -> float:
    """reasoning-gym's BinaryMatrixDataset.score_answer, reading the answer as a literal where
    it calls `eval` on it: 1 for the oracle's text, 0.1 for a list of rows that prints as it."""
    oracle = task.item["answer"]
    if answer == oracle:
        return 1.0
    try:
        text = task.dataset._matrix_to_str(literal(answer))  # the oracle's own printing
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return 0.0
    return 0.1 if text == oracle else 0.0


def _propositional_logic(task: Task, answer: str) -> float:
    """reasoning-gym's PropositionalLogicDataset.score_answer for an answer over the question's
    own variables only, 0 otherwise: it decides validity by a truth table over every atom of the
    premises and the answer, built whole (2^n assignments), and holds only single capitals to the
    question's variables, so `v0∧v1∧…∧v19` (69 characters) took 13 s and 30 such atoms would
    take hours and the memory of 2^30 assignments. Its parser re-scans the rest of the answer at
    each operator (2,047 negations took 4 s, 63 take 9 ms), so an answer is at most
    MAX_LOGIC_CHARS."""
    from reasoning_gym.logic.propositional_logic import Expression

    if len(answer) > MAX_LOGIC_CHARS:
        return 0.0
    variables = set(task.item["metadata"]["variables"])
    try:
        atoms = task.dataset._collect_variables([Expression.from_string(answer)])
    except (ValueError, KeyError, AttributeError, RecursionError):
        return 0.0
    if not atoms <= variables:
        return 0.0
    return task.dataset.score_answer(answer=answer, entry=task.item)


# the audited datasets (client.tasks.catalog.AUDITED) this module scores itself, or bounds first
SCORERS: dict[str, Callable[[Task, str], float]] = {
    "binary_matrix": _binary_matrix,
    "propositional_logic": _propositional_logic,
}


def reward(task: Task, completion: str) -> float:
    """Returns the dataset verifier's reward for a completion, in [0, 1]."""
    answer = extract_answer(completion)
    if answer is None or len(answer) > MAX_ANSWER_CHARS:
        return 0.0
    own = SCORERS.get(task.dataset_name)
    try:
        if own is not None:
            value = float(own(task, answer))
        else:
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
