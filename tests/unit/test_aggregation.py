"""The aggregator's collector (client/node/aggregation/collector.py): every message a peer sends
is validated where it enters (domain, round, range, agreement with the claim, a submission held
first); a second, different message of one signer is kept as evidence and changes nothing; the
roots it builds credit exactly the batches whose seated agreeing voters reach quorum. The lists
it publishes (client/chain/roots.py) are opened only as the posted root's data, and an entry no
proof could show is challenged by the auditor, never read."""

from __future__ import annotations

import pytest
from eth_abi import decode, encode
from eth_utils import keccak, to_checksum_address

from client.chain.book import BookRound
from client.chain.messages import Domain
from client.chain.roots import (
    SUBMISSION_ABI,
    BadList,
    SubmissionRoot,
    VerdictRoot,
    decode_submission,
    open_submission_list,
    open_verdict_list,
    submission_encoding,
    submission_list,
    verdict_list,
    votes_hash,
)
from client.chain.sumtree import SumTree, leaf
from client.node.aggregation.auditor import Auditor
from client.node.aggregation.collector import Collector, Refused
from client.units import SCORE_SCALE
from tests.harness.signed import DOMAIN, KEYS, OTHER, ROUND, signed_submission, signed_vote


def submission(
    key, signal: int = SCORE_SCALE, domain: Domain = DOMAIN, round_: int = ROUND, rollouts: int = 8
) -> bytes:
    return signed_submission(key, signal, domain, round_, rollouts).to_bytes()


def vote(key, producer, **kw) -> bytes:
    return signed_vote(key, producer, **kw).to_bytes()


def collector() -> Collector:
    registered = {k.address for k in KEYS[:8]}  # KEYS[8] is no registered node
    return Collector(DOMAIN, ROUND, tolerance_bps=50, registered=registered.__contains__)


def test_a_submission_is_taken_once_and_a_different_second_one_is_evidence() -> None:
    c = collector()
    first = c.accept(submission(KEYS[0]))
    assert c.accept(submission(KEYS[0])) == first  # the same again: nothing changes
    with pytest.raises(Refused, match="the first stands"):
        c.accept(submission(KEYS[0], signal=5))
    assert len(c.equivocations) == 1 and c.equivocations[0].first == first
    assert c.submissions[KEYS[0].address.lower()] == first


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (lambda: submission(KEYS[0], domain=OTHER), "not its signer"),
        (lambda: submission(KEYS[0], round_=ROUND + 1), "this is round 7"),
        (lambda: submission(KEYS[0], signal=4 * SCORE_SCALE + 1), "out of range"),
        (lambda: submission(KEYS[0], rollouts=65_537), "at most 65536 rollouts"),
        (lambda: submission(KEYS[8]), "not a registered node"),
        (lambda: b"{" * 2_000, "at most 1024 bytes"),
        (lambda: b'{"kind": "Vote"}', "malformed"),
    ],
)
def test_what_a_peer_sends_is_refused_with_a_reason(data, why) -> None:
    c = collector()
    with pytest.raises(Refused, match=why):
        c.accept(data())
    assert not c.submissions and not c.votes


def test_a_vote_counts_only_on_a_held_claim_it_agrees_with() -> None:
    c = collector()
    producer, voter = KEYS[0], KEYS[1]
    with pytest.raises(Refused, match="no submission"):
        c.accept(vote(voter, producer))
    c.accept(submission(producer))
    refusals = {
        "goes on chain \\(reportUnavailable\\)": vote(
            voter, producer, score=0, signal=0, unavailable=True
        ),
        "does not agree": vote(voter, producer, signal=SCORE_SCALE - 1),
        # 50 bps of 8 rollouts' 80,000 units is 400
        "does not agree ": vote(voter, producer, score=4 * SCORE_SCALE - 401),
        "another batch": vote(voter, producer, digest="0x" + "ab" * 32),
        "its own batch": vote(producer, producer),
    }
    for why, data in refusals.items():
        with pytest.raises(Refused, match=why.strip()):
            c.accept(data)
    taken = c.accept(vote(voter, producer, score=4 * SCORE_SCALE - 400))  # within 50 bps
    with pytest.raises(Refused, match="the first stands"):
        c.accept(vote(voter, producer, score=4 * SCORE_SCALE))
    # a flood of further variants (a dispute among them) is refused, and kept no more: one pair
    # proves the equivocation, and the collector's memory does not grow with the flood
    for score in (0, 1, 2, 4 * SCORE_SCALE - 1):
        with pytest.raises(Refused, match="the first stands"):
            c.accept(vote(voter, producer, score=score))
    assert c.votes == {(producer.address.lower(), voter.address.lower()): taken}
    assert len(c.equivocations) == 1


def test_the_roots_credit_what_seated_agreeing_voters_carried_to_quorum() -> None:
    c = collector()
    producers, voters = KEYS[:3], KEYS[3:8]
    for p in producers:
        c.accept(submission(p))
    # producer 0: three agreeing voters, one of them not seated; producer 1: one voter only;
    # producer 2: enough voters, but its batch escalated (a dispute of it is on chain)
    for v in voters[:3]:
        c.accept(vote(v, producers[0]))
    c.accept(vote(voters[0], producers[1]))
    for v in voters[:2]:
        c.accept(vote(v, producers[2]))
    root = c.submission_root()
    with pytest.raises(Refused, match="closed"):
        c.accept(submission(KEYS[7]))
    unseated = voters[2].address.lower()
    verdicts = c.verdict_root(
        root,
        seated=lambda producer, voter: voter != unseated,
        quorum=2,
        escalated={producers[2].address.lower()},
    )
    assert verdicts is not None and len(verdicts.credits) == 1
    credit = verdicts.credits[0]
    assert credit.producer == producers[0].address
    assert root.signed[credit.index].signer == producers[0].address
    voted = [v[0] for v in verdicts.votes[0]]
    assert voted == sorted((v.address for v in voters[:2]), key=lambda a: int(a, 16))
    assert credit.votes == votes_hash(verdicts.votes[0])
    assert verdicts.total == credit.signal
    assert c.verdict_root(root, seated=lambda p, v: False, quorum=2) is None


