"""Our own batch on its way out: pinned, then submitted (a digest nobody can fetch earns
nothing), then, once its beacon is known, the checkpoints that beacon opened pinned too, so that
the drawn checkers can re-draw its completions (client.node.proving.opened: the weights of the
local rounds of its OPENED_GROUPS groups, kept as snapshots until then). A batch that can be
fetched but whose openings cannot is disputed (withheld) and slashed.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time

from client.chain.errors import LedgerRevert
from client.chain.events import EventReader
from client.node.eventlog import Event, Span, timed
from client.node.journal import OutboxEntry
from client.node.journal.outbox import (
    Appeal,
    Audit,
    Challenge,
    Draw,
    Listed,
    Open,
    OutboxStatus,
    Settle,
    Submit,
)
from client.node.journal.records import Kept
from client.node.journal.states import OutboxKind, RoundPhase
from client.node.proving import Snapshots, opened
from client.node.publishing.handler import Handler
from client.node.publishing.rootlane import NoAggregator, RootLane, Unposted, Unread
from client.node.services import Services
from client.store import BlockStore
from client.store.batch import BatchLimits, decode_batch
from client.store.weights import put_weights

# how the claim of a challenge that was answered says so (what `_answered_before` looks for)
ANSWERED = "answered:"
DAY_S = 86_400  # what [root_lane].max_challenges_per_day counts over
# the proofs of a lie in a credit's earnings (what a producer finds of its own: RootLane.audit)
EARNINGS_PROOFS = ("proveBadEarnings", "proveSkippedCredit")


class OwnBatch(Handler):
    """Sends `Pin`, `Submit` and `Open` for our batches."""

    def __init__(
        self,
        services: Services,
        reader: EventReader,
        store: BlockStore,
        snapshots: Snapshots,
        limits: BatchLimits,
        root: RootLane | None = None,
    ):
        """`root`: the root lane our submissions go to first (None: the ledger only)."""
        super().__init__(services, reader)
        self.store, self.snapshots, self.limits = store, snapshots, limits
        self.root = root
        # rounds whose uncredited batch waits for relayed votes: how many were kept at its audit
        self._relayed_seen: dict[int, int] = {}
        self._relayed_lock = threading.Lock()

    def pin(self, entry: OutboxEntry) -> None:
        """Pins the sealed batch (a StoreError leaves it pending: the store is down)."""
        record = self.journal.round(entry.round)
        if record is None or record.batch is None:
            self.journal.dropped(entry.key, "no batch recorded for the round")
            return
        with timed(self.journal, Span.PIN):
            cid = self.store.put(record.batch, entry.round)
        self.health.store(True)
        self.journal.done(entry.key)
        self.journal.advance(entry.round, RoundPhase.PINNED, cid=cid)
        self.events.emit(
            Event.ROUND_PINNED, f"round {entry.round}: pinned {cid}", round=entry.round, cid=cid
        )

    def submit(self, entry: OutboxEntry) -> None:
        """Submits the batch's digest and claim, unless it is on chain already (sent before a
        crash, or by an attempt that timed out) or its window closed."""
        message = entry.message
        assert isinstance(message, Submit)
        round_ = message.round
        on_chain = self.ledger.submission(round_, self.address)
        self.health.chain(True)
        if on_chain.rollouts:
            if on_chain.digest.lower() == message.digest.lower():
                self._submitted(entry, None)
            else:
                self.give_up(entry, f"another batch ({on_chain.digest}) is on chain")
            return
        current = self.current_round()
        held = self.root.kept(round_) if self.root is not None else None
        if held is not None:  # receipted before a crash: the receipt stands, whatever the clock
            self._submitted(entry, None, held)
            return
        if not self.params.submit_open(round_, current):
            self.give_up(entry, "the round's submission window closed before it could go")
            return
        if self.root is not None:
            kept = self.root.send(message)
            if isinstance(kept, Kept):
                self._submitted(entry, None, kept)
                return
            last = current >= round_ + self.params.submit_rounds
            if not last and not isinstance(kept, NoAggregator):  # the ledger's last round is left
                self.journal.attempted(entry.key, kept)
                self.events.emit(
                    Event.ROOT_LANE_UNSENT,
                    f"round {round_}: not receipted by the root lane ({kept}); sent again, and "
                    f"on the ledger in round {round_ + self.params.submit_rounds} if still not",
                    logging.WARNING,
                    round=round_,
                    reason=kept,
                )
                return
            self.events.emit(
                Event.ROOT_LANE_UNSENT,
                f"round {round_}: not receipted by the root lane ({kept}); submitted on the "
                "ledger instead"
                + ("" if isinstance(kept, NoAggregator) else ", in the window's last round"),
                logging.WARNING,
                round=round_,
                reason=kept,
            )
        result = self.ledger.submit(
            round_, message.digest, message.rollouts, message.score, message.signal
        )
        self._submitted(entry, result.tx_hash)

    def _submitted(self, entry: OutboxEntry, tx_hash: str | None, kept: Kept | None = None) -> None:
        """A submission on chain (or receipted by the root lane's aggregator: `kept`): its
        openings, settlement and a possible appeal are queued before it is marked done (a crash
        between the two queues them once more, as no-ops); a receipted one also gets the check
        of the root that must list it. A batch of the root lane that a checker escalates is a
        ledger submission from then on, settled and appealed as any."""
        round_ = entry.round
        queued = [Open(round=round_), Settle(round=round_), Appeal(round=round_)]
        for message in queued + ([Listed(round=round_), Audit(round=round_)] if kept else []):
            self.journal.enqueue(message)
        self.journal.done(entry.key, tx_hash)
        self.journal.advance(round_, RoundPhase.CONFIRMED, tx_hash=tx_hash)
        record = self.journal.round(round_)
        if kept is not None:
            how = f" by the root lane's aggregator {kept.aggregator} (receipt kept)"
        else:
            how = f" in {tx_hash}" if tx_hash else " (found on chain)"
        self.events.emit(
            Event.ROUND_SUBMITTED,
            f"round {round_}: submission confirmed{how}",
            round=round_,
            digest=record.digest if record else None,
            cid=record.cid if record else None,
            local_rounds=record.local_rounds if record else None,
            tx_hash=tx_hash,
            lane="root" if kept is not None else "ledger",
        )

    def open(self, entry: OutboxEntry) -> None:
        """Pins the checkpoints our submission's beacon opened, once the beacon is known; then
        the round's other snapshots go. (Waits silently for the beacon: one block.) The beacon
        is queued for storing (`Draw`) in case no vote stores it."""
        round_ = entry.round
        if self.root is not None and self.root.kept(round_) is not None:
            listed = self.journal.outbox(Listed(round=round_).key)
            if listed is not None and listed.status == OutboxStatus.PENDING and not listed.attempts:
                return  # opened once the posted root was checked (or its list could not be read)
            drawn = self.root.beacon(round_)  # the book's: an escalation keeps it
            self.health.chain(True)
            if isinstance(drawn, str):
                self.journal.dropped(entry.key, drawn)
                self.snapshots.drop(round_)
                return
            if drawn is None:
                return
            value = drawn
        else:
            if not self.params.attest_open(round_, self.current_round()):
                self.journal.dropped(entry.key, "the challenge window closed before the beacon")
                self.snapshots.drop(round_)
                return
            beacon = self.ledger.beacon(round_, self.address)
            self.health.chain(True)
            if not beacon.ready:
                return
            if not beacon.drawn:  # stored by its first vote, else by us before it can lapse
                self.journal.enqueue(Draw(round=round_, node=self.address, block=beacon.block))
            value = beacon.beacon
        record = self.journal.round(round_)
        if record is None or record.batch is None:
            self.journal.dropped(entry.key, "no batch recorded for the round")
            return
        batch = decode_batch(record.batch, self.limits)
        ks = opened(value, batch)
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

    def listed(self, entry: OutboxEntry) -> None:
        """Once the round's submission root is posted: checks that its list holds our receipted
        submission, and proves on chain what it finds otherwise (the aggregator's bond, half of
        it to us). Waits while the list cannot be read, until the round's lies can no longer be
        proven."""
        round_ = entry.round
        kept = self.root.kept(round_) if self.root is not None else None
        if self.root is None or kept is None:
            self.journal.dropped(entry.key, "no receipt of the root lane is kept for the round")
            return
        posted = self.root.posted(round_)
        self.health.chain(True)
        if posted is None:
            return
        if isinstance(posted, Unposted):
            self._unposted(entry, kept, posted)
            return
        if isinstance(posted, str):
            self._unbound(entry, posted)
            return
        if posted.submissions_voided:  # proven already, by someone else
            self._unbound(entry, f"round {round_}'s submission root was voided")
            return
        finding = self.root.check_listed(posted, kept)
        if finding is None:
            self.journal.done(entry.key)
            return
        if isinstance(finding, Unread):  # the list cannot be read (yet)
            self._unread(entry, posted, finding)
            return
        if finding.challenge:
            self._bad_list(
                entry, posted, finding.args, f"its list is not its root's data ({finding.what})"
            )
            return
        self._proven(entry, posted, finding)

    def audit(self, entry: OutboxEntry) -> None:
        """Once the round's verdict root is posted: checks it (RootLane.audit: our credit, a
        random sample of the others, the order of all) and proves on chain the lie it finds;
        says so when it does not credit our batch. Waits while its lists cannot be read, until
        the round's lies can no longer be proven."""
        round_ = entry.round
        if self.root is None or self.root.kept(round_) is None:
            self.journal.dropped(entry.key, "no receipt of the root lane is kept for the round")
            return
        with self._relayed_lock:  # (audits of two rounds run in parallel passes)
            seen = self._relayed_seen.get(round_)
        if (
            seen is not None
            and len(self.journal.relayed_votes(round_)) == seen
            and self.current_round() <= self.root.windows.challenge_end(round_)
        ):
            return  # uncredited, and no relayed vote more since its last audit
        posted = self.root.book.round_of(round_)
        self.health.chain(True)
        current, windows = self.current_round(), self.root.windows
        if posted.void:
            self.journal.done(entry.key)  # proven already: nothing of it stands
            return
        if not posted.verdicts_posted:
            if current > windows.verdict_round(round_):
                self._unbound(
                    entry,
                    "no verdict root was posted: the round is void once its "
                    "aggregator's bond is asked back",
                )
            return
        finding, votes = self.root.audit(posted)
        credited = votes is not None
        if isinstance(finding, Unread):
            self._unread(entry, posted, finding)
            return
        if finding is not None and not finding.challenge:
            try:
                self._proven(entry, posted, finding)
                return
            except LedgerRevert as exc:
                if finding.function not in EARNINGS_PROOFS:
                    raise
                # what our own credits alone judged of our earnings, the book judges otherwise:
                # said, and the audit goes on
                self.events.emit(
                    Event.ROOT_LANE_UNSENT,
                    f"round {round_}: our check of our own earnings found {finding.what!r}, "
                    f"but the book refused the proof ({exc}); the audit goes on",
                    logging.WARNING,
                    round=round_,
                    reason="earnings proof refused",
                )
                finding = None
        if finding is not None:  # a data challenge (it costs a bond)
            self._bad_list(
                entry,
                posted,
                finding.args,
                f"its verdict list is not its root's data ({finding.what})",
            )
            return
        if not credited and self._waiting_for_relays(entry, round_):
            return
        with self._relayed_lock:
            self._relayed_seen.pop(round_, None)
        record = self.journal.round(round_)
        claimed = record.signal if record is not None and record.signal is not None else 0
        self.journal.keep_book_credit(round_, claimed, votes)  # what the TUI shows of it
        self.journal.done(entry.key)
        if not credited:
            self.events.emit(
                Event.ROOT_LANE_UNSENT,
                f"round {round_}: the verdict root does not credit our batch (fewer than a "
                "quorum of its checkers agreed off chain, or an escalation took it to the "
                "ledger)",
                logging.WARNING,
                round=round_,
                reason="not credited",
            )

    def _waiting_for_relays(self, entry: OutboxEntry, round_: int) -> bool:
        """Whether the audit of our uncredited batch stays open for our checkers' relayed votes
        ([root_lane].relay_votes): fewer than a quorum of them kept yet, and the round's lies
        still provable. It runs again once one more is kept (a quorum the root dropped is then
        proven)."""
        assert self.root is not None
        if self.root.pubsub is None:
            return False
        end = self.root.windows.challenge_end(round_)
        kept = len(self.journal.relayed_votes(round_))
        if kept >= self.params.quorum or self.current_round() > end:
            return False
        current, windows = self.current_round(), self.root.windows
        with self._relayed_lock:
            for q in [q for q in self._relayed_seen if windows.challenge_end(q) < current]:
                del self._relayed_seen[q]  # (rounds whose audit ended another way)
            self._relayed_seen[round_] = kept
        self.journal.attempted(
            entry.key,
            f"not credited; {kept} of its checkers' votes relayed so far: the audit waits for a "
            f"quorum of them until round {end}",
        )
        return True

    def _unread(self, entry: OutboxEntry, posted, unread: Unread) -> None:
        """A list of our round cannot be read: again next pass, until its window closed. In the
        last rounds of the window it is challenged (with [root_lane].challenge_lists: `challenge`),
        or the challenge is named to the operator in the entry's error; the entry stays pending
        either way, so that a list that comes late is still checked. Nothing is challenged while
        it is our own store that does not answer."""
        assert self.root is not None
        round_ = entry.round
        if unread.store_down:
            self.health.store(False, unread.why)
            self.journal.attempted(entry.key, unread.why)
            return
        if self.current_round() > self.root.windows.challenge_end(round_):
            self._unbound(entry, f"its {unread.name} was never readable: {unread}")
            return
        if not self.root.challenge_due(round_, unread.verdict_tree):
            self.journal.attempted(entry.key, str(unread))
            return
        said = self.challenge(
            posted, unread.verdict_tree, None, f"its {unread.name} cannot be read"
        )
        self.journal.attempted(entry.key, f"{unread}; {said}")

    def _bad_list(self, entry: OutboxEntry, posted, leaf: tuple, why: str) -> None:
        """A list that is not its root's data (it never changes: its digest is the post's): its
        leaf challenged (`challenge`), and our batch's check of the round ends."""
        _, verdict_tree, index = leaf
        self._unbound(entry, f"{why}; {self.challenge(posted, verdict_tree, index, why)}")

    def challenge(self, posted, verdict_tree: bool, index: int | None, why: str) -> str:
        """With [root_lane].challenge_lists, bonds a data challenge of leaf `index` of the
        round's submission or verdict list (None: a leaf drawn at random among those nobody
        challenged: an aggregator cannot shield its lists by challenging one leaf of them and
        answering itself), its claim queued first (Challenge: a restart between the two still
        claims it); returns what was done, or why not:
        - our challenge of the list is there already (sent before a restart, or by the round's
          other check): nothing more;
        - another's challenge of it is open: the root is void unless it is answered, and we
          look again next pass;
        - its aggregator answered a challenge of ours before (a withholding aggregator that
          answers when challenged collects the challengers' bonds): not challenged again by
          the node, the operator is told;
        - [root_lane].max_challenges_per_day bonded in the last 24 hours: the operator is told;
        - without challenge_lists, the command that sends one."""
        assert self.root is not None
        round_, aggregator = posted.round, posted.aggregator
        tree = "verdict" if verdict_tree else "submission"
        manual = f"`sapo audit book {round_} --prove --challenge` sends a challenge"
        if not self.root.challenge_lists:
            return f"{manual} (or set [root_lane].challenge_lists)"
        current = self.current_round()
        if posted.void or current > self.root.windows.challenge_end(round_):
            return "its challenge window closed, or the root is void already"
        if self._answered_before(aggregator):
            return (
                f"not challenged: {aggregator} answered a challenge of ours before, so that a "
                f"challenge may only pay it our bond; {manual}"
            )
        me = self.services.address.lower()
        with self.root.challenging:
            leaves = self.root.challenges(round_, verdict_tree)
            for i, c in leaves.items():
                if c.challenger.lower() == me:
                    self.journal.enqueue(self._claim(posted, verdict_tree, i))
                    return f"we challenged leaf {i} of its {tree} list"
            for i, c in leaves.items():
                if c.open(current):
                    return (
                        f"{c.challenger} challenged leaf {i} of its {tree} list: the root is "
                        f"void unless {aggregator} answers it by round {c.answer_by}"
                    )
            size = posted.credits if verdict_tree else posted.count
            if index is None:
                free = [i for i in range(size) if i not in leaves]
                if not free:
                    return f"every leaf of its {tree} list was challenged already"
                index = secrets.choice(free)
            elif index in leaves:
                return f"leaf {index} of its {tree} list was challenged already"
            cap = self.root.max_challenges_per_day
            if self.journal.created_since(OutboxKind.CHALLENGE, time.time() - DAY_S) >= cap:
                return (
                    f"not challenged: {cap} data challenges bonded in the last 24 hours "
                    f"([root_lane].max_challenges_per_day); {manual}"
                )
            self.journal.enqueue(self._claim(posted, verdict_tree, index))
            try:
                result = self.root.send_challenge(round_, verdict_tree, index)
            except LedgerRevert as exc:  # another challenged that leaf meanwhile; the window
                # closed before it was mined: its claim finds no challenge of ours, and drops
                return f"the book refused our challenge of leaf {index}: {exc}"
        self.events.emit(
            Event.ROOT_LANE_CHALLENGED,
            f"round {round_}: {why}; challenged leaf {index} of the {tree} list of {aggregator} "
            f"in {result.tx_hash} (our challenge bond; it must show the leaf on chain by the "
            "round after, or its root is void and half its bond ours)",
            logging.WARNING,
            round=round_,
            aggregator=aggregator,
            verdict_tree=verdict_tree,
            index=index,
            tx_hash=result.tx_hash,
        )
        return f"challenged leaf {index} of its {tree} list in {result.tx_hash}"

    def _claim(self, posted, verdict_tree: bool, index: int) -> Challenge:
        """The claim of our challenge of a leaf: due once its answer window has closed (a
        challenge is mined by the window's last round, so it is answered by the round after)."""
        assert self.root is not None
        answer_by = self.root.windows.challenge_end(posted.round) + 1
        return Challenge(
            round=posted.round,
            verdict_tree=verdict_tree,
            index=index,
            aggregator=posted.aggregator,
            answer_by=answer_by,
        )

    def _answered_before(self, aggregator: str) -> bool:
        """Whether `aggregator` answered a challenge of ours (its claim found it answered)."""
        return any(
            isinstance(e.message, Challenge)
            and e.message.aggregator.lower() == aggregator.lower()
            and e.status == OutboxStatus.DROPPED
            and (e.error or "").startswith(ANSWERED)
            for e in self.journal.outbox_entries(OutboxKind.CHALLENGE)
        )

    def claim_challenge(self, entry: OutboxEntry) -> None:
        """Once our data challenge's answer window closed: claims it (the root void, our bond
        back with half the aggregator's); or says that it was answered (our bond paid the
        answerer), claimed already (by us before a restart, or by anyone: the bond is paid to
        its challenger whoever calls), or never ours (the send did not go through)."""
        message = entry.message
        assert isinstance(message, Challenge)
        if self.root is None:
            self.journal.dropped(entry.key, "the node no longer reads the root lane's book")
            return
        round_ = message.round
        tree = "verdict" if message.verdict_tree else "submission"
        leaf = self.root.challenges(round_, message.verdict_tree).get(message.index)
        me = self.services.address.lower()
        if leaf is None or leaf.challenger.lower() != me:
            self.journal.dropped(
                entry.key, f"leaf {message.index} of its {tree} list holds no challenge of ours"
            )
            return
        if leaf.answered:
            reason = (
                f"{ANSWERED} {message.aggregator} showed leaf {message.index} of its {tree} "
                "list on chain (DataAnswered): our challenge bond paid it; the node does not "
                "challenge its lists again"
            )
            self.journal.dropped(entry.key, reason)
            self.events.emit(
                Event.ROOT_LANE_ANSWERED,
                f"round {round_}: {reason}",
                logging.WARNING,
                round=round_,
                aggregator=message.aggregator,
            )
            return
        posted = self.root.book.round_of(round_)
        if posted.void and posted.open_challenges == 0:
            self.journal.done(entry.key)  # claimed already: its bond went to its challenger
            return
        result = self.root.claim_unanswered(round_, message.verdict_tree, message.index)
        self.journal.done(entry.key, result.tx_hash)
        self.events.emit(
            Event.ROOT_LANE_PROVEN,
            f"round {round_}: {message.aggregator} did not answer our challenge of leaf "
            f"{message.index} of its {tree} list; claimed in {result.tx_hash}: the root is "
            "void, and our challenge bond came back with half its bond (unless a lie proven "
            "first took it)",
            logging.WARNING,
            round=round_,
            lie="data withheld",
            aggregator=message.aggregator,
            tx_hash=result.tx_hash,
        )

    def _proven(self, entry: OutboxEntry, posted, finding) -> None:
        assert self.root is not None
        result = self.root.prove(finding)
        self.journal.done(entry.key, result.tx_hash)
        self.events.emit(
            Event.ROOT_LANE_PROVEN,
            f"round {entry.round}: the root of {posted.aggregator} lied ({finding.what}); "
            f"proven in {result.tx_hash}, its bond forfeit",
            logging.WARNING,
            round=entry.round,
            lie=finding.what,
            aggregator=posted.aggregator,
            tx_hash=result.tx_hash,
        )

    def _unposted(self, entry: OutboxEntry, kept: Kept, reason: str) -> None:
        """The drawn aggregator receipted our batch and posted no root: proven, its roster bond
        forfeit (half of it ours); or, refused (proven by another first), the batch unbound."""
        assert self.root is not None
        try:
            result = self.root.prove_unposted(kept)
        except LedgerRevert as exc:
            self._unbound(entry, f"{reason} (not proven: {exc})")
            return
        self.journal.done(entry.key, result.tx_hash)
        self.events.emit(
            Event.ROOT_LANE_PROVEN,
            f"round {entry.round}: its drawn aggregator {kept.aggregator} receipted our batch "
            f"and posted no root; proven in {result.tx_hash}: its roster bond is forfeit (half "
            "of it ours), and it is off the roster",
            logging.WARNING,
            round=entry.round,
            lie="a receipted round left unposted",
            aggregator=kept.aggregator,
            tx_hash=result.tx_hash,
        )

    def _unbound(self, entry: OutboxEntry, reason: str) -> None:
        self.journal.dropped(entry.key, reason)
        self.events.emit(
            Event.ROOT_LANE_UNSENT,
            f"round {entry.round}: the root lane will not credit our batch: {reason}",
            logging.WARNING,
            round=entry.round,
            reason=reason,
        )
