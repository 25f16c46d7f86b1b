"""The aggregator's role, run by a node round after round (docs/scaling.md, "A round"): it
enlists on the book's roster of aggregators, makes the draws of the coming rounds' aggregators
(any enlisted node's service may; the first pays the gas), collects the signed messages of the
rounds drawn to it on its endpoint's desk (the others' are refused: only the drawn aggregator
may post a round's root, so its receipt is the only one that binds), and on the book's clock
posts each round's submission root (with its bond) and, once the votes are in, its verdict root
with every credit's earnings; it answers the data challenges of its rounds, folds the rounds
that stand into what each producer has earned, and takes its bonds back.

Everything it posts is what an auditor will check (client.node.aggregation.auditor), so it
judges by the same code: a vote counts only from a seated voter (`Auditor.seated`), a producer
the v4 lane holds for the round is not credited (the ledger's `Submitted` events of the round),
and a credit's earnings come from every round that stands, in order (`EarningsBook`), the
others' rounds read from their published lists. Where it cannot know (a list it cannot fetch,
an earlier round not decided yet) it does not post, and says why: a root it cannot stand behind
would cost its bond.

Nothing it holds is lost to a restart: each message is written to its store (`Held`) before it
is answered, and each list before its root is posted; `start` rebuilds the collectors and
roots from there and from the book.

`tick` is one pass (a node calls it every POLL_S); each step is idempotent against the chain,
so a pass interrupted anywhere is finished by the next.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from client.chain import ChainError, LedgerRevert
from client.chain.book import BookRound, Drawn, RoundBook, Windows
from client.chain.events import EventCursor, EventReader
from client.chain.ledger import Ledger
from client.chain.messages import Domain, ReceiptSigner, Vote
from client.chain.roots import (
    NO_CREDITS_ROOT,
    BadList,
    SubmissionRoot,
    VerdictRoot,
    open_verdict_list,
    submission_list,
    submission_struct,
    verdict_list,
)
from client.node.aggregation.auditor import Auditor, v4_producers
from client.node.aggregation.collector import Collector, Equivocation
from client.node.aggregation.earnings import EarningsBook, LedgerNotFinal, ledger_total
from client.node.aggregation.endpoint import Desk
from client.node.aggregation.held import Held
from client.node.aggregation.lists import ListUnavailable, fetch_list, list_digest, publish_list
from client.store import BlockStore, StoreError, cid_to_digest, digest_to_cid

log = logging.getLogger("sapo.aggregator")

POLL_S = 2.0
# what the aggregator keeps beyond the bond for a round's posts' gas: a round drawn to it is
# collected only while its balance holds both (a receipt it could not post for costs its bond)
POST_GAS_WEI = 10**16
KIND = {False: "submissions", True: "verdicts"}


@dataclass
class Tick:
    """What one pass did (for the log and for tests), and what it could not do, with why."""

    drew: list[int] = field(default_factory=list)  # the rounds whose aggregator we drew
    opened: list[int] = field(default_factory=list)
    posted_submissions: list[int] = field(default_factory=list)
    drawn: list[int] = field(default_factory=list)
    posted_verdicts: list[int] = field(default_factory=list)
    answered: list[tuple[int, bool, int]] = field(default_factory=list)
    released: list[int] = field(default_factory=list)
    folded: list[int] = field(default_factory=list)
    # (round, producer, voter) of each double vote proven
    equivocations: list[tuple[int, str, str]] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)  # round -> why it was not posted


class Aggregator:
    """One node's aggregator: its desk (served by an AggregatorServer), its store, its posts.

    `ledger` and `book` carry the node's account (its key signs the posts and, through
    `receipts`, the receipts); `store`: the node's IPFS store, where the lists are published and
    the other aggregators' lists fetched (None: lists are not published, as the simulator's in
    memory). `start_block`: the block the book was deployed at (its events are read from there).
    """

    collector_class: type[Collector] = Collector  # a devnet's adversary takes its own

    def __init__(
        self,
        ledger: Ledger,
        book: RoundBook,
        held: Held,
        receipts: ReceiptSigner,
        *,
        store: BlockStore | None,
        start_block: int = 0,
        chunk_blocks: int = 2_000,
    ):
        self.ledger, self.book, self.held, self.store = ledger, book, held, store
        self.domain: Domain = receipts.domain
        self.me = book.tx.address
        if receipts.address.lower() != self.me.lower():
            raise ValueError("the receipts must be signed by the key that posts the roots")
        self.params = ledger.params()
        self.windows = Windows.of(self.params)
        self.desk = Desk(self.domain, receipts, record=held.record)
        self.auditor = Auditor.of(self.domain, ledger, self.params)
        self.book_events = EventReader(book, chunk_blocks=chunk_blocks, start_block=start_block)  # type: ignore[arg-type]
        self.ledger_events = EventReader(ledger, chunk_blocks=chunk_blocks, start_block=start_block)
        self.start_block = start_block
        self.first_round = 0
        self.collectors: dict[int, Collector] = {}
        self.submission_roots: dict[int, SubmissionRoot] = {}  # the rounds we posted
        self.verdict_roots: dict[int, VerdictRoot] = {}
        self.no_credits: set[int] = set()  # the rounds we posted the no-credit root of
        self.earned = EarningsBook(self.params.reward_per_round, self.windows.lag)
        self._cursor = EventCursor(next_block=start_block)  # DataChallenged
        self._challenges: dict[tuple[int, bool, int], int] = {}  # open -> answer by
        self._lists: dict[tuple[int, bool], bytes] = {}  # the other aggregators' list digests
        self._draws: dict[int, Drawn] = {}  # the rounds drawn, whoever to
        self._unpublished: dict[int, bytes] = {}  # submission lists posted but not published yet

    # ------------------------------------------------------------------------------- start

    def start(self) -> None:
        """Rebuilds what a restart lost: the collectors of the rounds still open, and the roots
        of the rounds this node posted, from its store, checked against the book."""
        current = self.ledger.current_round()
        self._enlist()
        # the swarm's registrations, in batches: each submission is checked against them as it
        # enters (a node registered later is read when its first message comes)
        self.auditor.know(self.ledger.nodes())
        held = [
            r
            for r in self.held.rounds()
            if current <= self.windows.challenge_end(r) + self.windows.lag + 2
        ]
        # rounds receipted before a restart on a book nobody posted to yet are still ours to post
        self.first_round = min([self.book_first_round(current), *held])
        saved = self.held.load_earned(self.params.reward_per_round, self.windows.lag)
        self.earned = saved or EarningsBook(
            self.params.reward_per_round, self.windows.lag, folded=self.first_round - 1
        )
        for round_ in sorted(self.held.rounds()):
            if current > self.windows.challenge_end(round_) + self.windows.lag + 2:
                continue  # long decided: nothing of it is asked for any more
            collector = self._collector(round_)
            for signed in self.held.messages(round_):
                try:
                    collector.take(signed)
                except Exception as exc:  # a message its own collector took once
                    log.warning("round %s: a held message is not taken again: %s", round_, exc)
            self._restore_roots(round_)
        self._collect(current, Tick())
        if self.collectors:
            log.info(
                "aggregator: restored rounds %s from %s", sorted(self.collectors), self.held.path
            )

    def _enlist(self) -> None:
        """Enlists this node on the book's roster (drawn from the next request on), unless it is
        on it, or resigned and still holds its bond there (`sapo aggregate resign`: it posts the
        rounds drawn to it, and is not drawn again). A refusal is logged, not fatal: the rounds
        drawn to it before must still be posted."""
        try:
            if self.book.enlisted(self.me):
                return
            held, until = self.book.held_bond(self.me)
            if held:
                log.warning(
                    "aggregator: %s resigned from the roster (its bond held through round %s): "
                    "not enlisting again; it posts the rounds drawn to it",
                    self.me,
                    until,
                )
                return
            self.book.enlist()
            log.info("aggregator: enlisted %s on the book's roster", self.me)
        except ChainError as exc:
            log.error("aggregator: %s could not enlist on the roster: %s", self.me, exc)

    def book_first_round(self, current: int) -> int:
        """The first round this aggregator folds earnings from: the book's first posted round
        (its first SubmissionsPosted event), or the current round on a book nobody posted to."""
        for event in self.book_events.read(["SubmissionsPosted"]):
            return int(event.args["round"])
        return current

    def _collector(self, round_: int) -> Collector:
        collector = self.collectors.get(round_)
        if collector is None:
            collector = self.collector_class(
                self.domain,
                round_,
                tolerance_bps=self.params.agree_tolerance_bps,
                registered=self.auditor.registered,
            )
            self.collectors[round_] = collector
        return collector

    def _restore_roots(self, round_: int) -> None:
        posted = self.book.round_of(round_)
        if not posted.posted or posted.aggregator.lower() != self.me.lower():
            return
        collector = self.collectors[round_]
        collector.closed = True
        root = SubmissionRoot(list(collector.submissions.values()))
        if root.root != posted.submissions:
            log.error(
                "round %s: the submission root rebuilt from the store is not the one posted; "
                "data challenges of it cannot be answered",
                round_,
            )
            return
        self.submission_roots[round_] = root
        if posted.verdicts_posted and posted.credits == 0:
            self.no_credits.add(round_)
        data = self.held.list_of(round_, "verdicts")
        if posted.verdicts_posted and posted.credits and data is not None:
            try:
                self.verdict_roots[round_] = open_verdict_list(
                    data, posted.verdicts, posted.credits, posted.total
                )
            except BadList as exc:
                log.error(
                    "round %s: the stored verdict list is not the posted root's: %s", round_, exc
                )

    # -------------------------------------------------------------------------------- pass

    def tick(self) -> Tick:
        """One pass over the rounds the clock has reached."""
        done = Tick()
        current = self.ledger.current_round()
        w = self.windows
        # the post first: it has one round; the beacons before the aggregators' draws, whose
        # transactions would mine the block a fresh root's beacon waits for
        self._post_submissions(current - w.submit_rounds - 1, current, done)
        for round_ in list(self.submission_roots):
            self._draw(round_, current, done)
        self._republish()
        self._draw_aggregators(current, done)
        self._collect(current, done)
        self._fold(current, done)
        self._post_verdicts(current - w.submit_rounds - w.challenge_rounds - 2, current, done)
        self._answer(current, done)
        self._prove_equivocations(current, done)
        self._release(current, done)
        self._forget(current)
        return done

    def _draw_aggregators(self, current: int, done: Tick) -> None:
        """Draws this round's aggregator and the next's, where nobody has: the request, then
        the draw itself (its transaction lands in a later block than the request's)."""
        for round_ in (current, current + 1):
            try:
                for _ in range(2):
                    drawn = self.drawn(round_)
                    if drawn.drawn:
                        break
                    self.book.draw_aggregator(round_)
                else:
                    drawn = self.drawn(round_)
            except LedgerRevert as exc:  # too late: the round's post window is past
                log.info("round %s: its aggregator's draw was refused: %s", round_, exc)
                continue
            except ChainError as exc:  # the next pass draws it
                log.warning("round %s: its aggregator's draw failed: %s", round_, exc)
                continue
            if drawn.drawn and round_ not in done.drew:
                done.drew.append(round_)
                log.info("round %s: its aggregator is %s", round_, drawn.aggregator or "nobody")

    def drawn(self, round_: int) -> Drawn:
        """`round_`'s draw (kept once drawn: it never changes)."""
        drawn = self._draws.get(round_)
        if drawn is None:
            drawn = self.book.drawn(round_)
            if drawn.drawn:
                self._draws[round_] = drawn
        return drawn

    def _collect(self, current: int, done: Tick) -> None:
        """Opens on the desk the rounds drawn to us whose submissions may still come, and each
        posted round's votes until its close."""
        w = self.windows
        for round_ in range(max(self.first_round, current - w.submit_rounds), current + 1):
            if round_ in self.collectors:
                if round_ not in self.desk.rounds() and not self.collectors[round_].closed:
                    self.desk.open(self.collectors[round_])
            elif self.drawn(round_).names(self.me) and self._can_post(round_):
                self.desk.open(self._collector(round_))
                done.opened.append(round_)
        for round_ in self.submission_roots:  # posted: its votes until the close (a restart)
            votes_open = w.post_round(round_) <= current <= w.vote_close(round_)
            if votes_open and round_ not in self.desk.rounds():
                self.desk.open(self.collectors[round_])

    def _can_post(self, round_: int) -> bool:
        """Whether our balance holds the bond and the gas of `round_`'s post: a round drawn to
        us is collected only then (its receipts bind us to post)."""
        balance = self.book.tx.rpc(lambda: self.book.w3.eth.get_balance(self.me), "balance")
        if balance >= self.book.bonds()[0] + POST_GAS_WEI:
            return True
        log.error(
            "round %s is drawn to us, but our balance (%s wei) does not hold the bond and the "
            "post's gas: not collected (fund %s)",
            round_,
            balance,
            self.me,
        )
        return False

    def _post_submissions(self, round_: int, current: int, done: Tick) -> None:
        collector = self.collectors.get(round_)
        if collector is None or round_ in self.submission_roots or round_ < self.first_round:
            return
        if current != self.windows.post_round(round_):
            return
        posted = self.book.round_of(round_)
        if posted.posted:  # ours, from before a restart whose store did not rebuild it
            log.warning("round %s: its root is posted already, by %s", round_, posted.aggregator)
            self.desk.close(round_)
            del self.collectors[round_]
            return
        with self.desk.hold(round_):
            if not collector.submissions:
                done.skipped[round_] = "no submission was sent"
                return
            root = collector.submission_root()  # closed: nothing enters after it
        root = self.listing(round_, root)
        listed = submission_list(root.signed)
        self.held.keep_list(round_, "submissions", listed)
        try:
            digest = self._publish("submissions", round_, listed)
        except StoreError as exc:  # posted all the same: its receipts bind us to post in time
            log.error("round %s: its submission list is not published yet: %s", round_, exc)
            digest = list_digest("submissions", round_, listed)
            self._unpublished[round_] = listed
        self.book.post_submissions(round_, root.root, len(root.signed), digest)
        self.submission_roots[round_] = root
        done.posted_submissions.append(round_)
        log.info("round %s: posted %d submissions", round_, len(root.signed))

    def _draw(self, round_: int, current: int, done: Tick) -> None:
        if current > self.windows.vote_close(round_):
            return
        posted = self.book.round_of(round_)
        if posted.beacon or posted.void:
            return
        if self.book.head() <= posted.posted_block:
            return  # the beacon's block (the next) is not mined yet: the draw lands after it
        self.book.draw_beacon(round_)
        done.drawn.append(round_)

    def _post_verdicts(self, round_: int, current: int, done: Tick) -> None:
        root = self.submission_roots.get(round_)
        if root is None or round_ in self.verdict_roots or round_ in self.no_credits:
            return
        if current != self.windows.verdict_round(round_):
            return
        self.desk.close(round_)  # no vote enters after the close
        posted = self.book.round_of(round_)
        if posted.void or posted.verdicts_posted:
            return
        if self.earned.folded < round_ - self.windows.lag:
            done.skipped[round_] = (
                f"round {self.earned.folded + 1} is not folded yet: earnings cannot be written"
            )
            return
        v4 = v4_producers(self.ledger, self.ledger_events, round_)
        collector = self.collectors[round_]
        self._find_contradictions(round_, collector, v4)
        # every voter's and producer's registration and stake as of the root, in batches
        self.auditor.prefetch(
            {p for p, _ in collector.votes} | {v for _, v in collector.votes}, posted.posted_block
        )
        verdicts = collector.verdict_root(
            root,
            seated=lambda p, v: self.auditor.seated(posted, p, v),
            quorum=self.params.quorum,
            escalated=v4,
            earnings=lambda p: self.earned.earnings(p, round_),
        )
        if verdicts is not None:
            verdicts = self.posting(round_, verdicts)
        if verdicts is None:  # posted all the same: a round without a verdict root is void
            self.book.post_verdicts(round_, NO_CREDITS_ROOT, 0, 0, bytes(32))
            self.no_credits.add(round_)
            done.posted_verdicts.append(round_)
            log.info("round %s: no batch reached the quorum; posted the no-credit root", round_)
            return
        listed = verdict_list(verdicts)
        self.held.keep_list(round_, "verdicts", listed)
        digest = self._publish("verdicts", round_, listed)
        self.book.post_verdicts(
            round_, verdicts.root, len(verdicts.credits), verdicts.total, digest
        )
        self.verdict_roots[round_] = verdicts
        done.posted_verdicts.append(round_)
        log.info("round %s: posted %d credits", round_, len(verdicts.credits))

    def listing(self, round_: int, root: SubmissionRoot) -> SubmissionRoot:
        """The submission root posted for `round_`, of the one the collector built. An honest
        aggregator posts what it built; a devnet's adversary (client.devnet.liar) overrides
        this."""
        return root

    def posting(self, round_: int, verdicts: VerdictRoot) -> VerdictRoot | None:
        """The verdict root posted for `round_`, of the one the collector built from the votes
        (None: the no-credit root). An honest aggregator posts what it built; a devnet's
        adversary (client.devnet.liar) overrides this."""
        return verdicts

    def _republish(self) -> None:
        """Publishes the submission lists posted while the store was down."""
        for round_, listed in list(self._unpublished.items()):
            try:
                self._publish("submissions", round_, listed)
            except StoreError as exc:
                log.warning("round %s: its submission list is still not published: %s", round_, exc)
                return
            del self._unpublished[round_]
            log.info("round %s: its submission list is published", round_)

    def _publish(self, kind: str, round_: int, data: bytes) -> bytes:
        if self.store is None:
            return bytes(32)
        keep = self.windows.challenge_end(round_) + 2
        return cid_to_digest(publish_list(self.store, kind, round_, data, keep_round=keep))

    # ------------------------------------------------------------------------------ earnings

    def _fold(self, current: int, done: Tick) -> None:
        """Folds, in order, every round that is decided (two rounds past its challenge window:
        standing, or void, or never posted), each as it stands."""
        while True:
            q = self.earned.folded + 1
            if current < self.windows.challenge_end(q) + 2:
                return
            posted = self.book.round_of(q)
            if posted.posted and posted.open_challenges:
                return  # a challenge decides it first
            verdicts = None
            if posted.posted and posted.verdicts_posted and not posted.void and posted.credits:
                verdicts = self._verdicts_of(q, posted)
                if verdicts is None:
                    return
            before = set(self.earned.places)
            other = None
            if verdicts is not None:  # both lanes split one reward: the ledger's total of q
                try:
                    other = ledger_total(self.ledger, q)
                except LedgerNotFinal as exc:
                    log.warning("%s", exc)
                    return
            self.earned.fold(q, verdicts, other)
            after = self.earned.places
            added = [after[k] for k in after.keys() - before]
            try:
                self.held.save_fold(self.earned, added, sorted(before - after.keys()))
            except Exception:
                # memory must not run ahead of the store: the next save would miss this fold
                self.earned = self.held.load_earned(
                    self.params.reward_per_round, self.windows.lag
                ) or EarningsBook(
                    self.params.reward_per_round, self.windows.lag, folded=self.first_round - 1
                )
                raise
            done.folded.append(q)

    def _verdicts_of(self, round_: int, posted: BookRound) -> VerdictRoot | None:
        """A standing round's credits: ours from the store, another aggregator's from its
        published list (None, logged, when it cannot be had: folding waits)."""
        if round_ in self.verdict_roots:
            return self.verdict_roots[round_]
        if self.store is None:
            log.error("round %s: another aggregator's verdicts, and no store to fetch them", round_)
            return None
        digest = self._list_digest(round_, True)
        if digest is None:
            return None
        try:
            data = fetch_list(
                self.store,
                digest_to_cid(digest),
                "verdicts",
                round_,
                posted.credits,
                keep_round=None,
            )
            return open_verdict_list(data, posted.verdicts, posted.credits, posted.total)
        except (ListUnavailable, BadList) as exc:
            log.error(
                "round %s: %s's verdict list cannot be read (%s): no verdict root is posted "
                "until it is, since earnings would be wrong",
                round_,
                posted.aggregator,
                exc,
            )
            return None

    def _list_digest(self, round_: int, verdicts: bool) -> bytes | None:
        key = (round_, verdicts)
        if key not in self._lists:
            name = "VerdictsPosted" if verdicts else "SubmissionsPosted"
            for event in self.book_events.read([name], round=round_):
                self._lists[key] = bytes.fromhex(event.args["list"][2:])
        return self._lists.get(key)

    # --------------------------------------------------------------------- answers, bonds

    def _answer(self, current: int, done: Tick) -> None:
        """Answers, in time, each data challenge of a root this node posted."""
        for event in self.book_events.poll(self._cursor, ["DataChallenged", "DataAnswered"]):
            key = (
                int(event.args["round"]),
                bool(event.args["verdictTree"]),
                int(event.args["index"]),
            )
            if event.name == "DataChallenged":
                self._challenges[key] = int(event.args["answerBy"])
            else:
                self._challenges.pop(key, None)
        for key, answer_by in list(self._challenges.items()):
            round_, verdict_tree, index = key
            if current > answer_by:
                del self._challenges[key]
                continue
            answer = self._answer_args(round_, verdict_tree, index)
            if answer is None:
                continue
            function, args = answer
            try:
                self.book.call(function, args)
            except ChainError as exc:
                log.error(
                    "round %s: answering %s leaf %s failed: %s",
                    round_,
                    KIND[verdict_tree],
                    index,
                    exc,
                )
                continue
            del self._challenges[key]
            done.answered.append(key)

    def _answer_args(self, round_: int, verdict_tree: bool, index: int) -> tuple[str, tuple] | None:
        if verdict_tree:
            verdicts = self.verdict_roots.get(round_)
            if verdicts is None:
                return None
            if index >= len(verdicts.credits):
                proof = [n.as_abi() for n in verdicts.tree.proof(index)]
                return "answerEmpty", (round_, True, index, proof)
            credit = verdicts.credits[index]
            return "answerCredit", (
                round_,
                index,
                credit.struct(),
                verdicts.amounts[index],
                verdicts.proof(index),
                verdicts.votes[index],
            )
        root = self.submission_roots.get(round_)
        if root is None:
            return None
        if index >= len(root.signed):
            return "answerEmpty", (
                round_,
                False,
                index,
                [n.as_abi() for n in root.tree.proof(index)],
            )
        return "answerSubmission", (
            round_,
            index,
            submission_struct(root.signed[index]),
            root.proof(index),
        )

    def _prove_equivocations(self, current: int, done: Tick) -> None:
        """Proves each voter that sent two different votes on one batch of a posted round, and
        each producer that sent two different submissions of it, while the book still judges
        it, and each contradiction with the ledger `_find_contradictions` found: the ledger
        slashes the signer and pays this node its settler's cut. Proven in the pass after the
        second message came (the refused message is not held, so a restart in between loses
        that evidence); a proof the chain did not take is sent again next pass."""
        for round_, collector in self.collectors.items():
            if round_ not in self.submission_roots or current > self.windows.challenge_end(round_):
                continue
            while collector.equivocations:
                both = collector.equivocations[0]
                vote = isinstance(both.first.message, Vote)
                try:
                    if vote:
                        self.book.prove_equivocation(both.first, both.second)
                    else:
                        self.book.prove_double_submission(both.first, both.second)
                except ChainError as exc:
                    if getattr(exc, "name", "") not in ("AlreadyProven", "NoLie"):
                        log.error("round %s: proving an equivocation failed: %s", round_, exc)
                        break  # tried again next pass
                    log.info("round %s: equivocation not proven (%s)", round_, exc)
                else:
                    signer = both.first.signer
                    producer = both.first.message.producer if vote else signer
                    done.equivocations.append((round_, producer, signer))
                    what = f"voted twice on {producer}'s batch" if vote else "submitted twice"
                    if both.second is None:
                        what = (
                            f"signed an agreement with {producer}'s batch and voted the other "
                            "side on the ledger"
                            if vote
                            else "submitted another batch on the ledger"
                        )
                    log.info("round %s: proved that %s %s", round_, signer, what)
                collector.equivocations.pop(0)

    def _find_contradictions(self, round_: int, collector: Collector, v4: set[str]) -> None:
        """Finds each voter that signed this node an agreement with a batch the ledger now holds
        (escalated, or submitted there too) and voted there the other side (the round's first
        votes on the ledger are all in by its verdict round), and each producer whose signed
        submission this node holds and that submitted another batch on the ledger; each goes to
        the collector's evidence, proven after the verdict root is posted (_prove_equivocations:
        a proof's wait must not delay the post, whose round is the only one it may come in)."""
        for producer in sorted(v4):
            submission = collector.submissions.get(producer)
            if submission is not None:
                s, on_ledger = submission.message, self.ledger.submission(round_, producer)
                if on_ledger.exists and (
                    on_ledger.digest.lower(),
                    on_ledger.rollouts,
                    on_ledger.score,
                    on_ledger.signal,
                ) != (s.digest.lower(), s.rollouts, s.score, s.signal):
                    collector.equivocations.append(Equivocation(submission, None))
            held = {v: s for (p, v), s in collector.votes.items() if p == producer}
            if not held:
                continue
            on_chain = self.ledger.votes_of(list(held), round_, producer)
            for signed, (first, _, _) in zip(held.values(), on_chain, strict=True):
                if first not in (0, 1):  # a vote there, not the agreement it signed
                    collector.equivocations.append(Equivocation(signed, None))

    def _release(self, current: int, done: Tick) -> None:
        for round_ in sorted(self.submission_roots):
            if current <= self.windows.challenge_end(round_):
                continue
            posted = self.book.round_of(round_)
            if posted.released or posted.void or posted.open_challenges:
                continue
            self.book.release(round_)
            done.released.append(round_)

    def _forget(self, current: int) -> None:
        """Lets go of the rounds no window can judge and no fold still needs."""
        keep = min(
            self.earned.folded - self.windows.lag, current - self.windows.challenge_end(0) - 2
        )
        for round_ in [r for r in self.collectors if r < keep]:
            self.desk.close(round_)
            del self.collectors[round_]
            self.submission_roots.pop(round_, None)
            self.verdict_roots.pop(round_, None)
            self.no_credits.discard(round_)
        self.held.forget_before(keep)


__all__ = ["POLL_S", "Aggregator", "Tick"]
