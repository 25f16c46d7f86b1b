"""An experiment file (`configs/experiments/<name>.toml`): the SAPO paper's controlled experiment
at a chosen scale.

Every configuration (a variant of the nodes' starting policies × an I/J split) is played once
per seed, either on a fresh devnet through the real node processes (`swarm = "devnet"`) or by
the in-process swarm (`swarm = "in-process"`: the nodes' round loops in one process, the same
sampler, trainer, batches and verifiers, no chain or IPFS; client.experiment.inprocess). The same
seeds are used for every configuration, so configurations differ only in what they are meant
to differ in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from client.config.files import load_toml_model

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "configs" / "experiments"
# How the nodes' starting policies differ:
#   homogeneous  every node starts from seed policy 0 (the paper: 8 copies of one model)
#   seeds        node i starts from seed policy i (same recipe, different initialisation and data
#                order: heterogeneous models of one architecture)
#   specialties  node i starts from seed policy 0's recipe pretrained on two catalog entries only
#                (entries 2i and 2i+1, cyclically): specialists that must learn the rest
VARIANTS = ("homogeneous", "seeds", "specialties")


class ExperimentError(Exception):
    """An experiment file cannot be used; the message names the file and what is wrong."""


class ExperimentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    description: str = ""
    nodes: int = Field(8, ge=1, le=32)
    rounds: int = Field(ge=1, le=100_000, description="rounds scored per configuration and seed")
    swarm: Literal["devnet", "in-process"] = "devnet"
    # a devnet's chain round; the in-process swarm has no clock (a round is one local round)
    round_length_s: int | None = Field(None, ge=2, le=3_600)
    questions: int = Field(8, ge=1, le=256, description="I + J, the questions a node trains on")
    completions: int = Field(8, ge=2, le=64, description="L")
    splits: list[tuple[int, int]] = Field(
        default_factory=lambda: [(8, 0), (6, 2), (4, 4), (2, 6)], min_length=1
    )
    # the splits of the heterogeneous variants (seeds, specialties); default: `splits`
    hetero_splits: list[tuple[int, int]] | None = None
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    variants: list[Literal["homogeneous", "seeds", "specialties"]] = Field(
        default_factory=lambda: ["homogeneous"], min_length=1
    )
    # how the nodes train peers' completions ([sapo].external_correction): each split with
    # J > 0 is played under each (I/0 has no peers' completions: under none only)
    corrections: list[Literal["none", "tis", "f-tis"]] = Field(
        default_factory=lambda: ["none"], min_length=1
    )
    store: Literal["local", "ipfs"] = "local"
    # held-out evaluation (client.experiment.heldout): greedy answers of every node's policy to a
    # fixed set of questions drawn apart from every ledger task seed; a question a cell's nodes
    # drew for training is left out of that cell's held-out score. A devnet cell evaluates the
    # starting policies and the checkpoints the nodes saved when they stopped
    eval_questions: int = Field(0, ge=0, le=4_096, description="0: no held-out evaluation")
    # which fixed set: settings are chosen on `validation`; results are reported on `test`,
    # which no choice of settings has looked at
    eval_set: Literal["validation", "test"] = "test"
    eval_every: int = Field(
        0, ge=0, le=100_000, description="rounds between evaluations (0: at the start and end)"
    )
    # torch threads of the in-process swarm (0: torch's default, one per core)
    threads: int = Field(0, ge=0, le=1_024)
    # sections of the nodes' config to override (validated when applied), e.g. policy.model
    node: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> ExperimentConfig:
        for i, j in self.splits + (self.hetero_splits or []):
            if i < 1 or j < 0 or i + j != self.questions:
                raise ValueError(
                    f"split {i}/{j}: I >= 1, J >= 0 and I + J must equal questions "
                    f"({self.questions})"
                )
        if len(set(self.splits)) != len(self.splits) or len(set(self.seeds)) != len(self.seeds):
            raise ValueError("splits and seeds must not repeat")
        if len(set(self.corrections)) != len(self.corrections):
            raise ValueError("corrections must not repeat")
        if "external_correction" in self.node.get("sapo", {}):
            raise ValueError(
                "node.sapo.external_correction: name the corrections to play in `corrections`"
            )
        if self.swarm == "devnet":
            if self.round_length_s is None:
                raise ValueError("round_length_s: a devnet experiment needs its round length")
            if self.eval_every:
                raise ValueError(
                    "eval_every: a devnet experiment evaluates at the start and the end only"
                )
            if self.threads:
                raise ValueError("threads: set [node.policy].cpu_threads for devnet nodes")
        else:
            devnet_only = {"round_length_s", "store"} & self.model_fields_set
            if devnet_only:
                raise ValueError(
                    f'{", ".join(sorted(devnet_only))}: only for swarm = "devnet" (the '
                    "in-process swarm has no chain clock and passes batches in memory)"
                )
        return self

    @property
    def baseline(self) -> tuple[int, int]:
        """The split gains are measured against: no external items (the paper's 8/0)."""
        return (self.questions, 0)

    def cells(self) -> list[Cell]:
        """Every (variant, split, seed) to play, in the order they are played: seed by seed,
        so that a run stopped part way has every configuration at (nearly) the same seeds, and
        its paired comparisons are of whole seeds."""
        return [
            Cell(variant=variant, local=i, external=j, seed=seed, correction=correction)
            for seed in self.seeds
            for variant in self.variants
            for i, j in self.splits_of(variant)
            for correction in (self.corrections if j > 0 else ["none"])
        ]

    def splits_of(self, variant: str) -> list[tuple[int, int]]:
        if variant != "homogeneous" and self.hetero_splits:
            return self.hetero_splits
        return self.splits


class Cell(BaseModel):
    """One configuration played with one seed."""

    model_config = ConfigDict(frozen=True)

    variant: str
    local: int
    external: int
    seed: int
    correction: str = "none"

    @property
    def split(self) -> str:
        """I/J, and the external correction when there is one: `4/4`, `4/4 tis`."""
        return f"{self.local}/{self.external}" + (
            "" if self.correction == "none" else f" {self.correction}"
        )

    @property
    def configuration(self) -> str:
        return f"{self.variant} {self.split}"

    @property
    def key(self) -> str:
        tag = "" if self.correction == "none" else f"-{self.correction}"
        return f"{self.variant}-{self.local}x{self.external}{tag}-s{self.seed}"


def load_experiment(name_or_path: str | Path) -> ExperimentConfig:
    """Loads `configs/experiments/<name>.toml`, or a path to such a file."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = EXPERIMENTS / f"{name_or_path}.toml"
    known = ", ".join(sorted(p.stem for p in EXPERIMENTS.glob("*.toml")))
    missing = f"{path}: no such experiment file (presets: {known})"
    return load_toml_model(path, ExperimentConfig, ExperimentError, missing=missing, whole="(file)")
