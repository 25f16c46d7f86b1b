"""A checker's side of the root lane (docs/scaling.md): the batches of a round whose submission
root is posted in the round book, read from the root's published list instead of the ledger's
`Submitted` logs, and voted on off chain.

Each poll reads the list of every round whose votes are open (from its submission root's round to
the book's vote close) once its beacon is drawn: one event in the root's block for the list's
digest, the list from IPFS (dialling the posting aggregator's daemon first), checked against the
root and count before an entry is read. Its entries of our family (each producer's family read
once for its life, in batches) become peers' submissions like any (journaled, and added to the
intake's window with the root's block: the stake snapshot and the beacon's block are the root's,
so the local draw is the book's), and are fetched, verified and proven as any; the others are
never journaled (their committees are never ours). What differs is the vote:

- a drawn checker's seat is the book's rule (`Auditor.seated`: rule 4 with the round's beacon and
  stakes as of the root's block), not the ledger's `seatsOf` (no ledger record exists);
- a vote that agrees with the claim (no findings, the signal exactly, the score within the
  tolerance, as the aggregator's collector and `attest` judge it) is signed and sent to the
  aggregator that posted the root (`RootVote`); any other (a dispute, unavailable) takes the batch
  to the ledger (`Escalate`, with the entry's place and path in the root), whose committee is the
  same and votes on chain from then on; so does ours, as on any ledger batch, saying what we
  signed.

A list that cannot be read is tried again after LIST_RETRY_S; one that is not its root's data is
left to auditors (`sapo audit book`): its batches are not voted on here.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from client.chain import ChainError
from client.chain.book import BookRound, RoundBook, Windows
from client.chain.events import EventReader
from client.chain.messages import Domain, Signed, Submission
from client.chain.roots import BadList, decode_submission
from client.chain.sumtree import SumTree
from client.node.aggregation.auditor import Auditor
from client.node.aggregation.lists import ListUnavailable
from client.node.aggregation.reading import open_posted_submissions
from client.node.intake.families import Families
from client.node.intake.window import Window
from client.node.journal.outbox import Attest, Escalate, RootVote, Unavailable
from client.node.journal.peers import PeerSubmission
from client.node.services import Services, Stage
from client.store import BlockStore
from client.units import BPS, SCORE_SCALE

log = logging.getLogger("sapo.node.intake.rootlane")

LIST_RETRY_S = 30.0  # a list that could not be fetched is asked for again after this


@dataclass(frozen=True)
class Entry:
    """A batch of a posted root: its place in the list and the signed submission there."""

    index: int
    signed: Signed
    round: BookRound


@dataclass
class _Read:
    posted: BookRound
    tree: SumTree | None  # None: the list is not its root's data


class RootIntake(Stage):
    """The root lane's rounds as one intake reads them (its thread only)."""

    def __init__(
        self,
        services: Services,
        book: RoundBook,
        store: BlockStore,
        window: Window,
        *,
        allow_private_peers: bool = False,
    ):
        super().__init__(services)
        self.book, self.store, self.window = book, store, window
        self.allow_private_peers = allow_private_peers
        self.me = services.address.lower()
        self.domain = Domain(chain_id=services.chain_id, contract=book.address)
        self.windows = Windows.of(self.params)
        self.book_events = EventReader(book)  # type: ignore[arg-type]
        self.auditor = Auditor.of(self.domain, services.ledger, self.params)
        self._rounds: dict[int, _Read] = {}  # the rounds whose list was read
        self._entries: dict[tuple[int, str], Entry] = {}
        self._retry_at: dict[int, float] = {}
        self._escalated: set[tuple[int, str]] = set()
        self._asked: set[tuple[int, str]] = set()  # asked the ledger once
        self._family: str | None = None  # ours, read once
        self.families = Families(services.ledger, services.journal)  # producers'

    # ---------------------------------------------------------------------------- reading

    def poll(self, current: int) -> None:
        """Reads the list of each round whose votes are open and whose beacon is drawn."""
        w = self.windows
        first = max(0, current - w.challenge_rounds - w.submit_rounds - 1)
        for round_ in [r for r in self._rounds if r < first]:
            del self._rounds[round_]
        self._entries = {k: e for k, e in self._entries.items() if k[0] >= first}
        self._escalated = {k for k in self._escalated if k[0] >= first}
        self._asked = {k for k in self._asked if k[0] >= first}
        for round_ in range(first, current - w.submit_rounds):
            if round_ in self._rounds or self._retry_at.get(round_, 0.0) > time.monotonic():
                continue
            try:
                self._read(round_)
            except ChainError as exc:
                log.info("round %s: the root lane's round not read: %s", round_, exc)
                return

    def _read(self, round_: int) -> None:
        posted = self.book.round_of(round_)
        if not posted.posted or posted.void or not posted.beacon:
            return  # nothing posted, voided, or its committees not drawn yet
        try:
            entries, tree = open_posted_submissions(
                self.store,
                self.book_events,
                self.ledger,
                posted,
                allow_private=self.allow_private_peers,
                keep_round=self.windows.challenge_end(round_),
            )
        except ListUnavailable as exc:
            log.info("round %s: the submission list not fetched (again later): %s", round_, exc)
            self._retry_at[round_] = time.monotonic() + LIST_RETRY_S
            return
        except BadList as exc:
            log.warning(
                "round %s: %s's submission list is not its root's data (%s): not voted on here; "
                "`sapo audit book %s --prove --challenge` challenges it",
                round_,
                posted.aggregator,
                exc,
                round_,
            )
            self._rounds[round_] = _Read(posted, None)
            return
        found = []
        claims = listed_claims(entries, round_, self.me)
        families = self.families.of({claim.node for _, _, claim in claims})
        for index, signed, claim in claims:
            if families.get(claim.node) != self._our_family():
                continue  # another family's batch: its committee is never ours
            key = (round_, claim.node)
            if self.window.blocks.get(key, posted.posted_block) != posted.posted_block:
                # submitted on the ledger (an escalated batch keeps the root's block, and
                # stays an entry: voted on the ledger once escalated): the book credits none of it
                continue
            self._entries[key] = Entry(index, signed, posted)
            found.append(claim)
        self._rounds[round_] = _Read(posted, tree)
        self.journal.peers.found_in_root(found, posted.posted_block)
        # what the TUI's peers table counts of every node in the root lane (once a list)
        listed = dict.fromkeys((claim.node for _, _, claim in claims), 1)
        mine = bytes.fromhex(self.me[2:])
        if any(entry[44:64] == mine for entry in entries):  # our own entry's producer word
            listed[self.me] = 1
        self.journal.peers.count_in_book(round_, "submissions", listed)
        self.window.add(found, posted.posted_block)
        log.info(
            "round %s: read %d submissions of our family from the root lane's %d",
            round_,
            len(found),
            len(entries),
        )

    def _our_family(self) -> str | None:
        if self._family is None:
            self._family = self.ledger.node_info(self.me).family
        return self._family

    # ------------------------------------------------------------------------------ seats

    def entry(self, sub: PeerSubmission) -> Entry | None:
        """The root lane's entry of `sub` (None: a ledger submission)."""
        return self._entries.get((sub.round, sub.node))

    def on_ledger(self, found: list[tuple[int, str]]) -> None:
        """The submissions the ledger's discovery just found (an escalation is one)."""
        self._escalated.update(found)

    def escalated(self, sub: PeerSubmission) -> bool:
        """Whether the batch is on the ledger now (a checker escalated it): then it is voted on
        there, by the same committee. The ledger is asked once a batch (a restart may have
        missed the event); later escalations come through discovery (`on_ledger`)."""
        key = (sub.round, sub.node)
        if key not in self._escalated and key not in self._asked:
            self._asked.add(key)
            if self.ledger.submission(sub.round, sub.node).exists:
                self._escalated.add(key)
        return key in self._escalated

    def seated(self, entry: Entry) -> bool:
        """The book's seat rule for us on the entry's committee; never on an entry its producer
        did not sign (or out of the book's ranges): that is the root's lie to prove (`sapo audit
        book ROUND --prove`), not a batch to vote on, and the book refuses its escalation. Its
        signature is checked here, for the few entries the local draw seats us on, not for the
        whole list."""
        signed = entry.signed
        lie = self.auditor.forged_lie(entry.round.round, signed)
        if lie:
            log.warning(
                "round %s: the root of %s lists a submission of %s that is a lie (%s): not voted "
                "on; prove it with `sapo audit book %s --prove`",
                entry.round.round,
                entry.round.aggregator,
                signed.signer,
                lie,
                entry.round.round,
            )
            return False
        return self.auditor.seated(entry.round, signed.signer, self.me)

    # ----------------------------------------------------------------------------- voting

    def vote(self, sub: PeerSubmission, vote: Attest | Unavailable) -> RootVote | Escalate:
        """What our vote becomes in the root lane: signed to the aggregator when it agrees with
        the claim as `attest` judges it, else the batch's escalation to the ledger with it."""
        entry = self._entries[(sub.round, sub.node)]
        if isinstance(vote, Attest) and self.agrees(sub, vote):
            return RootVote(
                round=sub.round,
                node=sub.node,
                digest=sub.digest,
                score=vote.score,
                signal=vote.signal,
            )
        tree = self._rounds[sub.round].tree
        assert tree is not None  # an entry comes only from a list that is its root's data
        proof = tuple(("0x" + n.hash.hex(), n.sum) for n in tree.proof(entry.index))
        return Escalate(
            round=sub.round,
            node=sub.node,
            unavailable=isinstance(vote, Unavailable),
            score=vote.score if isinstance(vote, Attest) else 0,
            signal=vote.signal if isinstance(vote, Attest) else 0,
            findings=vote.findings if isinstance(vote, Attest) else 0,
            index=entry.index,
            leaf=entry.signed.to_bytes().decode(),
            proof=proof,
        )

    def agrees(self, sub: PeerSubmission, vote: Attest) -> bool:
        most = sub.rollouts * SCORE_SCALE
        return (
            not vote.findings
            and vote.signal == sub.signal
            and abs(vote.score - sub.score) * BPS <= most * self.params.agree_tolerance_bps
        )


def listed_claims(
    entries: list[bytes], round_: int, me: str
) -> list[tuple[int, Signed, PeerSubmission]]:
    """The entries of a checked submission list of `round_` as (place, signed submission, the
    claim a peer's submission is), but `me`'s and those that do not decode (a lie the auditors
    prove: nothing to vote on). Signatures are not recovered here (`RootIntake.seated` checks
    the few the draw seats us on)."""
    found = []
    for index, raw in enumerate(entries):
        try:
            producer, submission, signature = decode_submission(raw)
        except BadList:
            continue
        node = producer.lower()
        if node == me or submission.round != round_:
            continue
        signed = Signed(kind="Submission", message=submission, signer=producer, signature=signature)
        found.append((index, signed, _claim(node, submission)))
    return found


def _claim(node: str, s: Submission) -> PeerSubmission:
    return PeerSubmission(
        round=s.round,
        node=node,
        digest=s.digest.lower(),
        rollouts=s.rollouts,
        score=s.score,
        signal=s.signal,
    )


__all__ = ["LIST_RETRY_S", "Entry", "RootIntake", "listed_claims"]
