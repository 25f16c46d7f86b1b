"""What anyone holding a round's published lists does with them: checks the aggregator's two roots
against the round book's rules and, on the first lie, gives the RoundBook call that proves it on
chain (docs/scaling.md, "What each proof defeats").

The rules are the contract's own (contracts/RoundBook.sol: `_forged`, `_creditLie`, the sort
orders), recomputed from public data: the signed messages in the lists, and the ledger's
registrations, families and stakes as of the submission root's block. A lie found here is one the
contract will take, and its `what` is the text the contract's `LieProven` event will carry. A list
that is not the posted root's data (withheld, garbled, or a tree whose sums do not add up, so that
no leaf of it can be shown) is answered with a data challenge: the aggregator must then post the
leaf on chain, or lose its bond.

Nothing in a list is trusted: it is checked against the root the book holds before any entry is
read, and every signature is recovered here before a finding names it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from client.chain.book import BookRound
from client.chain.hashing import keccak256
from client.chain.messages import (
    BadMessage,
    Domain,
    Signed,
    Submission,
    Vote,
    receipt_signer,
    recover,
)
from client.chain.models import Beacon, LedgerParams
from client.chain.roots import (
    NO_INDEX,
    NO_ROUND,
    BadList,
    Credit,
    VerdictRoot,
    decode_submission,
    open_submission_list,
    open_verdict_list,
    submission_struct,
    vote_struct,
    votes_hash,
)
from client.chain.sumtree import SumTree, leaf
from client.node.aggregation.earnings import EarningsBook, Entry
from client.units import BPS, MAX_ROLLOUTS, SCORE_SCALE

# a neighbour that does not exist (the left-out submission sorts first or last): ignored by the
# book, which reads only the leaves between 0 and the count
EMPTY_SUBMISSION = ("0x" + "00" * 20, (0, bytes(32), 0, 0, 0), b"")


class LedgerReads(Protocol):
    """What the auditor reads from the ledger (client.chain.Ledger has it)."""

    def node_info(self, node: str): ...
    def node_infos(self, nodes: list[str]) -> list: ...
    def stake_at(self, node: str, block: int) -> int: ...
    def stakes_at(self, nodes: list[str], block: int) -> list[int]: ...
    def family_stake_at(self, family: str, block: int) -> int: ...


@dataclass(frozen=True)
class Finding:
    """A lie (or data nobody can check) and the RoundBook call that settles it."""

    what: str  # the contract's LieProven text, or why the data is challenged
    function: str
    args: tuple
    challenge: bool = False  # a data challenge: send it with the book's challengeBond


@dataclass
class Auditor:
    domain: Domain
    ledger: LedgerReads
    quorum: int
    checkers: int
    tolerance_bps: int
    min_stake: int
    # what it read of the ledger: registration and family are for life, a stake as of a past
    # block never changes, so each is read once per address (and block)
    _infos: dict = field(default_factory=dict, repr=False)
    _stakes: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, domain: Domain, ledger: LedgerReads, params: LedgerParams) -> Auditor:
        """The auditor of a deployment with the ledger's parameters `params`."""
        return cls(
            domain,
            ledger,
            quorum=params.quorum,
            checkers=params.checkers,
            tolerance_bps=params.agree_tolerance_bps,
            min_stake=params.min_stake,
        )

    def _info(self, node: str):
        key = node.lower()
        if key not in self._infos:
            self._infos[key] = self.ledger.node_info(node)
        return self._infos[key]

    def _stake_at(self, node: str, block: int) -> int:
        key = (node.lower(), block)
        if key not in self._stakes:
            self._stakes[key] = self.ledger.stake_at(node, block)
        return self._stakes[key]

    def _family_stake_at(self, family: str, block: int) -> int:
        key = (family, block)
        if key not in self._stakes:
            self._stakes[key] = self.ledger.family_stake_at(family, block)
        return self._stakes[key]

    def know(self, nodes: Collection[str]) -> None:
        """Reads, in JSON-RPC batches, the registrations of `nodes` not read yet (an aggregator
        learns the swarm's at start: each submission is checked against them as it enters)."""
        fresh = sorted({n.lower() for n in nodes} - self._infos.keys())
        if fresh:
            for node, info in zip(fresh, self.ledger.node_infos(fresh), strict=True):
                self._infos[node] = info

    def prefetch(self, nodes: Collection[str], block: int) -> None:
        """Reads, in JSON-RPC batches, what checking a round's votes asks of each of `nodes` and
        is not read yet: its registration and family, and its stake as of `block` (the
        submission root's). One batched read instead of one call per voter."""
        wanted = sorted({n.lower() for n in nodes})
        self.know(wanted)
        fresh = [n for n in wanted if (n, block) not in self._stakes]
        if fresh:
            for node, stake in zip(fresh, self.ledger.stakes_at(fresh, block), strict=True):
                self._stakes[(node, block)] = stake

    def registered(self, node: str) -> bool:
        """Whether `node` is a registered node of the ledger (for life: read once)."""
        return bool(self._info(node).registered)

    def seated(
        self, posted: BookRound, producer: str, voter: str, *, remember: bool = True
    ) -> bool:
        """Whether `voter` holds a seat on `producer`'s committee of the round: the ledger's
        rule 4 with the round's beacon and stakes as of the submission root's block, as the book's
        `_seated` judges it. Without `remember`, the voter's registration and stake are read
        and not kept (a voter a stranger names: keeping each would let a flood of fresh keys
        grow the caches without bound)."""
        family = self._info(producer).family
        total = self._family_stake_at(family, posted.posted_block)
        return self._seated(posted, producer, voter, family, total, remember)

    # ------------------------------------------------------------------------ submissions

    def submissions(
        self, posted: BookRound, data: bytes | None
    ) -> tuple[list[bytes], Finding | None]:
        """Checks the submission list; returns its entries (empty when it cannot be read) and
        the first finding, if any."""
        if data is None:
            return [], self._challenge(posted.round, False, 0, "the submission list is withheld")
        try:
            entries, tree = open_submission_list(data, posted.submissions, posted.count)
        except BadList as exc:
            return [], self._challenge(posted.round, False, 0, str(exc))
        decoded = []
        for index, entry in enumerate(entries):
            try:
                decoded.append(decode_submission(entry))
            except BadList as exc:  # in the root, but no SignedSubmission encodes to it
                return entries, self._challenge(posted.round, False, index, str(exc))
        for index, (producer, message, signature) in enumerate(decoded):
            lie = self._forged(posted.round, producer, message, signature)
            if lie:
                return entries, Finding(
                    lie,
                    "proveForgedSubmission",
                    (posted.round, index, _submission(decoded[index]), _proof(tree, index)),
                )
        for index in range(len(decoded) - 1):
            if int(decoded[index][0], 16) >= int(decoded[index + 1][0], 16):
                return entries, Finding(
                    "submissions out of order",
                    "proveUnsorted",
                    (
                        posted.round,
                        index,
                        _submission(decoded[index]),
                        _proof(tree, index),
                        _submission(decoded[index + 1]),
                        _proof(tree, index + 1),
                    ),
                )
        return entries, None

    def left_out(
        self, posted: BookRound, entries: list[bytes], signed: Signed, receipt: str
    ) -> Finding | None:
        """What a producer holding its aggregator's `receipt` of `signed` (its submission of the
        round) does once the submission list is checked (`submissions`, no finding): if the list
        leaves it out, the call that proves it (RoundBook.proveLeftOut: the two leaves its
        producer sorts between). None when it is in the list, or when the list is out of order
        there (`submissions` finds that lie first). The receipt is taken as is: the book checks
        it was the posting aggregator's."""
        me = int(signed.signer, 16)
        producers = [int(decode_submission(e)[0], 16) for e in entries]
        if me in producers:
            return None
        place = next((i for i, p in enumerate(producers) if p > me), len(producers))
        if place > 0 and producers[place - 1] >= me:
            return None  # out of order: proveUnsorted, not this
        tree = SumTree([leaf(keccak256(e), 0) for e in entries])

        def neighbour(i: int) -> tuple[tuple, list]:
            if 0 <= i < len(entries):
                return _submission(decode_submission(entries[i])), _proof(tree, i)
            return EMPTY_SUBMISSION, []

        below, above = neighbour(place - 1), neighbour(place)
        return Finding(
            "a receipted submission left out",
            "proveLeftOut",
            (
                posted.round,
                submission_struct(signed),
                bytes.fromhex(receipt[2:]),
                place,
                *below,
                *above,
            ),
        )

    def uncredited(
        self,
        posted: BookRound,
        entries: list[bytes],
        verdicts: VerdictRoot | None,
        receipted: Sequence[tuple[Signed, str]],
        v4: Collection[str] = (),
    ) -> Finding | None:
        """What whoever holds a batch's agreeing votes with the aggregator's receipt of each
        (`receipted`: its checkers', sent on to it) does once both lists are checked and hold:
        if the verdict root (`verdicts`, opened from the verdict list; None: the no-credit root)
        leaves the batch
        uncredited although a quorum of those votes are its seated checkers' and agree, the call
        that proves it (RoundJudge.proveUncredited). None when the batch is credited, its
        producer is in `v4` (the ledger holds its batch of the round), or the votes that count
        are fewer than quorum."""
        if not receipted:
            return None
        producer = receipted[0][0].message.producer.lower()
        if producer in {p.lower() for p in v4}:
            return None
        decoded = [decode_submission(e) for e in entries]
        found = [(i, d) for i, d in enumerate(decoded) if d[0].lower() == producer]
        if len(found) != 1:
            return None
        index, (_, claim, _) = found[0]
        if verdicts is not None and any(c.index == index for c in verdicts.credits):
            return None
        most = claim.rollouts * SCORE_SCALE
        counted: dict[str, tuple[Signed, str]] = {}
        for vote, receipt in receipted:
            v = vote.message
            if not isinstance(v, Vote) or v.unavailable or v.round != posted.round:
                continue
            if v.producer.lower() != producer or v.digest != claim.digest:
                continue
            if (
                v.signal != claim.signal
                or abs(v.score - claim.score) * BPS > most * self.tolerance_bps
            ):
                continue
            try:
                if receipt_signer(self.domain, vote, receipt).lower() != posted.aggregator.lower():
                    continue
                vote.verify(self.domain)
            except BadMessage:
                continue
            if self.seated(posted, producer, vote.signer):
                counted.setdefault(vote.signer.lower(), (vote, receipt))
        if len(counted) < self.quorum:
            return None
        # a quorum is all the proof needs: each vote more is a seat draw and two key recoveries
        # on chain (all the receipted votes of a batch at K = 10 cost up to 490,000 gas more)
        ordered = sorted(counted.values(), key=lambda vr: int(vr[0].signer, 16))[: self.quorum]
        tree = SumTree([leaf(keccak256(e), 0) for e in entries])
        return Finding(
            "a receipted quorum left uncredited",
            "proveUncredited",
            (
                posted.round,
                index,
                _submission(decoded[index]),
                _proof(tree, index),
                [vote_struct(v) for v, _ in ordered],
                [bytes.fromhex(r.removeprefix("0x")) for _, r in ordered],
                [] if verdicts is None else verdicts.around(posted.round, index),
            ),
        )

    def escalation(self, posted: BookRound, entries: list[bytes], producer: str) -> tuple | None:
        """The arguments of RoundBook.escalate for `producer`'s batch in the round's checked
        submission list (`submissions`, no finding): its place, its leaf and its path to the
        root; None when the list holds no batch of it."""
        wanted = int(producer, 16)
        for i, entry in enumerate(entries):
            decoded = decode_submission(entry)
            if int(decoded[0], 16) == wanted:
                tree = SumTree([leaf(keccak256(e), 0) for e in entries])
                return (posted.round, i, _submission(decoded), _proof(tree, i))
        return None

    def forged_lie(self, round_: int, signed: Signed) -> str:
        """Why a listed submission of round `round_` is a lie the book proves
        (proveForgedSubmission), "" when it is not."""
        message = signed.message
        if not isinstance(message, Submission):
            return "not a submission"
        return self._forged(round_, signed.signer, message, signed.signature)

    def _forged(self, round_: int, producer: str, s: Submission, signature: str) -> str:
        try:
            signer = recover(self.domain, s, signature)
        except BadMessage:
            signer = None
        if signer != producer or int(producer, 16) == 0:
            return "a submission its producer did not sign"
        if s.round != round_:
            return "a submission of another round"
        if not self._info(producer).registered:
            return "a submission of no registered node"
        most = s.rollouts * SCORE_SCALE
        if s.rollouts == 0 or s.rollouts > MAX_ROLLOUTS or s.score > most or s.signal > most // 2:
            return "a submission out of range"
        return ""

    # --------------------------------------------------------------------------- verdicts

    def verdicts(
        self,
        posted: BookRound,
        entries: list[bytes],
        data: bytes | None,
        earned: EarningsBook | None = None,
        v4: Collection[str] = (),
        only: Collection[int] | None = None,
    ) -> Finding | None:
        """Checks the verdict list against the round's (already checked) submission entries, and
        each credit's earnings against `earned` (the standing rounds this auditor folded; not
        checked without it, or before it has folded every round settled for this one). `v4`: the
        producers the ledger holds a submission of for this round (lowercase; its Submitted
        events of the round), whom the book must not credit. `only`: the places of the credits
        whose votes, amounts and earnings are checked (None: every one); the order of all."""
        in_v4 = {p.lower() for p in v4}
        if posted.credits == 0:
            return None  # the book took it only as the no-credit root: nothing in it to prove
        if data is None:
            return self._challenge(posted.round, True, 0, "the verdict list is withheld")
        try:
            opened = open_verdict_list(data, posted.verdicts, posted.credits, posted.total)
        except BadList as exc:
            return self._challenge(posted.round, True, 0, str(exc))
        subs = SumTree([leaf(keccak256(e), 0) for e in entries])
        every = range(len(opened.credits))
        checked = set(every) if only is None else set(every).intersection(only)
        voters = {v[0] for i in checked for v in opened.votes[i]}
        producers = {opened.credits[i].producer for i in checked}
        self.prefetch(voters | producers, posted.posted_block)
        for i, (credit, amount, votes) in enumerate(
            zip(opened.credits, opened.amounts, opened.votes, strict=True)
        ):
            if i not in checked:
                continue
            if votes_hash(votes) != credit.votes:
                # the list's votes are not the ones the leaf holds: nothing to prove a lie with
                return self._challenge(posted.round, True, i, "a credit's votes are not its leaf's")
            lie = self._credit_lie(posted, credit, amount, votes, entries, in_v4)
            if lie:
                index = min(credit.index, len(entries) - 1)
                return Finding(
                    lie,
                    "proveBadCredit",
                    (
                        posted.round,
                        i,
                        credit.struct(),
                        amount,
                        opened.proof(i),
                        _submission(decode_submission(entries[index])),
                        _proof(subs, index),
                        votes,
                    ),
                )
            if earned is not None:
                finding = self.earnings(posted, opened, i, earned)
                if finding is not None:
                    return finding
        for i in range(len(opened.credits) - 1):
            if opened.credits[i].index >= opened.credits[i + 1].index:
                return Finding(
                    "credits out of order",
                    "proveCreditsUnsorted",
                    (
                        posted.round,
                        i,
                        opened.credits[i].struct(),
                        opened.amounts[i],
                        opened.proof(i),
                        opened.credits[i + 1].struct(),
                        opened.amounts[i + 1],
                        opened.proof(i + 1),
                    ),
                )
        return None

    def earnings(
        self, posted: BookRound, opened: VerdictRoot, i: int, earned: EarningsBook
    ) -> Finding | None:
        """The lie in the earnings of credit `i` of a round's opened verdict list, judged
        against `earned` once it has folded every round settled for this one (None before, or
        when they hold). `earned` need hold only this credit's producer's credits and the rounds
        its earnings name: a producer checks its own earnings so (RootLane.audit)."""
        if posted.round - earned.lag > earned.folded:
            return None
        credit = opened.credits[i]
        found = self._earnings(posted.round, credit, earned)
        if found is None:
            return None
        what, function, shown = found
        head = (posted.round, i, credit.struct(), opened.amounts[i], opened.proof(i))
        return Finding(what, function, (*head, shown))

    def _credit_lie(
        self,
        posted: BookRound,
        credit: Credit,
        amount: int,
        votes: list[tuple],
        entries: list[bytes],
        in_v4: set[str],
    ) -> str:
        if amount != credit.signal:
            return "a credit's amount is not its signal"
        if credit.index >= posted.count:
            return "a credit of no submission"
        if credit.producer.lower() in in_v4:  # a round of a producer is paid by one lane
            return "a credit the v4 lane holds"
        producer, s, signature = decode_submission(entries[credit.index])
        if (
            credit.producer != producer
            or credit.digest != s.digest
            or credit.score != s.score
            or credit.signal != s.signal
        ):
            return "a credit that is not its submission's"
        if self._forged(posted.round, producer, s, signature):
            return "a credit of a forged submission"
        if len(votes) < self.quorum:
            return "a credit with fewer votes than quorum"
        most = s.rollouts * SCORE_SCALE
        family = self._info(producer).family
        family_stake = self._family_stake_at(family, posted.posted_block)
        last = 0
        for voter, score, findings, sig in votes:
            if int(voter, 16) <= last:
                return "a credit's votes not sorted by voter"
            last = int(voter, 16)
            vote = Vote(
                round=posted.round,
                producer=producer,
                digest=credit.digest,
                unavailable=False,
                score=score,
                signal=credit.signal,
                findings=findings,
            )
            try:
                signer = recover(self.domain, vote, "0x" + sig.hex())
            except BadMessage:
                signer = None
            if signer is None or signer.lower() != voter.lower():
                return "a vote its voter did not sign"
            if abs(score - credit.score) * BPS > most * self.tolerance_bps:
                return "a vote that does not agree"
            if not self._seated(posted, producer, voter, family, family_stake):
                return "a vote from a node without a seat"
        return ""

    def _earnings(
        self, round_: int, credit: Credit, earned: EarningsBook
    ) -> tuple[str, str, object] | None:
        """A lie in a credit's earnings: (what, the proof's function, its shown leaves), as
        RoundBook's `_earningsLie` and proveSkippedCredit judge; None when they hold (or the
        leaf a proof would need is no longer held)."""
        e, lag, producer = credit.earnings, earned.lag, credit.producer.lower()

        def bad(what: str, shown: Sequence[Entry] = ()) -> tuple[str, str, object]:
            return what, "proveBadEarnings", [s.shown() for s in shown]

        if (
            e.anchor != NO_ROUND
            and e.anchor <= round_ - lag
            and not all(earned.known(q) for q in range(max(0, e.anchor - lag + 1), e.anchor + 1))
        ):
            return None  # rounds older than this auditor keeps: it cannot judge them
        if e.anchor == NO_ROUND:
            if e.settled or e.recent:
                return bad("earnings with no anchor")
        elif len(e.recent) != lag - 1:
            return bad("earnings of the wrong shape")
        elif round_ < lag or e.anchor > round_ - lag or not earned.standing(e.anchor):
            return bad("an anchor that is not a settled round")
        elif e.anchor_index >= earned.counts.get(e.anchor, NO_INDEX):
            return bad("an anchor past its round's credits")
        else:
            for k, index in enumerate(e.recent):
                if index == NO_INDEX:
                    continue
                if e.anchor < k + 1:
                    return bad("a recent credit before the first round")
                q = e.anchor - 1 - k
                if not earned.standing(q):
                    return bad("a recent credit in a round that does not stand")
                if index >= earned.counts.get(q, NO_INDEX):
                    return bad("a recent credit past its round's credits")
            anchor = earned.at(e.anchor, e.anchor_index)
            if anchor is None:
                return None
            shown = [anchor]
            if anchor.credit.producer.lower() != producer:
                return bad("an anchor that is not the producer's credit", shown)
            total = anchor.credit.earnings.settled + earned.share(anchor)
            for k, index in enumerate(e.recent):
                if index == NO_INDEX:
                    continue
                recent = earned.at(e.anchor - 1 - k, index)
                if recent is None:
                    return None
                shown.append(recent)
                if recent.credit.producer.lower() != producer:
                    return bad("a recent credit that is not the producer's", shown)
                total += earned.share(recent)
            if total != e.settled:
                return bad("earnings that do not add up", shown)
        expected = earned.earnings(producer, round_)
        if expected == e:
            return None
        skipped = None
        if e.anchor == NO_ROUND or expected.anchor > e.anchor:
            skipped = earned.entry(producer, expected.anchor)
        else:
            k = next(
                (k for k, i in enumerate(e.recent) if i == NO_INDEX != expected.recent[k]), None
            )
            if k is not None:
                skipped = earned.entry(producer, e.anchor - 1 - k)
        if skipped is None:
            return None
        return "earnings that skip a credit", "proveSkippedCredit", skipped.shown()

    def _seated(
        self, posted: BookRound, producer: str, voter: str, family, total: int, remember=True
    ) -> bool:
        if voter.lower() == producer.lower():
            return False
        info = self._info(voter) if remember else self.ledger.node_info(voter)
        if info.family != family:
            return False
        block = posted.posted_block
        stake = self._stake_at(voter, block) if remember else self.ledger.stake_at(voter, block)
        if stake < self.min_stake:
            return False
        draw = Beacon(
            round=posted.round,
            node=producer,
            beacon=posted.beacon,
            block=posted.posted_block + 1,
            ready=True,
        )
        return draw.seats(voter, stake, total, self.checkers) > 0

    @staticmethod
    def _challenge(round_: int, verdict_tree: bool, index: int, why: str) -> Finding:
        return Finding(why, "challengeData", (round_, verdict_tree, index), challenge=True)


def v4_producers(ledger, reader, round_: int) -> set[str]:
    """The producers the ledger holds a submission of for `round_` (lowercase): its `Submitted`
    events of the round, read from the round's first block (`reader`: an EventReader of the
    ledger). The book must not credit them: the v4 lane pays them."""
    params = ledger.params()
    first = ledger.block_at(params.genesis + round_ * params.round_length, low=reader.start_block)
    events = reader.read(["Submitted"], from_block=first, round=round_)
    return {e.args["node"].lower() for e in events}


def _proof(tree: SumTree, index: int) -> list[tuple[bytes, int]]:
    return [n.as_abi() for n in tree.proof(index)]


def _submission(decoded: tuple[str, Submission, str]) -> tuple:
    producer, s, signature = decoded
    return (
        producer,
        (s.round, bytes.fromhex(s.digest[2:]), s.rollouts, s.score, s.signal),
        bytes.fromhex(signature[2:]),
    )


__all__ = ["Auditor", "Finding", "VerdictRoot", "v4_producers"]
