"""The node's parts on real things: the journal (SQLite), batch re-verification on a real tiny
policy and real verifiers, the task seed against the real contract, and wallet keystores."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from client.cli.main import app
from client.credit import FOREIGN_TASKS, SCORE_DIFFERS, SIGNAL_DIFFERS
from client.node.journal import Journal, LocalRoundRecord
from client.node.journal.outbox import Submit
from client.node.journal.peers import VoteBasis
from client.node.rollouts import make_batch, task_seed, verify_batch
from client.policy import load_policy
from client.store import Item, RolloutBatch, Sampling
from client.tasks import load_catalog
from tests.harness.batches import local_round
from tests.harness.policies import copied_seed_test

LEDGER = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
NODE = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"


# ------------------------------------------------------------------------------------ journal


def test_outbox_keys_are_idempotent_and_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    journal = Journal(path)
    first = Submit(round=3, digest="0xab", rollouts=8, score=5, signal=2)
    assert first.key == "submit:3"
    assert journal.enqueue(first)
    assert not journal.enqueue(first.model_copy(update={"digest": "0xcd"}))  # first one wins
    journal.attempted("submit:3", "connection refused")
    journal.close()
    again = Journal(path)
    [entry] = again.pending()
    assert entry.message == first and entry.attempts == 1
    assert entry.error == "connection refused"
    again.done("submit:3", "0xfeed")
    assert again.pending() == [] and again.outbox("submit:3").tx_hash == "0xfeed"


def test_a_round_collects_local_rounds_seals_once_and_only_moves_forward(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.sqlite")
    for k in range(3):
        journal.add_local_round(LocalRoundRecord(5, k, b"part%d" % k, 8, 100 * k, 1.0, 2.0))
    assert journal.collecting() == [5] and journal.open_batch(5) == (3, 15)
    assert journal.next_k(5) == 3 and journal.next_k(6) == 0
    journal.seal(5, b"batch-bytes", "0x01", 300, 24, 3, 150)
    journal.seal(5, b"other-bytes", "0x02", 7, 8, 1, 7)  # a sealed round is never sealed again
    assert [e.key for e in journal.pending()] == ["pin:5", "submit:5"]
    submit = journal.outbox("submit:5").message
    assert (submit.score, submit.signal, submit.rollouts) == (300, 150, 24)
    journal.advance(5, "confirmed", tx_hash="0xaa")
    journal.advance(5, "pinned", cid="bafy")  # later news of an earlier phase: cid kept only
    record = journal.round(5)
    assert (
        record.phase,
        record.batch,
        record.tx_hash,
        record.cid,
        record.local_rounds,
        record.signal,
    ) == ("confirmed", b"batch-bytes", "0xaa", "bafy", 3, 150)
    journal.end(6, "missed", "chain unreachable")
    journal.end(6, "missed", "something later")
    assert journal.round(6).reason == "chain unreachable"
    reader = Journal.read_only(tmp_path / "journal.sqlite")  # another process's view
    assert [r.round for r in reader.rounds()] == [5, 6] and reader.collecting() == []
    with pytest.raises(FileNotFoundError, match="has this node run here"):
        Journal.read_only(tmp_path / "nope.sqlite")


def test_an_escalated_batch_keeps_its_roots_snapshot_in_the_window_through_a_restart(
    tmp_path: Path,
) -> None:
    """An escalated root lane batch's committee is drawn from its root's block, not from the
    later block of its Submitted event: the window (and so the local draw of seats) reads the
    root's block, after a restart too, while the event scan goes on after the event's block."""
    from client.node.intake.window import Window
    from client.node.journal.peers import PeerSubmission

    def sub(node: str) -> PeerSubmission:
        return PeerSubmission(round=3, node=node, digest="0xd", rollouts=8, score=1, signal=1)

    journal = Journal(tmp_path / "journal.sqlite")
    journal.peers.discovered(
        [sub("0xforced"), sub("0xescalated")],
        next_block=41,
        blocks={(3, "0xforced"): 38, (3, "0xescalated"): 40},
        snapshots={(3, "0xescalated"): 19},  # its root's block, as the ledger's record keeps
    )
    window = Window(journal.peers)
    window.refresh(0)
    assert window.blocks == {(3, "0xforced"): 38, (3, "0xescalated"): 19}
    journal.close()
    again = Journal(tmp_path / "journal.sqlite")
    rows, cursor = again.peers.submissions_since(None, 0)
    assert sorted((s.node, block) for s, block in rows) == [("0xescalated", 19), ("0xforced", 38)]
    assert cursor == 40  # the scan's, from the events' blocks
    assert again.peers.submissions_since(cursor, 0) == ([], cursor)
    again.close()


def test_what_a_node_knows_of_its_peers_survives_a_restart(tmp_path: Path) -> None:
    """Where the event scan stopped and which peer items were trained on are kept: a restart
    neither rescans the chain from its deployment nor trains on an item twice."""
    from client.node.journal.peers import PeerSubmission
    from client.node.journal.states import Verdict
    from client.node.training import PeerPool

    journal = Journal(tmp_path / "journal.sqlite")
    journal.peers.discovered(
        [
            PeerSubmission(
                round=4, node="0xpeer", digest="0xd1", rollouts=8, score=4_000, signal=2_000
            )
        ],
        next_block=77,
    )
    items = [{"question": "q", "completions": ["a", "b"], "rewards": [1.0, 0.0]}] * 3
    journal.peers.peer_batch(4, "0xpeer", "0xd1", Verdict.VERIFIED, items=items)
    journal.peers.used([(4, "0xpeer", 1)])
    journal.close()
    again = Journal(tmp_path / "journal.sqlite")
    assert again.peers.event_cursor() == 77
    assert [s.round for s in again.peers.peer_submissions(0)] == [4]
    assert [i.index for i in PeerPool(again).items(0, 10)] == [0, 2]
    assert again.peers.peer_verdicts()[0]["used"] == 1
    for _ in range(2):  # fetches that found it nowhere are counted, in a row
        again.peers.peer_batch(4, "0xother", "0xd2", Verdict.UNAVAILABLE, reason="no provider")
    assert again.peers.vote_basis(4, "0xother").failures == 2
    again.peers.peer_batch(4, "0xother", "0xd2", Verdict.BAD, recomputed=0, findings=1)
    assert again.peers.vote_basis(4, "0xother") == VoteBasis(Verdict.BAD, 0, 0, 1, 0)


def test_pruned_peer_rows_leave_every_count_a_reader_shows_as_it_was(tmp_path: Path) -> None:
    """A node forgets the rows of its peers' batches once no window can judge them (at 10,000
    peers they are ~20 MiB a round): the rows of older rounds go in one transaction, what the
    TUI, /metrics and `devnet status` count per peer and per verdict reads the same after, the
    newer rounds' rows are untouched, and pruning again, or a node reopening the file, changes
    nothing."""
    from client.node.journal.peers import PeerSubmission
    from client.node.journal.states import Verdict
    from client.node.view.journal import NodeView

    journal = Journal(tmp_path / "journal.sqlite")
    verdicts = (Verdict.VERIFIED, Verdict.VERIFIED, Verdict.BAD, Verdict.UNAVAILABLE)
    items = [{"question": "q", "completions": ["a", "b"], "rewards": [1.0, 0.0]}]
    for round_ in range(10):
        subs = [
            PeerSubmission(
                round=round_, node=f"0xp{i}", digest="0xd", rollouts=2, score=1, signal=1
            )
            for i in range(4)
        ]
        journal.peers.discovered(
            subs,
            next_block=round_,
            appeals=[(round_, "0xp2", 9)],
        )
        for i, verdict in enumerate(verdicts):
            journal.peers.peer_batch(round_, f"0xp{(i + round_) % 4}", "0xd", verdict, items=items)
        journal.peers.used([(round_, "0xp0", 0), (round_, "0xp1", 0)])
    view = NodeView(tmp_path)
    before = (journal.peers.verdict_counts(), journal.peers.per_peer(), view.peer_counts())
    recent = journal.peers.peer_verdicts(6)
    pruned = journal.peers.prune(6)
    # 6 rounds of 4 submissions, 1 appeal, 4 batches and 2 used items each
    assert pruned == 6 * (4 + 1 + 4 + 2)
    after = (journal.peers.verdict_counts(), journal.peers.per_peer(), view.peer_counts())
    assert after == before and before[0] == {"verified": 20, "bad": 10, "unavailable": 10}
    assert journal.peers.peer_verdicts() == recent  # rounds 6 to 9, as they were
    assert [s.round for s in journal.peers.peer_submissions(0)] == [6] * 4 + [7] * 4 + [8] * 4 + [
        9
    ] * 4
    assert journal.peers.appealed(0) == {(r, "0xp2") for r in range(6, 10)}
    assert journal.peers.used_keys(0) == {(r, n, 0) for r in range(6, 10) for n in ("0xp0", "0xp1")}
    assert journal.peers.prune(6) == 0 and journal.peers.per_peer() == before[1]
    view.close()
    journal.close()
    again = Journal(tmp_path / "journal.sqlite")
    assert again.peers.verdict_counts() == before[0] and again.peers.per_peer() == before[1]
    assert Journal.read_only(tmp_path / "journal.sqlite").peers.per_peer() == before[1]


def test_the_intakes_window_reads_only_what_is_new_and_agrees_with_the_journal(
    tmp_path: Path,
) -> None:
    """The intake keeps the submissions still open to a vote in memory (client.node.intake.
    window): each poll reads the rows discovered since the last one (not the whole window, with a
    query per row, as it did), a verdict is read back when journaled, a restart loads the
    verdicts of the window once, rounds that close are forgotten, and rows pruned under it do
    not stop it from reading the next ones."""
    from client.node.intake.window import Window
    from client.node.journal.peers import PeerSubmission
    from client.node.journal.states import Verdict

    journal = Journal(tmp_path / "journal.sqlite")

    def discover(round_: int, nodes: str) -> None:
        subs = [
            PeerSubmission(round=round_, node=n, digest="0xd", rollouts=1, score=1, signal=1)
            for n in nodes
        ]
        blocks = {(round_, n): 10 * round_ for n in nodes}  # discovery's: the events' blocks
        journal.peers.discovered(subs, next_block=10 * round_ + 1, blocks=blocks)

    def keys(window: Window) -> list[tuple[int, str]]:
        return [(s.round, s.node) for s in window.submissions()]

    discover(1, "ab")
    journal.peers.peer_batch(1, "a", "0xd", Verdict.BAD, recomputed=0, findings=8)
    window = Window(journal.peers)
    window.refresh(0)
    assert keys(window) == [(1, "a"), (1, "b")]
    sub_a, sub_b = window.submissions()
    assert window.basis(sub_a).verdict == Verdict.BAD and window.basis(sub_b) is None
    reads = []
    journal.db._db.set_trace_callback(reads.append)
    window.refresh(0)  # nothing new: one read of the rows after the last block read
    assert len(reads) == 1 and "block > 10" in reads[0] and len(keys(window)) == 2
    journal.db._db.set_trace_callback(None)
    discover(2, "ca")
    window.refresh(0)
    assert keys(window) == [(1, "a"), (1, "b"), (2, "a"), (2, "c")]
    for _ in range(2):
        journal.peers.peer_batch(1, "b", "0xd", Verdict.UNAVAILABLE, reason="gone")
    assert window.recorded(sub_b).failures == 2 and window.basis(sub_b).failures == 2
    window.refresh(2)  # round 1 closed
    assert keys(window) == [(2, "a"), (2, "c")] and window.basis(sub_a) is None
    journal.peers.prune(3)  # every row pruned under it
    discover(3, "d")
    window.refresh(3)
    assert keys(window) == [(3, "d")]
    fresh = Window(journal.peers)  # a restart
    fresh.refresh(0)
    assert keys(fresh) == [(3, "d")]


def test_status_names_an_outage_when_no_peer_batch_could_be_fetched_for_rounds(
    tmp_path: Path,
) -> None:
    """`sapo devnet status` reads it through NodeView: three chain rounds in a row in which
    every peer batch was unavailable are an outage, with the reason the last fetch gave."""
    from client.node.journal.states import Verdict
    from client.node.view.journal import OUTAGE_ROUNDS, NodeView

    journal = Journal(tmp_path / "journal.sqlite")
    view = NodeView(tmp_path)
    journal.peers.peer_batch(3, "0xa", "0xd3", Verdict.VERIFIED)
    reason = "not dialled (/ip4/127.0.0.4/tcp/4001: 127.0.0.4 is private)"
    for round_ in range(4, 4 + OUTAGE_ROUNDS):
        assert view.peer_outage() is None  # not yet for enough rounds
        for node in ("0xa", "0xb"):
            digest = f"0x{round_}{node}"
            journal.peers.peer_batch(round_, node, digest, Verdict.UNAVAILABLE, reason=reason)
    outage = view.peer_outage()
    assert outage is not None and outage.rounds == (4, 5, 6) and outage.reason == reason
    assert "rounds 4-6" in outage.describe() and reason in outage.describe()
    # one batch that came through ends it
    journal.peers.peer_batch(6, "0xb", "0x60xb", Verdict.VERIFIED)
    assert view.peer_outage() is None
    view.close()
    journal.close()


def test_a_journal_of_another_version_is_refused_not_reinterpreted(tmp_path: Path) -> None:
    import sqlite3

    from client.node.journal.db import JournalVersionError

    path = tmp_path / "journal.sqlite"
    with sqlite3.connect(path) as db:  # what version 1 of the client wrote
        db.execute("CREATE TABLE rounds (round INTEGER PRIMARY KEY, phase TEXT NOT NULL)")
    with pytest.raises(JournalVersionError, match="move it aside to start a fresh journal"):
        Journal(path)


def _weeks_of_rounds(journal: Journal, first: int, rounds: int, local: int = 8) -> None:
    """Adds `rounds` chain rounds as a node writes them, in bulk: each with `local` local
    rounds' metrics, a confirmed submission (one in 20 skipped), its outbox entries and two
    peers' verified batches, one of whose items was trained on."""
    start = time.time() - 30 * (first + rounds)
    rows = range(first, first + rounds)
    with journal.db.tx() as db:
        db.executemany(
            "INSERT INTO rounds (round, phase, rollouts, claimed, local_rounds, updated) "
            "VALUES (?, ?, 64, 32000, ?, ?)",
            [(r, "skipped" if r % 20 == 0 else "confirmed", local, start + 30 * r) for r in rows],
        )
        db.executemany(
            "INSERT INTO metrics (round, k, data) VALUES (?, ?, ?)",
            [
                (r, k, json.dumps({"new_tokens": 300, "tokens": 500, "step": r * local + k}))
                for r in rows
                for k in range(local)
            ],
        )
        db.executemany(
            "INSERT INTO outbox (key, kind, round, payload, status, created, updated) "
            "VALUES (?, ?, ?, '{}', 'done', ?, ?)",
            [(f"{kind}:{r}", kind, r, start, start) for r in rows for kind in ("pin", "submit")],
        )
        db.executemany(
            "INSERT INTO peer_batches (round, node, digest, verdict, fetched) "
            "VALUES (?, ?, '0xd', 'verified', ?)",
            [(r, node, start) for r in rows for node in ("0xa", "0xb")],
        )
        db.executemany("INSERT INTO used_items VALUES (?, '0xa', 0)", [(r,) for r in rows])


