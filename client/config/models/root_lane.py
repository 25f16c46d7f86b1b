"""[root_lane]: whether a training node sends its batches' submissions to the root lane's
aggregator (docs/scaling.md) instead of submitting each on the ledger, and to which one."""

from __future__ import annotations

from pydantic import Field

from client.config.models.section import Section
from client.config.models.values import Address


class RootLaneSection(Section):
    """The aggregator a producer sends its signed submissions to, whether the node bonds the
    data challenges its audits of the book's lists call for, and whether it relays receipted
    votes."""

    aggregator: Address | None = Field(
        None,
        description="the registered node whose `sapo aggregate run` collects this node's signed "
        "submissions (its endpoint is read from its on-chain metadata, and only its receipts are "
        "kept); needs [chain].round_book_address. Without a receipt by the last round of a "
        "batch's submission window, the batch is submitted on the ledger (the v4 lane). Unset: "
        "every batch is submitted on the ledger",
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
