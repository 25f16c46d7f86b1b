"""How an adversary's batch leaves it: sealed, pinned or held back, submitted, and served or
withheld once its beacon says which groups checkers will re-draw."""

from __future__ import annotations

import logging
import time

from client.chain import ChainError
from client.credit import group_signal
from client.node.eventlog import Event
from client.node.rollouts import make_batch
from client.store import (
    LocalRound,
    Sampling,
)
from client.units import SCORE_SCALE

log = logging.getLogger("sapo.adversary")


class Release:
    """Sealing, submitting and serving, for `Adversary` (client.devnet.adversary.node)."""

    def serve(self, current: int) -> None:
        """For each batch submitted and not served yet, once its beacon is known: withholds it
        for good when the beacon opens a forged group (its checkers vote "unavailable", which
        slashes nobody), and pins it otherwise. Every drawn checker re-draws the same groups
        (`client.node.proving.openings`), so a forged row is caught by all of them or by none."""
        from client.node.proving import openings

        for round_, (batch, data, forged) in list(self.held.items()):
            beacon = self.ledger.beacon(round_, self.address)
            if not beacon.ready:
                continue
            del self.held[round_]
            opened = openings(beacon.beacon, batch)
            caught = sorted(set(opened) & forged)
            share = sum(
                group_signal(batch.local_rounds[k].items[i].rewards) for k, i in forged
            ) / max(1, batch.signal)
            self.outcomes[round_] = "withheld" if caught else "served"
            if not caught:
                self.store.put(data, round_)
            self.events.emit(
                Event.ADVERSARY_MOVE,
                f"{self.strategy}: round {round_}: the beacon opens group(s) {opened}; forged "
                f"{sorted(forged)[:3]}{'…' if len(forged) > 3 else ''} ({share:.1%} of the "
                "signal): " + ("caught, the batch withheld" if caught else "not opened, served"),
                round=round_,
                move="withheld" if caught else "served",
                opened=[list(g) for g in opened],
                forged_share=round(share, 4),
            )

    def _hold(self, round_: int, parts: list[LocalRound], forged: set[tuple[int, int]]) -> None:
        """Submits the batch of `parts` (claiming its signal) without pinning it, and keeps it
        for `serve`; `forged` are its hand-written groups (k, i). While the batch is too large,
        the last local round loses its last group (or the round itself, when it has one)."""
        while len(data := (batch := self._batch(round_, parts)).encode()) > self.limits.max_bytes:
            last = parts[-1]
            if len(last.items) > 1:
                forged.discard((last.k, len(last.items) - 1))
                parts[-1] = last.model_copy(update={"items": last.items[:-1]})
            else:
                forged = {g for g in forged if g[0] != last.k}
                parts.pop()
        self.held[round_] = (batch, data, forged)
        self._submit(
            round_,
            "0x" + batch.digest().hex(),
            batch.rollouts,
            batch.score,
            batch.signal,
            pinned=False,
            forged=len(forged),
        )

    def _seal(self, round_: int, parts: list[LocalRound], *, padded: bool = False) -> None:
        """Pins and submits the batch of `parts`, as the publisher seals (the last local rounds
        go while it is too large), claiming its signal, or with `padded` its signal plus a
        tolerance (agree_tolerance_bps of the batch's maximal score)."""
        while len(data := (batch := self._batch(round_, parts)).encode()) > self.limits.max_bytes:
            parts.pop()
        cid = self.store.put(data, round_)
        signal = batch.signal
        if padded:
            top = batch.rollouts * SCORE_SCALE
            signal = min(top // 2, signal + max(1, top * self.params.agree_tolerance_bps // 10_000))
        self._submit(
            round_, "0x" + batch.digest().hex(), batch.rollouts, batch.score, signal, cid=cid
        )

    def _batch(self, round_: int, parts: list[LocalRound]):
        return make_batch(
            chain_id=self.chain_id,
            ledger=self.ledger.address,
            round_=round_,
            node=self.address,
            catalog=self.catalog,
            model=self.model,
            sampling=Sampling.of(
                self.cfg.policy.temperature, self.cfg.policy.top_p, self.cfg.policy.max_new_tokens
            ),
            local_rounds=parts,
        )

    def _submit(
        self, round_: int, digest: str, rollouts: int, score: int, signal: int, **fields
    ) -> None:
        started = time.monotonic()
        try:
            tx = self.ledger.submit(round_, digest, rollouts, score, signal)
        except ChainError as exc:  # e.g. stake slashed below the minimum: it goes on trying
            self.events.emit(
                Event.NODE_ERROR,
                f"{self.strategy}: round {round_}: submit failed: {exc}",
                logging.WARNING,
                round=round_,
            )
            return
        self.events.emit(
            Event.ADVERSARY_MOVE,
            f"{self.strategy}: round {round_}: submitted {digest[:12]}… claiming signal "
            f"{signal / SCORE_SCALE:.2f} ({rollouts} rollouts)",
            round=round_,
            move="submit",
            digest=digest,
            rollouts=rollouts,
            score=score,
            signal=signal,
            gas=tx.gas_used,
            seconds=round(time.monotonic() - started, 3),
            **fields,
        )
