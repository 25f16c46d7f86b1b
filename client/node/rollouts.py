"""A round's rollouts: our own batch (draw, generate, score, encode) and the re-verification of a
peer's batch (regenerate every task from the on-chain seed, compare, re-score every completion).

Both sides use the same derivation, so an honest batch re-verifies to exactly its claim. This is
also what `sapo audit verify` runs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eth_abi import encode
from eth_utils import keccak, to_checksum_address

from client.store import Item, ModelDescriptor, RolloutBatch, TaskRef
from client.tasks import Catalog, Task, draw, draw_refs, regenerate, render_prompt, reward, to_units

if TYPE_CHECKING:  # generation needs the training stack; verification (audits) does not
    from client.policy import GenerationBackend, Policy


def task_seed(chain_id: int, ledger: str, round_: int, node: str) -> bytes:
    """Returns the ledger's `taskSeed(round, node)`, computed locally (no RPC needed):
    keccak256(abi.encode(chainid, ledger, round, node))."""
    return keccak(
        encode(
            ["uint256", "address", "uint64", "address"],
            [chain_id, to_checksum_address(ledger), round_, to_checksum_address(node)],
        )
    )


def generation_seed(round_: int, node: str) -> int:
    """Returns the sampling seed of a node's round (a restart regenerates the same batch)."""
    digest = hashlib.sha256(f"sapo.generate/1:{node.lower()}:{round_}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass(frozen=True)
class LocalRound:
    """Our rollouts of a round: the batch to publish, its tasks and [0, 1] rewards."""

    batch: RolloutBatch
    tasks: list[Task]
    rewards: list[list[float]]
    new_tokens: int


def generate_round(
    policy: Policy,
    backend: GenerationBackend,
    catalog: Catalog,
    *,
    chain_id: int,
    ledger: str,
    round_: int,
    node: str,
    items: int,
    completions: int,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
) -> LocalRound:
    """Draws this round's tasks from the on-chain seed, samples and scores the completions."""
    tasks = draw(task_seed(chain_id, ledger, round_, node), items, catalog)
    out = backend.generate(
        [render_prompt(t.question, policy.tokenizer) for t in tasks],
        completions,
        max_new_tokens,
        temperature,
        top_p,
        seed=generation_seed(round_, node),
    )
    rewards = [[reward(t, c) for c in texts] for t, texts in zip(tasks, out.texts, strict=True)]
    batch = RolloutBatch(
        chain_id=chain_id,
        ledger=ledger.lower(),
        round=round_,
        node=node.lower(),
        catalog_digest="0x" + catalog.digest().hex(),
        model=ModelDescriptor(**policy.descriptor()),
        items=[
            Item(
                task=TaskRef(entry=t.entry, seed=t.seed, index=t.index),
                question=t.question,
                completions=texts,
                rewards=[to_units(r) for r in rs],
            )
            for t, texts, rs in zip(tasks, out.texts, rewards, strict=True)
        ],
    )
    return LocalRound(batch=batch, tasks=tasks, rewards=rewards, new_tokens=out.new_tokens)


@dataclass(frozen=True)
class ItemCheck:
    index: int
    entry: str
    claimed: int  # the sender's summed rewards of the item, in score units
    recomputed: int  # ours
    rewards: list[float] = field(repr=False)  # ours, in [0, 1]
    problem: str | None = None


@dataclass(frozen=True)
class Verification:
    """Our verdict on a batch: `valid` when every task is the one the seed draws; the scores
    then say whether the sender's claim holds."""

    valid: bool
    reason: str | None
    claimed: int
    recomputed: int
    items: list[ItemCheck]

    @property
    def agrees(self) -> bool:
        return self.valid and self.claimed == self.recomputed

    @property
    def attest_score(self) -> int:
        """What we attest: our recomputed score, or 0 for a batch with foreign tasks."""
        return self.recomputed if self.valid else 0


def verify_batch(batch: RolloutBatch, catalog: Catalog, seed: bytes) -> Verification:
    """Re-verifies a (store-checked) batch: catalog, every task reference and question against
    the seeded draw, and every completion re-scored by our own verifier."""
    claimed = batch.score
    expected_digest = "0x" + catalog.digest().hex()
    if batch.catalog_digest != expected_digest:
        reason = f"batch uses catalog {batch.catalog_digest}, this node {expected_digest}"
        return Verification(False, reason, claimed, 0, [])
    refs = draw_refs(seed, len(batch.items), catalog)
    checks, problems = [], []
    for i, (item, ref) in enumerate(zip(batch.items, refs, strict=True)):
        got = (item.task.entry, item.task.seed, item.task.index)
        if got != ref:
            problem = f"task {got} is not the seed's task {ref}"
            checks.append(ItemCheck(i, item.task.entry, sum(item.rewards), 0, [], problem))
            problems.append(f"item {i}: {problem}")
            continue
        task = regenerate(catalog, *ref)
        ours = [reward(task, c) for c in item.completions]
        problem = None if task.question == item.question else "question differs from the task's"
        if problem:
            problems.append(f"item {i}: {problem}")
        checks.append(
            ItemCheck(
                i, task.entry, sum(item.rewards), sum(to_units(r) for r in ours), ours, problem
            )
        )
    valid = not problems
    recomputed = sum(c.recomputed for c in checks) if valid else 0
    return Verification(valid, "; ".join(problems) or None, claimed, recomputed, checks)
