"""Generation backends: `generate(prompts, n, max_new_tokens, temperature, top_p, seed)`.

The transformers backend samples all prompts x n completions in batches with a KV cache and left
padding, prefills each prompt once for its n completions, and stops a sequence at `</answer>` or
EOS. Each token is drawn by inverse CDF from a uniform that the call's seed fixes for its row and
step (`Draws`), so that anyone with the weights can check that a completion is the seeded draw
(client.policy.proof.check_draws). The vLLM backend (client.policy.vllm_backend) takes the same
draws.
"""

from __future__ import annotations

import torch

from client.policy.policy import Policy
from client.policy.sampling import (
    Completions,
    Draws,
    GenerationBackend,
    Stopping,
    pick_logprobs,
)


def make_backend(name: str, policy: Policy) -> GenerationBackend:
    """The generation backend `[policy].backend` names, on `policy` (vllm: starts its engine;
    PolicyError naming the install command where vLLM is not installed)."""
    if name == "vllm":
        # lazily: importing the vLLM backend imports vLLM (seconds), which a transformers node
        # never needs
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
        logprobs: list[list[float]] = []
        self.policy.model.eval()
        for start in range(0, len(prompts), per_chunk):
            chunk = prompts[start : start + per_chunk]
            draws = Draws(seed, first_row=start * n)
            ids, lps = self._sample(chunk, n, max_new_tokens, temperature, top_p, draws)
            rows += ids
            logprobs += lps
        texts = [self.stopping.text_of(ids) for ids in rows]
        grouped = [texts[i * n : (i + 1) * n] for i in range(len(prompts))]
        return Completions(
            texts=grouped,
            new_tokens=sum(len(ids) for ids in rows),
            token_ids=[rows[i * n : (i + 1) * n] for i in range(len(prompts))],
            sampled_logprobs=[logprobs[i * n : (i + 1) * n] for i in range(len(prompts))],
        )

    def _sample(self, prompts, n, max_new_tokens, temperature, top_p, draws: Draws):
        """Returns the new token ids of each prompt's n completions (prompt-major order), and
        each token's log-probability under the distribution it was drawn from."""
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
        logprobs: list[list[float]] = [[] for _ in range(logits.shape[0])]
        stopping = self.stopping
        stop = torch.tensor(stopping.ids, device=device)
        for step in range(max_new_tokens):
            u = draws.uniforms(alive.tolist(), step)
            nxt, lp = pick_logprobs(logits, temperature, top_p, u)  # (b,), (b,)
            done = torch.isin(nxt, stop)
            for row, token, p in zip(alive.tolist(), nxt.tolist(), lp.tolist(), strict=True):
                rows[row].append(token)
                logprobs[row].append(p)
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
        return rows, logprobs
