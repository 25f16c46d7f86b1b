"""`RoundBook`: the root lane's contract (contracts/RoundBook.sol, docs/scaling.md) as typed Python
calls, beside the `Ledger` it reads: its windows, its rounds as `roundOf` gives them, and the
transactions of its roles (the aggregator's posts, answers and release; a prover's call; a
producer's claim). Reads work without a key; writes go through TxSender like the ledger's, so
transient RPC failures are retried and every revert arrives as the book's named error.

It has what `client.chain.events.EventReader` reads logs through (`contract`, `address`, `w3`,
`tx`, `head`), so the book's events are read in bounded ranges the ledger's way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from web3 import Web3
from web3.contract import Contract

from client.chain.artifacts import load_artifact
from client.chain.errors import WrongChain
from client.chain.ledger.connection import Deployed
from client.chain.messages import Signed, Submission, Vote
from client.chain.models import LedgerParams, TxResult
from client.chain.roots import cast_vote_struct, submission_struct

CONTRACT = "RoundBook"


@dataclass(frozen=True)
class BookRound:
    """One round as `roundOf` returns it (IRoundBook.RoundView)."""

    round: int
    aggregator: str  # the zero address until the submission root is posted
    posted_block: int
    count: int
    submissions: bytes
    verdicts: bytes  # 32 zero bytes until posted
    credits: int
    total: int
    beacon: int
    submissions_voided: bool
    verdicts_voided: bool
    released: bool
    open_challenges: int

    @property
    def posted(self) -> bool:
        return int(self.aggregator, 16) != 0

    @property
    def verdicts_posted(self) -> bool:
        return self.verdicts != bytes(32)

    @property
    def void(self) -> bool:
        return self.submissions_voided or self.verdicts_voided

    @classmethod
    def from_view(cls, round_: int, view: Sequence[Any]) -> BookRound:
        return cls(round_, *(bytes(v) if isinstance(v, bytes) else v for v in view))


@dataclass(frozen=True)
class Drawn:
    """A round's draw of its aggregator (AggregatorDraw.drawOf): who may post its submission
    root, once drawn; `requested` is the block of the draw's request (0: not requested)."""

    round: int
    aggregator: str | None  # None until drawn, and when drawn with none
    drawn: bool
    requested: int

    def names(self, address: str) -> bool:
        return self.aggregator is not None and self.aggregator.lower() == address.lower()


@dataclass(frozen=True)
class EscalationVote:
    """The vote a checker's escalation carries (ISwarmLedger.EscalationVote): unavailable, or a
    dispute with the score and signal it recomputed and its findings bits (client/credit.py)."""

    unavailable: bool
    score: int = 0
    signal: int = 0
    findings: int = 0

    def struct(self) -> tuple[bool, int, int, int]:
        return (self.unavailable, self.score, self.signal, self.findings)


# the proofs sent to the book's judge (RoundJudge), which has the book slash or void on its word
# IRoundBook.SignedSubmission with no signature: "the ledger's record" to proveDoubleSubmission
NO_SUBMISSION = ("0x" + "00" * 20, (0, bytes(32), 0, 0, 0), b"")
JUDGED = ("proveEquivocation", "proveDoubleSubmission", "proveUncredited")

# RoundBook.windows(round)'s values, in order, by the names the book's sources give them
WINDOWS = ("postRound", "voteClose", "verdictRound", "challengeEnd")


@dataclass(frozen=True)
class Windows:
    """The book's windows for a round r, from the ledger's W (submitRounds) and C
    (challengeRounds), as RoundBook computes them: the submission root in r + W + 1, votes until
    r + W + 1 + C, the verdict root in the round after, lies provable until r + W + 2C + 2."""

    submit_rounds: int
    challenge_rounds: int

    @classmethod
    def of(cls, params: LedgerParams) -> Windows:
        return cls(params.submit_rounds, params.challenge_rounds)

    def post_round(self, round_: int) -> int:
        return round_ + self.submit_rounds + 1

    def vote_close(self, round_: int) -> int:
        return self.post_round(round_) + self.challenge_rounds

    def verdict_round(self, round_: int) -> int:
        return self.vote_close(round_) + 1

    def challenge_end(self, round_: int) -> int:
        return self.verdict_round(round_) + self.challenge_rounds

    def escalation_open(self, round_: int, current: int) -> bool:
        """Whether a drawn checker may still take a batch of `round_` to the v4 lane in round
        `current`: from the submission root's round until the ledger's own vote close for the
        round (the round before the book's vote close), so that its v4 committee can still vote."""
        return self.post_round(round_) <= current < self.vote_close(round_)

    @property
    def lag(self) -> int:
        """Rounds from a credit's round to the rounds settled for it (RoundBook.lag)."""
        return self.challenge_rounds + 2