def a_round() -> tuple[SubmissionRoot, VerdictRoot]:
    """Three submissions, the first two credited with two votes each, as an aggregator
    publishes them."""
    c = collector()
    for p in KEYS[:3]:
        c.accept(submission(p))
    for p in KEYS[:2]:
        for v in KEYS[3:5]:
            c.accept(vote(v, p))
    root = c.submission_root()
    verdicts = c.verdict_root(root, seated=lambda p, v: True, quorum=2)
    assert verdicts is not None
    return root, verdicts


def test_a_list_entry_is_read_as_eth_abi_reads_it_and_only_in_its_canonical_form() -> None:
    """decode_submission reads an entry from its fixed words: what eth_abi decodes from the
    canonical encoding, and a refusal for any byte changed where eth_abi would read another
    entry or none (a padding byte, an offset, a length)."""
    root, _ = a_round()
    for signed in root.signed:
        entry = submission_encoding(signed)
        (producer, inner, sig) = decode([SUBMISSION_ABI], entry)[0]
        found, message, signature = decode_submission(entry)
        assert found == to_checksum_address(producer) == signed.signer
        assert message == signed.message and signature == "0x" + sig.hex()
        assert (message.round, message.rollouts, message.score, message.signal) == (
            inner[0],
            inner[2],
            inner[3],
            inner[4],
        )
    entry = submission_encoding(root.signed[0])
    for at in range(len(entry)):
        changed = bytearray(entry)
        changed[at] ^= 0x80
        try:
            read = decode_submission(bytes(changed))
        except BadList:
            continue
        # a byte of a value: eth_abi reads the same entry from it, and it re-encodes to it
        (producer, inner, sig) = decode([SUBMISSION_ABI], bytes(changed))[0]
        assert read[0] == to_checksum_address(producer) and read[2] == "0x" + sig.hex(), at
        assert encode([SUBMISSION_ABI], [(producer, inner, sig)]) == bytes(changed), at


def test_a_published_list_is_opened_only_as_its_roots_data() -> None:
    root, verdicts = a_round()
    listed = submission_list(root.signed)
    entries, tree = open_submission_list(listed, root.root, 3)
    assert tree.root.hash == root.root
    assert [decode_submission(e)[0] for e in entries] == [s.signer for s in root.signed]
    assert decode_submission(entries[0])[1] == root.signed[0].message
    opened = open_verdict_list(verdict_list(verdicts), verdicts.root, 2, verdicts.total)
    assert opened.credits == verdicts.credits and opened.votes == verdicts.votes
    flipped = bytearray(listed)
    flipped[100] ^= 1
    hostile = [
        (lambda: open_submission_list(listed[:-1], root.root, 3), "1152 bytes, got 1151"),
        (lambda: open_submission_list(bytes(flipped), root.root, 3), "not the posted"),
        (lambda: open_submission_list(listed, root.root, 0), "0 submissions"),
        (lambda: decode_submission(b"\xff" * 384), "does not decode"),
        (lambda: open_verdict_list(b"\x00" * 7, verdicts.root, 2, verdicts.total), "ABI"),
        (lambda: open_verdict_list(verdict_list(verdicts), verdicts.root, 3, 1), "holds 2"),
        (
            lambda: open_verdict_list(verdict_list(verdicts), verdicts.root, 2, 1),
            "with a total of 1:",
        ),
        (lambda: open_verdict_list(b"\x00" * 10**6, verdicts.root, 2, 1), "at most"),
    ]
    for attempt, why in hostile:
        with pytest.raises(BadList, match=why):
            attempt()


def test_an_entry_in_the_root_that_no_submission_encodes_is_challenged() -> None:
    """An aggregator can put any 384 bytes in its tree: an entry whose signature's length word
    says 64 encodes no SignedSubmission the book would take, so no lie in it can be proven; the
    auditor asks for it on chain instead (and reads nothing from the ledger to decide it)."""
    root, _ = a_round()
    entries = [submission_encoding(s) for s in root.signed]
    odd = bytearray(entries[1])
    odd[9 * 32 - 1] = 64  # the signature's length word (the tuple, then its 5 words)
    entries[1] = bytes(odd)
    tree = SumTree([leaf(keccak(e), 0) for e in entries])
    posted = BookRound.from_view(
        ROUND, ("0x" + "11" * 20, 1, 3, tree.root.hash, bytes(32), 0, 0, 1, False, False, False, 0)
    )
    auditor = Auditor(DOMAIN, ledger=None, quorum=2, checkers=10, tolerance_bps=50, min_stake=1)
    _, finding = auditor.submissions(posted, b"".join(entries))
    assert finding is not None and finding.challenge
    assert finding.args == (ROUND, False, 1) and "canonical" in finding.what
    # a list withheld, or not the root's: a challenge of its first leaf
    for data in (None, b"".join(entries[:2])):
        _, finding = auditor.submissions(posted, data)
        assert finding is not None and finding.function == "challengeData"
