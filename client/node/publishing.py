"""Publishing: a chain round's batch from its local rounds, then the outbox (pin, submit,
attest), beside the compute stage.

The compute stage seals a chain round when it starts a local round of a later one (`seal`: the
local rounds k = 0..n-1 become the batch, its bytes, pin and submission go into the journal in
one transaction; no I/O). The publisher's own thread sends what the outbox holds, oldest first:
a pin, then the round's submission (a digest nobody can fetch earns nothing), and the
attestations intake queued, together (one nonce sequence, receipts awaited at once: ~one block
for all). What cannot go yet waits (an outage); a submission whose window (round + W) closes
first, or an attestation past its challenge window, is dropped and the round recorded as missed.
Once a submission's beacon is known (the block after it), the publisher pins the checkpoints the
beacon opened (client.node.proving.opened: the weights of the local rounds of its
OPENED_GROUPS groups, kept as snapshots until then), so that the drawn checkers can re-draw its
completions; a batch that can be fetched but whose openings cannot is disputed (withheld) and
slashed. If no vote has stored the beacon DRAW_AFTER_BLOCKS after its block, the publisher
stores it (`drawBeacon`), for its own batch and for those its node is drawn to check: a beacon
nobody stores within the EVM's 256-block window lapses, and its batch can no longer be checked.
Once the first committee's window closes, a batch of ours that it did not credit is appealed
(`appeal`) if our own re-check of the batch, the checkers' verification run on the bytes we
pinned, agrees with what we claimed: a verdict a large holder won by the luck of a small draw,
or that checkers who never voted left uncredited, goes to a larger committee drawn afresh; a
batch whose re-check disagrees is not appealed (a lost appeal slashes twice). Once a round is
final, settling a submission (ours, or one we disputed) also has the votes that lost against
its verdict judged (`settleVotes`: disputes of a credited batch, agreements with a disputed
one), so that voting against the evidence costs the voter its stake, not only gas.
It also unpins what `[store].retain_rounds` no longer keeps, and once a chain round keeps the
node's on-chain metadata current (its IPFS peer id and swarm addresses, which peers dial to
fetch its batches: `setMetadata` when they changed, e.g. after the daemon moved).

(Over 400 lines, on purpose: every outbox kind is sent, retried and dropped here, one thread and
one nonce sequence, so what can happen to an entry between its queueing and its receipt reads in
one place.)
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from client.chain import ChainError
from client.chain.errors import (
    AlreadyAppealed,
    AlreadySettled,
    BeaconAlreadyDrawn,
    LedgerRevert,
    RpcUnavailable,
    TransactionTimeout,
)
from client.chain.events import EventReader
from client.chain.models import SubmissionInfo, TxResult, VoteSide
from client.config.models import SapoSection, StoreSection
from client.credit import describe_findings
from client.node.eventlog import Event, Span, timed
from client.node.journal import OutboxEntry
from client.node.proving import Snapshots, opened
from client.node.rollouts import make_batch, task_seed, verify_batch
from client.node.services import Services, Stage
from client.node.states import OutboxKind, RoundPhase
from client.store import BlockStore, IpfsStore, LocalRound, Sampling, StoreError
from client.store.batch import BatchLimits, decode_batch
from client.store.weights import put_weights
from client.tasks import Catalog
from client.units import SCORE_SCALE

log = logging.getLogger("sapo.node.publishing")
MAX_CONCURRENT_TX = 8  # attestations in flight at once (each waits for its own receipt)
_CHAIN_DOWN = (RpcUnavailable, TransactionTimeout)
HEADER_BYTES = 1_024  # room kept for a batch's header beside its local rounds
# a beacon nobody stored this many blocks after its block is stored by the producer or a drawn
# checker (half of the EVM's 256-block window: time enough for the transaction, and most batches
# have had their first vote, which stores it, long before)
DRAW_AFTER_BLOCKS = 128


class Publisher(Stage):
    """Seals chain rounds' batches and sends the outbox."""

    def __init__(
        self,
        services: Services,
        store: BlockStore,
        catalog: Catalog,
        model: dict,
        sampling: Sampling,
        snapshots: Snapshots,
        *,
        store_cfg: StoreSection,
        sapo: SapoSection,
        metadata: Callable[[dict], str],
        reader: EventReader | None = None,
    ):
        """`metadata(peer)`: the metadata the node registers with, given what its IPFS daemon
        says of itself (client.node.metadata)."""
        super().__init__(services)
        self.store_cfg, self.sapo, self.metadata = store_cfg, sapo, metadata
        self.store = store
        self.catalog = catalog
        self.model = model
        self.sampling = sampling
        self.snapshots = snapshots
        self.address = services.address
        self.limits = BatchLimits(max_bytes=store_cfg.max_batch_bytes)
        self.reader = reader or EventReader(services.ledger)  # who voted on a batch
        self.wake = threading.Event()
        self._metadata_round = -1

    # ------------------------------------------------------------------- sealing (compute)

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
                node=self.address,
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

    # ---------------------------------------------------------------------- the I/O thread

    def run(self, stop: threading.Event) -> None:
        """Sends the outbox whenever something is queued (or every second) until `stop`."""
        while not stop.is_set():
            self.flush()
            self.retain()
            self.keep_metadata()
            self.wake.wait(1.0)
            self.wake.clear()

    def flush(self) -> None:
        """Sends what the outbox holds, oldest first; what cannot go yet stays pending."""
        chain_down = store_down = False
        attestations = []
        for entry in self.journal.pending():
            if entry.kind == OutboxKind.PIN and not store_down:
                store_down = not self._pin(entry)
            elif entry.kind == OutboxKind.SUBMIT and not chain_down:
                pin = self.journal.outbox(f"pin:{entry.round}")
                if pin is not None and pin.status == "pending":
                    if not self.params.submit_open(entry.round, self.current_round()):
                        self._give_up(
                            entry, "the batch could not be pinned before its window closed"
                        )
                    continue  # a digest nobody can fetch earns nothing: pin first
                chain_down = not self._send(entry)
            elif entry.kind == OutboxKind.OPEN and not chain_down and not store_down:
                try:
                    self._open(entry)
                except ChainError as exc:
                    chain_down = True
                    self.health.chain(False, str(exc))
                except StoreError as exc:
                    store_down = True
                    self.journal.attempted(entry.key, str(exc))
                    self.health.store(False, str(exc))
            elif entry.kind in (
                OutboxKind.ATTEST,
                OutboxKind.UNAVAILABLE,
                OutboxKind.DRAW,
                OutboxKind.SETTLE,
                OutboxKind.APPEAL,
            ):
                attestations.append(entry)
        attestations = self._due(attestations) if not chain_down else []
        if attestations:
            with (
                timed(self.journal, Span.ATTEST),
                ThreadPoolExecutor(
                    min(len(attestations), MAX_CONCURRENT_TX), thread_name_prefix="attest"
                ) as pool,
            ):
                list(pool.map(self._send, attestations))

    def _pin(self, entry: OutboxEntry) -> bool:
        record = self.journal.round(entry.round)
        if record is None or record.batch is None:
            self.journal.dropped(entry.key, "no batch recorded for the round")
            return True
        try:
            with timed(self.journal, Span.PIN):
                cid = self.store.put(record.batch, entry.round)
        except StoreError as exc:
            self.journal.attempted(entry.key, str(exc))
            self.health.store(False, str(exc))
            return False
        self.health.store(True)
        self.journal.done(entry.key)
        self.journal.advance(entry.round, RoundPhase.PINNED, cid=cid)
        self.events.emit(
            Event.ROUND_PINNED, f"round {entry.round}: pinned {cid}", round=entry.round, cid=cid
        )
        return True

    def _send(self, entry: OutboxEntry) -> bool:
        """Sends one submit or attest; returns False when the chain is unreachable."""
        try:
            if entry.kind == OutboxKind.SUBMIT:
                with timed(self.journal, Span.SUBMIT):
                    self._submit(entry)
            else:
                self._attest(entry)
        except _CHAIN_DOWN as exc:
            self.journal.attempted(entry.key, str(exc))
            self.health.chain(False, str(exc))
            return False
        except LedgerRevert as exc:
            # The chain answered: this entry cannot go (a window closed, stake too low, ...)
            self._give_up(entry, str(exc))
        except ChainError as exc:
            self.journal.attempted(entry.key, str(exc))
            self.health.chain(False, str(exc))
            return False
        return True

    def _submit(self, entry: OutboxEntry) -> None:
        round_, p = entry.round, entry.payload
        on_chain = self.ledger.submission(round_, self.address)
        self.health.chain(True)
        if on_chain.rollouts:  # sent before a crash, or by an earlier attempt that timed out
            if on_chain.digest.lower() == p["digest"].lower():
                self._submitted(entry, None)
            else:
                self._give_up(entry, f"another batch ({on_chain.digest}) is on chain")
            return
        if not self.params.submit_open(round_, self.current_round()):
            self._give_up(entry, "the round's submission window closed before it could go")
            return
        result = self.ledger.submit(round_, p["digest"], p["rollouts"], p["score"], p["signal"])
        self._submitted(entry, result.tx_hash)

    def _submitted(self, entry: OutboxEntry, tx_hash: str | None) -> None:
        self.journal.enqueue(f"open:{entry.round}", OutboxKind.OPEN, entry.round, {})
        self.journal.enqueue(f"settle:{entry.round}", OutboxKind.SETTLE, entry.round, {})
        self.journal.enqueue(f"appeal:{entry.round}", OutboxKind.APPEAL, entry.round, {})
        self.journal.done(entry.key, tx_hash)
        self.journal.advance(entry.round, RoundPhase.CONFIRMED, tx_hash=tx_hash)
        record = self.journal.round(entry.round)
        self.events.emit(
            Event.ROUND_SUBMITTED,
            f"round {entry.round}: submission confirmed"
            + (f" in {tx_hash}" if tx_hash else " (found on chain)"),
            round=entry.round,
            digest=record.digest if record else None,
            cid=record.cid if record else None,
            local_rounds=record.local_rounds if record else None,
            tx_hash=tx_hash,
        )

    def _attest(self, entry: OutboxEntry) -> None:
        """Casts a drawn checker's vote: an attestation of what we recomputed, or (kind
        `unavailable`) that we could not fetch the batch from anyone."""
        round_, p = entry.round, entry.payload
        if entry.kind == OutboxKind.DRAW:
            self._draw(entry)
            return
        if entry.kind == OutboxKind.SETTLE:
            self._settle(entry)
            return
        if entry.kind == OutboxKind.APPEAL:
            if p.get("node", self.address) != self.address:
                self._appeal_vote(entry)
            else:
                self._appeal(entry)
            return
        peer = p["node"]
        if self.ledger.has_attested(self.address, round_, peer):
            self.journal.done(entry.key)
            return
        if not self.params.vote_open(round_, self.current_round(), p.get("appeal", False)):
            self._give_up(entry, "the challenge window closed")
            return
        if entry.kind == OutboxKind.UNAVAILABLE:
            result = self.ledger.report_unavailable(round_, peer)
            what = "reported unavailable (fetched from nobody)"
            event = Event.PEER_REPORTED_UNAVAILABLE
            if p.get("appeal"):
                what += " on its appeal"
        else:
            result = self.ledger.attest(round_, peer, p["score"], p["signal"], p["findings"])
            found = describe_findings(p["findings"])
            what = (
                f"attested score {p['score'] / SCORE_SCALE:.4f}, "
                f"signal {p['signal'] / SCORE_SCALE:.2f}" + (f" ({found})" if found else "")
            ) + (" on its appeal" if p.get("appeal") else "")
            event = Event.PEER_ATTESTED
        self.health.chain(True)
        if entry.kind == OutboxKind.ATTEST and not p.get("appeal"):
            # queued before the vote is marked done: if the first committee's verdict goes
            # against this vote (a bait batch's allies outseat us, or a forgery is credited),
            # it is appealed once that committee's window closes
            self.journal.enqueue(
                f"appeal-of:{round_}:{peer}", OutboxKind.APPEAL, round_, {"node": peer}
            )
        self.journal.done(entry.key, result.tx_hash)
        self.events.emit(
            event,
            f"round {round_}: {peer[:10]}… {what}",
            round=round_,
            node=peer,
            score=p.get("score"),
            signal=p.get("signal"),
            findings=p.get("findings"),
            tx_hash=result.tx_hash,
        )

    def _draw(self, entry: OutboxEntry) -> None:
        """Stores a submission's beacon (ours, or one we are drawn to check) if nobody has
        half a window after its block: the first vote usually stores it, and a beacon nobody
        stores within 256 blocks lapses (the batch can no longer be checked: for our own, no
        credit; for one we check, no vote). Waits while it is early; done once it is stored."""
        node = entry.payload["node"]
        beacon = (
            self.ledger.appeal_of(entry.round, node) if entry.payload.get("appeal") else None
        ) or self.ledger.beacon(entry.round, node)
        head = self.ledger.head()
        self.health.chain(True)
        if beacon.drawn:  # the checkers' votes usually stored it first
            self.journal.done(entry.key)
            return
        if beacon.lapsed(head):
            self._give_up(entry, "nobody drew the beacon in 256 blocks: it lapsed")
            return
        try:
            result = self.ledger.draw_beacon(entry.round, node)
        except BeaconAlreadyDrawn:  # another node's transaction came first
            self.journal.done(entry.key)
            return
        self.journal.done(entry.key, result.tx_hash)
        self.events.emit(
            Event.BEACON_DRAWN,
            f"round {entry.round}: stored the beacon of {node[:10]}…'s batch (nobody had, "
            f"{head - beacon.block} blocks on)",
            round=entry.round,
            node=node,
            tx_hash=result.tx_hash,
        )

    def _settle(self, entry: OutboxEntry) -> None:
        """Settles a submission once its round is final: ours (until every one of them is
        settled the ledger keeps our unbonding stake), or a peer's we disputed (so that its
        slash lands; its producer would never settle it). Anyone may, and a claim settles what
        it claims: settled already, we go on to its votes. Then the votes that lost against its
        verdict are judged (`_judge_votes`). Sent once the round is final (`_due`)."""
        round_, node = entry.round, entry.payload.get("node", self.address)
        sub = self.ledger.submission(round_, node)
        self.health.chain(True)
        if not sub.exists:
            self.journal.done(entry.key)
            return
        tx_hash = None
        if not sub.settled:
            try:
                result = self.ledger.settle(round_, node)
            except AlreadySettled:  # settled by another's transaction first
                pass
            else:
                tx_hash, disputed = result.tx_hash, sub.disputed
                cut = self._settler_cut(result, round_, node)
                whose = "our submission" if node == self.address else f"{node[:10]}…'s submission"
                outcome = (
                    " (disputed: slashed)"
                    if disputed
                    else f", credited {sub.credited / SCORE_SCALE}"
                )
                paid = f"; our settler's cut {cut / 10**18:g} ETH" if cut else ""
                self.events.emit(
                    Event.ROUND_SETTLED,
                    f"round {round_}: {whose} settled{outcome}{paid}",
                    logging.WARNING if disputed else logging.INFO,
                    round=round_,
                    node=node,
                    disputed=disputed,
                    credited=sub.credited,
                    appealed=sub.appealed,
                    settler_cut=cut,
                    tx_hash=tx_hash,
                )
        self._judge_votes(sub)
        self.journal.done(entry.key, tx_hash)

    def _judge_votes(self, sub: SubmissionInfo) -> None:
        """Has the votes on a final submission that lost against its verdict judged
        (`settleVotes`): the disputes of a credited batch, the agreements with a disputed one,
        on the first committee, and on the appeal's when the appeal reached the verdict; each
        costs its voter slashBps of its stake. The voters are read from the batch's Attested
        events; those judged already are skipped. Nothing when the verdict is neither
        (unavailable votes never lose) or the judging window has passed."""
        if not self.params.votes_judged_open(sub.round, self.current_round()):
            return
        if sub.credited:
            losing = VoteSide.DISPUTED
        elif sub.disputed:
            losing = VoteSide.AGREED
        else:
            return
        events = self.reader.read(
            ["Attested"], from_block=sub.snapshot_block, round=sub.round, node=sub.node
        )
        voters = sorted({e.args["attester"] for e in events})
        if not voters:
            return
        appeal_decided = sub.appeal is not None and sub.appeal.decided
        votes = self.ledger.votes_of(voters, sub.round, sub.node)
        losers = [
            v
            for v, (first, second, judged) in zip(voters, votes, strict=True)
            if not judged and (first == losing or (appeal_decided and second == losing))
        ]
        if not losers:
            return
        result = self.ledger.settle_votes(sub.round, sub.node, losers)
        cut = self._settler_cut(result, sub.round, sub.node)
        side = "disputed it" if sub.credited else "agreed with it"
        whose = "our batch" if sub.node == self.address else f"{sub.node[:10]}…'s batch"
        paid = f"; our settler's cut {cut / 10**18:g} ETH" if cut else ""
        self.events.emit(
            Event.VOTES_SETTLED,
            f"round {sub.round}: {len(losers)} checker(s) who {side} against the verdict on "
            f"{whose} judged (slashed){paid}",
            round=sub.round,
            node=sub.node,
            voters=losers,
            settler_cut=cut,
            tx_hash=result.tx_hash,
        )

    def _settler_cut(self, result: TxResult, round_: int, node: str) -> int:
        """The wei our settle or settleVotes transaction paid us (its `SettlerPaid` event:
        SETTLER_CUT_BPS of what it slashed others); 0 when it slashed nobody else."""
        events = self.reader.read(
            ["SettlerPaid"],
            from_block=result.block_number,
            to_block=result.block_number,
            settler=self.address,
            round=round_,
            node=node,
        )
        return sum(e.args["amount"] for e in events if e.tx_hash == result.tx_hash)

    def _appeal(self, entry: OutboxEntry) -> None:
        """Appeals our batch's verdict once the first committee's window has closed (`_due`),
        if it did not credit the batch and our own re-check of the batch agrees with our
        claim; then its beacon is stored if no appellate vote has half a window on. Done without
        an appeal when the batch is credited (the usual case) or our re-check disagrees (a lost
        appeal slashes twice slashBps)."""
        round_ = entry.round
        sub = self.ledger.submission(round_, self.address)
        self.health.chain(True)
        if not sub.exists or sub.credited:
            self.journal.done(entry.key)
            return
        appealed, result = sub.appealed, None
        if not appealed:
            if not self.params.appeal_open(round_, self.current_round()):
                self._give_up(entry, "the appeal window closed before the appeal could go")
                return
            agrees, why = self._recheck(round_)
            if not agrees:
                self.journal.dropped(entry.key, f"not appealed: {why}")
                self.events.emit(
                    Event.ROUND_APPEALED,
                    f"round {round_}: our batch was not credited, and our re-check {why}: "
                    "not appealed",
                    logging.WARNING,
                    round=round_,
                    appealed=False,
                    reason=why,
                )
                return
            try:
                result = self.ledger.appeal(round_)
            except AlreadyAppealed:  # our earlier attempt went through
                result = None
            sub = self.ledger.submission(round_, self.address)
            self.events.emit(
                Event.ROUND_APPEALED,
                f"round {round_}: our batch was not credited ({sub.agree_seats} agreeing seats, "
                f"{sub.dispute_seats} disputing, {sub.unavailable_seats} unavailable; "
                f"{sub.agrees} agreeing checkers); our re-check agrees with our claim: appealed "
                "to a larger committee",
                logging.WARNING,
                round=round_,
                appealed=True,
                agree_seats=sub.agree_seats,
                dispute_seats=sub.dispute_seats,
                unavailable_seats=sub.unavailable_seats,
                tx_hash=result.tx_hash if result else None,
            )
        # queued before the appeal is marked done: a crash between the two appeals nothing
        # twice (the ledger says it is appealed) and still queues the draw
        self.journal.enqueue(
            f"draw:{round_}:{self.address}:appeal",
            OutboxKind.DRAW,
            round_,
            {"node": self.address, "block": sub.appeal_block + 1, "appeal": True},
        )
        self.journal.done(entry.key, result.tx_hash if not appealed and result else None)

    def _appeal_vote(self, entry: OutboxEntry) -> None:
        """Appeals the first committee's verdict on a peer's batch we voted on, once that
        committee's window has closed (`_due`), when the verdict judges our vote lost: we
        disputed a batch it credited, or agreed with one more seats disputed (`appealVote`).
        Our vote is what our own check found, so the verdict is what is wrong: a bait batch
        (its producer's allies dispute it in the last block, outseating the honest agreers) or a
        forgery its allies credited. Done without an appeal when our vote stands, or when the
        batch was appealed already (its appeal's committee then judges every vote)."""
        round_, node = entry.round, entry.payload["node"]
        sub = self.ledger.submission(round_, node)
        self.health.chain(True)
        if not sub.exists or sub.appealed:
            self.journal.done(entry.key)
            return
        first, _, _ = self.ledger.vote_of(self.address, round_, node)
        won = sub.wins(self.params.quorum)  # the first committee's tally: `sub`'s own fields
        loses = (
            first == VoteSide.DISPUTED
            if won
            else first == VoteSide.AGREED and sub.dispute_seats > sub.agree_seats
        )
        if not loses:
            self.journal.done(entry.key)
            return
        if not self.params.appeal_open(round_, self.current_round()):
            self._give_up(entry, "the appeal window closed before our appeal could go")
            return
        try:
            result = self.ledger.appeal_vote(round_, node)
        except AlreadyAppealed:  # the producer, another voter or our earlier attempt
            result = None
        appealed = self.ledger.submission(round_, node)
        if appealed.appealed:  # its committee's beacon stored if no appellate vote does
            self.journal.enqueue(
                f"draw:{round_}:{node}:appeal",
                OutboxKind.DRAW,
                round_,
                {"node": node, "block": appealed.appeal_block + 1, "appeal": True},
            )
            # settled by us once final, and the votes that lost against the appeal's verdict
            # judged (the bait set's disputes): its producer would not do it
            self.journal.enqueue(
                f"settle:{round_}:{node}", OutboxKind.SETTLE, round_, {"node": node}
            )
        side = "disputed it, and it was credited" if won else "agreed, and it was disputed"
        self.events.emit(
            Event.ROUND_APPEALED,
            f"round {round_}: we {side} ({sub.agree_seats} agreeing seats, {sub.dispute_seats} "
            f"disputing): {node[:10]}…'s verdict appealed to a larger committee",
            logging.WARNING,
            round=round_,
            node=node,
            appealed=result is not None,
            tx_hash=result.tx_hash if result else None,
        )
        self.journal.done(entry.key, result.tx_hash if result else None)

    def _recheck(self, round_: int) -> tuple[bool, str]:
        """Runs the checkers' verification on our own batch of `round_`, as pinned: whether
        it agrees with our claim (score within the ledger's tolerance, the signal exactly),
        and in words what it found."""
        record = self.journal.round(round_)
        if record is None or record.batch is None:
            return False, "found no batch of ours for the round in the journal"
        batch = decode_batch(record.batch, self.limits)
        seed = task_seed(self.services.chain_id, self.ledger.address, round_, self.address)
        check = verify_batch(batch, self.catalog, seed)
        if not check.valid:
            return False, f"finds the batch invalid ({check.reason})"
        if not check.agrees:
            return False, (
                f"gives score {check.recomputed} and signal {check.recomputed_signal} where we "
                f"claimed {check.claimed} and {check.claimed_signal}"
            )
        return True, "agrees with our claim"

    def _open(self, entry: OutboxEntry) -> None:
        """Pins the checkpoints our submission's beacon opened, once the beacon is known; then
        the round's other snapshots go. (Waits silently for the beacon: one block.)"""
        round_ = entry.round
        if not self.params.attest_open(round_, self.current_round()):
            self.journal.dropped(entry.key, "the challenge window closed before the beacon")
            self.snapshots.drop(round_)
            return
        beacon = self.ledger.beacon(round_, self.address)
        self.health.chain(True)
        if not beacon.ready:
            return
        if not beacon.drawn:  # stored by its first vote, else by us before it can lapse
            self.journal.enqueue(
                f"draw:{round_}:{self.address}",
                OutboxKind.DRAW,
                round_,
                {"node": self.address, "block": beacon.block},
            )
        record = self.journal.round(round_)
        if record is None or record.batch is None:
            self.journal.dropped(entry.key, "no batch recorded for the round")
            return
        batch = decode_batch(record.batch, self.limits)
        ks = opened(beacon.beacon, batch)
        # local rounds with no GRPO step between them share a checkpoint: pinned once, named by
        # its first opened local round
        checkpoints = {batch.local_rounds[k].weights: k for k in reversed(ks)}
        with timed(self.journal, Span.PIN):
            for ident, k in checkpoints.items():
                data = self.snapshots.read(round_, ident)
                if data is None:
                    reason = f"the snapshot of local round {k} ({ident[:12]}…) is gone"
                    self.journal.dropped(entry.key, reason)
                    self.events.emit(
                        Event.SUBMIT_DROPPED,
                        f"round {round_}: cannot open local round {k}: {reason}; checkers will "
                        "find it unavailable",
                        logging.WARNING,
                        round=round_,
                        reason=reason,
                    )
                    return
                put_weights(self.store, data, round_)
        self.health.store(True)
        self.journal.done(entry.key)
        self.snapshots.drop(round_)
        self.events.emit(
            Event.WEIGHTS_OPENED,
            f"round {round_}: opened local round(s) {ks} (their checkpoints pinned for the "
            "checkers)",
            round=round_,
            opened=ks,
            weights=[batch.local_rounds[k].weights for k in ks],
        )

    def _give_up(self, entry: OutboxEntry, reason: str) -> None:
        self.journal.dropped(entry.key, reason)
        if entry.kind == OutboxKind.SUBMIT:
            self.journal.end(entry.round, RoundPhase.MISSED, reason)
        kind = Event.SUBMIT_DROPPED if entry.kind != OutboxKind.ATTEST else Event.ATTEST_DROPPED
        self.events.emit(
            kind,
            f"round {entry.round}: {entry.kind} dropped: {reason}",
            logging.WARNING,
            round=entry.round,
            reason=reason,
        )

    def keep_metadata(self) -> None:
        """Once a chain round: writes our metadata on chain when what peers need to reach our
        IPFS node changed. A daemon that cannot be asked leaves the metadata as it is (its
        addresses may still be right); a chain error retries next round."""
        current = self.current_round()
        if current == self._metadata_round or not isinstance(self.store, IpfsStore):
            return
        self._metadata_round = current
        try:
            peer = self.store.peer()
        except StoreError:
            return
        wanted = self.metadata(peer)
        try:
            if self.ledger.node_info(self.address).metadata == wanted:
                return
            result = self.ledger.set_metadata(wanted)
        except ChainError as exc:
            log.warning("could not update the node's metadata: %s", exc)
            return
        self.events.emit(
            Event.METADATA_SET,
            f"metadata updated on chain (IPFS addresses changed) in {result.tx_hash}",
            metadata=wanted,
            tx_hash=result.tx_hash,
        )

    def retain(self) -> None:
        """Unpins what is older than `[store].retain_rounds` (peers had their windows to fetch
        it: open_node checks retain_rounds against them) and old time spans."""
        current = self.current_round()
        try:
            dropped = self.store.gc(current, self.store_cfg.retain_rounds)
        except StoreError as exc:
            self.health.store(False, str(exc))
            return
        if dropped:
            self.events.emit(
                Event.STORE_UNPINNED,
                f"unpinned {len(dropped)} batch(es) older than round "
                f"{current - self.store_cfg.retain_rounds}",
                round=current,
                cids=dropped,
            )
        # snapshots of rounds whose window closed (an opened or dropped round's went already)
        self.snapshots.drop_before(
            current - self.params.submit_rounds - self.params.challenge_rounds
        )
        with contextlib.suppress(Exception):  # bookkeeping only
            keep_s = max(self.store_cfg.retain_rounds, 100) * self.params.round_length
            self.journal.prune_spans(self.services.clock.now() - keep_s)

    def drain(self, seconds: float, stop_waiting: threading.Event) -> int:
        """Sends the outbox until nothing that can go now is left, the chain or store is down,
        or `seconds` pass; returns how many such entries are left (kept for the next start, like
        the entries that wait for a later round or block: settlements, appeals and beacon draws)."""
        import time

        deadline = time.monotonic() + seconds
        self.flush()
        while self.sendable() and self.health.chain_ok and self.health.store_ok:
            if time.monotonic() > deadline or stop_waiting.wait(0.5):
                break
            self.flush()
        return len(self.sendable())

    def sendable(self) -> list[OutboxEntry]:
        """Pending entries that could go now (`_due`)."""
        return self._due(self.journal.pending())

    def _due(self, entries: list[OutboxEntry]) -> list[OutboxEntry]:
        """The entries whose time has come: a SETTLE once its round is final, an APPEAL once the
        first committee's window has closed, a DRAW once
        DRAW_AFTER_BLOCKS blocks have passed its beacon block (the chain's head read once, and
        only when a DRAW waits; none is due while the chain does not answer), any other at once.
        The waiting ones cost nothing each second they wait."""
        current, head, due = self.current_round(), None, []
        for entry in entries:
            if entry.kind == OutboxKind.SETTLE and not self.params.is_final(entry.round, current):
                continue
            if entry.kind == OutboxKind.APPEAL and current <= self.params.close(entry.round):
                continue
            if entry.kind == OutboxKind.DRAW:
                if head is None:
                    try:
                        head = self.ledger.head()
                    except ChainError:
                        head = -1
                if head < entry.payload["block"] + DRAW_AFTER_BLOCKS:
                    continue
            due.append(entry)
        return due
