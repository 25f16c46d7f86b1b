"""A node's model family: what a checker must hold to re-run the node's batches.

The ledger draws a batch's checkers from its producer's family only (SwarmLedger: families are
fixed at deployment, each address registers in one), so a checker never meets a model it cannot
load. What it needs depends on what the node publishes for its proofs:
- an adapter node publishes its LoRA adapter only: a checker needs that exact frozen base, so the
  family is the base's content id (`base_id`, the id its float32 checkpoint would have);
- a fully fine-tuned node publishes every weight: a checker loads them into a model of the same
  architecture and tokenizer, so the family is the id of that shape (`architecture_id`): the
  model's config without what does not shape it (paths, versions, dtypes), and the tokenizer's
  vocabulary fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from client.policy.adapter import base_id

# config keys that name where or how a model was saved or loaded, not what it computes
_UNSHAPED = frozenset(
    {
        "_name_or_path",
        "architectures",
        "transformers_version",
        "torch_dtype",
        "dtype",
        "use_cache",
        "output_attentions",
        "output_hidden_states",
        "return_dict",
    }
)


def architecture_id(model, tokenizer) -> str:
    """'0x' + sha256 over the model's config (less what does not shape it: `_UNSHAPED` and
    private keys) and its tokenizer's vocabulary fingerprint."""
    from client.policy.policy import tokenizer_fingerprint

    config = model.config.to_dict()
    shape = {k: v for k, v in config.items() if k not in _UNSHAPED and not k.startswith("_")}
    document: dict[str, Any] = {
        "config": shape,
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "vocabulary": len(tokenizer),
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return "0x" + hashlib.sha256(text.encode()).hexdigest()


def family_id(model, tokenizer, adapted: bool) -> str:
    """The family of a node that starts from `model` (the base, no adapter attached yet):
    the base's content id when it trains an adapter, else its architecture's id."""
    return base_id(model) if adapted else architecture_id(model, tokenizer)


def policy_family(policy) -> str:
    """The family of a loaded policy (client.policy.Policy), adapted or not."""
    if policy.adapter is not None:
        if not policy.base:
            raise ValueError(f"policy {policy.name} trains an adapter but names no base")
        return policy.base
    return architecture_id(policy.model, policy.tokenizer)
