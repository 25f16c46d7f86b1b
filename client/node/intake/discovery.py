"""Discovery: the peers' submissions and appeals read from the ledger's events since the
journal's cursor (a restart goes on from there, not from the deployment block), journaled with
the new cursor in one transaction. The swarm's votes are not read here: who agreed with a batch
is read per batch fetched (fetching.Fetcher.sources), when its producer does not give it."""

from __future__ import annotations

from client.chain.events import EventReader
from client.chain.ledger_events import Appealed, Submitted
from client.node.journal import Journal


def discover(reader: EventReader, journal: Journal, me: str) -> None:
    """Journals what happened on the ledger since the saved cursor, up to the head: the peers'
    submissions (not `me`'s) and their blocks (a local draw's stake snapshot), and which peers'
    batches were appealed (drawing a new committee)."""
    cursor = journal.peers.event_cursor()
    start = reader.start_block if cursor is None else cursor
    head = reader.head()
    if head < start:
        return
    subs, appeals, blocks = [], [], {}
    for e in reader.events(Submitted, Appealed, from_block=start, to_block=head):
        match e:
            case Appealed() if e.node != me:
                appeals.append((e.round, e.node, e.beacon_block - 1))
            case Submitted() if e.node != me:
                subs.append(e.claim())
                blocks[(e.round, e.node)] = e.block_number
    journal.peers.discovered(subs, head + 1, appeals, blocks)
