"""[devnet]: the local swarm that `sapo devnet up` starts, and what may differ between its nodes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from client.config.models.section import Section
from client.config.models.values import Wei
from client.config.roles import expand

# what may differ between a devnet's nodes (chain, store and ledger are the swarm's)
NODE_OVERRIDABLE = ("sapo", "policy", "train")
MAX_LIGHT = 10_000  # light nodes a devnet runs at most ([devnet].light, --light)


class DevnetSection(Section):
    """The local swarm that `sapo devnet up` starts (anvil, IPFS, N nodes) on loopback."""

    nodes: int = Field(3, ge=1, le=64)
    metrics: bool = Field(
        False,
        description="serve each node's Prometheus metrics ([node].metrics_addr): on a free "
        "loopback port, or under --netns on port 9464 of the node's namespace address",
    )
    chain_id: int = Field(31_337, gt=0)
    accounts: int = Field(10, ge=1, le=256, description="funded dev accounts")
    balance_eth: int = Field(10_000, gt=0)
    reward_pool: Wei = Field(default_factory=lambda: 100 * 10**18)
    root_lane: bool = Field(
        False,
        description="deploy a round book beside the ledger, run an aggregator (a registered "
        "node of its own that trains nothing, with its own IPFS daemon) and have the honest "
        "nodes submit and vote through it (docs/aggregator.md); adversary nodes stay in the "
        "ledger's lane",
    )
    light: int = Field(
        0,
        ge=0,
        le=MAX_LIGHT,
        description="light nodes beside the real ones (root lane only): staked identities in "
        "families of their own, each signing its submission and its seat votes every round and "
        "sending them to the aggregator, with no batch behind them (client.devnet.light; "
        "docs/aggregator.md); at least [ledger].quorum + 1",
    )
    light_equivocators: int = Field(
        0,
        ge=0,
        le=MAX_LIGHT,
        description="of the light nodes, how many sign a second, different vote on the first "
        "batch they are seated on (an adversary: the aggregator keeps the second as evidence "
        "and proves it on chain, and the ledger slashes the voter); at most [devnet].light",
    )
    aggregator_lies: list[
        Literal["drop-quorum", "invent-signer", "withhold", "leave-out", "censor", "abandon"]
    ] = Field(
        default_factory=list,
        description="lies the root lane's aggregator tells, each once, about a real node "
        "(client.devnet.liar): drop-quorum leaves out of a verdict root the credit of a batch "
        "although it receipted a quorum of its checkers' agreeing votes (the node proves it "
        "with the votes its checkers relayed to it); invent-signer puts in a credit a vote "
        "signed by a key with no seat (a producer of the round proves it); withhold posts a "
        "verdict root whose list it never publishes nor shows (a producer bonds a data "
        "challenge and claims it); leave-out leaves a receipted submission out of a submission "
        "root (the node proves it with the receipt); censor refuses a node's submission of a "
        "round (the node submits it on the ledger); abandon posts no submission root for a "
        "round it receipted a node's submission in (the node proves it with the receipt: the "
        "aggregator's roster bond, half to it). Each proof voids the root and pays its prover "
        "half the round's bond. Empty: an honest aggregator",
    )
    node_overrides: dict[int, dict[str, dict[str, Any]]] = Field(
        default_factory=dict,
        description="per node index (honest nodes first, then adversaries), sections of its "
        "config that differ from the others' ([sapo], [policy], [train]): e.g. a slower node, "
        "[devnet.node_overrides.2.sapo] completions = 24, or another model family, "
        "[devnet.node_overrides.2.policy] model = 'seed-llama'",
    )
    adversaries: list[str] = Field(
        default_factory=list,
        description="adversary nodes added beside the honest ones, each running one strategy "
        "for farming credit or denying it to others (client.devnet.adversary): free-claim, "
        "answer-farmer, mixed-farmer, withholder, copycat, colluders (a pair), cartel (three "
        "vouching for each other), griefer, whale (a griefer holding whale_share of all "
        "stake), sybils (three identities holding whale_share together, 4:2:1, vouching for "
        "each other and disputing the rest), stake-mover (a griefer adding whale_share of "
        "stake once a batch is on chain), padder (honest samples, a claim padded by v3's "
        "tolerance), logprob-liar (honest samples whose log-probs claim each token an unlikely "
        "draw, so that learners weigh them up), nan-weights (hand-made groups opening a "
        "checkpoint with a NaN value), poison-token (hand-made groups whose token ids start "
        "past the vocabulary), concentrator (one forged local round beside one-item honest "
        "ones, the batch withheld when the beacon opens a forged group), splitter (one forged "
        "row in an honest batch, withheld when re-drawn), baiters (two honest producers, each "
        "disputing the other's batch "
        "in the window's last round when it out-seats the agreers), or all (every strategy but "
        "the whale, the "
        "sybils and the stake mover, whose stake would change the others' world)",
    )
    node_stake: Wei | None = Field(
        None,
        description="what each node registers with (default 2 x [ledger].min_stake; at least "
        "min_stake); the heavy adversaries hold whale_share of all stake whatever it is",
    )
    adversary_stake: Wei | None = Field(
        None,
        description="what each adversary node registers with (default node_stake; at least "
        "min_stake): below node_stake, the honest nodes hold most of the stake, which the rules "
        "assume (scripts/run_attacks.py --adversary-stake)",
    )
    whale_share: float = Field(
        0.10,
        gt=0,
        lt=0.5,
        description="the share of all active stake a whale adversary registers with (each "
        "whale alike; at least [ledger].min_stake, so a small devnet's whale may hold more)",
    )

    @field_validator("adversaries")
    @classmethod
    def _known_adversaries(cls, names: list[str]) -> list[str]:
        expand(names)  # raises ValueError naming what is unknown
        return names

    @field_validator("aggregator_lies")
    @classmethod
    def _each_lie_once(cls, lies: list[str]) -> list[str]:
        doubled = sorted({lie for lie in lies if lies.count(lie) > 1})
        if doubled:
            raise ValueError(f"each lie is told once: {', '.join(doubled)} is named twice")
        return lies

    def adversary_roles(self) -> list[str]:
        """The adversary nodes, one strategy each (a colluder pair is two)."""
        return expand(self.adversaries)

    @model_validator(mode="after")
    def _overrides_name_nodes_and_sections(self) -> DevnetSection:
        # adversary nodes follow the honest ones: a farmer of a second model family is one
        every = self.nodes + len(self.adversary_roles())
        for index, sections in self.node_overrides.items():
            if not 0 <= index < every:
                raise ValueError(f"node_overrides.{index}: the devnet has nodes 0..{every - 1}")
            if unknown := sorted(set(sections) - set(NODE_OVERRIDABLE)):
                raise ValueError(
                    f"node_overrides.{index}: {unknown} cannot differ between a devnet's nodes "
                    f"(they may override {', '.join(NODE_OVERRIDABLE)})"
                )
        return self

    @model_validator(mode="after")
    def _light_in_the_root_lane(self) -> DevnetSection:
        if self.light and not self.root_lane:
            raise ValueError(
                f"light = {self.light}: light nodes send their messages to the root lane's "
                "aggregator: set root_lane = true (or pass --root-lane)"
            )
        # (light = 0 here may still be set by `devnet up --light N`: control.apply_options
        # checks the equivocators against what the devnet runs)
        if self.light and self.light_equivocators > self.light:
            raise ValueError(
                f"light_equivocators = {self.light_equivocators}: more than the {self.light} "
                "light nodes ([devnet].light)"
            )
        return self

    @model_validator(mode="after")
    def _enough_accounts(self) -> DevnetSection:
        # account 0 deploys and funds the pool; every node (adversaries too) needs its own, and
        # the root lane's aggregator one more
        adversaries = len(self.adversary_roles())
        need = self.nodes + adversaries + 1 + self.root_lane
        if self.accounts < need:
            what = "nodes + adversary nodes" if adversaries else "nodes"
            what += " + 2 (the deployer, the aggregator)" if self.root_lane else " + 1"
            raise ValueError(f"accounts ({self.accounts}) must be at least {what} ({need})")
        return self
