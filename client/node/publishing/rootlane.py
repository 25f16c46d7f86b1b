"""What the publisher sends in the root lane (docs/scaling.md): as a producer, our batch's
submission signed and sent to the round's aggregator, drawn by the book (with
`[root_lane].submit`), instead of a transaction on the ledger (RootLane); as a drawn checker, our
votes (RootVoting).

- **Sending.** The submission is an EIP-712 `Submission` under the round book's domain, signed
  with the node's key, sent to the endpoint the aggregator lists in its on-chain metadata (a
  stranger's input: read as an http(s) origin only, client.node.aggregation.endpoint). What the
  aggregator receipts (its signature, checked to be the named aggregator's) is kept in the
  journal before anything else is done with it: it is our proof should its root leave the batch
  out. Only the round's drawn aggregator may post its root (RoundBook.aggregators), so only its
  receipt is sought. No receipt by the last round of the batch's submission window (no
  aggregator drawn yet, the aggregator is down, refused it, or signed with another key): the
  batch goes on the ledger (force inclusion), which costs gas and never credit; a round drawn
  with no aggregator, or to a node whose metadata lists no well-formed endpoint, goes there at
  once.
- **Opening.** The checkpoints our batch must open are drawn by the round's beacon in the book
  (the hash of the block after the submission root's), which the aggregator draws; if nobody has
  a few blocks after the root, we draw it.
- **Checking the root.** Once the submission root is posted, we fetch its list, check it as any
  auditor does, and if it leaves our receipted submission out (or holds any lie the list alone
  proves), we prove it on chain: the aggregator loses its bond, half of it to us.
- **Auditing the verdict root.** Once it is posted: the order of every credit, and the
  submission, votes and amount of ours and of AUDIT_SAMPLE others drawn at random, and our own
  earnings against our own credits kept by the audits before; a lie is proven the same way. A
  verdict root that leaves our batch uncredited although a quorum of our seated checkers'
  agreeing votes was receipted (their relays: client.node.publishing.relay) is proven too.
- **Challenging a list.** A list of our round that still cannot be read in the last two rounds
  of its challenge window, or that is not its root's data, calls for a data challenge: with
  `[root_lane].challenge_lists`, we bond one of a leaf nobody challenged (unless a challenge of
  the list is open) and claim it once unanswered (the root void, our bond back with half the
  aggregator's); without, the operator is told to send it (publishing.ours, `challenge`).
- **Voting.** An agreement is signed and sent to the aggregator that posted the round's root
  (its receipt journaled), and with `[root_lane].relay_votes` relayed to the batch's producer;
  a dispute or an unavailable batch is escalated to the ledger with our vote, or, escalated
  already, voted on the ledger as any batch.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from dataclasses import dataclass, replace

from client.chain.book import BookRound, EscalationVote, RoundBook, Windows
from client.chain.events import EventReader
from client.chain.hashing import keccak256
from client.chain.messages import BadMessage, Domain, Signed, Submission, Vote
from client.chain.models import TxResult
from client.chain.roots import (
    NO_INDEX,
    NO_ROUND,
    BadList,
    VerdictRoot,
    open_submission_list,
    open_verdict_list,
    submission_struct,
)
from client.credit import describe_findings
from client.node.aggregation.auditor import Auditor, Finding, v4_producers
from client.node.aggregation.claims import standing
from client.node.aggregation.earnings import EarningsBook, Entry, ledger_total
from client.node.aggregation.endpoint import AggregatorClient, EndpointError, aggregator_origin
from client.node.aggregation.lists import ListUnavailable, fetch_list
from client.node.aggregation.reading import fetch_posted_submissions, verdict_digest
from client.node.eventlog import Event
from client.node.journal import OutboxEntry
from client.node.journal.outbox import (
    Attest,
    Escalate,
    Relay,
    RootVote,
    Submit,
    Unavailable,
    VoteAppeal,
)
from client.node.journal.records import Kept
from client.node.publishing.handler import Handler
from client.node.publishing.votes import Votes
from client.node.services import Services, Stage
from client.store import BlockStore
from client.store.cid import digest_to_cid
from client.store.pubsub import PubSub
from client.units import SCORE_SCALE

log = logging.getLogger("sapo.node.rootlane")

# Blocks past the root's before we draw its beacon ourselves (the poster's job, which the book has
# it do on its next pass): DRAW_AFTER_BLOCKS, plus 0 to DRAW_SPREAD_BLOCKS - 1 more that each
# producer draws for itself and the round (`draw_delay`), so that when the poster does not draw,
# one producer does, not every producer of the round in one block (each later draw is a no-op
# that costs ~26,000 gas). Within BLOCKHASH_WINDOW (256) of the beacon's block, or it lapses.
DRAW_AFTER_BLOCKS = 6
DRAW_SPREAD_BLOCKS = 32
AUDIT_SAMPLE = 8  # others' credits a producer checks in each verdict root of its rounds


def draw_delay(producer: str, round_: int) -> int:
    """The blocks past a round's root after which `producer` draws its beacon if nobody has: a
    hash of its address and the round (the same at every pass and after a restart, and
    different from the other producers')."""
    seed = keccak256(bytes.fromhex(producer[2:]) + round_.to_bytes(8, "big"))
    return DRAW_AFTER_BLOCKS + int.from_bytes(seed[:4], "big") % DRAW_SPREAD_BLOCKS


class Unlisted(Exception):
    """The aggregator cannot be reached through what the chain says of it."""


class Unposted(str):
    """Why a receipted round has no submission root: its drawn aggregator posted none in the
    post round (provable, AggregatorDraw.proveUnposted, for C rounds after)."""


class NoAggregator(str):
    """Why a submission has no receipt to wait for: its round was drawn with no aggregator, or
    to a node whose metadata lists no well-formed endpoint, so it goes on the ledger at once."""


@dataclass(frozen=True)
class Unread:
    """A list of a round that cannot be read (yet): which one, and why (`store_down`: our own
    store did not answer, so nothing is known of the list)."""

    why: str
    verdict_tree: bool  # the verdict list (else the submission list)
    store_down: bool = False

    def __str__(self) -> str:
        return self.why

    @property
    def name(self) -> str:
        return "verdict list" if self.verdict_tree else "submission list"


@dataclass(frozen=True)
class LeafChallenge:
    """A data challenge of one leaf of a round's list, as the book's events tell it."""

    challenger: str
    answer_by: int  # the last round it may be answered in
    answered: bool  # the leaf was shown on chain (DataAnswered): the bond paid the answerer

    def open(self, current: int) -> bool:
        return not self.answered and current <= self.answer_by


class RootLane(Stage):
    """What the publisher's handlers ask of the root lane: our batch's submission (when
    `aggregator` names where it goes; None: our batches go on the ledger) and our votes as a
    drawn checker on its batches (RootVoting)."""

    def __init__(
        self,
        services: Services,
        book: RoundBook,
        submit: bool,
        store: BlockStore,
        *,
        allow_private_peers: bool = False,
        challenge_lists: bool = False,
        max_challenges_per_day: int = 12,
        pubsub: PubSub | None = None,
    ):
        """`submit`: whether our batches go to the root lane ([root_lane].submit); `store`:
        where the lists are fetched (an IPFS store dials the posting aggregator's
        daemon first, at the addresses its metadata lists: `allow_private_peers` as
        [store]'s); `challenge_lists`: [root_lane]'s, whether we bond the data challenges our
        audits call for, at most `max_challenges_per_day` in any 24 hours; `pubsub`: with
        [root_lane].relay_votes, our IPFS daemon's pubsub, where our receipted agreeing votes
        are published to their batches' producers and our checkers' come to us
        (client.node.publishing.relay; None: no relay)."""
        super().__init__(services)
        if book.tx.account is None:
            raise ValueError("the root lane signs with the node's key: give the book its account")
        self.book, self.store = book, store
        self.submit = submit
        self.domain = Domain(chain_id=services.chain_id, contract=book.address)
        self.windows = Windows.of(self.params)
        self._key = book.tx.account.key
        self._clients: dict[str, AggregatorClient] = {}  # by aggregator address (lowercase)
        self.allow_private_peers = allow_private_peers
        self.challenge_lists = challenge_lists
        self.max_challenges_per_day = max_challenges_per_day
        self.pubsub = pubsub
        # one challenge decision at a time: a round's two checks (its submission list's and its
        # verdict root's) run in parallel passes and may both find a list unreadable
        self.challenging = threading.Lock()
        self.book_events = EventReader(book)  # type: ignore[arg-type]
        self.ledger_events = EventReader(services.ledger)
        self.auditor = Auditor.of(self.domain, services.ledger, self.params)

    # ------------------------------------------------------------------------------ sending

    def endpoint(self, aggregator: str) -> AggregatorClient:
        """An aggregator's endpoint, as its on-chain metadata lists it (read again after a
        failure: it may have moved); raises Unlisted."""
        client = self._clients.get(aggregator.lower())
        if client is not None:
            return client
        info = self.ledger.node_info(aggregator)
        if not info.registered:
            raise Unlisted(f"aggregator {aggregator} is not registered on the ledger")
        try:
            listed = json.loads(info.metadata).get("aggregator")
            origin = aggregator_origin(listed)
        except (ValueError, AttributeError, EndpointError) as exc:
            raise Unlisted(
                f"aggregator {aggregator}'s metadata lists no endpoint ({exc})"
            ) from None
        client = AggregatorClient(origin, self.domain, aggregator=aggregator)
        self._clients[aggregator.lower()] = client
        return client

    def deliver(self, signed: Signed, aggregator: str, key: str) -> Kept | str:
        """Sends one signed message to `aggregator`; returns what was kept of its receipt
        (journaled under `key` before this returns), or why there is none (ChainError
        propagates: the metadata is read from the chain)."""
        try:
            [answer] = self.endpoint(aggregator).send([signed])
        except (EndpointError, Unlisted) as exc:
            client = self._clients.pop(aggregator.lower(), None)
            if client is not None:
                client.close()
            return str(exc)
        if answer.refused is not None:
            return f"aggregator {aggregator} refused it: {answer.refused}"
        if answer.receipt is None:
            return f"aggregator {aggregator} held it but gave no receipt signed by its key"
        kept = Kept(key, signed.message.round, aggregator, signed.to_bytes(), answer.receipt)
        self.journal.keep_receipt(kept)
        return kept

    def sign(self, message: Submission | Vote) -> Signed:
        return Signed.sign(message, self.domain, self._key)

    def send(self, message: Submit) -> Kept | str:
        """Sends our signed submission to its round's drawn aggregator; returns what was kept of
        its receipt, or why there is none (a NoAggregator when the round was drawn with none)."""
        assert self.submit
        drawn = self.book.drawn(message.round)
        if not drawn.drawn:
            return f"round {message.round}'s aggregator is not drawn yet"
        if drawn.aggregator is None:
            return NoAggregator(
                f"round {message.round} was drawn with no aggregator (the roster is empty, or "
                "the draw fell on left slots)"
            )
        try:
            self.endpoint(drawn.aggregator)
        except Unlisted as exc:  # what the chain says of it: no endpoint to wait for
            return NoAggregator(f"round {message.round}'s drawn aggregator: {exc}")
        submission = Submission(
            round=message.round,
            digest=message.digest,
            rollouts=message.rollouts,
            score=message.score,
            signal=message.signal,
        )
        key = Kept.submission_key(message.round)
        return self.deliver(self.sign(submission), drawn.aggregator, key)

    def kept(self, round_: int) -> Kept | None:
        return self.journal.receipt(Kept.submission_key(round_))

    # ----------------------------------------------------------------------------- beacon

    def beacon(self, round_: int) -> int | str | None:
        """The beacon of `round_` in the book: an int once drawn (drawn here when the poster
        has not, `draw_delay` blocks after its root, or once a whole round has passed since the
        root's, whichever comes first), None while it is to come, or why it never will (no root
        was posted in time, or it was voided)."""
        posted = self.book.round_of(round_)
        current = self.current_round()
        if posted.submissions_voided:
            return f"round {round_}'s submission root was voided"
        if not posted.posted:
            if current > self.windows.post_round(round_):
                return f"no submission root was posted for round {round_}"
            return None
        if posted.beacon:
            return posted.beacon
        if current > self.windows.vote_close(round_):
            return f"round {round_}'s beacon was never drawn"
        ours = draw_delay(self.book.tx.account.address, round_)
        # on a chain of short rounds the delay must not eat the committee's window
        late = current > self.windows.post_round(round_)
        if late or self.book.head() > posted.posted_block + ours:
            self.book.draw_beacon(round_)
            return self.book.round_of(round_).beacon or None
        return None

    # ----------------------------------------------------------------------- the list check

    def posted(self, round_: int) -> BookRound | str | None:
        """The round's posted submission root, None while it may come, or why it never will
        (Unposted: the drawn aggregator's proof window is open)."""
        posted = self.book.round_of(round_)
        if posted.posted:
            return posted
        current, post = self.current_round(), self.windows.post_round(round_)
        if current > post + self.params.challenge_rounds:
            return f"no submission root was posted for round {round_}: the receipt binds nobody"
        if current > post:
            return Unposted(f"no submission root was posted for round {round_}")
        return None

    def prove_unposted(self, kept: Kept) -> TxResult:
        """Proves that the round's drawn aggregator receipted our submission (`kept`) and posted
        no root: half its roster bond is ours, and it is off the roster."""
        signed = Signed.from_bytes(kept.message, self.domain)
        return self.book.prove_unposted(kept.round, signed, kept.receipt)

    def check_listed(self, posted: BookRound, kept: Kept) -> Finding | Unread | None:
        """Fetches the posted submission list and checks it as any auditor does; returns the
        finding to prove (our receipted submission left out, or any lie the list proves), why
        it cannot be read yet, or None: it lists our submission."""
        try:
            data = self._submission_list(posted)
        except ListUnavailable as exc:
            return Unread(str(exc), verdict_tree=False, store_down=exc.store_down)
        entries, finding = self.auditor.submissions(posted, data)
        if finding is None:
            signed = Signed.from_bytes(kept.message, self.domain)
            finding = self.auditor.left_out(posted, entries, signed, kept.receipt)
        return finding

    def _submission_list(self, posted: BookRound) -> bytes:
        """The posted root's submission list, pinned through its challenge window; raises
        ListUnavailable."""
        return fetch_posted_submissions(
            self.store,
            self.book_events,
            posted,
            self.ledger.node_info(posted.aggregator).metadata,
            allow_private=self.allow_private_peers,
            keep_round=self.windows.challenge_end(posted.round),
        )

    def audit(self, posted: BookRound) -> tuple[Finding | Unread | None, int | None]:
        """Checks the posted verdict root of a round our batch is in: the order of its credits,
        and the votes, amount and seats of our own credit and of AUDIT_SAMPLE others drawn at
        random (unpredictable to the aggregator: every node of a round samples its own, so each
        credit of a large round is checked by several nodes, at a few signature recoveries each),
        and our own credit's earnings (`_own_earnings`; our credit is kept for the next audits).
        Returns (the finding to prove, or which list cannot be read yet and why, or None; the
        number of signed votes its credit of our batch carries, None when it does not credit
        it)."""
        try:
            data = self._submission_list(posted)
            entries, _ = open_submission_list(data, posted.submissions, posted.count)
        except ListUnavailable as exc:
            return Unread(str(exc), verdict_tree=False, store_down=exc.store_down), None
        except BadList as exc:
            return Unread(str(exc), verdict_tree=False), None
        if posted.credits == 0:  # the no-credit root: nothing in it to prove but a dropped quorum
            return self._dropped_quorum(posted, entries, None), None
        digest = verdict_digest(self.ledger, self.book_events, self.windows, posted.round)
        if digest is None:
            return Unread(f"no VerdictsPosted event of round {posted.round}", True), None
        try:
            listed = fetch_list(
                self.store,
                digest_to_cid(digest),
                "verdicts",
                posted.round,
                posted.credits,
                keep_round=self.windows.challenge_end(posted.round),
            )
            opened = open_verdict_list(listed, posted.verdicts, posted.credits, posted.total)
        except ListUnavailable as exc:
            return Unread(str(exc), verdict_tree=True, store_down=exc.store_down), None
        except BadList:
            opened = None  # not the root's data: the auditor says so (a challenge)
        me = self.services.address.lower()
        ours = [
            i for i, c in enumerate(opened.credits if opened else []) if c.producer.lower() == me
        ]
        others = [i for i in range(posted.credits) if i not in ours]
        sample = ours + secrets.SystemRandom().sample(others, min(AUDIT_SAMPLE, len(others)))
        v4 = v4_producers(self.ledger, self.ledger_events, posted.round)
        finding = self.auditor.verdicts(posted, entries, listed, v4=v4, only=sample)
        if finding is None and opened is not None and ours:
            i = ours[0]
            entry = Entry(
                posted.round,
                i,
                opened.credits[i],
                opened.amounts[i],
                posted.total,
                tuple(opened.proof(i)),
            )
            # what our later credits' earnings are checked against (a round voided later is
            # left out by its standing, read again then)
            self.journal.keep_book_entry(posted.round, entry.to_json(), 3 * self.windows.lag)
            finding = self.auditor.earnings(posted, opened, i, self._own_earnings(posted, entry))
        if finding is None and opened is not None and not ours:
            finding = self._dropped_quorum(posted, entries, opened, v4)
        if finding is None and opened is not None:  # what the TUI's peers table counts
            credited: dict[str, int] = {}
            for credit in opened.credits:
                key = credit.producer.lower()
                credited[key] = credited.get(key, 0) + credit.signal
            self.journal.peers.count_in_book(posted.round, "verdicts", credited)
        return finding, len(opened.votes[ours[0]]) if opened and ours else None

    def _dropped_quorum(
        self,
        posted: BookRound,
        entries: list[bytes],
        verdicts: VerdictRoot | None,
        v4: set[str] | None = None,
    ) -> Finding | None:
        """Our batch left uncredited (by `verdicts`, opened from the verdict list; None: the
        no-credit root) although a quorum of our seated checkers' agreeing votes was receipted
        by the round's aggregator, as they relayed them to us (client.node.publishing.relay):
        the proof of it (proveUncredited). None without such a quorum."""
        receipted = []
        for message, receipt in self.journal.relayed_votes(posted.round):
            try:
                receipted.append((Signed.from_bytes(message, self.domain), receipt))
            except BadMessage:
                continue  # checked as it entered: not another deployment's, nor a stranger's
        if len(receipted) < self.params.quorum:
            return None
        if v4 is None:
            v4 = v4_producers(self.ledger, self.ledger_events, posted.round)
        return self.auditor.uncredited(posted, entries, verdicts, receipted, v4)

    def _own_earnings(self, posted: BookRound, entry: Entry) -> EarningsBook:
        """Our own credits, folded as the book settles them for round `posted.round`: those our
        audits kept (their rounds' standing read again now: a root can be voided after our
        audit), and the standing, totals and counts of the rounds our credit's earnings name.
        Enough for Auditor.earnings to judge our credit's earnings: what the aggregator wrote
        of what we earned before (it could leave out a credit of ours, and our claim would pay
        less), without folding every credit of every round."""
        lag = self.windows.lag
        horizon = posted.round - lag
        book = EarningsBook(self.params.reward_per_round, lag)
        mine: dict[int, Entry] = {}
        for q, text in self.journal.book_entries():
            if q <= horizon:
                try:
                    mine[q] = Entry.from_json(text)
                except ValueError as exc:
                    log.warning("round %s: our kept credit is unreadable (%s): left out", q, exc)
        e = entry.credit.earnings
        named: set[int] = set()
        if e.anchor != NO_ROUND and e.anchor <= horizon:
            named.add(e.anchor)
            # the recent credits' rounds too, unless there are more than lag - 1 of them (as many
            # reads): a shape the anchor alone proves a lie
            if len(e.recent) == lag - 1:
                named.update(
                    e.anchor - 1 - k
                    for k, index in enumerate(e.recent)
                    if index != NO_INDEX and e.anchor - 1 - k >= 0
                )
        looked = named | set(mine)
        first = max(0, min(looked | {horizon}) - lag, horizon - book.keep_rounds)
        book.folded, book.first = first - 1, first
        # the root is posted, so the chain is in its verdict round at least: the rounds settled
        # for it stand by then, whatever this node's clock says
        current = max(self.current_round(), self.windows.verdict_round(posted.round))
        for q in range(first, horizon + 1):
            if q in looked:
                round_q = self.book.round_of(q)
                if standing(round_q, current, self.windows):
                    kept = mine.get(q)
                    if kept is not None and not kept.proven_in(
                        round_q.verdicts, round_q.total, round_q.credits
                    ):
                        log.warning("round %s: our kept credit is not its root's: left out", q)
                        kept = None
                    book.fold_entries(
                        q,
                        round_q.total,
                        round_q.credits,
                        [kept] if kept else [],
                        ledger_total(self.ledger, q),  # not final: a ChainError, retried
                    )
                    continue
            book.fold(q, None)
        return book

    def prove(self, finding: Finding) -> TxResult:
        """Sends the proof a finding names (never a data challenge: `challenge` bonds one)."""
        if finding.challenge:
            raise ValueError("a data challenge is bonded by RootLane.challenge")
        return self.book.call(finding.function, finding.args)

    # ---------------------------------------------------------------------- data challenges

    def challenge_due(self, round_: int, verdict_tree: bool) -> bool:
        """Whether a list of `round_` that we still cannot read is challenged now: in the last
        two rounds of its challenge window (the aggregator had the rounds before to publish
        it), and at the earliest the round after the list's root was posted."""
        current = self.current_round()
        w = self.windows
        posted_in = w.verdict_round(round_) if verdict_tree else w.post_round(round_)
        end = w.challenge_end(round_)
        return max(posted_in + 1, end - 1) <= current <= end

    def challenges(self, round_: int, verdict_tree: bool) -> dict[int, LeafChallenge]:
        """The data challenges of `round_`'s submission or verdict list, by leaf: their
        DataChallenged and DataAnswered events, read from the round's post round on."""
        start = self.ledger.block_at(
            self.params.round_start(self.windows.post_round(round_)), self.book_events.start_block
        )
        found: dict[int, LeafChallenge] = {}
        names = ["DataChallenged", "DataAnswered"]
        for event in self.book_events.read(names, from_block=start, round=round_):
            args = event.args
            if bool(args["verdictTree"]) != verdict_tree:
                continue
            index = int(args["index"])
            if event.name == "DataChallenged":
                found[index] = LeafChallenge(str(args["challenger"]), int(args["answerBy"]), False)
            elif index in found:
                found[index] = replace(found[index], answered=True)
        return found

    def send_challenge(self, round_: int, verdict_tree: bool, index: int) -> TxResult:
        """Bonds a data challenge (the book's challengeBond) of leaf `index` of `round_`'s
        submission or verdict list."""
        return self.book.call(
            "challengeData", (round_, verdict_tree, index), value=self.book.bonds()[1]
        )

    def claim_unanswered(self, round_: int, verdict_tree: bool, index: int) -> TxResult:
        """Claims our challenge once its answer window closed (RoundBook.claimUnanswered)."""
        return self.book.call("claimUnanswered", (round_, verdict_tree, index))


class RootVoting(Handler):
    """Sends `RootVote` (our signed agreement, to the aggregator that posted the round's root)
    and `Escalate` (the batch to the ledger with our vote; once it is there already, our vote
    there as any ledger vote: `votes`)."""

    def __init__(self, services: Services, reader: EventReader, root: RootLane, votes: Votes):
        super().__init__(services, reader)
        self.root, self.votes = root, votes

    def root_vote(self, entry: OutboxEntry) -> None:
        message = entry.message
        assert isinstance(message, RootVote)
        round_, peer = message.round, message.node
        if self.current_round() > self.root.windows.vote_close(round_):
            self.give_up(entry, "the root lane's votes closed")
            return
        posted = self.root.book.round_of(round_)
        self.health.chain(True)
        if not posted.posted or posted.void:
            self.give_up(entry, f"round {round_}'s submission root is not posted or was voided")
            return
        vote = Vote(
            round=round_,
            producer=peer,
            digest=message.digest,
            unavailable=False,
            score=message.score,
            signal=message.signal,
            findings=0,
        )
        kept = self.root.deliver(self.root.sign(vote), posted.aggregator, entry.key)
        if isinstance(kept, str):
            if "refused it" in kept:
                self.give_up(entry, kept)
            else:  # not reachable: again next pass, until the votes close
                self.journal.attempted(entry.key, kept)
            return
        if self.root.pubsub is not None:  # to the producer, should the verdict root drop our vote
            self.journal.enqueue(Relay(round=round_, node=peer))
        self.journal.done(entry.key)
        self.events.emit(
            Event.PEER_ATTESTED,
            f"round {round_}: {peer[:10]}… agreed, score {message.score / SCORE_SCALE:.4f}, "
            f"signal {message.signal / SCORE_SCALE:.2f} (signed, receipted by the root lane's "
            f"aggregator {posted.aggregator})",
            round=round_,
            node=peer,
            score=message.score,
            signal=message.signal,
            findings=0,
            lane="root",
        )

    def escalate(self, entry: OutboxEntry) -> None:
        message = entry.message
        assert isinstance(message, Escalate)
        round_, peer = message.round, message.node
        if self.ledger.submission(round_, peer).exists:  # escalated first by another checker
            vote = (
                Unavailable(round=round_, node=peer)
                if message.unavailable
                else Attest(
                    round=round_,
                    node=peer,
                    score=message.score,
                    signal=message.signal,
                    findings=message.findings,
                )
            )
            self.votes.vote(replace(entry, message=vote))  # the same key: our first vote
            return
        if not self.root.windows.escalation_open(round_, self.current_round()):
            self.give_up(entry, "the root lane's escalation window closed")
            return
        try:
            signed = Signed.from_bytes(message.leaf.encode(), self.root.domain)
        except BadMessage as exc:
            self.give_up(entry, f"the list's entry is not a signed submission: {exc}")
            return
        proof = [(bytes.fromhex(h[2:]), amount) for h, amount in message.proof]
        vote = EscalationVote(message.unavailable, message.score, message.signal, message.findings)
        result = self.root.book.escalate(
            round_, message.index, submission_struct(signed), proof, vote
        )
        if not message.unavailable:  # as an attestation: appealed should its verdict lose it
            self.journal.enqueue(VoteAppeal(round=round_, node=peer))
        self.health.chain(True)
        self.journal.done(entry.key, result.tx_hash)
        found = describe_findings(message.findings)
        what = (
            "found nowhere"
            if message.unavailable
            else f"disputed: score {message.score / SCORE_SCALE:.4f}, signal "
            f"{message.signal / SCORE_SCALE:.2f}" + (f" ({found})" if found else "")
        )
        self.events.emit(
            Event.PEER_REPORTED_UNAVAILABLE if message.unavailable else Event.PEER_ATTESTED,
            f"round {round_}: {peer[:10]}… {what}; escalated from the root lane to the ledger",
            round=round_,
            node=peer,
            score=message.score,
            signal=message.signal,
            findings=message.findings,
            tx_hash=result.tx_hash,
            lane="escalated",
        )


__all__ = [
    "DRAW_AFTER_BLOCKS",
    "DRAW_SPREAD_BLOCKS",
    "LeafChallenge",
    "RootLane",
    "RootVoting",
    "Unlisted",
    "Unread",
    "draw_delay",
]
