"""The publisher: the stage that sends what the outbox holds, beside the compute stage.

Its own thread sends the pending messages, oldest first, each to the one handler of its type:
our batch's pin, then its submission (a digest nobody can fetch earns nothing; on the ledger,
or signed to the root lane's aggregator when `[root_lane]` names one:
client.node.publishing.rootlane), then its openings, one at a time; every other message (votes,
beacon draws, settlements, appeals) at once with the others due now (one nonce sequence, receipts
awaited together: about one block for all).
What cannot go yet waits (an outage); what can never go (a window closed, the chain refused it)
is dropped with its reason. Settlements wait for the round to be final, appeals for the first
committee's window to close, beacon draws for DRAW_AFTER_BLOCKS after their block, the check
that the root lane's submission root lists our batch for that root's round: waiting costs nothing
a second.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from client.chain import ChainError
from client.chain.errors import LedgerRevert
from client.chain.events import EventReader
from client.config.models import SapoSection, StoreSection
from client.node.eventlog import Span, timed
from client.node.journal import OutboxEntry
from client.node.journal.outbox import (
    Appeal,
    Attest,
    Audit,
    Challenge,
    Draw,
    Escalate,
    Listed,
    Message,
    Open,
    OutboxStatus,
    Pin,
    Relay,
    RootVote,
    Settle,
    Submit,
    Unavailable,
    VoteAppeal,
)
from client.node.proving import Snapshots
from client.node.publishing.appeals import Appeals
from client.node.publishing.handler import Handler
from client.node.publishing.ours import OwnBatch
from client.node.publishing.relay import VoteRelay
from client.node.publishing.rootlane import RootLane, RootVoting
from client.node.publishing.sealing import Sealer
from client.node.publishing.settlement import Settlement
from client.node.publishing.upkeep import Upkeep
from client.node.publishing.votes import DRAW_AFTER_BLOCKS, Votes
from client.node.services import Services, Stage
from client.store import BlockStore, Sampling, StoreError
from client.store.batch import BatchLimits
from client.tasks import Catalog

log = logging.getLogger(__name__)
MAX_CONCURRENT_TX = 8  # transactions in flight at once (each waits for its own receipt)


class Sent(enum.Enum):
    """How one attempt at a message ended, for the messages after it."""

    OK = "ok"  # sent, waiting, or dropped: the next may go
    CHAIN_DOWN = "chain down"  # nothing more goes to the chain this pass
    STORE_DOWN = "store down"  # nothing more goes to the store this pass


class Publisher(Stage):
    """Seals chain rounds' batches (on the compute thread) and sends the outbox (its own)."""

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
        root: RootLane | None = None,
    ):
        """`metadata(peer)`: the metadata the node registers with, given what its IPFS daemon
        says of itself (client.node.metadata); `root`: the root lane, where our votes on its
        batches go, and our submissions with `[root_lane].submit` (None: no
        round book is configured: the ledger only)."""
        super().__init__(services)
        self.store = store
        self.wake = threading.Event()
        limits = BatchLimits(max_bytes=store_cfg.max_batch_bytes)
        reader = reader or EventReader(services.ledger)
        self.sealer = Sealer(
            services, catalog, model, sampling, sapo=sapo, limits=limits, wake=self.wake
        )
        self.upkeep = Upkeep(services, store, snapshots, store_cfg, metadata)
        self.root = root
        producing = root if root is not None and root.submit else None
        ours = OwnBatch(services, reader, store, snapshots, limits, producing)
        votes = Votes(services, reader)
        appeals = Appeals(services, reader, catalog, limits)
        self.handlers: dict[type[Message], Callable[[OutboxEntry], None]] = {
            Pin: ours.pin,
            Submit: ours.submit,
            Open: ours.open,
            Listed: ours.listed,
            Audit: ours.audit,
            Challenge: ours.claim_challenge,
            Attest: votes.vote,
            Unavailable: votes.vote,
            Draw: votes.draw,
            Settle: Settlement(services, reader).settle,
            Appeal: appeals.appeal,
            VoteAppeal: appeals.vote_appeal,
        }
        if root is not None:  # our votes on the root lane's batches
            voting = RootVoting(services, reader, root, votes)
            self.handlers[RootVote] = voting.root_vote
            self.handlers[Escalate] = voting.escalate
            if root.pubsub is not None:  # and relayed to their producers
                self.handlers[Relay] = VoteRelay(root, root.pubsub).send
        self._dropper = Handler(services, reader)

    # compute's side
    def room(self, round_: int, part_bytes: int) -> bool:
        return self.sealer.room(round_, part_bytes)

    def seal(self, round_: int) -> bool:
        return self.sealer.seal(round_)

    # ---------------------------------------------------------------------- the I/O thread

    def run(self, stop: threading.Event) -> None:
        """Sends the outbox whenever something is queued (or every second) until `stop`."""
        while not stop.is_set():
            self.flush()
            self.upkeep.retain()
            self.upkeep.keep_metadata()
            self.wake.wait(1.0)
            self.wake.clear()

    def flush(self) -> None:
        """Sends what the outbox holds, oldest first; what cannot go yet stays pending."""
        chain_down = store_down = False
        together = []
        for entry in self.journal.pending():
            match entry.message:
                case Pin() if not store_down:
                    store_down = self.send(entry) is Sent.STORE_DOWN
                case Submit() if not chain_down:
                    pin = self.journal.outbox(Pin(round=entry.round).key)
                    if pin is not None and pin.status == OutboxStatus.PENDING:
                        if not self.params.submit_open(entry.round, self.current_round()):
                            self._dropper.give_up(
                                entry, "the batch could not be pinned before its window closed"
                            )
                        continue  # a digest nobody can fetch earns nothing: pin first
                    with timed(self.journal, Span.SUBMIT):
                        chain_down = self.send(entry) is Sent.CHAIN_DOWN
                case Open() if not chain_down and not store_down:
                    sent = self.send(entry)
                    chain_down, store_down = sent is Sent.CHAIN_DOWN, sent is Sent.STORE_DOWN
                case Pin() | Submit() | Open():
                    pass  # its part is down: next pass
                case _:
                    together.append(entry)
        together = self.due(together) if not chain_down else []
        if together:
            with (
                timed(self.journal, Span.ATTEST),
                ThreadPoolExecutor(
                    min(len(together), MAX_CONCURRENT_TX), thread_name_prefix="attest"
                ) as pool,
            ):
                list(pool.map(self.send, together))

    def send(self, entry: OutboxEntry) -> Sent:
        """Hands one message to its handler. The chain or store not answering leaves it pending
        (its attempt counted); the chain refusing it (a window closed, stake too low) drops it."""
        handler = self.handlers.get(type(entry.message))
        if handler is None:  # queued under a config that sent it (a root lane, a relay)
            why = f"this node's config no longer sends {entry.message.KIND} messages"
            self.journal.dropped(entry.key, why)
            log.warning("outbox entry %s dropped: %s", entry.key, why)
            return Sent.OK
        try:
            handler(entry)
        except LedgerRevert as exc:  # the chain answered: this message cannot go
            self._dropper.give_up(entry, str(exc))
        except ChainError as exc:  # RpcUnavailable, TransactionTimeout, ...
            self.journal.attempted(entry.key, str(exc))
            self.health.chain(False, str(exc))
            return Sent.CHAIN_DOWN
        except StoreError as exc:
            self.journal.attempted(entry.key, str(exc))
            self.health.store(False, str(exc))
            return Sent.STORE_DOWN
        return Sent.OK

    def drain(self, seconds: float, stop_waiting: threading.Event) -> int:
        """Sends the outbox until nothing that can go now is left, the chain or store is down,
        or `seconds` pass; returns how many such entries are left (kept for the next start, like
        the entries that wait for a later round or block: settlements, appeals and draws)."""
        deadline = time.monotonic() + seconds
        self.flush()
        while self.sendable() and self.health.chain_ok and self.health.store_ok:
            if time.monotonic() > deadline or stop_waiting.wait(0.5):
                break
            self.flush()
        return len(self.sendable())

    def sendable(self) -> list[OutboxEntry]:
        """Pending entries that could go now (`due`)."""
        return self.due(self.journal.pending())

    def due(self, entries: list[OutboxEntry]) -> list[OutboxEntry]:
        """The entries whose time has come: a `Settle` once its round is final, an appeal once
        the first committee's window has closed, a `Challenge`'s claim once its answer window
        has, a second `Relay` in the verdict round, a `Draw` once DRAW_AFTER_BLOCKS blocks have
        passed its beacon block (the chain's
        head read once, and only when a draw waits; none is due while the chain does not
        answer), any other at once."""
        current, head, due = self.current_round(), None, []
        for entry in entries:
            match entry.message:
                case Settle() if not self.params.is_final(entry.round, current):
                    continue
                case Appeal() | VoteAppeal() if current <= self.params.close(entry.round):
                    continue
                case Listed() if self.root and current < self.root.windows.post_round(entry.round):
                    continue
                case Audit() if self.root and current < self.root.windows.verdict_round(
                    entry.round
                ):
                    continue
                case Challenge(answer_by=answer_by) if current <= answer_by:
                    continue
                case Relay(again=True) if self.root and current < self.root.windows.verdict_round(
                    entry.round
                ):
                    continue
                case Draw(block=block):
                    if head is None:
                        try:
                            head = self.ledger.head()
                        except ChainError:
                            head = -1
                    if head < block + DRAW_AFTER_BLOCKS:
                        continue
            due.append(entry)
        return due