def test_what_monitoring_reads_of_a_journal_costs_the_same_after_weeks(tmp_path: Path) -> None:
    """/metrics reads a node's totals and its last rounds' window through NodeView at every
    scrape, for as long as the node runs. Counted in SQLite's own steps (not seconds), a reading
    after the first costs about the same for a journal of 20,000 rounds (a week of 30 s rounds)
    as for one of 2,000; its answers equal a count over every row, also as rows are added
    between readings and a verdict changes; and a journal written before its indexes gets
    them."""
    from client.node.journal.db import INDEXES
    from client.node.journal.states import RoundPhase, Verdict
    from client.node.view.journal import NodeView

    def read(view: NodeView, now: float) -> tuple:
        steps = 0

        def count() -> int:
            nonlocal steps
            steps += 1
            return 0

        view.journal.db._db.set_progress_handler(count, 100)  # a call per 100 VM steps
        got = (view.totals(), view.window(now - 30 * 30_000, 30.0, now), view.local_metrics(1))
        view.journal.db._db.set_progress_handler(None, 0)
        return got, steps

    def recount(path: Path) -> dict:
        with sqlite3.connect(path) as db:
            [(n, new, trained, step)] = db.execute(
                "SELECT COUNT(*), SUM(json_extract(data, '$.new_tokens')), "
                "SUM(json_extract(data, '$.tokens')), MAX(json_extract(data, '$.step')) "
                "FROM metrics"
            ).fetchall()
            verdicts = dict(
                db.execute("SELECT verdict, COUNT(*) FROM peer_batches GROUP BY verdict")
            )
            skipped = db.execute("SELECT COUNT(*) FROM rounds WHERE phase = 'skipped'").fetchone()
        return {
            "local": n,
            "new": new,
            "trained": trained,
            "step": step,
            "verdicts": verdicts,
            "skipped": skipped[0],
        }

    steps = {}
    now = time.time()
    for rounds in (2_000, 20_000):
        d = tmp_path / str(rounds)
        journal = Journal(d / "journal.sqlite")
        _weeks_of_rounds(journal, 0, rounds)
        view = NodeView(d)
        (totals, _, last), _ = read(view, now)  # a new reader reads each row once
        truth = recount(d / "journal.sqlite")
        assert (totals.local_rounds, totals.generated_tokens, totals.trained_tokens) == (
            truth["local"],
            truth["new"],
            truth["trained"],
        )
        assert totals.grpo_steps == truth["step"] and totals.skipped == truth["skipped"]
        assert totals.peer_batches == {"verified": 2 * rounds, "bad": 0, "unavailable": 0}
        assert totals.last_submitted_round == rounds - 1 and last[-1][0] == rounds - 1
        # rows added between readings, a verdict that changes, an outbox entry waiting
        _weeks_of_rounds(journal, rounds, 5)
        journal.peers.peer_batch(rounds + 1, "0xa", "0xd", Verdict.BAD, findings=1)
        journal.peers.peer_batch(rounds + 9, "0xc", "0xe", Verdict.UNAVAILABLE, reason="gone")
        journal.enqueue(Submit(round=rounds + 5, digest="0x1", rollouts=1, score=1, signal=1))
        (totals, _, _), steps[rounds] = read(view, now)  # what each scrape after costs
        truth = recount(d / "journal.sqlite")
        assert (totals.local_rounds, totals.generated_tokens, totals.grpo_steps) == (
            truth["local"],
            truth["new"],
            truth["step"],
        )
        assert totals.peer_batches == truth["verdicts"] | {"bad": 1, "unavailable": 1}
        assert totals.outbox == {"submit": 1} and totals.skipped == truth["skipped"]
        view.close()
        journal.close()
    assert steps[20_000] < 1.5 * steps[2_000], steps  # 10 times the rounds

    # a journal of this version from before the phase counts and indexes: its node's next
    # start adds them, counted from its rows
    path = tmp_path / "old" / "journal.sqlite"
    journal = Journal(path)
    _weeks_of_rounds(journal, 0, 100)
    journal.end(7, RoundPhase.MISSED, "window closed")
    journal.close()
    made = set(re.findall(r"(INDEX|TRIGGER) IF NOT EXISTS (\w+)", INDEXES))
    with sqlite3.connect(path) as db:
        for kind, name in made:
            db.execute(f"DROP {kind} {name}")
        db.execute("DROP TABLE phase_counts")
        db.execute("UPDATE rounds SET phase = 'skipped' WHERE round = 3")  # no trigger now
        # (and from before the peer totals, the families and the submissions' blocks and
        # snapshots)
        db.execute("DROP TABLE peer_totals")
        db.execute("DROP TABLE peer_families")
        db.execute("ALTER TABLE peer_submissions DROP COLUMN snapshot")
        db.execute("ALTER TABLE peer_submissions DROP COLUMN block")
        db.execute("INSERT INTO peer_submissions VALUES (7, '0xa', '0xd', 1, 1, 1)")
        # (and the root lane's credits of ours from before their votes were kept)
        db.execute("ALTER TABLE book_credits DROP COLUMN votes")
        db.execute("INSERT INTO book_credits VALUES (5, 40, 1, 0.0)")
    old = Journal.read_only(path)  # before its node opens it: counted from the rows
    assert old.phases() == {"confirmed": (93, 99), "skipped": (6, 80), "missed": (1, 7)}
    assert old.peers.per_peer()["0xa"]["used"] == 100 and old.peers.verdict_counts()["bad"] == 0
    assert old.book_credits() == {5: (40, True, 0)}  # its votes not known: none counted
    Journal(path).close()
    with sqlite3.connect(path) as db:
        names = {n for (n,) in db.execute("SELECT name FROM sqlite_master")}
    assert {name for _, name in made} | {"phase_counts", "peer_totals", "peer_families"} <= names
    assert old.phases() == {"confirmed": (93, 99), "skipped": (6, 80), "missed": (1, 7)}
    reopened = Journal(path)  # its old submission has no block: read by a window's first pass
    [(sub, block)] = reopened.peers.submissions_since(None, 0)[0]
    assert (sub.round, sub.node, block) == (7, "0xa", None)
    reopened.keep_book_credit(6, 50, 2)  # its node keeps the votes from now on
    assert reopened.book_credits() == {5: (40, True, 0), 6: (50, True, 2)}
    reopened.close()
    old.close()