class RoundBook(Deployed):
    """One deployed RoundBook on one chain, read-only unless an account is given."""

    NAME = CONTRACT

    def __init__(self, w3: Web3, address: str, **sending: Any):
        super().__init__(w3, address, **sending)
        self._bonds: tuple[int, int] | None = None
        self._contracts: dict[str, Contract] = {}  # those the book created, by its getter

    def check(self, ledger: str) -> None:
        """Raises WrongChain unless this client's RoundBook is deployed at the address, reading
        the ledger at `ledger`."""
        self._check_code("(no round book is deployed there)")
        reads = self._view("ledger")
        if reads.lower() != ledger.lower():
            raise WrongChain(f"the round book at {self.address} reads ledger {reads}, not {ledger}")

    # --------------------------------------------------------------------------------- views

    def bonds(self) -> tuple[int, int]:
        """(bond, challengeBond) in wei: fixed for the book's life, read once."""
        if self._bonds is None:
            self._bonds = (self._view("bond"), self._view("challengeBond"))
        return self._bonds

    def post_pay_bps(self) -> int:
        """What the book pays an aggregator at a round's release, in basis points of the
        round's reward (times its root's share of the round's credited signal): fixed for the
        book's life."""
        return self._view("postPayBps")

    def judge(self) -> Contract:
        """The book's RoundJudge (created by the book: fixed for its life), read once."""
        return self._created("judge", "RoundJudge")

    def aggregators(self) -> Contract:
        """The book's AggregatorDraw (created by the book: fixed for its life), read once."""
        return self._created("aggregators", "AggregatorDraw")

    def _created(self, getter: str, artifact: str) -> Contract:
        """A contract the book created, at the address its `getter` names (read once)."""
        contract = self._contracts.get(getter)
        if contract is None:
            abi = load_artifact(artifact)["abi"]
            contract = self.w3.eth.contract(address=self._view(getter), abi=abi)
            self._contracts[getter] = contract
        return contract

    def _draw_view(self, name: str, *args: Any) -> Any:
        fn = self.aggregators().functions[name](*args)
        return self.tx.rpc(fn.call, f"{name}()")

    def drawn(self, round_: int) -> Drawn:
        """`round_`'s draw of the aggregator that may post its submission root."""
        aggregator, drawn, requested = self._draw_view("drawOf", round_)
        zero = int(aggregator, 16) == 0
        return Drawn(round_, None if zero else aggregator, bool(drawn), int(requested))

    def enlisted(self, node: str) -> bool:
        """Whether `node` is on the book's roster of aggregators."""
        return bool(self._draw_view("enlisted", node))

    def held_bond(self, node: str) -> tuple[int, int]:
        """(wei `node` holds on the roster, the last round a proof of a round drawn to it may
        come in: it is held until then)."""
        return int(self._draw_view("bondOf", node)), int(self._draw_view("heldUntil", node))

    def paid_of(self, producer: str) -> tuple[int, int]:
        """(wei paid to `producer` in all, the round after its last claim's) (RoundBook.paidOf)."""
        total, through = self._view("paidOf", producer)
        return int(total), int(through)

    def round_of(self, round_: int) -> BookRound:
        return BookRound.from_view(round_, self._view("roundOf", round_))

    # -------------------------------------------------------------------------- transactions

    def post_submissions(self, round_: int, root: bytes, count: int, listed: bytes) -> TxResult:
        return self._send("postSubmissions", round_, root, count, listed, value=self.bonds()[0])

    def escalate(
        self,
        round_: int,
        index: int,
        leaf: tuple,
        proof: Sequence[tuple[bytes, int]],
        vote: EscalationVote,
    ) -> TxResult:
        """Takes the batch at `index` of round `round_`'s submission root (`leaf`: its
        SignedSubmission as roots.submission_struct gives it; `proof`: its path) to the ledger's
        v4 lane, as a checker drawn on its committee that disputes it or cannot fetch it, with
        that `vote`."""
        return self._send("escalate", round_, index, leaf, list(proof), vote.struct())

    def prove_equivocation(self, first: Signed, second: Signed | None = None) -> TxResult:
        """Proves that `first`'s signer equivocated on its batch (RoundJudge.proveEquivocation):
        `second` is another vote it signed on the same round and producer, or, None, its own
        vote on the ledger's record of the batch takes the other side. The ledger slashes it and
        pays the caller its settler's cut (ISwarmLedger.slashEquivocation)."""
        v = first.message
        if not isinstance(v, Vote):
            raise ValueError("an equivocation is proven from a signed Vote")
        args = [v.round, v.producer, cast_vote_struct(first), cast_vote_struct(second)]
        return self.call("proveEquivocation", args)

    def prove_double_submission(self, first: Signed, second: Signed | None = None) -> TxResult:
        """Proves that `first`'s producer signed two different submissions of its round
        (RoundJudge.proveDoubleSubmission): `second` is the other, or, None, the ledger holds
        another batch of it for the round. The ledger slashes it and pays the caller its
        settler's cut, as for a checker's equivocation."""
        s = first.message
        if not isinstance(s, Submission):
            raise ValueError("a double submission is proven from a signed Submission")
        other = submission_struct(second) if second is not None else NO_SUBMISSION
        return self.call("proveDoubleSubmission", [s.round, submission_struct(first), other])

    def draw_beacon(self, round_: int) -> TxResult:
        return self._send("drawBeacon", round_)

    def post_verdicts(
        self, round_: int, root: bytes, credits: int, total: int, listed: bytes
    ) -> TxResult:
        return self._send("postVerdicts", round_, root, credits, total, listed)

    def release(self, round_: int) -> TxResult:
        return self._send("release", round_)

    def fund(self, amount: int) -> TxResult:
        """Adds `amount` wei to the book's reward pool (what its credits are paid from)."""
        return self._send("fund", value=amount)

    def enlist(self) -> TxResult:
        """Puts this account (a registered node) on the roster of aggregators, with the book's
        bond (less what it still holds there): from the next draw requested, it may be drawn to
        post a round's roots."""
        held, _ = self.held_bond(self.tx.address)
        return self._draw_send("enlist", value=self.bonds()[0] - held)

    def withdraw_bond(self) -> TxResult:
        """Takes back this account's roster bond (off the roster, past its last proof window)."""
        return self._draw_send("withdrawBond")

    def prove_unposted(self, round_: int, signed: Signed, receipt: bytes) -> TxResult:
        """Proves that `round_`'s drawn aggregator receipted `signed` (our submission) and
        posted no root (AggregatorDraw.proveUnposted): half its roster bond is ours."""
        return self._draw_send("proveUnposted", round_, submission_struct(signed), receipt)

    def resign(self) -> TxResult:
        """Takes this account off the roster of aggregators (the rounds drawn to it stay its)."""
        return self._draw_send("resign")

    def draw_aggregator(self, round_: int) -> TxResult:
        """Requests `round_`'s draw of its aggregator, or draws it once the request's block is
        mined (AggregatorDraw.draw: from the round before until its post round)."""
        return self._draw_send("draw", round_)

    def _draw_send(self, function: str, *args: Any, value: int = 0) -> TxResult:
        return self._send_to(self.aggregators(), function, list(args), value)

    def _send_to(self, contract: Contract, function: str, args: list, value: int) -> TxResult:
        """Calls a contract the book created; what it refuses with is one of the book's errors
        (the book's error decoder is this account's sender's)."""
        data = contract.encode_abi(function, args=args)
        return self.tx.send({"to": contract.address, "data": data, "value": value}, function)

    def call(self, function: str, args: Sequence[Any], *, value: int = 0) -> TxResult:
        """Any of the book's functions by name (a finding's proof, an answer, a claim), or of its
        judge's (JUDGED: the proofs the judge takes and has the book act on); what either
        refuses with is one of the book's errors."""
        if function not in JUDGED:
            return self._send(function, *args, value=value)
        return self._send_to(self.judge(), function, list(args), value)


__all__ = [
    "CONTRACT",
    "JUDGED",
    "WINDOWS",
    "BookRound",
    "Drawn",
    "EscalationVote",
    "RoundBook",
    "Windows",
]
