"""What every stage of a node shares: its identity, journal, event log, clock, the chain and its
health. Stages take one `Services`, their own parts (a store, a catalog) and their own sections
of the config, and talk to each other through the journal and events, not through each other's
attributes. The builder (client.node.assemble) makes one of each."""

from __future__ import annotations

from dataclasses import dataclass

from client.chain import Ledger, LedgerParams
from client.node.clock import Clock
from client.node.eventlog import EventLog
from client.node.health import Health
from client.node.journal import Journal


@dataclass(frozen=True)
class Services:
    ledger: Ledger  # signing as the node
    params: LedgerParams
    chain_id: int
    journal: Journal
    events: EventLog
    health: Health
    clock: Clock

    @property
    def address(self) -> str:
        return self.ledger.account_address

    def current_round(self) -> int:
        """The chain round now, on the node's clock (the ledger's formula)."""
        return self.params.round_at(self.clock.now())


class Stage:
    """A stage of the node, with the shared services under their short names."""

    def __init__(self, services: Services):
        self.services = services
        self.journal, self.events = services.journal, services.events
        self.ledger, self.params, self.health = services.ledger, services.params, services.health

    def current_round(self) -> int:
        return self.services.current_round()
