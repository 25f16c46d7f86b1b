"""What every generation backend shares: the completions it returns, where a completion stops,
and the protocol's seeded draws (`Draws`, `pick`), so that a checker with the weights re-derives
any token (client.policy.proof). The transformers backend (client.policy.generate) and the vLLM
backend (client.policy.vllm_backend) both sample through these.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

import torch

from client.sapo.distribution import distribution

STOP = "</answer>"


@dataclass(frozen=True)
class Completions:
    texts: list[list[str]]  # per prompt, n completions
    new_tokens: int  # tokens generated (padding excluded)
    token_ids: list[list[list[int]]] | None = None  # per prompt, n completions' sampled ids
    # per prompt, n completions' per-token log-probs at temperature 1 (vLLM's, when asked)
    logprobs: list[list[list[float]]] | None = None
    # per prompt, n completions' per-token log-probs under the distribution each token was
    # drawn from (temperature and top-p applied): what a batch carries for off-policy learners
    sampled_logprobs: list[list[list[float]]] | None = None


class Stopping:
    """Where a completion ends: at EOS or at `</answer>` (one token in the seed tokenizer; for
    other tokenizers, its decoded string), or at `max_new_tokens`. The sampler stops by it, and a
    checker holds a batch's token ids to it (a completion cut short is not the draw)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        stop_ids = tokenizer.encode(STOP, add_special_tokens=False)
        self.ids = [tokenizer.eos_token_id] + (stop_ids if len(stop_ids) == 1 else [])
        self.text = None if len(stop_ids) == 1 else STOP
        self.tail = len(stop_ids) + 2  # tokens to decode when looking for the stop string

    def stops(self, ids: list[int]) -> bool:
        """Whether a completion whose tokens so far are `ids` ends after the last one."""
        return ids[-1] in self.ids or (
            self.text is not None and self.text in self.tokenizer.decode(ids[-self.tail :])
        )

    def problem(self, ids: list[int], max_new_tokens: int) -> str | None:
        """Why `ids` cannot be a whole completion (None when they can): longer than the limit,
        going on past a stop, or ending before the limit without one."""
        if len(ids) > max_new_tokens:
            return f"{len(ids)} tokens, over max_new_tokens {max_new_tokens}"
        for t in range(len(ids) - 1):
            if self.stops(ids[: t + 1]):
                return f"goes on after a stop at token {t}"
        if len(ids) < max_new_tokens and not self.stops(ids):
            return f"ends at token {len(ids)} with no stop, before max_new_tokens {max_new_tokens}"
        return None

    def text_of(self, ids: list[int]) -> str:
        """The completion's text, as the sampler decodes it (no pad or EOS)."""
        tok = self.tokenizer
        return tok.decode([t for t in ids if t not in (tok.pad_token_id, tok.eos_token_id)])


class GenerationBackend(Protocol):
    def generate(
        self,
        prompts: list[str],
        n: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seed: int,
    ) -> Completions: ...

    def close(self) -> None: ...


class Draws:
    """The sampling randomness of one `generate` call, as anyone holding its seed can derive it:
    row r's token at step t is drawn with u = sha256(domain, seed, r, t) / 2^64 in [0, 1). Rows
    count completions across the call, prompt-major (prompt i's completion j is row i * n + j),
    so a checker re-derives any completion's draws from the seed, the prompt's index and j."""

    DOMAIN = b"sapo.sample/1"

    def __init__(self, seed: int, first_row: int = 0):
        self.key = self.DOMAIN + int(seed).to_bytes(8, "big", signed=False)
        self.first_row = first_row

    def uniform(self, row: int, step: int) -> float:
        digest = hashlib.sha256(
            self.key + (self.first_row + row).to_bytes(4, "big") + step.to_bytes(4, "big")
        ).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def uniforms(self, rows: list[int], step: int) -> list[float]:
        return [self.uniform(row, step) for row in rows]


def pick(logits: torch.Tensor, temperature: float, top_p: float, u: list[float]) -> torch.Tensor:
    """Next tokens (b,): argmax at temperature 0, else each row's draw by inverse CDF: the first
    token id (in id order) whose cumulative probability exceeds the row's u."""
    return pick_logprobs(logits, temperature, top_p, u)[0]


def pick_logprobs(
    logits: torch.Tensor, temperature: float, top_p: float, u: list[float]
) -> tuple[torch.Tensor, torch.Tensor]:
    """`pick`'s tokens (b,) and each one's log-probability under the distribution it was drawn
    from (b,) float64 (0 at temperature 0: the argmax is certain)."""
    if temperature <= 0:
        tokens = logits.argmax(-1)
        return tokens, torch.zeros(tokens.shape, dtype=torch.float64, device=tokens.device)
    probs = distribution(logits, temperature, top_p)  # (b, V)
    cdf = probs.cumsum(-1)
    draws = torch.tensor(u, dtype=cdf.dtype, device=cdf.device)[:, None]
    index = torch.searchsorted(cdf, draws, right=True).squeeze(-1).clamp(max=cdf.shape[-1] - 1)
    return index, probs.gather(-1, index[:, None]).squeeze(-1).log()
