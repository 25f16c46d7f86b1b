"""Generation backends: `generate(prompts, n, max_new_tokens, temperature, top_p, seed)`.

The transformers backend samples all prompts x n completions in batches with a KV cache and left
padding, prefills each prompt once for its n completions, and stops a sequence at `</answer>` or
EOS. Each token is drawn by inverse CDF from a uniform that the call's seed fixes for its row and
step (`Draws`), so that anyone with the weights can check that a completion is the seeded draw
(client.policy.proof.check_draws). The vLLM backend (client.policy.vllm_backend) takes the same
draws.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

import torch

from client.policy.policy import Policy

STOP = "</answer>"


@dataclass(frozen=True)
class Completions:
    texts: list[list[str]]  # per prompt, n completions
    new_tokens: int  # tokens generated (padding excluded)
    token_ids: list[list[list[int]]] | None = None  # per prompt, n completions' sampled ids
    # per prompt, n completions' per-token log-probs at temperature 1 (backends that report them)
    logprobs: list[list[list[float]]] | None = None


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


def make_backend(name: str, policy: Policy) -> GenerationBackend:
    """The generation backend `[policy].backend` names, on `policy` (vllm: starts its engine;
    PolicyError naming the install command where vLLM is not installed)."""
    if name == "vllm":
        from client.policy.vllm_backend import VllmBackend

        return VllmBackend(policy)
    if name != "transformers":
        raise ValueError(f"unknown generation backend {name!r}: transformers or vllm")
    return TransformersBackend(policy)


class TransformersBackend:
    """Batched sampling on the policy's device, written out (nanoGPT-style) rather than through
    `model.generate`, for two savings that matter on a CPU:

    1. each distinct prompt is prefilled once and its KV cache copied to its n completions (the
       n samples of a GRPO group share the prompt, so this divides the prefill work by n);
    2. a sequence that stops (at `</answer>` or EOS) leaves the batch, so the remaining steps run
       only on the sequences still going.

    Prompts are left-padded; position ids follow the attention mask, as in `generate`.
    """

    name = "transformers"

    def __init__(self, policy: Policy, batch_size: int = 64):
        self.policy = policy
        self.batch_size = batch_size
        self.stopping = Stopping(policy.tokenizer)

    def close(self) -> None:
        """Nothing to release: the backend samples with the policy's own model."""

    @torch.no_grad()
    def generate(
        self,
        prompts: list[str],
        n: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seed: int,
    ) -> Completions:
        per_chunk = max(1, self.batch_size // n)
        rows: list[list[int]] = []
        self.policy.model.eval()
        for start in range(0, len(prompts), per_chunk):
            chunk = prompts[start : start + per_chunk]
            draws = Draws(seed, first_row=start * n)
            rows += self._sample(chunk, n, max_new_tokens, temperature, top_p, draws)
        texts = [self.stopping.text_of(ids) for ids in rows]
        grouped = [texts[i * n : (i + 1) * n] for i in range(len(prompts))]
        return Completions(
            texts=grouped,
            new_tokens=sum(len(ids) for ids in rows),
            token_ids=[rows[i * n : (i + 1) * n] for i in range(len(prompts))],
        )

    def _sample(self, prompts, n, max_new_tokens, temperature, top_p, draws: Draws):
        """Returns the new token ids of each prompt's n completions (prompt-major order)."""
        tok, model, device = self.policy.tokenizer, self.policy.model, self.policy.device
        enc = tok(prompts, return_tensors="pt", padding=True).to(device)
        mask = enc["attention_mask"]
        out = model(
            input_ids=enc["input_ids"],
            attention_mask=mask,
            position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
            use_cache=True,
        )
        cache = out.past_key_values
        cache.batch_repeat_interleave(n)  # the n completions of a prompt share its prefill
        logits = out.logits[:, -1].repeat_interleave(n, dim=0)  # (B, V), B = prompts * n
        mask = mask.repeat_interleave(n, dim=0)
        positions = mask.sum(-1) - 1  # position of each row's last token
        alive = torch.arange(logits.shape[0], device=device)  # original row of each batch row
        rows: list[list[int]] = [[] for _ in range(logits.shape[0])]
        stopping = self.stopping
        stop = torch.tensor(stopping.ids, device=device)
        for step in range(max_new_tokens):
            nxt = pick(logits, temperature, top_p, draws.uniforms(alive.tolist(), step))  # (b,)
            done = torch.isin(nxt, stop)
            for row, token in zip(alive.tolist(), nxt.tolist(), strict=True):
                rows[row].append(token)
            if stopping.text is not None:
                done |= torch.tensor(
                    [stopping.stops(rows[r]) for r in alive.tolist()], device=device
                )
            keep = (~done).nonzero().squeeze(-1)
            if keep.numel() == 0 or step == max_new_tokens - 1:
                break
            if keep.numel() < alive.numel():  # finished rows leave the batch
                cache.batch_select_indices(keep)
                alive, nxt, mask, positions = alive[keep], nxt[keep], mask[keep], positions[keep]
            mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
            positions = positions + 1
            out = model(
                input_ids=nxt[:, None],
                attention_mask=mask,
                position_ids=positions[:, None],
                past_key_values=cache,
                use_cache=True,
            )
            logits = out.logits[:, -1]
        return rows


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


def distribution(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """The sampling distribution of each row (b, V), in float64: softmax at `temperature`,
    restricted to the top-p nucleus (the most likely token always kept), renormalised."""
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        outside = sorted_probs.cumsum(-1) - sorted_probs > top_p
        sorted_probs = sorted_probs.masked_fill(outside, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return probs / probs.sum(-1, keepdim=True)


def pick(logits: torch.Tensor, temperature: float, top_p: float, u: list[float]) -> torch.Tensor:
    """Next tokens (b,): argmax at temperature 0, else each row's draw by inverse CDF: the first
    token id (in id order) whose cumulative probability exceeds the row's u."""
    if temperature <= 0:
        return logits.argmax(-1)
    cdf = distribution(logits, temperature, top_p).cumsum(-1)
    draws = torch.tensor(u, dtype=cdf.dtype, device=cdf.device)[:, None]
    index = torch.searchsorted(cdf, draws, right=True).squeeze(-1)
    return index.clamp(max=cdf.shape[-1] - 1)
