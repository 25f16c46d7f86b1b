"""A devnet's adversarial aggregator ([devnet].aggregator_lies): the real service
(client.node.aggregation.service.Aggregator, run by `sapo devnet liar` as `sapo aggregate run`
runs it) with lies in what it takes and posts, so that the real nodes' defences run against it
end to end, on the devnet's chain and IPFS daemons. Each lie is told once a process (a restarted
liar may tell it again), against a real node (a node of the aggregator's own model family: the
light nodes have families of their own); the lies told in verdict roots each take a round of
their own, in the order given (one proven lie takes a round's whole bond).

- `drop-quorum`: the credit of a real node's batch is left out of a verdict root although the
  aggregator receipted a quorum of its checkers' agreeing votes. The lists hold (the credit is
  simply not there); only the receipts show the lie, and only the checkers hold them: they relay
  them to the producer ([root_lane].relay_votes, client.node.publishing.relay), which proves it
  (RoundJudge.proveUncredited) and takes half of the round's bond.
- `invent-signer`: one vote of a real node's credit is replaced by the same vote signed by a key
  that holds no seat (a signer the aggregator made up, to carry a batch its committee did not).
  Every producer of the round audits the credits of its verdict list (RootLane.audit): the first
  to find it proves it (proveBadCredit, "a vote from a node without a seat").
- `withhold`: a verdict root is posted with a list digest whose blocks are never published, and
  the data challenge of it is never answered. A producer of the round that cannot read the list
  by the last rounds of its challenge window bonds a data challenge ([root_lane].challenge_lists)
  and, once its answer window closed, claims it (claimUnanswered): the root is void, the bond the
  challenger's half.
- `leave-out`: a real node's submission, receipted, is left out of the round's submission root
  (censoring it once the ledger's submission window closed: too late to submit there). The node
  checks the posted list against its receipt and proves it (proveLeftOut): the submission root
  is void, and with it the round.
- `censor`: a real node's submission of a round is refused (as if the round were closed), again
  at each try. The node, with no receipt by the window's last round, submits the batch on the
  ledger (force inclusion): its checkers vote on it there, and the book must not credit it.
- `abandon`: a round drawn to it, with a real node's receipted submission in it (and no other
  lie), gets no submission root at all: its producers' ledger window is closed, and with no root
  no left-out proof reaches them. A producer of the round proves it with its receipt
  (AggregatorDraw.proveUnposted): the liar's roster bond, half to the prover, and the liar off
  the roster; it enlists again with a new bond on its next pass (the draws it requests next
  count it), so that the devnet goes on.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from dataclasses import replace

from client.chain import ChainError
from client.chain.messages import Signed, Submission, Vote
from client.chain.roots import SubmissionRoot, VerdictRoot, vote_struct, votes_hash
from client.node.aggregation.collector import Collector, Refused
from client.node.aggregation.lists import list_digest
from client.node.aggregation.service import Aggregator

log = logging.getLogger("sapo.aggregator")

LIES = ("drop-quorum", "invent-signer", "withhold", "leave-out", "censor", "abandon")
VERDICT_LIES = ("drop-quorum", "invent-signer", "withhold")


class CensoringCollector(Collector):
    """A round's collector that refuses the submissions `censors` names."""

    def censors(self, signed: Signed) -> bool:  # set by the liar on each of its collectors
        return False

    def _submission(self, signed: Signed) -> Signed:
        if self.censors(signed):
            raise Refused("the round's submissions are closed (its root is posted)")
        return super()._submission(signed)


