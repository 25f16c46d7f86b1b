"""[root_lane]: whether a training node sends its batches' submissions to the root lane's
aggregator (docs/scaling.md) instead of submitting each on the ledger, and to which one."""

from __future__ import annotations

from pydantic import Field

from client.config.models.section import Section
from client.config.models.values import Address


class RootLaneSection(Section):
    """The aggregator a producer sends its signed submissions to."""

    aggregator: Address | None = Field(
        None,
        description="the registered node whose `sapo aggregate run` collects this node's signed "
        "submissions (its endpoint is read from its on-chain metadata, and only its receipts are "
        "kept); needs [chain].round_book_address. Without a receipt by the last round of a "
        "batch's submission window, the batch is submitted on the ledger (the v4 lane). Unset: "
        "every batch is submitted on the ledger",
    )
