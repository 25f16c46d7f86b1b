"""What an aggregator collects for one round of the root lane (docs/scaling.md): the producers'
signed submissions and the drawn checkers' signed agreeing votes, each validated where it
enters, and the two roots it posts from them (client.chain.roots).

Nothing a peer sends is trusted: a message must be signed under this deployment's domain
(`Signed.from_bytes` checks size, fields, canonical signature and signer), name this round,
and fit what is already held. A second, different message of the same signer on the same thing
is kept as evidence (equivocation) and changes nothing held: the first one stands. A vote counts
only once its submission is held, it agrees with the claim (the signal exactly, the score within
the ledger's tolerance, as `attest` judges), and its voter holds a seat (`seated`, the ledger's
draw, computed by the caller from the round's beacon and snapshot).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from client.chain.messages import BadMessage, Domain, Signed, Submission, Vote
from client.chain.roots import (
    NO_EARNINGS,
    Credit,
    Earnings,
    SubmissionRoot,
    VerdictRoot,
    vote_struct,
    votes_hash,
)
from client.units import BPS, MAX_ROLLOUTS, SCORE_SCALE


class Refused(ValueError):
    """A message the collector does not take; the text says why (what the sender is told)."""


# how a second, different vote of one voter on one batch is refused (and kept as evidence)
SECOND_VOTE = "a second, different vote on this batch"


@dataclass
class Equivocation:
    """Two different messages one signer signed on the same thing: of two votes, the proof the
    book slashes their voter for (RoundJudge.proveEquivocation, which the aggregator sends); of
    two submissions, the proof it slashes their producer for (proveDoubleSubmission). `second`
    None: `first` and the signer's own record on the ledger take two sides (the aggregator reads
    it before its verdict root)."""

    first: Signed
    second: Signed | None


@dataclass
class Collector:
    """The messages of one round, as one aggregator holds them."""

    domain: Domain
    round: int
    tolerance_bps: int
    # whether an address is a registered node of the ledger (registration is for life): a root
    # holding a submission of anyone else is a lie anyone proves (proveForgedSubmission), so an
    # aggregator that took one would lose its bond to whoever sent it
    registered: Callable[[str], bool]
    submissions: dict[str, Signed] = field(default_factory=dict)  # producer -> its submission
    votes: dict[tuple[str, str], Signed] = field(default_factory=dict)  # (producer, voter)
    equivocations: list[Equivocation] = field(default_factory=list)
    closed: bool = False  # the submission root is built: no submission enters after it
    _equivocated: set[tuple[str, ...]] = field(default_factory=set)  # the things kept evidence of

    def accept(self, data: bytes) -> Signed:
        """Takes one message a peer sent (its JSON bytes); returns it, or raises Refused."""
        try:
            signed = Signed.from_bytes(data, self.domain)
        except BadMessage as exc:
            raise Refused(str(exc)) from None
        return self.take(signed)

    def take(self, signed: Signed) -> Signed:
        """Takes one message already parsed and verified under this collector's domain
        (`Signed.from_bytes`); returns the one held, or raises Refused."""
        if signed.message.round != self.round:
            raise Refused(f"a message of round {signed.message.round}; this is round {self.round}")
        if isinstance(signed.message, Submission):
            return self._submission(signed)
        return self._vote(signed)

    def _submission(self, signed: Signed) -> Signed:
        if self.closed:
            raise Refused("the round's submissions are closed (its root is posted)")
        producer = signed.signer.lower()
        held = self.submissions.get(producer)
        if held is not None:
            if held.message != signed.message:
                self._evidence(("submission", producer), held, signed)
                raise Refused("a second, different submission of this round: the first stands")
            return held
        s = signed.message
        most = s.rollouts * SCORE_SCALE
        if s.rollouts > MAX_ROLLOUTS or s.score > most or s.signal > most // 2:
            raise Refused(
                f"rollouts, score or signal out of range for {s.rollouts} rollouts "
                f"(at most {MAX_ROLLOUTS} rollouts, a score of SCORE_SCALE each, half that signal)"
            )
        if not self.registered(signed.signer):
            raise Refused(f"{signed.signer} is not a registered node of the ledger")
        self.submissions[producer] = signed
        return signed

    def _vote(self, signed: Signed) -> Signed:
        v = signed.message
        assert isinstance(v, Vote)
        producer, voter = v.producer.lower(), signed.signer.lower()
        held = self.votes.get((producer, voter))
        if held is not None:
            # whatever the second one says (another score, a dispute, unavailable), two votes
            # of one voter on one batch are what the book slashes (proveEquivocation)
            if held.message != signed.message:
                self._evidence(("vote", producer, voter), held, signed)
                raise Refused(f"{SECOND_VOTE}: the first stands")
            return held
        if v.unavailable:
            raise Refused("an unavailable vote goes on chain (reportUnavailable), not here")
        if producer == voter:
            raise Refused("a producer does not vote on its own batch")
        sub = self.submissions.get(producer)
        if sub is None:
            raise Refused(f"no submission of {v.producer} is held for round {self.round}")
        claim = sub.message
        if v.digest != claim.digest:
            raise Refused("the vote names another batch than the one submitted")
        most = claim.rollouts * SCORE_SCALE
        if v.signal != claim.signal or abs(v.score - claim.score) * BPS > most * self.tolerance_bps:
            raise Refused("a vote that does not agree with the claim goes on chain (attest)")
        self.votes[(producer, voter)] = signed
        return signed

    def _evidence(self, key: tuple[str, ...], held: Signed, signed: Signed) -> None:
        """Keeps the first pair of one signer's messages on one thing: one proves it (the book
        slashes a voter once per batch), and a signer that sends a thousand more variants makes
        the collector hold no more."""
        if key not in self._equivocated:
            self._equivocated.add(key)
            self.equivocations.append(Equivocation(held, signed))

    def drop(self, signed: Signed) -> None:
        """Lets go of `signed`, held last (its record could not be written: the sender is told to
        send it again)."""
        if isinstance(signed.message, Submission):
            if self.submissions.get(signed.signer.lower()) is signed:
                del self.submissions[signed.signer.lower()]
        else:
            key = (signed.message.producer.lower(), signed.signer.lower())
            if self.votes.get(key) is signed:
                del self.votes[key]

    def submission_root(self) -> SubmissionRoot:
        """The round's submission root (and no submission enters after it)."""
        if not self.submissions:
            raise Refused(f"no submission is held for round {self.round}")
        self.closed = True
        return SubmissionRoot(list(self.submissions.values()))

    def verdict_root(
        self,
        root: SubmissionRoot,
        seated: Callable[[str, str], bool],
        quorum: int,
        escalated: set[str] = frozenset(),  # type: ignore[assignment]
        earnings: Callable[[str], Earnings] | None = None,
    ) -> VerdictRoot | None:
        """The credits of the batches whose seated agreeing voters reach `quorum`, none of the
        producers in `escalated` (lowercase: a submission of theirs for this round is in the v4
        lane, its own or an escalation, and the v4 lane judges and pays it; the book proves a
        credit of one a lie), each with its producer's `earnings` (EarningsBook.earnings for
        this round; none given: no producer has earned yet); None when no batch is credited."""
        by_producer: dict[str, list[str]] = {}  # one pass over the votes, not one per batch
        for producer, voter in self.votes:
            by_producer.setdefault(producer, []).append(voter)
        credits, lists = [], []
        for index, sub in enumerate(root.signed):
            producer = sub.signer.lower()
            if producer in escalated:
                continue
            voters = sorted(
                (v for v in by_producer.get(producer, ()) if seated(producer, v)),
                key=lambda a: int(a, 16),
            )
            if len(voters) < quorum:
                continue
            votes = [vote_struct(self.votes[(producer, voter)]) for voter in voters]
            s = sub.message
            earned = NO_EARNINGS if earnings is None else earnings(sub.signer)
            credits.append(
                Credit(index, sub.signer, s.digest, s.score, s.signal, votes_hash(votes), earned)
            )
            lists.append(votes)
        return VerdictRoot(credits, votes=lists) if credits else None
