"""What every outbox handler shares: the node's services, its address, the ledger's events, and
how an entry that can never go is dropped."""

from __future__ import annotations

import logging

from client.chain.events import EventReader
from client.node.eventlog import Event
from client.node.journal import OutboxEntry
from client.node.journal.states import OutboxKind, RoundPhase
from client.node.services import Services, Stage


class Handler(Stage):
    """A part of the publisher that sends some kinds of outbox message (one method a kind)."""

    def __init__(self, services: Services, reader: EventReader):
        super().__init__(services)
        self.address = services.address
        self.reader = reader  # who voted on a batch, what a settlement paid

    def give_up(self, entry: OutboxEntry, reason: str) -> None:
        """Drops an entry that can never go (a window closed, the chain refused it) and tells the
        operator; a dropped submission leaves its round missed."""
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
