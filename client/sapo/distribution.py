"""The distribution a token is drawn from: softmax at a temperature, cut to the top-p nucleus.

One definition for the three parties that compute it: the sampler (client.policy.sampling) draws
from it and writes each drawn token's log-probability into the batch, a checker re-computes it
(client.policy.proof), and a learner weighs a peer's token by its own probability under it
against the producer's (client.sapo.offpolicy), so that identical weights give a ratio of
exactly 1.
"""

from __future__ import annotations

import torch


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


def sampled_logprobs(
    logits: torch.Tensor, tokens: torch.Tensor, temperature: float, top_p: float, chunk: int = 256
) -> torch.Tensor:
    """log p(token) under `distribution` of each row: logits (N, V), tokens (N,) -> (N,) float64
    (-inf for a token outside the nucleus). Rows go `chunk` at a time: a float64 distribution
    over a 152k vocabulary is 1.2 MB a row."""
    out = []
    for start in range(0, logits.shape[0], chunk):
        probs = distribution(logits[start : start + chunk], temperature, top_p)  # (c, V)
        out.append(probs.gather(-1, tokens[start : start + chunk, None]).squeeze(-1).log())
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64, device=logits.device)
