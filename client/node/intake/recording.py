"""Recording: what the intake does with a finished check of a peer's batch. It journals the
verdict (and reads it back into the window), tells the operator, and does what the verdict
implies: a missing batch is tried again after `retry_delay`, a deferred one (our own disk
stopped it) in half a round, an accepted one is pinned so that it outlives its producer, and a
drawn batch whose generation was checked is marked proven."""

from __future__ import annotations

import logging
import time

from client.config.models import SapoSection
from client.credit import WITHHELD
from client.node.eventlog import Event
from client.node.intake.retries import RETRY_MIN_S, retry_delay
from client.node.intake.seats import Seats
from client.node.intake.verdict import Accepted, Deferred, Judgement, Missing, Rejected
from client.node.intake.window import Window
from client.node.journal.peers import PeerSubmission
from client.node.journal.states import Verdict
from client.node.services import Services, Stage
from client.store import BlockStore, StoreError
from client.store.cid import digest_to_cid
from client.store.weights import pin_weights

log = logging.getLogger("sapo.node.intake")


class Recorder(Stage):
    """The intake's verdicts, on the intake's thread."""

    def __init__(
        self,
        services: Services,
        store: BlockStore,
        sapo: SapoSection,
        window: Window,
        seats: Seats,
        spool: str,
    ):
        super().__init__(services)
        self.store, self.sapo, self.window, self.seats, self.spool = (
            store,
            sapo,
            window,
            seats,
            spool,
        )
        self.retry_at: dict[tuple[int, str], float] = {}  # unavailable batches: when again
        self.proven: set[tuple[int, str]] = set()  # drawn batches whose generation we checked

    def forget_before(self, first: int) -> None:
        """Drops what concerns rounds no committee votes on any more."""
        self.proven = {k for k in self.proven if k[0] >= first}
        self.retry_at = {k: v for k, v in self.retry_at.items() if k[0] >= first}

    def record(self, sub: PeerSubmission, judgement: Judgement) -> None:
        """Journals a verdict, tells the operator, and does what it implies: a missing batch is
        tried again after `retry_delay`, a deferred one in half a round, an accepted one is
        pinned (so that it outlives its producer: peers and auditors find it here)."""
        match judgement:
            case Missing(error=error, took=took, withheld=withheld):
                self._missing(sub, error, took, withheld)
            case Rejected(reason=reason, claimed=claimed, findings=findings):
                self._verdict(
                    sub,
                    Verdict.BAD,
                    Event.PEER_BAD,
                    f"bad batch: {reason}",
                    reason,
                    claimed=claimed,
                    recomputed=0,
                    claimed_signal=sub.signal,
                    recomputed_signal=0,
                    findings=findings,
                )
            case Deferred(error=error):
                self._deferred(sub, error)
            case Accepted():
                self._accepted(sub, judgement)

    def _accepted(self, sub: PeerSubmission, verdict: Accepted) -> None:
        check = verdict.check
        if verdict.proof is not None:
            self.proven.add((sub.round, sub.node))
            for manifest in verdict.manifests:  # kept, like the batch, for later checkers
                try:
                    pin_weights(self.store, manifest, sub.round)
                except StoreError as exc:
                    log.warning("round %s: could not pin a checkpoint: %s", sub.round, exc)
        self._verdict(
            sub,
            Verdict.VERIFIED,
            Event.PEER_VERIFIED,
            f"verified ({len(verdict.batch.local_rounds)} local rounds): claimed "
            f"{check.claimed}, recomputed {check.recomputed}; signal {check.claimed_signal} / "
            f"{check.recomputed_signal}",
            verdict.reason,
            claimed=check.claimed,
            recomputed=check.recomputed,
            claimed_signal=check.claimed_signal,
            recomputed_signal=check.recomputed_signal,
            findings=check.findings,
            items=verdict.items(),
            source=verdict.source,
            proof=verdict.proof_summary(),
        )
        try:
            self.store.pin(digest_to_cid(sub.digest), sub.round)
        except StoreError as exc:
            log.warning("round %s: could not pin %s's batch: %s", sub.round, sub.node[:10], exc)

    def _missing(
        self, sub: PeerSubmission, exc: StoreError, took: float, withheld: int | None
    ) -> None:
        """Records a batch nobody gave us, or (`withheld`: our recomputed score) one whose
        opened checkpoints nobody gave us, and when to try again."""
        journaled = (
            {}
            if withheld is None
            else {
                "claimed": sub.score,
                "recomputed": withheld,
                "claimed_signal": sub.signal,
                "recomputed_signal": 0,
                "findings": WITHHELD,
            }
        )
        what = "unavailable" if withheld is None else "opened checkpoints unavailable"
        self._verdict(
            sub,
            Verdict.UNAVAILABLE,
            Event.PEER_UNAVAILABLE,
            f"{what}: {exc}",
            str(exc),
            **journaled,
        )
        basis = self.window.basis(sub)
        self.retry_at[(sub.round, sub.node)] = time.monotonic() + retry_delay(
            self.params,
            self.sapo.unavailable_after,
            sub.round,
            basis.failures if basis else 1,
            took,
            time.time(),
            appealed=self.seats.appealed(sub),
        )

    def _deferred(self, sub: PeerSubmission, exc: StoreError) -> None:
        """A check our own disk stopped (the spool full or unwritable): no verdict and no
        failure counted against the producer; tried again in half a round."""
        delay = max(RETRY_MIN_S, self.params.round_length / 2)
        self.retry_at[(sub.round, sub.node)] = time.monotonic() + delay
        self.events.emit(
            Event.STORE_SPOOL,
            f"round {sub.round}: {sub.node[:10]}…'s checkpoints could not be spooled ({exc}); "
            f"checked again in {delay:.0f} s: free disk under {self.spool}",
            logging.WARNING,
            round=sub.round,
            node=sub.node,
        )

    def _verdict(
        self,
        sub: PeerSubmission,
        verdict: str,
        event: Event,
        what: str,
        reason: str | None,
        **journaled,
    ) -> None:
        """Journals a peer batch's verdict and tells the operator."""
        proof = journaled.pop("proof", None)  # in the event only
        self.journal.peers.peer_batch(
            sub.round, sub.node, sub.digest, verdict, reason=reason, **journaled
        )
        self.window.recorded(sub)
        if proof is not None:
            journaled["proof"] = proof
        fields = {k: v for k, v in journaled.items() if k != "items"}
        self.events.emit(
            event,
            f"round {sub.round}: {sub.node[:10]}…'s batch {what}",
            logging.INFO if verdict == Verdict.VERIFIED else logging.WARNING,
            round=sub.round,
            node=sub.node,
            reason=reason,
            **fields,
        )
