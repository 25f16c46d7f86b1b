"""A posted round's submission list as a node reads it (the producer checking its batch is
listed, a checker reading its round's batches): the list's digest from the root's own event (one
log query in the root's block), the posting aggregator's IPFS daemon dialled first (it serves the
list before anyone else), then the list fetched and checked as `fetch_list` does."""

from __future__ import annotations

import logging

from client.chain.book import BookRound, Windows
from client.chain.events import EventReader
from client.chain.roots import open_submission_list
from client.chain.sumtree import SumTree
from client.node.aggregation.lists import ListUnavailable, fetch_list
from client.store import BlockStore, IpfsStore
from client.store.cid import digest_to_cid
from client.store.peers import peer_addresses

log = logging.getLogger("sapo.node.aggregation")


def list_digest(book_events: EventReader, posted: BookRound) -> bytes | None:
    """The digest of the submission list's index, as the root's post named it (None: no such
    event in the root's block)."""
    block = posted.posted_block
    for event in book_events.read(
        ["SubmissionsPosted"], from_block=block, to_block=block, round=posted.round
    ):
        return bytes.fromhex(event.args["list"][2:])
    return None


def verdict_digest(ledger, book_events: EventReader, windows: Windows, round_: int) -> bytes | None:
    """The digest of `round_`'s verdict list, from its VerdictsPosted event (posted in the
    round's verdict round: read from that round's first block on; None: no such event)."""
    start = ledger.block_at(
        ledger.params().round_start(windows.verdict_round(round_)), book_events.start_block
    )
    for event in book_events.read(["VerdictsPosted"], from_block=start, round=round_):
        return bytes.fromhex(event.args["list"][2:])
    return None


def dial(store: BlockStore, metadata: str, *, allow_private: bool) -> None:
    """Connects an IPFS store to a node's daemon at the addresses its metadata lists; what
    cannot be dialled is left to the store's peers."""
    if not isinstance(store, IpfsStore):
        return
    found = peer_addresses(metadata, allow_private=allow_private)
    if found.dialable:
        connected, failures = store.connect(list(found.dialable))
        if connected is None:
            log.info("could not dial an aggregator's daemon: %s", failures)


def fetch_posted_submissions(
    store: BlockStore,
    book_events: EventReader,
    posted: BookRound,
    metadata: str,
    *,
    allow_private: bool,
    keep_round: int,
) -> bytes:
    """The submission list of a posted root (`metadata`: its poster's); raises ListUnavailable
    saying why it could not be had."""
    digest = list_digest(book_events, posted)
    if digest is None:
        raise ListUnavailable(f"no SubmissionsPosted event of round {posted.round} at its block")
    dial(store, metadata, allow_private=allow_private)
    return fetch_list(
        store,
        digest_to_cid(digest),
        "submissions",
        posted.round,
        posted.count,
        keep_round=keep_round,
    )


def open_posted_submissions(
    store: BlockStore,
    book_events: EventReader,
    ledger,
    posted: BookRound,
    *,
    allow_private: bool,
    keep_round: int,
) -> tuple[list[bytes], SumTree]:
    """A posted round's submission list, fetched (its poster's daemon, from the metadata the
    ledger holds of it, dialled first) and checked against its root and count: its entries and
    their tree. Raises ListUnavailable (try again later) or BadList (not the root's data)."""
    data = fetch_posted_submissions(
        store,
        book_events,
        posted,
        ledger.node_info(posted.aggregator).metadata,
        allow_private=allow_private,
        keep_round=keep_round,
    )
    return open_submission_list(data, posted.submissions, posted.count)
