"""Sealing: a chain round's batch made from the local rounds the compute stage journaled.

The compute stage seals a chain round when it starts a local round of a later one: the local
rounds k = 0..n-1 become the batch, and its bytes, pin and submission go into the journal in one
transaction, with no I/O (the publisher's thread sends them). `room` keeps a batch within the
limits a checker accepts before a local round is added to it.
"""

from __future__ import annotations

import threading

from client.config.models import SapoSection
from client.node.eventlog import Event
from client.node.rollouts import make_batch
from client.node.services import Services, Stage
from client.store import LocalRound, Sampling
from client.store.batch import BatchLimits
from client.tasks import Catalog
from client.units import SCORE_SCALE

HEADER_BYTES = 1_024  # room kept for a batch's header beside its local rounds


class Sealer(Stage):
    """Closes chain rounds' batches; runs on the compute stage's thread."""

    def __init__(
        self,
        services: Services,
        catalog: Catalog,
        model: dict,
        sampling: Sampling,
        *,
        sapo: SapoSection,
        limits: BatchLimits,
        wake: threading.Event,
    ):
        super().__init__(services)
        self.catalog, self.model, self.sampling = catalog, model, sampling
        self.sapo, self.limits, self.wake = sapo, limits, wake

    def room(self, round_: int, part_bytes: int) -> bool:
        """Whether a local round of `part_bytes` still fits in the round's batch (its limits:
        bytes, items and local rounds)."""
        count, used = self.journal.open_batch(round_)
        return (
            count < self.limits.max_local_rounds
            and (count + 1) * self.sapo.local_items <= self.limits.max_items
            and used + part_bytes + count + HEADER_BYTES <= self.limits.max_bytes
        )

    def seal(self, round_: int) -> bool:
        """Makes the round's batch from its local rounds and queues pin and submission; returns
        whether there was a batch to seal."""
        parts = self.journal.local_rounds(round_)
        if not parts:
            return False
        local = [LocalRound.model_validate_json(p.part) for p in parts]
        while True:
            batch = make_batch(
                chain_id=self.services.chain_id,
                ledger=self.ledger.address,
                round_=round_,
                node=self.services.address,
                catalog=self.catalog,
                model=self.model,
                sampling=self.sampling,
                local_rounds=local,
            )
            data = batch.encode()
            if len(data) <= self.limits.max_bytes or len(local) == 1:
                break
            local.pop()  # `room` keeps this from happening; the last local rounds go first
        digest = "0x" + batch.digest().hex()
        self.journal.seal(
            round_, data, digest, batch.score, batch.rollouts, len(local), batch.signal
        )
        self.events.emit(
            Event.ROUND_SEALED,
            f"round {round_}: sealed {len(local)} local round(s), {batch.rollouts} rollouts, "
            f"mean reward {batch.score / SCORE_SCALE / batch.rollouts:.3f}, "
            f"learning signal {batch.signal / SCORE_SCALE:.2f}",
            round=round_,
            digest=digest,
            local_rounds=len(local),
            rollouts=batch.rollouts,
            score=batch.score,
            signal=batch.signal,
        )
        self.wake.set()
        return True
