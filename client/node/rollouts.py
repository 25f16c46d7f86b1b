"""A chain round's rollouts: our own local rounds (draw, generate, score), the batch they make,
and the re-verification of a peer's batch (regenerate every task from the on-chain seed and the
local round's number, compare, re-score every completion).

Both sides use the same derivation, so an honest batch re-verifies to exactly its claim. This is
also what `sapo audit verify` runs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eth_abi import encode
from eth_utils import keccak, to_checksum_address

from client.credit import FOREIGN_TASKS, SCORE_DIFFERS, SIGNAL_DIFFERS, batch_signal
from client.store import Item, LocalRound, ModelDescriptor, RolloutBatch, Sampling, TaskRef
from client.store.batch import SCHEMA, SCHEMA_V4
from client.tasks import (
    Catalog,
    Task,
    draw,
    draw_refs,
    local_round_seed,
    regenerate,
    render_prompt,
    reward,
    to_units,
)
from client.units import to_logprob_units

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


def generation_seed(round_: int, node: str, k: int) -> int:
    """Returns the sampling seed of a node's local round (a restart regenerates it the same)."""
    digest = hashlib.sha256(f"sapo.generate/2:{node.lower()}:{round_}:{k}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass(frozen=True)
class LocalRollouts:
    """One local round of ours: its batch part, its tasks and [0, 1] rewards."""

    round: int
    k: int
    part: LocalRound
    tasks: list[Task]
    rewards: list[list[float]]
    new_tokens: int

    @property
    def rollouts(self) -> int:
        return sum(len(r) for r in self.rewards)

    @property
    def mean_reward(self) -> float:
        return sum(map(sum, self.rewards)) / max(1, self.rollouts)


def generate_local_round(
    policy: Policy,
    backend: GenerationBackend,
    catalog: Catalog,
    *,
    seed: bytes,
    round_: int,
    node: str,
    k: int,
    items: int,
    completions: int,
    sampling: Sampling,
    weights: str,
) -> LocalRollouts:
    """Draws local round k's tasks from the chain round's task `seed`, samples (as `sampling`
    says, from the checkpoint whose id is `weights`: the policy's weights now) and scores the
    completions."""
    tasks = draw(local_round_seed(seed, k), items, catalog)
    out = backend.generate(
        [render_prompt(t.question, policy.tokenizer) for t in tasks],
        completions,
        sampling.max_new_tokens,
        sampling.temperature_value,
        sampling.top_p_value,
        seed=generation_seed(round_, node, k),
    )
    if out.token_ids is None or out.sampled_logprobs is None:
        raise ValueError(
            "the generation backend gave no token ids or no sampling log-probs: a batch needs both"
        )
    rewards = [[reward(t, c) for c in texts] for t, texts in zip(tasks, out.texts, strict=True)]
    part = LocalRound(
        k=k,
        weights=weights,
        items=[
            Item(
                task=TaskRef(entry=t.entry, seed=t.seed, index=t.index),
                question=t.question,
                completions=texts,
                token_ids=ids,
                rewards=[to_units(r) for r in rs],
                logprobs=[[to_logprob_units(p) for p in row] for row in lps],
            )
            for t, texts, ids, rs, lps in zip(
                tasks, out.texts, out.token_ids, rewards, out.sampled_logprobs, strict=True
            )
        ],
    )
    return LocalRollouts(round_, k, part, tasks, rewards, out.new_tokens)


def make_batch(
    *,
    chain_id: int,
    ledger: str,
    round_: int,
    node: str,
    catalog: Catalog,
    model: dict,
    sampling: Sampling,
    local_rounds: list[LocalRound],
) -> RolloutBatch:
    """Returns the batch of a chain round from its local rounds (k = 0, 1, … in order): a v5
    batch, or a v4 one when a local round has no log-probs (sampled by the client before v5 and
    journaled across the upgrade), so that the round can still be sealed."""
    schema = SCHEMA
    if any(item.logprobs is None for lr in local_rounds for item in lr.items):
        schema = SCHEMA_V4
        local_rounds = [
            lr.model_copy(
                update={"items": [i.model_copy(update={"logprobs": None}) for i in lr.items]}
            )
            for lr in local_rounds
        ]
    return RolloutBatch(
        schema_=schema,
        chain_id=chain_id,
        ledger=ledger.lower(),
        round=round_,
        node=node.lower(),
        catalog_digest="0x" + catalog.digest().hex(),
        model=ModelDescriptor(**model),
        sampling=sampling,
        local_rounds=local_rounds,
    )


@dataclass(frozen=True)
class ItemCheck:
    k: int  # the local round
    index: int  # in the local round
    entry: str
    claimed: int  # the sender's summed rewards of the item, in score units
    recomputed: int  # ours
    rewards: list[float] = field(repr=False)  # ours, in [0, 1]
    problem: str | None = None
    # the sender's per-completion rewards are not ours (its sum may still be: two items' errors
    # can cancel, and the batch's openings are drawn by its groups' claimed signal)
    rewards_differ: bool = False


@dataclass(frozen=True)
class Verification:
    """Our verdict on a batch: `valid` when every task is the one the seed draws; the scores
    and learning signals then say whether the sender's claims hold."""

    valid: bool
    reason: str | None
    claimed: int
    recomputed: int
    items: list[ItemCheck]
    claimed_signal: int = 0
    recomputed_signal: int = 0

    @property
    def agrees(self) -> bool:
        return (
            self.valid
            and self.claimed == self.recomputed
            and self.claimed_signal == self.recomputed_signal
            and not self.rewards_differ
        )

    @property
    def rewards_differ(self) -> int:
        """Items whose claimed rewards are not their completions' rewards by our verifier: a
        claim that moves signal between groups steers which groups the beacon opens
        (client.node.proving.openings), so it is a finding even when the sums agree."""
        return sum(1 for c in self.items if c.rewards_differ)

    @property
    def attest_score(self) -> int:
        """What we attest: our recomputed score, or 0 for a batch with foreign tasks."""
        return self.recomputed if self.valid else 0

    @property
    def attest_signal(self) -> int:
        """The learning signal we attest: recomputed from our rewards, 0 for foreign tasks."""
        return self.recomputed_signal if self.valid else 0

    @property
    def findings(self) -> int:
        """What we found wrong, as the attestation's findings bits."""
        if not self.valid:
            return FOREIGN_TASKS
        score_differs = self.claimed != self.recomputed or self.rewards_differ
        return (SCORE_DIFFERS if score_differs else 0) | (
            SIGNAL_DIFFERS if self.claimed_signal != self.recomputed_signal else 0
        )


def verify_batch(
    batch: RolloutBatch, catalog: Catalog, seed: bytes, claims: tuple[int, int] | None = None
) -> Verification:
    """Re-verifies a (store-checked) batch: catalog, every local round's task references and
    questions against the seeded draw of that local round, and every completion re-scored by our
    own verifier. `seed` is the ledger's task seed of the batch's round and node. `claims`: the
    (score, signal) the ledger records for it, what would be credited (a producer may claim on
    chain more than its batch's header says); the header's by default."""
    claimed, claimed_signal = (batch.score, batch.signal) if claims is None else claims
    expected_digest = "0x" + catalog.digest().hex()
    if batch.catalog_digest != expected_digest:
        reason = f"batch uses catalog {batch.catalog_digest}, this node {expected_digest}"
        return Verification(False, reason, claimed, 0, [], claimed_signal, 0)
    checks, problems = [], []
    for lr in batch.local_rounds:
        refs = draw_refs(local_round_seed(seed, lr.k), len(lr.items), catalog)
        for i, (item, ref) in enumerate(zip(lr.items, refs, strict=True)):
            where = f"local round {lr.k} item {i}"
            got = (item.task.entry, item.task.seed, item.task.index)
            if got != ref:
                problem = f"task {got} is not the seed's task {ref}"
                checks.append(
                    ItemCheck(lr.k, i, item.task.entry, sum(item.rewards), 0, [], problem)
                )
                problems.append(f"{where}: {problem}")
                continue
            task = regenerate(catalog, *ref)
            ours = [reward(task, c) for c in item.completions]
            problem = None if task.question == item.question else "question differs from the task's"
            if problem:
                problems.append(f"{where}: {problem}")
            units = [to_units(r) for r in ours]
            checks.append(
                ItemCheck(
                    lr.k,
                    i,
                    task.entry,
                    sum(item.rewards),
                    sum(units),
                    ours,
                    problem,
                    rewards_differ=units != list(item.rewards),
                )
            )
    valid = not problems
    recomputed = sum(c.recomputed for c in checks) if valid else 0
    signal = batch_signal([to_units(r) for r in c.rewards] for c in checks) if valid else 0
    reason = "; ".join(problems) or None
    return Verification(valid, reason, claimed, recomputed, checks, claimed_signal, signal)
