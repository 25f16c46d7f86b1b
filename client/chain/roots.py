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

from eth_abi import decode, encode
from eth_utils import to_checksum_address

from client.chain.hashing import checksum_address, keccak256
from client.chain.messages import Signed, Submission, Vote
from client.chain.sumtree import Node, SumTree, leaf

SUBMISSION_ABI = "(address,(uint64,bytes32,uint32,uint64,uint64),bytes)"
VOTES_ABI = "(address,uint64,uint16,bytes)[]"
EARNINGS_ABI = "(uint128,uint64,uint32,uint32[])"
CREDIT_ABI = f"(uint32,address,bytes32,uint64,uint64,bytes32,{EARNINGS_ABI})"
NO_ROUND = 2**64 - 1  # Earnings.anchor: the producer has no settled credit yet
NO_INDEX = 2**32 - 1  # Earnings.recent: no credit of the producer in that round
# the verdict root of a round in which no batch reached its quorum (RoundBook.NO_CREDITS): posted
# with 0 credits and a total of 0; no leaf hashes to it
NO_CREDITS_ROOT = keccak256(b"sapo.no-credits")


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


def submission_encoding(signed: Signed) -> bytes:
    """abi.encode(SignedSubmission): what the leaf hashes, and one entry of a submission list."""
    return encode([SUBMISSION_ABI], [submission_struct(signed)])


def submission_leaf(signed: Signed) -> Node:
    return leaf(keccak256(submission_encoding(signed)), 0)


# A submission list (what an aggregator publishes beside its submission root, and every node
# fetches instead of the swarm's Submitted logs) is its leaves' encodings, in the root's order,
# end to end: each is 384 bytes, since a canonical signature is always 65 (its ABI tail is 96).
SUBMISSION_BYTES = 384


class BadList(ValueError):
    """A published list that is not the posted root's data; the text says how."""


def submission_list(signed: Sequence[Signed]) -> bytes:
    return b"".join(submission_encoding(s) for s in signed)


def open_submission_list(data: bytes, root: bytes, count: int) -> tuple[list[bytes], SumTree]:
    """Checks a fetched submission list against the root and count the round book holds, and
    returns its entries (each still ABI-encoded: `decode_submission` reads one) and their tree
    (whose proofs show an entry on chain). Nothing is decoded or recovered to check it: a node
    reads only its own family's entries."""
    if count <= 0 or len(data) != count * SUBMISSION_BYTES:
        raise BadList(
            f"a list of {count} submissions is {count * SUBMISSION_BYTES} bytes, got {len(data)}"
        )
    entries = [data[i : i + SUBMISSION_BYTES] for i in range(0, len(data), SUBMISSION_BYTES)]
    tree = SumTree([leaf(keccak256(e), 0) for e in entries])
    found = tree.root
    if found.hash != root or found.sum != 0:
        raise BadList(
            f"the list's root is 0x{found.hash.hex()}, not the posted 0x{root.hex()}: "
            "not the root's data (challenge a leaf of it on chain: challengeData)"
        )
    return entries, tree


# abi.encode(SignedSubmission)'s fixed layout (a canonical 65-byte signature): the tuple's
# offset (32), then the tuple: producer, the five words of its static Submission, the signature's
# offset in the tuple (7 words), its length (65) and its bytes padded to three words
_TUPLE_OFFSET = (32).to_bytes(32, "big")
_SIGNATURE_AT = (7 * 32).to_bytes(32, "big")
_SIGNATURE_LENGTH = (65).to_bytes(32, "big")


def _word(value: int, size: int) -> bytes:
    return value.to_bytes(size, "big").rjust(32, b"\0")


def decode_submission(entry: bytes) -> tuple[str, Submission, str]:
    """(producer, its Submission, its signature) of one list entry, as the leaf says them: not
    verified, and not range-checked (a submission out of range is a lie to prove, so it must be
    read as it is). BadList when the entry is not the canonical encoding of a SignedSubmission
    with a 65-byte signature (no proof could then show it: challenge it instead). Read from the
    entry's fixed words (a node reads a list of 10,000 a round), then encoded again the same way
    and compared: only the canonical encoding is read (`submission_encoding`'s, eth_abi's)."""
    if len(entry) != SUBMISSION_BYTES:
        raise BadList(f"a submission entry that does not decode: {len(entry)} bytes, not 384")
    producer = entry[44:64]
    round_ = int.from_bytes(entry[88:96], "big")
    dig = entry[96:128]
    rollouts = int.from_bytes(entry[156:160], "big")
    score = int.from_bytes(entry[184:192], "big")
    signal = int.from_bytes(entry[216:224], "big")
    sig = entry[288:353]
    canonical = b"".join(
        (
            _TUPLE_OFFSET,
            producer.rjust(32, b"\0"),
            _word(round_, 8),
            dig,
            _word(rollouts, 4),
            _word(score, 8),
            _word(signal, 8),
            _SIGNATURE_AT,
            _SIGNATURE_LENGTH,
            sig.ljust(96, b"\0"),
        )
    )
    if canonical != entry:
        raise BadList("a submission entry that does not decode as the canonical encoding")
    message = Submission.model_construct(
        round=round_, digest="0x" + dig.hex(), rollouts=rollouts, score=score, signal=signal
    )
    return checksum_address("0x" + producer.hex()), message, "0x" + sig.hex()


def vote_struct(signed: Signed) -> tuple:
    """IRoundBook.SignedVote of a signed agreeing `Vote`."""
    v = signed.message
    if not isinstance(v, Vote) or v.unavailable:
        raise ValueError("not a signed agreeing Vote")
    return (signed.signer, v.score, v.findings, _sig(signed))