class LyingAggregator(Aggregator):
    """The aggregator service telling `lies` (a subclass names them: `liar`)."""

    lies: tuple[str, ...] = ()
    collector_class = CensoringCollector

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.told: dict[str, tuple[int, str]] = {}  # lie -> (round, the real node lied about)
        self.withheld: set[int] = set()  # rounds whose verdict list is never published
        self._families: dict[str, int] = {}
        self._replaying = False
        self.abandoned: set[int] = set()  # rounds whose submission root is never posted

    def start(self) -> None:
        # what the store held was taken once: a replay tells no lie (a censor now would leave
        # out a receipted submission: another lie than the one asked)
        self._replaying = True
        try:
            super().start()
        finally:
            self._replaying = False

    # ------------------------------------------------------------------------------ target

    def _real(self, address: str) -> bool:
        """Whether `address` is a real node: of the aggregator's own model family (False while
        the chain does not say: the lie waits for a later message)."""
        try:
            for who in (address, self.me):
                if who.lower() not in self._families:
                    self._families[who.lower()] = self.ledger.node_info(who).family
        except ChainError:
            return False
        return self._families[address.lower()] == self._families[self.me.lower()]

    def _tell(self, lie: str, round_: int, producer: str, what: str) -> None:
        self.told[lie] = (round_, producer)
        log.warning("round %s: lying (%s): %s", round_, lie, what)

    # ----------------------------------------------------------------------------- censor

    def _collector(self, round_: int) -> Collector:
        collector = super()._collector(round_)
        collector.censors = self._censors  # type: ignore[method-assign]
        return collector

    def _censors(self, signed: Signed) -> bool:
        if self._replaying or "censor" not in self.lies:
            return False
        if not isinstance(signed.message, Submission):
            return False
        told = self.told.get("censor")
        if told is not None:  # the same node's tries again in the round: refused again
            return told == (signed.message.round, signed.signer.lower())
        if not self._real(signed.signer):
            return False
        self._tell(
            "censor",
            signed.message.round,
            signed.signer.lower(),
            f"{signed.signer}'s submission refused, as at each try this round",
        )
        return True

    # -------------------------------------------------------------------------- leave-out

    def listing(self, round_: int, root: SubmissionRoot) -> SubmissionRoot:
        if "leave-out" not in self.lies or "leave-out" in self.told or len(root.signed) < 2:
            return root
        target = next((s for s in root.signed if self._real(s.signer)), None)
        if target is None:
            return root
        self._tell(
            "leave-out",
            round_,
            target.signer.lower(),
            f"{target.signer}'s receipted submission left out of the submission root",
        )
        return SubmissionRoot([s for s in root.signed if s is not target], presorted=True)

    # ---------------------------------------------------------------------------- abandon

    def tick(self):
        if "abandon" in self.told:  # proven off the roster: back on it before the next draws
            self._enlist()
        return super().tick()

    def _post_submissions(self, round_, current, done) -> None:
        if round_ in self.abandoned:
            return  # (the next pass of the post round must not post it after all)
        collector = self.collectors.get(round_)
        abandon = (
            "abandon" in self.lies
            and "abandon" not in self.told
            and collector is not None
            and round_ not in self.submission_roots
            and current == self.windows.post_round(round_)
            and round_ not in {r for r, _ in self.told.values()}
        )
        target = None
        if abandon:
            with self.desk.hold(round_):
                signed = list(collector.submissions.values())
            target = next((s for s in signed if self._real(s.signer)), None)
        if target is None:
            super()._post_submissions(round_, current, done)
            return
        self._tell(
            "abandon",
            round_,
            target.signer.lower(),
            f"no submission root posted, though {target.signer}'s submission was receipted",
        )
        self.abandoned.add(round_)
        self.desk.close(round_)
        done.skipped[round_] = "abandoned (a lie)"

    # ---------------------------------------------------------------------- verdict lies

    def posting(self, round_: int, verdicts: VerdictRoot) -> VerdictRoot | None:
        lie = next((x for x in self.lies if x in VERDICT_LIES and x not in self.told), None)
        if lie is None or self.told.get("leave-out", (None,))[0] == round_:
            return verdicts  # (a round whose submission root is a lie: proven void, maybe late)
        target = next((c for c in verdicts.credits if self._real(c.producer)), None)
        if target is None:
            return verdicts
        if lie == "drop-quorum":
            self._tell(
                lie,
                round_,
                target.producer,
                f"{target.producer}'s credit left out of the verdict root although its "
                "checkers' agreeing votes were receipted",
            )
            return _without(verdicts, target)
        if lie == "invent-signer":
            self._tell(
                lie,
                round_,
                target.producer,
                f"a vote of {target.producer}'s credit signed by a key that holds no seat",
            )
            return self._invented(round_, verdicts, target)
        self._tell(
            lie, round_, target.producer, "the verdict list is never published nor shown on chain"
        )
        self.withheld.add(round_)
        return verdicts

    def _invented(self, round_: int, verdicts: VerdictRoot, target) -> VerdictRoot:
        """`verdicts` with the last vote of `target`'s credit signed by a fresh key instead."""
        place = verdicts.credits.index(target)
        votes = list(verdicts.votes[place])
        _, score, findings, _ = votes[-1]
        vote = Vote(
            round=round_,
            producer=target.producer,
            digest=target.digest,
            unavailable=False,
            score=score,
            signal=target.signal,
            findings=findings,
        )
        votes[-1] = vote_struct(Signed.sign(vote, self.domain, secrets.token_bytes(32)))
        votes.sort(key=lambda v: int(v[0], 16))  # sorted by voter, as the book reads them
        credits, lists = list(verdicts.credits), list(verdicts.votes)
        credits[place] = replace(target, votes=votes_hash(votes))
        lists[place] = votes
        return VerdictRoot(credits, verdicts.amounts, votes=lists, presorted=True)

    def _publish(self, kind: str, round_: int, data: bytes) -> bytes:
        if kind == "verdicts" and round_ in self.withheld:
            return list_digest(kind, round_, data)  # its digest, and nothing stored
        return super()._publish(kind, round_, data)

    def _answer_args(self, round_: int, verdict_tree: bool, index: int) -> tuple[str, tuple] | None:
        if verdict_tree and round_ in self.withheld:
            return None  # withheld: never shown
        return super()._answer_args(round_, verdict_tree, index)


def _without(verdicts: VerdictRoot, target) -> VerdictRoot | None:
    rows = [
        (c, a, v)
        for c, a, v in zip(verdicts.credits, verdicts.amounts, verdicts.votes, strict=True)
        if c is not target
    ]
    if not rows:
        return None  # the no-credit root
    return VerdictRoot(
        [c for c, _, _ in rows],
        [a for _, a, _ in rows],
        votes=[v for _, _, v in rows],
        presorted=True,
    )


def liar(lies: Sequence[str]) -> type[Aggregator]:
    """The service class that tells `lies` (each one of LIES)."""
    unknown = [lie for lie in lies if lie not in LIES]
    if unknown or not lies:
        raise ValueError(
            f"no such lie {(unknown or [''])[0]!r} (the devnet's aggregator tells "
            f"{', '.join(LIES)})"
        )
    return type("LyingAggregator", (LyingAggregator,), {"lies": tuple(lies)})


__all__ = ["LIES", "CensoringCollector", "LyingAggregator", "liar"]