# ---------------------------------------------------------------------------- verification


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    directory = copied_seed_test(seed_test, tmp_path_factory.mktemp("seed") / "seed-test")
    return load_policy(directory, device="cpu", dtype="float32")


class Honest:
    """Two local rounds of a node's chain round 7, as its batch publishes them."""

    def __init__(self, policy):
        catalog = load_catalog("tiny")
        seed = task_seed(31_337, LEDGER, 7, NODE)
        self.local = [
            local_round(policy, seed=seed, round_=7, node=NODE, k=k, items=4, completions=4)
            for k in (0, 1)
        ]
        self.batch = make_batch(
            chain_id=31_337,
            ledger=LEDGER,
            round_=7,
            node=NODE,
            catalog=catalog,
            model=policy.descriptor(),
            sampling=Sampling.of(1.0, 1.0, 12),
            local_rounds=[lr.part for lr in self.local],
        )


@pytest.fixture(scope="module")
def honest(policy):
    return Honest(policy)


def replaced_item(batch: RolloutBatch, index: int, k: int = 0, **changes) -> RolloutBatch:
    """Returns the batch with item `index` of local round `k` changed."""
    rounds = list(batch.local_rounds)
    items = list(rounds[k].items)
    items[index] = Item(**{**items[index].model_dump(), **changes})
    rounds[k] = rounds[k].model_copy(update={"items": items})
    return batch.model_copy(update={"local_rounds": rounds})


