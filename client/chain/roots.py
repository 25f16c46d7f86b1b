"""A round's two roots as the RoundBook (contracts/RoundBook.sol) reads them: the submission root
over the producers' signed submissions (sorted by producer, amount 0 each) and the verdict root,
a Merkle-sum tree of credit leaves (a batch its committee agreed on, its agreeing votes, its
signal as its amount). Leaves hash their ABI encoding exactly as the contract's
`keccak256(abi.encode(...))` does; the tests check both sides on anvil.

An aggregator builds these; anyone holding the signed messages builds them again to find a lie
and the arguments of the proof that shows it (docs/scaling.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eth_abi import encode
from eth_utils import keccak

from client.chain.messages import Signed, Submission, Vote
from client.chain.sumtree import Node, SumTree, leaf

SUBMISSION_ABI = "(address,(uint64,bytes32,uint32,uint64,uint64),bytes)"
VOTES_ABI = "(address,uint64,uint16,bytes)[]"
CREDIT_ABI = "(uint32,address,bytes32,uint64,uint64,bytes32)"


def _b32(value: str) -> bytes:
    return bytes.fromhex(value[2:])


def _sig(signed: Signed) -> bytes:
    return bytes.fromhex(signed.signature[2:])


def submission_struct(signed: Signed) -> tuple:
    """IRoundBook.SignedSubmission of a signed `Submission`."""
    s = signed.message
    if not isinstance(s, Submission):
        raise ValueError("not a signed Submission")
    inner = (s.round, _b32(s.digest), s.rollouts, s.score, s.signal)
    return (signed.signer, inner, _sig(signed))


def submission_leaf(signed: Signed) -> Node:
    return leaf(keccak(encode([SUBMISSION_ABI], [submission_struct(signed)])), 0)


def vote_struct(signed: Signed) -> tuple:
    """IRoundBook.SignedVote of a signed agreeing `Vote`."""
    v = signed.message
    if not isinstance(v, Vote) or v.unavailable:
        raise ValueError("not a signed agreeing Vote")
    return (signed.signer, v.score, v.findings, _sig(signed))


def votes_hash(votes: Sequence[tuple]) -> bytes:
    return keccak(encode([VOTES_ABI], [list(votes)]))


@dataclass(frozen=True)
class Credit:
    """IRoundBook.Credit: submission `index` of the round's root, credited `signal`."""

    index: int
    producer: str
    digest: str
    score: int
    signal: int
    votes: bytes  # votes_hash of its SignedVote list

    def struct(self) -> tuple:
        return (self.index, self.producer, _b32(self.digest), self.score, self.signal, self.votes)

    def leaf(self, amount: int | None = None) -> Node:
        """Its leaf; `amount` other than its signal is a lie (for tests and adversaries)."""
        data = keccak(encode([CREDIT_ABI], [self.struct()]))
        return leaf(data, self.signal if amount is None else amount)


class SubmissionRoot:
    """The submission root over `signed` submissions, sorted by producer (as posted)."""

    def __init__(self, signed: Sequence[Signed], *, presorted: bool = False):
        self.signed = list(signed) if presorted else sorted(signed, key=lambda s: s.signer.lower())
        if not self.signed:
            raise ValueError("a submission root holds at least one submission")
        self.tree = SumTree([submission_leaf(s) for s in self.signed])

    @property
    def root(self) -> bytes:
        return self.tree.root.hash

    def index(self, producer: str) -> int:
        return next(i for i, s in enumerate(self.signed) if s.signer.lower() == producer.lower())

    def proof(self, index: int) -> list[tuple[bytes, int]]:
        return [n.as_abi() for n in self.tree.proof(index)]


class VerdictRoot:
    """The verdict root over credit leaves (each with the amount its tree gives it), sorted by
    the submission they credit (as posted)."""

    def __init__(
        self,
        credits: Sequence[Credit],
        amounts: Sequence[int] | None = None,
        *,
        votes: Sequence[list[tuple]] | None = None,
        presorted: bool = False,
    ):
        rows = list(
            zip(
                credits,
                amounts or [c.signal for c in credits],
                votes or [[] for _ in credits],
                strict=True,
            )
        )
        if not presorted:
            rows.sort(key=lambda row: row[0].index)
        self.credits = [c for c, _, _ in rows]
        self.amounts = [a for _, a, _ in rows]
        self.votes = [v for _, _, v in rows]  # each credit's SignedVote list, where known
        self.tree = SumTree([c.leaf(a) for c, a in zip(self.credits, self.amounts, strict=True)])

    @property
    def root(self) -> bytes:
        return self.tree.root.hash

    @property
    def total(self) -> int:
        return self.tree.root.sum

    def proof(self, index: int, height: int = 0) -> list[tuple[bytes, int]]:
        return [n.as_abi() for n in self.tree.proof(index, height)]
