"""Generation backends: `generate(prompts, n, max_new_tokens, temperature, top_p, seed)`.

The transformers backend runs all prompts x n completions as batches with a KV cache and left
padding, and stops a sequence at `</answer>` or EOS. (A vLLM backend is planned for GPUs; it is
not part of this build.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from client.policy.policy import Policy

STOP = "</answer>"


@dataclass(frozen=True)
class Completions:
    texts: list[list[str]]  # per prompt, n completions
    new_tokens: int  # tokens generated (padding excluded)


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


class TransformersBackend:
    """Batched sampling with transformers' generate on the policy's device."""

    def __init__(self, policy: Policy, batch_size: int = 64):
        self.policy = policy
        self.batch_size = batch_size
        tok = policy.tokenizer
        stop_ids = tok.encode(STOP, add_special_tokens=False)
        # one token in the seed tokenizer; for other tokenizers, stop on the string
        self._stop_ids = [tok.eos_token_id] + (stop_ids if len(stop_ids) == 1 else [])
        self._stop_strings = None if len(stop_ids) == 1 else [STOP]

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
        tok, model = self.policy.tokenizer, self.policy.model
        expanded = [p for p in prompts for _ in range(n)]
        torch.manual_seed(seed)
        texts: list[str] = []
        new_tokens = 0
        model.eval()
        for start in range(0, len(expanded), self.batch_size):
            chunk = expanded[start : start + self.batch_size]
            enc = tok(chunk, return_tensors="pt", padding=True).to(self.policy.device)
            sampling = temperature > 0
            out = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=sampling,
                temperature=temperature if sampling else None,
                top_p=top_p if sampling else None,
                top_k=0 if sampling else None,
                pad_token_id=tok.pad_token_id,
                eos_token_id=self._stop_ids,
                stop_strings=self._stop_strings,
                tokenizer=tok if self._stop_strings else None,
            )
            generated = out[:, enc["input_ids"].shape[1] :]  # (b, new)
            for row in generated:
                ids = row.tolist()
                cut = next((i + 1 for i, t in enumerate(ids) if t in self._stop_ids), len(ids))
                ids = [t for t in ids[:cut] if t not in (tok.pad_token_id, tok.eos_token_id)]
                new_tokens += cut
                texts.append(tok.decode(ids, skip_special_tokens=False))
        grouped = [texts[i * n : (i + 1) * n] for i in range(len(prompts))]
        return Completions(texts=grouped, new_tokens=new_tokens)