@pytest.mark.slow
def test_an_honest_batch_reverifies_to_exactly_its_claim(honest) -> None:
    seed = task_seed(31_337, LEDGER, 7, NODE)
    check = verify_batch(honest.batch, load_catalog("tiny"), seed)
    assert check.valid and check.agrees and check.findings == 0, check.reason
    assert check.recomputed == honest.batch.score == sum(c.claimed for c in check.items)
    assert check.recomputed_signal == check.claimed_signal == honest.batch.signal
    assert [c.k for c in check.items] == [0] * 4 + [1] * 4  # every local round re-verified


@pytest.mark.slow
def test_each_local_round_draws_fresh_questions_bound_to_the_chain_round(honest) -> None:
    first, second = ([t.question for t in lr.tasks] for lr in honest.local)
    assert first != second
    # a local round relabelled as another (k 1's items as k 0's) is not the seed's
    swapped = honest.batch.model_copy(
        update={
            "local_rounds": [
                honest.batch.local_rounds[1].model_copy(update={"k": 0}),
                honest.batch.local_rounds[0].model_copy(update={"k": 1}),
            ]
        }
    )
    check = verify_batch(swapped, load_catalog("tiny"), task_seed(31_337, LEDGER, 7, NODE))
    assert not check.valid and "local round 0 item 0: task" in check.reason


