"""Discovery: the peers' submissions, agreements and appeals read from the ledger's events since
the journal's cursor (a restart goes on from there, not from the deployment block), journaled
with the new cursor in one transaction."""

from __future__ import annotations

from client.chain.events import EventReader
from client.chain.ledger_events import Appealed, Attested, Submitted
from client.node.journal import Journal


def discover(reader: EventReader, journal: Journal, me: str) -> None:
    """Journals what happened on the ledger since the saved cursor, up to the head: the peers'
    submissions (not `me`'s) and their blocks (a local draw's stake snapshot), who agreed with
    which batch (they fetched it, so they can give it), and which peers' batches were appealed
    (drawing a new committee)."""
    cursor = journal.peers.event_cursor()
    start = reader.start_block if cursor is None else cursor
    head = reader.head()
    if head < start:
        return
    subs, attesters, appeals, blocks = [], [], [], {}
    for e in reader.events(Submitted, Attested, Appealed, from_block=start, to_block=head):
        match e:
            case Attested(agrees=True):
                attesters.append((e.round, e.node, e.attester))
            case Appealed() if e.node != me:
                appeals.append((e.round, e.node, e.beacon_block - 1))
            case Submitted() if e.node != me:
                subs.append(e.claim())
                blocks[(e.round, e.node)] = e.block_number
    journal.peers.discovered(subs, head + 1, attesters, appeals, blocks)