def cast_vote_struct(signed: Signed | None) -> tuple:
    """IRoundBook.CastVote of a signed `Vote` (what RoundJudge.proveEquivocation is shown); None
    gives the empty one (no signature: compare the other with the voter's vote on the ledger)."""
    if signed is None:
        return (bytes(32), False, 0, 0, 0, b"")
    v = signed.message
    if not isinstance(v, Vote):
        raise ValueError("not a signed Vote")
    return (_b32(v.digest), v.unavailable, v.score, v.signal, v.findings, _sig(signed))


def votes_hash(votes: Sequence[tuple]) -> bytes:
    return keccak256(encode([VOTES_ABI], [list(votes)]))


@dataclass(frozen=True)
class Earnings:
    """IRoundBook.Earnings: what a credit's producer earned in the rounds settled before it (the
    anchor's settled, the anchor's share and its recent credits' shares), and where the leaves
    that prove it are (client.node.aggregation.earnings computes it)."""

    settled: int = 0
    anchor: int = NO_ROUND
    anchor_index: int = 0
    recent: tuple[int, ...] = ()

    def struct(self) -> tuple:
        return (self.settled, self.anchor, self.anchor_index, list(self.recent))


NO_EARNINGS = Earnings()


@dataclass(frozen=True)
class Credit:
    """IRoundBook.Credit: submission `index` of the round's root, credited `signal`."""

    index: int
    producer: str
    digest: str
    score: int
    signal: int
    votes: bytes  # votes_hash of its SignedVote list
    earnings: Earnings = NO_EARNINGS

    def struct(self) -> tuple:
        return (
            self.index,
            self.producer,
            _b32(self.digest),
            self.score,
            self.signal,
            self.votes,
            self.earnings.struct(),
        )

    def leaf(self, amount: int | None = None) -> Node:
        """Its leaf; `amount` other than its signal is a lie (for tests and adversaries)."""
        data = keccak256(encode([CREDIT_ABI], [self.struct()]))
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

    def around(self, round_: int, index: int) -> list[tuple]:
        """IRoundBook.Shown of the credit leaves the submission at `index` sorts between (the
        last below it and the first above it, those that exist): what shows it uncredited
        (RoundJudge.proveUncredited). Raises ValueError when it is credited."""
        if any(c.index == index for c in self.credits):
            raise ValueError(f"the submission at {index} is credited")
        below = [p for p, c in enumerate(self.credits) if c.index < index][-1:]
        above = [p for p, c in enumerate(self.credits) if c.index > index][:1]
        return [
            (round_, p, self.credits[p].struct(), self.amounts[p], self.proof(p))
            for p in below + above
        ]


# A verdict list (published beside a verdict root) is one ABI-encoded array of its credit leaves,
# each with its amount in the tree and its SignedVote list: what proveBadCredit and answerCredit
# take. A credit leaf holds 7 words and a vote about 6, so a list is bounded by its count.
VERDICT_LIST_ABI = f"({CREDIT_ABI},uint128,{VOTES_ABI})[]"
# a credit with 256 votes (K is at most 255) and 256 recent rounds (C is less)
MAX_VERDICT_ENTRY_BYTES = 32 * (20 + 256 + 6 * 256)


def verdict_list(verdicts: VerdictRoot) -> bytes:
    rows = [
        (c.struct(), a, list(v))
        for c, a, v in zip(verdicts.credits, verdicts.amounts, verdicts.votes, strict=True)
    ]
    return encode([VERDICT_LIST_ABI], [rows])


def open_verdict_list(data: bytes, root: bytes, credits: int, total: int) -> VerdictRoot:
    """Checks a fetched verdict list against the root, leaf count and total the round book holds;
    returns it as a VerdictRoot (its credits, amounts and votes in the posted order). The votes
    are not checked here (an auditor checks them: client.node.aggregation.auditor)."""
    if credits <= 0 or len(data) > credits * MAX_VERDICT_ENTRY_BYTES:
        raise BadList(
            f"a list of {credits} credits is at most {credits * MAX_VERDICT_ENTRY_BYTES} bytes"
        )
    try:
        (rows,) = decode([VERDICT_LIST_ABI], data)
    except Exception as exc:  # eth_abi raises several kinds on malformed bytes
        raise BadList(f"not an ABI-encoded verdict list: {exc}") from None
    if len(rows) != credits:
        raise BadList(f"the list holds {len(rows)} credits, the root {credits}")
    found = []
    for (index, producer, dig, score, signal, votes_h, earned), amount, votes in rows:
        settled, anchor, anchor_index, recent = earned
        credit = Credit(
            index,
            to_checksum_address(producer),
            "0x" + dig.hex(),
            score,
            signal,
            votes_h,
            Earnings(settled, anchor, anchor_index, tuple(recent)),
        )
        voted = [(to_checksum_address(v), score_, f, sig) for v, score_, f, sig in votes]
        found.append((credit, amount, voted))
    try:
        opened = VerdictRoot(
            [c for c, _, _ in found],
            [a for _, a, _ in found],
            votes=[v for _, _, v in found],
            presorted=True,
        )
    except ValueError as exc:  # an amount past 128 bits, or sums that overflow
        raise BadList(f"the list's amounts make no tree: {exc}") from None
    if opened.root != root or opened.total != total:
        raise BadList(
            f"the list's root is 0x{opened.root.hex()} with a total of {opened.total}; the book "
            f"holds 0x{root.hex()} with a total of {total}: not the root's data (challenge a "
            "leaf: challengeData)"
        )
    return opened