@pytest.mark.slow
def test_an_inflated_claim_is_caught_and_attested_at_our_score(honest) -> None:
    batch = honest.batch
    item = batch.items[0]
    inflated = replaced_item(batch, 0, rewards=[10_000] * len(item.completions))
    check = verify_batch(inflated, load_catalog("tiny"), task_seed(31_337, LEDGER, 7, NODE))
    assert check.valid and not check.agrees
    assert check.attest_score == batch.score  # what the honest batch scores, not the claim
    assert check.attest_signal == batch.signal and check.findings & SCORE_DIFFERS
    # all-correct rewards flatten the item's group: the claimed signal differs too
    assert inflated.signal != batch.signal and check.findings & SIGNAL_DIFFERS


@pytest.mark.slow
def test_foreign_tasks_make_a_batch_invalid(honest) -> None:
    catalog = load_catalog("tiny")
    seed = task_seed(31_337, LEDGER, 7, NODE)
    # the questions of another node's seed: easy tasks picked by the sender
    other = verify_batch(honest.batch, catalog, task_seed(31_337, LEDGER, 7, LEDGER))
    assert not other.valid and "is not the seed's task" in other.reason
    assert other.attest_score == 0 and other.attest_signal == 0
    assert other.findings == FOREIGN_TASKS
    swapped = replaced_item(honest.batch, 1, question="What is 1 + 1?")
    check = verify_batch(swapped, catalog, seed)
    assert not check.valid and "local round 0 item 1: question differs" in check.reason
    wrong_catalog = honest.batch.model_copy(update={"catalog_digest": "0x" + "00" * 32})
    assert "catalog" in verify_batch(wrong_catalog, catalog, seed).reason


