"""Discovery: the peers' submissions and appeals read from the ledger's events since the
journal's cursor (a restart goes on from there, not from the deployment block; a first start
from the first block of the oldest round the node keeps, not from the deployment block either),
journaled with the new cursor in one transaction. The swarm's votes are not read here: who
agreed with a batch is read per batch fetched (fetching.Fetcher.sources), when its producer does
not give it."""

from __future__ import annotations

from collections.abc import Callable

from client.chain import Ledger, LedgerParams
from client.chain.events import EventReader
from client.chain.ledger_events import Appealed, Escalated, Submitted
from client.node.journal import Journal


def window_start(
    ledger: Ledger, params: LedgerParams, current: int, retain_rounds: int, start_block: int
) -> int:
    """The block a first start's discovery begins at: the first block of the oldest round whose
    peers' batches a node keeps in `current` (LedgerParams.first_kept), found by bisecting block
    timestamps, and never before `start_block`; so a node that joins an old swarm reads a window
    of it, not its whole history."""
    first = params.first_kept(current, retain_rounds)
    if first <= 0:
        return start_block
    return ledger.block_at(params.round_start(first), start_block)


def discover(
    reader: EventReader,
    journal: Journal,
    me: str,
    first_block: Callable[[], int] | None = None,
) -> list[tuple[int, str]]:
    """Journals what happened on the ledger since the saved cursor, up to the head: the peers'
    submissions (not `me`'s) and their blocks (a local draw's stake snapshot: an escalated
    batch's is its root's, read from the ledger's record), and which peers'
    batches were appealed (drawing a new committee). A journal without a cursor starts at
    `first_block()` (asked only then), else at the reader's start block. Returns the (round,
    node) of the submissions found (a root lane's batch escalated to the ledger among them)."""
    cursor = journal.peers.event_cursor()
    if cursor is not None:
        start = cursor
    else:
        start = (
            reader.start_block if first_block is None else max(reader.start_block, first_block())
        )
    head = reader.head()
    if head < start:
        return []
    subs, appeals, blocks, escalated = [], [], {}, []
    for e in reader.events(Submitted, Appealed, Escalated, from_block=start, to_block=head):
        match e:
            case Appealed() if e.node != me:
                appeals.append((e.round, e.node, e.beacon_block - 1))
            case Submitted() if e.node != me:
                subs.append(e.claim())
                blocks[(e.round, e.node)] = e.block_number
            case Escalated() if e.node != me:
                escalated.append((e.round, e.node))
    # an escalated root lane batch keeps the root's committee: its stake snapshot is the root's
    # block, which the ledger's record holds (its Submitted event comes later); drawn from the
    # event's block, a seated checker could find no seat and never vote. One read an
    # escalation (each costs its checker a transaction)
    snapshots = {
        key: reader.ledger.submission(*key).snapshot_block for key in escalated if key in blocks
    }
    journal.peers.discovered(subs, head + 1, appeals, blocks, snapshots)
    return list(blocks)
