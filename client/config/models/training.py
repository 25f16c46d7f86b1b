"""[sapo], [train] and [tasks]: what a round trains on (the SAPO mix of local and peers'
questions), the GRPO update, and the task catalog the questions are drawn from."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from client.config.models.section import Section


class SapoSection(Section):
    """The SAPO mix: I local and J external questions a local round, L completions per question;
    how many local rounds a chain round holds, and how fresh external items are."""

    local_items: int = Field(4, ge=1, le=256, description="I: own questions per round")
    external_items: int = Field(4, ge=0, le=256, description="J: peers' questions per round")
    completions: int = Field(8, ge=2, le=64, description="L: completions per question")
    lookback_rounds: int = Field(
        2,
        ge=0,
        le=100,
        description="external items come from peers' batches of the last this many chain "
        "rounds (their staleness)",
    )
    max_fetch_per_round: int = Field(
        8,
        ge=0,
        le=256,
        description="peer batches fetched per chain round to learn from, beyond those this "
        "node is drawn to check (attest_budget bounds these)",
    )
    attest_budget: int = Field(
        16,
        ge=0,
        le=256,
        description="votes (attestations and unavailable reports) sent, and drawn batches "
        "taken up (a retry of one nobody gave is not counted again), per chain round as a "
        "drawn checker; a node drawn more often leaves the rest short of their quorum",
    )
    unavailable_after: int = Field(
        3,
        ge=1,
        le=100,
        description="fetches in a row that find a batch we are drawn to check nowhere (not at "
        "its producer nor any attester) before we vote it unavailable",
    )
    max_local_rounds: int = Field(
        0,
        ge=0,
        le=512,
        description="local rounds per chain round (0: as many as the hardware allows; 1: one "
        "round of the paper per chain round, as the experiments play it)",
    )
    external_correction: Literal["none", "tis", "f-tis"] = Field(
        "none",
        description="how a peer's completion is trained: none (as if this node had sampled it, "
        "the paper's), tis (each token weighed by the truncated ratio of this node's probability "
        "to the producer's, from the batch's log-probs) or f-tis (tis, and peers' "
        "negative-advantage completions further off-policy than offpolicy_filter left out); "
        "a completion of another tokenizer, or of a batch without log-probs, is never weighed",
    )
    tis_cap: float = Field(
        2.0,
        ge=1.0,
        le=100.0,
        description="the largest importance weight of a peer's token (tis, f-tis)",
    )
    offpolicy_filter: float = Field(
        0.5,
        gt=0.0,
        le=100.0,
        description="f-tis: a peer's completion with negative advantage is left out when the "
        "mean over its tokens of log(producer's probability / ours) is above this (nats)",
    )


class TrainSection(Section):
    """The GRPO update (the paper: no KL, asymmetric clip 0.2 / 0.28, Adam)."""

    learning_rate: float = Field(1e-5, gt=0, le=1)
    eps_low: float = Field(0.2, gt=0, lt=1)
    eps_high: float = Field(0.28, gt=0, lt=10)
    kl_coef: float = Field(0.0, ge=0)
    grad_clip: float = Field(1.0, gt=0)
    micro_batch: int = Field(16, gt=0, le=4_096)
    updates_per_round: int = Field(
        1, ge=1, le=64, description="optimizer steps on each round's batch (TRL num_iterations)"
    )
    rounds_per_update: int = Field(
        1,
        ge=1,
        le=64,
        description="gather this many local rounds' items into one GRPO step: a tiny policy needs "
        "~64 questions a step to learn rather than drift",
    )
    loss_agg: Literal["token-mean", "seq-mean"] = "token-mean"
    checkpoint_every: int = Field(10, gt=0, description="training steps between checkpoints")


class TasksSection(Section):
    """Which task catalog (configs/tasks/<name>.toml, or a path) tasks are drawn from."""

    catalog: str = Field("tiny", min_length=1)