# ------------------------------------------------------------------------------------ wallet


def test_wallet_new_writes_an_encrypted_0600_keystore(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"SAPO_KEYSTORE_PASSWORD": "correct horse"}
    path = tmp_path / "keys" / "node.json"
    made = runner.invoke(app, ["wallet", "new", "--keystore", str(path), "--json"], env=env)
    assert made.exit_code == 0, made.output
    address = json.loads(made.stdout)["address"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "crypto" in json.loads(path.read_text())
    shown = runner.invoke(app, ["wallet", "address", "--keystore", str(path)])
    assert shown.stdout.strip() == address
    again = runner.invoke(app, ["wallet", "new", "--keystore", str(path)], env=env)
    assert again.exit_code == 2 and "never overwritten" in again.output


def test_wallet_import_reads_the_key_from_a_file_and_never_prints_it(tmp_path: Path) -> None:
    key = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"  # anvil dev #1
    key_file = tmp_path / "key.txt"
    key_file.write_text(key + "\n")
    path = tmp_path / "imported.json"
    result = CliRunner().invoke(
        app,
        ["wallet", "import", "--keystore", str(path), "--key-file", str(key_file)],
        env={"SAPO_KEYSTORE_PASSWORD": "pw"},
    )
    assert result.exit_code == 0, result.output
    assert "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" in result.stdout
    assert key[2:] not in result.output and key[2:] not in path.read_text()
    bad = CliRunner().invoke(
        app,
        ["wallet", "import", "--keystore", str(tmp_path / "b.json"), "--key-file", str(path)],
        env={"SAPO_KEYSTORE_PASSWORD": "pw"},
    )
    assert bad.exit_code == 2 and "not a valid secp256k1 private key" in bad.output


# ------------------------------------------------------------------------------ intake retries


@pytest.mark.parametrize(
    "round_length, took, late",
    [(20, 10.0, 0.5), (20, 10.0, 3.0), (20, 2.0, 0.5), (60, 15.0, 3.0), (8, 2.0, 2.0)],
)
def test_retries_of_a_batch_nobody_has_fit_its_vote_in_the_window(round_length, took, late):
    """A drawn checker retries a batch nobody gave it until `unavailable_after` attempts failed,
    then votes: the schedule must bring the last failure before the window closes, whatever
    the round length and however long an attempt takes (run 4: most free claims at 20-s rounds
    ended their window one failure short)."""
    from client.chain.models import LedgerParams
    from client.node.intake.retries import RETRY_MIN_S, retry_delay

    params = LedgerParams(
        round_length=round_length,
        min_stake=1,
        unbonding_period=0,
        challenge_rounds=3,
        submit_rounds=2,
        reward_per_round=1,
        slash_bps=0,
        agree_tolerance_bps=0,
        catalog_digest="0x" + "00" * 32,
        quorum=2,
        checkers=8,
        genesis=1_000_000,
    )
    closes = params.round_start(5 + 2 + 3 + 1)  # round 5's votes are taken until then
    # submitted in round 5; the first attempt starts `late` rounds after it ended (a busy
    # checker: with the old fixed spacing of max(10 s, half a round), 3 rounds late at 20-s
    # rounds ended its third failure 15 s after the vote's last chance)
    now, failures = params.round_start(6) + late * round_length, 0
    while failures < 3:
        now += took  # an attempt that found it nowhere
        failures += 1
        wait = retry_delay(params, 3, 5, failures, took, now)
        assert RETRY_MIN_S <= wait <= max(RETRY_MIN_S, round_length / 2)
        if failures < 3:
            now += wait
    assert now <= closes - round_length / 4, (now, closes)  # room left for the vote


# ------------------------------------------------------------------ verdicts and votes (pure)


def test_each_fetch_outcome_gets_its_verdict_and_each_verdict_its_vote() -> None:
    """client.node.intake.verdict.judge and voting.ballot, branch by branch: what a fetch worker
    found decides the verdict, and the journaled verdict decides the vote, with no chain,
    journal or clock."""
    from client.credit import GENERATION, MALFORMED, WITHHELD
    from client.node.intake.verdict import (
        Accepted,
        Deferred,
        Fetched,
        Missing,
        Proof,
        Rejected,
        judge,
    )
    from client.node.intake.voting import ballot, disputes
    from client.node.journal.outbox import Attest, Unavailable
    from client.node.journal.peers import PeerSubmission
    from client.node.journal.states import Verdict
    from client.node.proving import GenerationCheck
    from client.node.rollouts import Verification
    from client.store.errors import BlockNotFound, MalformedBatch, SpoolError, StoreTimeout
    from client.store.weights import WeightsError
    from tests.harness.batches import make_batch as batch_like

    sub = PeerSubmission(round=4, node="0xpeer", digest="0xd1", rollouts=32, score=900, signal=300)
    batch = batch_like()
    good = Verification(True, None, 900, 900, [], 300, 300)
    lying = Verification(True, None, 900, 800, [], 300, 200)
    foreign = Verification(False, "task 2 is not the seed's", 900, 0, [], 300, 0)
    passed = GenerationCheck(32, 8, 96, 0, None, 0.2)
    failed = GenerationCheck(32, 8, 96, 3, "token 5 outside its interval", 0.0)

    def fetched(result, verified=None, proof=None):
        return Fetched(10.0, 13.0, result, proof, None if verified is None else (verified, 13, 14))

    def proven(outcome):
        return Proof(14.0, 20.0, outcome, ["manifest"])

    nowhere = BlockNotFound("bafy…", "ipfs")
    assert judge(sub, fetched(nowhere)) == Missing(nowhere, 3.0)
    assert judge(sub, fetched(MalformedBatch("bad header"))) == Rejected(
        "bad header", 900, MALFORMED
    )
    assert judge(sub, fetched((batch, "0xpeer"), foreign)) == Rejected(
        "task 2 is not the seed's", 900, foreign.findings
    )
    assert isinstance(
        judge(sub, fetched((batch, "0xpeer"), good, proven(SpoolError("full")))), Deferred
    )
    assert (
        judge(sub, fetched((batch, "0xp"), good, proven(WeightsError("NaN")))).findings
        == GENERATION
    )
    withheld = judge(sub, fetched((batch, "0xpeer"), good, proven(StoreTimeout("openings"))))
    assert isinstance(withheld, Missing) and (withheld.took, withheld.withheld) == (6.0, 900)
    # a batch whose claims are wrong is disputed for them, whatever its openings
    wrong = judge(sub, fetched((batch, "0xpeer"), lying, proven(StoreTimeout("openings"))))
    assert isinstance(wrong, Accepted) and wrong.proof is None and "claimed score" in wrong.reason
    assert judge(sub, fetched((batch, "0xpeer"), good, proven(failed))).findings == GENERATION
    ok = judge(sub, fetched((batch, "0xpeer"), good, proven(passed)))
    assert isinstance(ok, Accepted) and ok.reason is None and ok.manifests == ["manifest"]
    assert ok.proof_summary()["redrawn"] == 8
    unproven = judge(sub, fetched((batch, "0xpeer"), good))
    assert isinstance(unproven, Accepted) and unproven.proof is None

    def vote(verdict, score=0, signal=0, findings=0, failures=0, appealed=False):
        basis = VoteBasis(verdict, score, signal, findings, failures)
        return ballot(sub, basis, appealed=appealed, unavailable_after=3)

    agree = vote(Verdict.VERIFIED, 900, 300)
    assert agree == Attest(round=4, node="0xpeer", score=900, signal=300, findings=0)
    assert agree.key == "attest:4:0xpeer" and not disputes(agree, sub)
    dispute = vote(Verdict.VERIFIED, 800, 200, findings=3, appealed=True)
    assert dispute.key == "appeal-vote:4:0xpeer" and disputes(dispute, sub)
    assert vote(Verdict.UNAVAILABLE, failures=2) is None  # not yet: fetched again first
    gone = vote(Verdict.UNAVAILABLE, failures=3)
    assert gone == Unavailable(round=4, node="0xpeer") and not disputes(gone, sub)
    held_back = vote(Verdict.UNAVAILABLE, 900, findings=WITHHELD, failures=3)
    assert held_back == Attest(round=4, node="0xpeer", score=900, signal=0, findings=WITHHELD)
    assert disputes(held_back, sub)


def test_every_outbox_message_reads_back_as_itself_under_the_keys_journals_already_hold(
    tmp_path: Path,
) -> None:
    """Keys and payloads are the ones this client wrote before the messages were types, so a
    journal from before reads back unchanged; each type reads back from its own row."""
    from client.node.journal.outbox import (
        MESSAGES,
        Appeal,
        Attest,
        Audit,
        Challenge,
        Draw,
        Escalate,
        Listed,
        Open,
        Pin,
        Relay,
        RootVote,
        Settle,
        Unavailable,
        VoteAppeal,
        decode,
    )

    node, other = "0x" + "ab" * 20, "0x" + "cd" * 20
    written = {
        Pin(round=3): ("pin:3", {}),
        Submit(round=3, digest="0x01", rollouts=8, score=5, signal=2): (
            "submit:3",
            {"digest": "0x01", "rollouts": 8, "score": 5, "signal": 2},
        ),
        Open(round=3): ("open:3", {}),
        Listed(round=3): ("listed:3", {}),
        Audit(round=3): ("audit:3", {}),
        Challenge(round=3, verdict_tree=True, index=0, aggregator=node, answer_by=7): (
            "challenge:3:verdicts:0",
            {"verdict_tree": True, "index": 0, "aggregator": node, "answer_by": 7},
        ),
        RootVote(round=3, node=node, digest="0x01", score=5, signal=2): (
            f"root-vote:3:{node}",
            {"node": node, "digest": "0x01", "score": 5, "signal": 2},
        ),
        Relay(round=3, node=node): (f"relay:3:{node}", {"node": node}),
        Relay(round=3, node=node, again=True): (
            f"relay-again:3:{node}",
            {"node": node, "again": True},
        ),
        Escalate(  # our first-committee vote, as an attestation is: another batch here
            round=3,
            node=other,
            unavailable=False,
            score=5,
            signal=1,
            findings=4,
            index=2,
            leaf="{}",
            proof=(("0x00", 0),),
        ): (
            f"attest:3:{other}",
            {
                "node": other,
                "unavailable": False,
                "score": 5,
                "signal": 1,
                "findings": 4,
                "index": 2,
                "leaf": "{}",
                "proof": (("0x00", 0),),
            },
        ),
        Attest(round=3, node=node, score=5, signal=2, findings=0): (
            f"attest:3:{node}",
            {"node": node, "score": 5, "signal": 2, "findings": 0},
        ),
        Unavailable(round=3, node=node, appeal=True): (
            f"appeal-vote:3:{node}",
            {"node": node, "appeal": True},
        ),
        Draw(round=3, node=node, block=77, appeal=True): (
            f"draw:3:{node}:appeal",
            {"node": node, "block": 77, "appeal": True},
        ),
        Settle(round=3): ("settle:3", {}),
        Settle(round=3, node=node): (f"settle:3:{node}", {"node": node}),
        Appeal(round=3): ("appeal:3", {}),
        VoteAppeal(round=3, node=node): (f"appeal-of:3:{node}", {"node": node}),
    }
    assert {type(m) for m in written} == set(MESSAGES)
    journal = Journal(tmp_path / "journal.sqlite")
    for message, (key, payload) in written.items():
        assert (message.key, message.payload()) == (key, payload)
        assert decode(message.KIND, 3, payload) == message
        assert journal.enqueue(message)
    assert [e.message for e in journal.pending()] == list(written)
    with pytest.raises(ValueError, match="no message reads"):
        decode("attest", 3, {"node": node})
