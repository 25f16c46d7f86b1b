"""Opening keystores (never leaking the key) and the digest <-> CID spelling of a batch hash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from eth_account import Account
from multiformats import CID, multihash

from client.chain.keystore import KeystoreError, load_account
from client.store.cid import InvalidCid, cid_to_digest, digest_to_cid


@pytest.fixture
def keystore(tmp_path: Path) -> tuple[Path, object]:
    account = Account.create()
    path = tmp_path / "key.json"
    path.write_text(json.dumps(Account.encrypt(account.key, "pw", kdf="scrypt", iterations=2**10)))
    return path, account


def test_password_sources_in_order(keystore, tmp_path: Path, monkeypatch) -> None:
    path, account = keystore
    monkeypatch.delenv("SAPO_KEYSTORE_PASSWORD", raising=False)
    secret = tmp_path / "password"
    secret.write_text("pw\n")
    assert load_account(path, password_file=secret).address == account.address
    monkeypatch.setenv("SAPO_KEYSTORE_PASSWORD", "pw")
    assert load_account(path, password_file=tmp_path / "absent").address == account.address


def test_keystore_failures_say_what_to_do_and_never_show_the_key(keystore, tmp_path, monkeypatch):
    path, account = keystore
    monkeypatch.delenv("SAPO_KEYSTORE_PASSWORD", raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    failures = []
    for call in (
        lambda: load_account(path),  # no password source, no terminal
        lambda: load_account(path, password="nope"),
        lambda: load_account(tmp_path / "absent.json", password="pw"),
    ):
        try:
            call()
        except KeystoreError as exc:
            failures.append(str(exc))
    not_json = tmp_path / "x.json"
    not_json.write_text("{not json")
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"address": account.address, "key": "00"}))
    for bad in (not_json, plain):
        with pytest.raises(KeystoreError) as info:
            load_account(bad, password="pw")
        failures.append(str(info.value))
    assert "set SAPO_KEYSTORE_PASSWORD" in failures[0]
    assert "wrong password" in failures[1]
    assert "sapo wallet new" in failures[2]
    assert "not a JSON keystore" in failures[3] and "not an encrypted keystore" in failures[4]
    assert all(account.key.hex()[2:] not in f and "nope" not in f for f in failures)


def test_digest_and_cid_are_two_spellings_of_one_hash() -> None:
    digest = hashlib.sha256(b"a rollout batch").digest()
    cid = digest_to_cid(digest)
    assert cid.startswith("bafkrei")
    assert cid_to_digest(cid) == digest
    assert digest_to_cid("0x" + digest.hex()) == cid
    # a daemon may spell the same CID in base58btc: it decodes to the same digest
    assert cid_to_digest(CID.decode(cid).encode("base58btc")) == digest


@pytest.mark.parametrize(
    "other",
    [
        str(CID("base32", 1, "dag-pb", multihash.wrap(bytes(32), "sha2-256"))),
        str(CID("base32", 1, "raw", multihash.digest(b"x", "sha2-512"))),
        "not-a-cid",
    ],
)
def test_other_cids_are_refused(other: str) -> None:
    with pytest.raises(InvalidCid):
        cid_to_digest(other)


def test_digest_must_be_32_bytes() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        digest_to_cid(b"short")
