"""The aggregator's collector (client/node/aggregation/collector.py): every message a peer sends
is validated where it enters (domain, round, range, agreement with the claim, a submission held
first); a second, different message of one signer is kept as evidence and changes nothing; the
roots it builds credit exactly the batches whose seated agreeing voters reach quorum."""

from __future__ import annotations

import pytest
from eth_account import Account

from client.chain.messages import Domain, Signed, Submission, Vote
from client.chain.roots import votes_hash
from client.node.aggregation.collector import Collector, Refused
from client.units import SCORE_SCALE

DOMAIN = Domain(chain_id=31337, contract="0x5FbDB2315678afecb367f032d93F642f64180aa3")
OTHER = Domain(chain_id=31337, contract="0x" + "11" * 20)
ROUND = 7
KEYS = [Account.from_key(bytes([i + 1]) * 32) for i in range(9)]


def submission(
    key,
    signal: int = SCORE_SCALE,
    domain: Domain = DOMAIN,
    round_: int = ROUND,
    rollouts: int = 8,
) -> bytes:
    message = Submission(
        round=round_,
        digest="0x" + key.address[2:].lower().rjust(64, "0"),
        rollouts=rollouts,
        score=4 * SCORE_SCALE,
        signal=signal,
    )
    return Signed.sign(message, domain, key.key).to_bytes()


def vote(key, producer, *, score: int = 4 * SCORE_SCALE, signal: int = SCORE_SCALE, **kw) -> bytes:
    message = Vote(
        round=ROUND,
        producer=producer.address,
        digest=kw.pop("digest", "0x" + producer.address[2:].lower().rjust(64, "0")),
        unavailable=kw.pop("unavailable", False),
        score=score,
        signal=signal,
        findings=0,
    )
    return Signed.sign(message, DOMAIN, key.key).to_bytes()


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
