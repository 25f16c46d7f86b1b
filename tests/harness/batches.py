"""Realistic rollout batches for tests: made up to a size, or sampled for real on a policy."""

from __future__ import annotations

from client.store import Item, LocalRound, ModelDescriptor, RolloutBatch, Sampling, TaskRef

LEDGER = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
NODE = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"


def make_batch(
    *,
    items: int = 4,
    completions: int = 8,
    round_: int = 3,
    text: str = "",
    node: str = NODE,
    local_rounds: int = 1,
) -> RolloutBatch:
    """Returns a batch like a node writes: `local_rounds` local rounds of `items` questions x
    `completions` answers."""
    return RolloutBatch(
        chain_id=31_337,
        ledger=LEDGER,
        round=round_,
        node=node,
        catalog_digest="0x" + "ab" * 32,
        model=ModelDescriptor(name="sapo-seed-tiny", parameters=1_870_000, tokenizer="bpe-512"),
        sampling=Sampling.of(1.0, 1.0, 64),
        local_rounds=[
            LocalRound(
                k=k,
                weights="0x" + (f"{k:02x}" * 32 if k < 256 else f"{k:064x}"),
                items=[
                    Item(
                        task=TaskRef(entry="basic_arithmetic", seed=1234 + i + 100 * k, index=i),
                        question=f"What is {i} + {i + 1}? Answer inside <answer></answer>. "
                        f"é→✓ {text}",
                        completions=[
                            f"<answer>{2 * i + 1 + (c % 2)}</answer>{text}"
                            for c in range(completions)
                        ],
                        token_ids=[[3 + i, 40 + c % 2, 2] for c in range(completions)],
                        rewards=[10_000 if c % 2 == 0 else 0 for c in range(completions)],
                        logprobs=[[-1_234 - c, -5, 0] for c in range(completions)],
                    )
                    for i in range(items)
                ],
            )
            for k in range(local_rounds)
        ],
    )


def batch_of_size(target: int) -> RolloutBatch:
    """Returns a batch whose canonical encoding is close to (and below) `target` bytes."""
    base = len(make_batch(items=8, completions=8).encode())
    per_char = 8 * 8 + 8  # each completion and each question carries the padding once
    pad = max(0, (target - base) // per_char - 1)
    return make_batch(items=8, completions=8, text="x" * min(pad, 8_000))


def local_round(policy, max_new_tokens: int = 12, **where):
    """Generates a real local round on `policy` (sampled at temperature 1, as a node does);
    `where` is generate_local_round's seed, round_, node, k, items and completions."""
    from client.node.rollouts import generate_local_round
    from client.policy import TransformersBackend
    from client.policy.weights import weights_bytes
    from client.store.weights import weights_id
    from client.tasks import load_catalog

    return generate_local_round(
        policy,
        TransformersBackend(policy),
        load_catalog("tiny"),
        **where,
        sampling=Sampling.of(1.0, 1.0, max_new_tokens),
        weights=weights_id(weights_bytes(policy.model)),
    )


def two_sampled_rounds(policy, snapshots, step) -> tuple[list[LocalRound], dict[str, bytes]]:
    """Local rounds 0 and 1 of NODE's chain round 7, really sampled from `policy`, with `step`
    (a stand-in GRPO step) moving its weights between them; and the snapshot of each checkpoint,
    by id, as the node keeps them for its openings."""
    import torch

    from client.node.rollouts import task_seed

    seed = task_seed(31_337, LEDGER, 7, NODE)
    parts, weights = [], {}
    for k in (0, 1):
        ident = snapshots.take(policy.model, k, 7)
        weights[ident] = snapshots.read(7, ident)
        lr = local_round(policy, seed=seed, round_=7, node=NODE, k=k, items=4, completions=4)
        parts.append(lr.part.model_copy(update={"weights": ident}))
        with torch.no_grad():
            step(policy)
    return parts, weights


def round_7_batch(policy, parts):
    """The batch NODE publishes for round 7 with these local rounds, sampled by `policy`."""
    from client.node.rollouts import make_batch as node_batch
    from client.tasks import load_catalog

    return node_batch(
        chain_id=31_337,
        ledger=LEDGER,
        round_=7,
        node=NODE,
        catalog=load_catalog("tiny"),
        model=policy.descriptor(),
        sampling=Sampling.of(1.0, 1.0, 12),
        local_rounds=parts,
    )
