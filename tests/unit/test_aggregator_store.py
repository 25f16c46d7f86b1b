"""The aggregator's store (client/node/aggregation/held.py) on a real SQLite file: messages come
back in the order they were taken, a request's messages are written all or none, folded
earnings come back as they were saved, and a file another deployment wrote (or a damaged one)
is refused with what to do, never taken as messages."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from client.chain.roots import Credit, Earnings, VerdictRoot
from client.node.aggregation.earnings import EarningsBook, Entry
from client.node.aggregation.held import Held, HeldError
from client.units import SCORE_SCALE
from tests.harness.signed import DOMAIN, KEYS, OTHER, ROUND, signed_submission, signed_vote


def test_messages_come_back_in_order_and_a_failed_write_keeps_none(tmp_path: Path) -> None:
    held = Held(tmp_path / "aggregator.db", DOMAIN)
    first = [signed_submission(KEYS[0]), signed_vote(KEYS[1], KEYS[0])]
    held.record(first)
    held.record([signed_submission(KEYS[2])])
    assert [m.signer for m in held.messages(ROUND)] == [
        KEYS[0].address,
        KEYS[1].address,
        KEYS[2].address,
    ]
    held._db.execute("PRAGMA query_only = ON")  # as a full disk: the write fails
    with pytest.raises(sqlite3.Error):
        held.record([signed_submission(KEYS[3]), signed_submission(KEYS[4])])
    held._db.execute("PRAGMA query_only = OFF")
    assert len(held.messages(ROUND)) == 3 and held.rounds() == [ROUND]
    held.forget_before(ROUND + 1)
    assert held.messages(ROUND) == [] and held.rounds() == []
    held.close()


def test_folded_earnings_come_back_as_saved(tmp_path: Path) -> None:
    held = Held(tmp_path / "aggregator.db", DOMAIN)
    assert held.load_earned(10**18, 5) is None  # nothing folded yet
    book = EarningsBook(10**18, 5, folded=ROUND - 1)
    credits = [
        Credit(i, k.address, "0x" + f"{i + 1:064x}", 4 * SCORE_SCALE, SCORE_SCALE + i, bytes(32))
        for i, k in enumerate(KEYS[:3])
    ]
    # the ledger's lane credited 2 units of the round too: each share is over both lanes
    book.fold(ROUND, VerdictRoot(credits), 2 * SCORE_SCALE)
    entry = book.entry(KEYS[1].address, ROUND)
    assert entry.ledger_total == 2 * SCORE_SCALE
    whole = sum(c.signal for c in credits) + 2 * SCORE_SCALE
    assert book.share(entry) == 10**18 * entry.amount // whole
    held.save_fold(book, list(book.places.values()), [])
    book.fold(ROUND + 1, None)
    held.save_fold(book, [], [])
    again = held.load_earned(10**18, 5)
    assert again is not None and again.folded == ROUND + 1
    assert again.places == book.places and again.totals == book.totals  # ledger totals too
    assert again.earnings(KEYS[1].address, ROUND + 5) == book.earnings(KEYS[1].address, ROUND + 5)
    assert again.earnings(KEYS[1].address, ROUND + 5) != Earnings()
    held.close()


def test_a_producer_keeps_its_credit_as_itself_and_it_proves_only_in_its_own_root() -> None:
    """What a node's journal keeps of its own credit (Entry.to_json) reads back as the same
    entry, and is taken as a credit of a round only where its leaf and proof reach that round's
    root, total and count: a stale or damaged row is left out, never folded."""
    earnings = Earnings(7 * SCORE_SCALE, ROUND - 6, 2, (1, 2**32 - 1, 0))
    credits = [
        Credit(i, k.address, "0x" + f"{i + 1:064x}", 4 * SCORE_SCALE, SCORE_SCALE + i, bytes(32))
        for i, k in enumerate(KEYS[:3])
    ]
    credits[1] = replace(credits[1], votes=b"\x05" * 32, earnings=earnings)
    verdicts = VerdictRoot(credits)
    book = EarningsBook(10**18, 5, folded=ROUND - 1)
    book.fold(ROUND, verdicts, 3 * SCORE_SCALE)
    entry = book.entry(KEYS[1].address, ROUND)
    assert entry is not None and entry.credit.earnings == earnings
    assert Entry.from_json(entry.to_json()) == entry
    root, total, count = verdicts.root, verdicts.total, len(credits)
    assert entry.proven_in(root, total, count)
    assert not entry.proven_in(b"\x01" * 32, total, count)  # another root
    assert not entry.proven_in(root, total + 1, count)
    assert not entry.proven_in(root, total, 1)  # its index past the root's credits
    other = VerdictRoot([credits[0], credits[2]])
    assert not entry.proven_in(other.root, other.total, 2)
    for broken in ("{", "[]", entry.to_json().replace('"votes": "', '"votes": "zz')):
        with pytest.raises(ValueError, match="not a kept credit entry"):
            Entry.from_json(broken)


def test_a_book_folded_from_a_later_round_knows_nothing_before_it() -> None:
    """`sapo audit book --earnings --since R` folds from R on: a credit anchored before R is not
    judged (a round it never folded would read as one that does not stand)."""
    book = EarningsBook(10**18, 5, folded=ROUND - 1, first=ROUND)
    book.fold(ROUND, None)
    assert book.known(ROUND) and not book.known(ROUND - 1)
    assert EarningsBook(10**18, 5, folded=ROUND).known(ROUND - 1)  # folded from round 0


def test_a_store_of_another_deployment_or_damaged_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "aggregator.db"
    held = Held(path, DOMAIN)
    held.record([signed_submission(KEYS[0])])
    held.close()
    with pytest.raises(HeldError, match="another deployment or damaged"):
        Held(path, OTHER).messages(ROUND)  # signed under another book's domain
    path.write_bytes(b"not a database" * 100)
    with pytest.raises(HeldError, match="cannot be opened"):
        Held(path, DOMAIN)
