"""The signed swarm messages (client/chain/messages.py): their EIP-712 hashes are eth-account's,
a signature proves its signer under one deployment only, and a peer's message that is malformed,
out of range, non-canonical or moved to another batch is refused with a reason."""

from __future__ import annotations

import json
import random

import pytest
from eth_account import Account
from eth_account.messages import _hash_eip191_message, encode_typed_data

from client.chain.messages import (
    MAX_MESSAGE_BYTES,
    SECP256K1_N,
    BadMessage,
    Domain,
    Signed,
    Submission,
    Vote,
    recover,
    signing_hash,
)

LEDGER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
DOMAIN = Domain(chain_id=31337, contract=LEDGER)
PRODUCER = Account.from_key(b"\x01" * 32)
CHECKER = Account.from_key(b"\x02" * 32)


def random_messages(seed: int) -> list[Submission | Vote]:
    rng = random.Random(seed)
    digest = "0x" + rng.randbytes(32).hex()
    unavailable = rng.random() < 0.3
    return [
        Submission(
            round=rng.randrange(2**64),
            digest=digest,
            rollouts=rng.randrange(1, 2**32),
            score=rng.randrange(2**64),
            signal=rng.randrange(2**64),
        ),
        Vote(
            round=rng.randrange(2**64),
            producer="0x" + rng.randbytes(20).hex(),
            digest=digest,
            unavailable=unavailable,
            score=0 if unavailable else rng.randrange(2**64),
            signal=0 if unavailable else rng.randrange(2**64),
            findings=0 if unavailable else rng.randrange(2**16),
        ),
    ]


@pytest.mark.parametrize("seed", range(20))
def test_the_signing_hash_is_eth_accounts_eip712_hash(seed: int) -> None:
    domain = Domain(chain_id=random.Random(seed).randrange(1, 2**64), contract=LEDGER)
    for message in random_messages(seed):
        reference = _hash_eip191_message(encode_typed_data(full_message=message.typed_data(domain)))
        assert signing_hash(domain, message) == reference


def test_a_wallets_eth_sign_typed_data_signature_is_accepted() -> None:
    vote = random_messages(1)[1]
    signed = Account.sign_typed_data(CHECKER.key, full_message=vote.typed_data(DOMAIN))
    assert recover(DOMAIN, vote, "0x" + bytes(signed.signature).hex()) == CHECKER.address


def test_a_signed_message_round_trips_and_proves_its_signer() -> None:
    for message in random_messages(2):
        signed = Signed.sign(message, DOMAIN, PRODUCER.key)
        data = signed.to_bytes()
        assert len(data) <= MAX_MESSAGE_BYTES
        again = Signed.from_bytes(data, DOMAIN)
        assert again == signed and again.signer == PRODUCER.address
        assert PRODUCER.key.hex() not in data.decode()  # the key never travels


def test_a_signature_proves_nothing_on_another_deployment() -> None:
    signed = Signed.sign(random_messages(3)[1], DOMAIN, CHECKER.key)
    for other in (
        Domain(chain_id=1, contract=LEDGER),  # another chain
        Domain(chain_id=31337, contract="0x" + "11" * 20),  # another ledger
        Domain(chain_id=31337, contract=LEDGER, version="2"),
    ):
        with pytest.raises(BadMessage, match="not its signer"):
            Signed.from_bytes(signed.to_bytes(), other)


def test_a_vote_moved_to_another_batch_or_side_is_refused() -> None:
    vote = random_messages(4)[1].model_copy(update={"unavailable": False, "findings": 0})
    signed = Signed.sign(vote, DOMAIN, CHECKER.key)
    raw = json.loads(signed.to_bytes())
    for field, value in (
        ("digest", "0x" + "00" * 32),  # an aggregator pins the vote on another batch
        ("findings", 7),  # or adds findings the checker did not report
        ("producer", PRODUCER.address),
        ("round", vote.round + 1 if vote.round < 2**64 - 1 else 0),
    ):
        moved = raw | {"message": raw["message"] | {field: value}}
        with pytest.raises(BadMessage, match="not its signer"):
            Signed.from_bytes(json.dumps(moved).encode(), DOMAIN)


def test_the_malleable_twin_of_a_signature_is_refused() -> None:
    message = random_messages(5)[0]
    signed = Signed.sign(message, DOMAIN, PRODUCER.key)
    raw = bytes.fromhex(signed.signature[2:])
    r, s, v = raw[:32], int.from_bytes(raw[32:64], "big"), raw[64]
    twin = r + (SECP256K1_N - s).to_bytes(32, "big") + bytes([55 - v])  # 27 <-> 28
    with pytest.raises(BadMessage, match="non-canonical"):
        recover(DOMAIN, message, "0x" + twin.hex())


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda m: m | {"kind": "Bribe"}, "unknown message kind"),
        (lambda m: m | {"extra": 1}, "extra"),
        (lambda m: m | {"signature": m["signature"][:-2]}, "130 hex digits"),
        (lambda m: m | {"signature": m["signature"][:-2] + "1d"}, "v is 27 or 28"),
        (lambda m: m | {"signature": "0x" + "00" * 65}, "v is 27 or 28"),
        # 132 characters that hex-decode to nothing (fromhex skips spaces): once an IndexError
        # that stopped the node reading it
        (lambda m: m | {"signature": "0x" + " " * 130}, "130 hex digits"),
        (lambda m: m | {"signature": "0x" + " 0" * 65}, "130 hex digits"),
        (lambda m: m | {"signer": "0x1234"}, "signer"),
        (lambda m: m | {"message": m["message"] | {"round": 2**64}}, "message.round"),
        (lambda m: m | {"message": m["message"] | {"round": "5"}}, "message.round"),
        (lambda m: m | {"message": m["message"] | {"findings": 2**16}}, "message.findings"),
        (lambda m: m | {"message": m["message"] | {"digest": "0xab"}}, "message.digest"),
        (lambda m: m | {"message": m["message"] | {"unavailable": "no"}}, "message.unavailable"),
        (lambda m: m | {"message": m["message"] | {"unavailable": True}}, "no score"),
        (lambda m: m | {"message": None}, "message"),
        (lambda m: [m], "unknown message kind"),
    ],
)
def test_a_malformed_peer_message_is_refused_naming_what_is_wrong(change, reason: str) -> None:
    vote = random_messages(6)[1].model_copy(update={"unavailable": False, "score": 5})
    raw = json.loads(Signed.sign(vote, DOMAIN, CHECKER.key).to_bytes())
    with pytest.raises(BadMessage, match=reason):
        Signed.from_bytes(json.dumps(change(raw)).encode(), DOMAIN)


def test_garbage_and_oversized_bytes_are_refused() -> None:
    for data in (b"\xff\xfe not json", b"", b"{", b"[]" * 600, b"0" * (MAX_MESSAGE_BYTES + 1)):
        with pytest.raises(BadMessage):
            Signed.from_bytes(data, DOMAIN)


def test_the_checksum_form_is_eip55s_as_eth_utils_writes_it() -> None:
    from eth_utils import to_checksum_address

    from client.chain.hashing import checksum_address

    rng = random.Random(55)
    for _ in range(500):
        value = "0x" + bytes(rng.getrandbits(8) for _ in range(20)).hex()
        assert checksum_address(value) == to_checksum_address(value)
        assert checksum_address(value.upper().replace("0X", "0x")) == to_checksum_address(value)
    for bad in ("0x12", "0x" + "g" * 40, "12" * 21, "", "0x" + "ab" * 20 + "00"):
        with pytest.raises(ValueError, match="not an address"):
            checksum_address(bad)
