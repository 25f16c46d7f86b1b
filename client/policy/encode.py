"""Encoding rollouts for training: prompt (own template) + completion -> a right-padded TokenBatch.

A completion is re-encoded from its text with the node's own tokenizer (local and external
alike, as the paper does), except a peer's completion sampled by a model of this node's
tokenizer with its log-probs given (a sapo.rollouts/5 batch): that one is trained on the token
ids it was sampled as, with its producer's log-probs beside them, so that the learner can weigh
it as the off-policy sample it is (client.sapo.offpolicy). A peer's completion of another
tokenizer, or of a v4 batch, has no ids the learner's model could have drawn: it is re-encoded
and never weighed (`TokenBatch.corrected` false).

A completion reaches the loss whole, never cut: its reward was computed on the whole text, so
training on a prefix would credit (or blame) tokens for an answer they never contained. What
bounds the trainer's memory is the choice of groups (the node leaves out peers' completions
longer than it would generate itself: `completion_tokens`), not truncation here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from client.policy.policy import parse_tokenizer_label, tokenizer_fingerprint
from client.sapo.advantages import group_advantages
from client.sapo.step import TokenBatch
from client.store.batch import Sampled
from client.tasks import render_prompt


@dataclass(frozen=True)
class Group:
    """One question's completions with this node's own rewards (in [0, 1])."""

    question: str
    completions: list[str]
    rewards: list[float]
    external: bool
    sampled: Sampled | None = None  # a peer's, when its batch gave it (v5)


def weighable(tokenizer, group: Group, vocabulary: int | None = None) -> bool:
    """Whether a group is a peer's whose tokens this tokenizer's model could have drawn (the
    producer's tokenizer is this one, every id one of its tokens), with their log-probs:
    trained as off-policy samples. A group with an id outside the tokenizer (a hostile peer's,
    or a rare draw past the tokenizer in a padded embedding table) is re-encoded from its text
    instead: an id past the model's embeddings would stop the training step. `vocabulary`:
    the model's embedding rows, when fewer than the tokenizer's tokens (a tokenizer may add
    tokens its model never embeds)."""
    if not group.external or group.sampled is None:
        return False
    fingerprint = parse_tokenizer_label(group.sampled.tokenizer)[1]
    if fingerprint is None or fingerprint != tokenizer_fingerprint(tokenizer):
        return False
    size = len(tokenizer) if vocabulary is None else min(len(tokenizer), vocabulary)
    sampled = group.sampled
    return len(sampled.token_ids) == len(group.completions) == len(sampled.logprobs) and all(
        len(ids) == len(lps) and all(0 <= t < size for t in ids)
        for ids, lps in zip(sampled.token_ids, sampled.logprobs, strict=True)
    )


def completion_tokens(tokenizer, group: Group, vocabulary: int | None = None) -> int:
    """Returns the length of the group's longest completion in this tokenizer's tokens (as it
    will be trained: its sampled ids when it is weighed, else its text re-encoded)."""
    if weighable(tokenizer, group, vocabulary):
        return max(len(ids) for ids in group.sampled.token_ids)
    ids = tokenizer(list(group.completions), add_special_tokens=False)["input_ids"]
    return max((len(x) for x in ids), default=0)


def encode_groups(tokenizer, groups: list[Group], vocabulary: int | None = None) -> TokenBatch:
    """Returns the TokenBatch of every whole completion of every group (advantages per group);
    `vocabulary` as for `weighable`."""
    rows: list[tuple[list[int], int, list[float] | None, tuple[float, float]]] = []
    advantages, rewards, external = [], [], []
    for group in groups:
        prompt = tokenizer.encode(
            render_prompt(group.question, tokenizer), add_special_tokens=False
        )
        adv = group_advantages(torch.tensor([group.rewards]))[0]  # (L,)
        sampled = group.sampled if weighable(tokenizer, group, vocabulary) else None
        for j, (text, a, r) in enumerate(
            zip(group.completions, adv.tolist(), group.rewards, strict=True)
        ):
            behaviour, how = None, (1.0, 1.0)
            if sampled is not None:
                completion = list(sampled.token_ids[j])
                behaviour, how = sampled.logprobs[j], (sampled.temperature, sampled.top_p)
            else:
                completion = tokenizer.encode(text, add_special_tokens=False)
            if not completion:
                completion = [tokenizer.eos_token_id]
            rows.append((prompt + completion, len(prompt), behaviour, how))
            advantages.append(a)
            rewards.append(r)
            external.append(group.external)
    width = max(len(ids) for ids, *_ in rows)
    n = len(rows)
    input_ids = torch.full((n, width), tokenizer.pad_token_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    completion_mask = torch.zeros((n, width), dtype=torch.long)
    behaviours = torch.zeros((n, width - 1), dtype=torch.float64)
    corrected = torch.zeros(n, dtype=torch.bool)
    sampling = torch.ones((n, 2), dtype=torch.float64)
    for i, (ids, prompt_len, behaviour, how) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention[i, : len(ids)] = 1
        completion_mask[i, prompt_len : len(ids)] = 1
        if behaviour is not None:  # position p predicts token p + 1
            behaviours[i, prompt_len - 1 : len(ids) - 1] = torch.tensor(
                behaviour, dtype=torch.float64
            )
            corrected[i] = True
            sampling[i] = torch.tensor(how)
    weigh = bool(corrected.any())
    return TokenBatch(
        input_ids=input_ids,
        attention_mask=attention,
        completion_mask=completion_mask,
        advantages=torch.tensor(advantages, dtype=torch.float32),
        rewards=torch.tensor(rewards, dtype=torch.float32),
        external=torch.tensor(external, dtype=torch.bool),
        behaviour=behaviours if weigh else None,
        corrected=corrected if weigh else None,
        temperature=sampling[:, 0] if weigh else None,
        top_p=sampling[:, 1] if weigh else None,
    )
