"""[root_lane]: whether a training node sends its batches' submissions to the root lane
(docs/scaling.md), to each round's drawn aggregator, instead of submitting each on the ledger."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from client.config.models.section import Section


class RootLaneSection(Section):
    """Whether a producer sends its signed submissions to the root lane, whether the node bonds
    the data challenges its audits of the book's lists call for, and whether it relays receipted
    votes."""

    submit: bool = Field(
        False,
        description="send each batch's signed submission to its round's aggregator, drawn by the "
        "round book from the nodes enlisted there (`sapo aggregate run` enlists one; its "
        "endpoint is read from its on-chain metadata, and only its receipts are kept); needs "
        "[chain].round_book_address. Without a receipt by the last round of a batch's "
        "submission window (no aggregator drawn, or none that answered), the batch is "
        "submitted on the ledger (the v4 lane). Off: every batch is submitted on the ledger",
    )
    challenge_lists: bool = Field(
        False,
        description="bond a data challenge (the book's challengeBond, from this node's account) "
        "of a round's submission or verdict list when our batch is in the round and the list "
        "still cannot be read in the last two rounds of its challenge window, or is not its "
        "root's data; and claim it once its answer window closed unanswered: the root is void, "
        "and the bond comes back with half the aggregator's. An answered challenge pays its "
        "bond to whoever answered it (the list may only have been slow to reach this node, or "
        "the aggregator withheld it to collect bonds: the node does not challenge an aggregator "
        "that answered it again). Off: the node names the challenge, and `sapo audit book ROUND "
        "--prove --challenge` sends it",
    )
    max_challenges_per_day: int = Field(
        12,
        ge=0,
        le=1_000,
        description="with challenge_lists, the most data challenges the node bonds in any 24 "
        "hours (each holds the book's challengeBond until its claim); past it, the node names "
        "the challenge to send instead",
    )
    relay_votes: bool = Field(
        False,
        description="carry receipted votes between checkers and producers over libp2p pubsub "
        "(through [store].ipfs_api, kubo's RPC): as a checker, publish each agreeing vote the "
        "round's aggregator receipted to its batch's producer; as a producer, keep the votes "
        "our seated checkers publish to us, and should the verdict root leave our batch "
        "uncredited although a quorum of them agreed, prove it (proveUncredited: the root is "
        'void, half the aggregator\'s bond is ours). Needs [store].backend = "ipfs" and a '
        "daemon with pubsub on (kubo: `ipfs config --json Pubsub.Enabled true`; `sapo devnet "
        "up` turns it on where this is set). Off: no relay; a dropped quorum is not proven by "
        "the node",
    )

    @model_validator(mode="before")
    @classmethod
    def _aggregator_is_drawn(cls, data: Any) -> Any:
        if isinstance(data, dict) and "aggregator" in data:
            raise ValueError(
                "[root_lane].aggregator is no longer read: each round's aggregator is drawn by "
                "the round book from the enlisted ones; write `submit = true` instead"
            )
        return data
