"""Opening an encrypted keystore (Web3 Secret Storage, as geth and eth-account write them).

The password comes, in this order, from: an explicit argument, SAPO_KEYSTORE_PASSWORD, the
config's password_file, or a prompt when a terminal is attached. The private key stays inside
the returned LocalAccount; no message here ever contains it or the password.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import is_address, to_checksum_address

PASSWORD_ENV = "SAPO_KEYSTORE_PASSWORD"  # noqa: S105 - the variable's name, not a secret
MAX_KEYSTORE_BYTES = 64 * 1024


class KeystoreError(Exception):
    """A keystore cannot be opened; the message says why and what to do."""


def resolve_password(path: Path, password: str | None, password_file: Path | None) -> str:
    """Returns the keystore password from the first source that has one."""
    if password is not None:
        return password
    if PASSWORD_ENV in os.environ:
        return os.environ[PASSWORD_ENV]
    if password_file is not None:
        try:
            return password_file.read_text().rstrip("\r\n")
        except OSError as exc:
            raise KeystoreError(
                f"cannot read password file {password_file}: {exc.strerror}"
            ) from None
    if sys.stdin.isatty():
        return getpass.getpass(f"password for keystore {path}: ")
    raise KeystoreError(
        f"no password for keystore {path}: set {PASSWORD_ENV}, [chain].password_file, "
        "or run in a terminal to be prompted"
    )


def _read_keystore(path: Path) -> dict:
    try:
        if path.stat().st_size > MAX_KEYSTORE_BYTES:
            raise KeystoreError(f"{path} is too large to be a keystore")
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise KeystoreError(
            f"keystore {path} not found; create one with `sapo wallet new` or fix [chain].keystore"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise KeystoreError(f"{path} is not a JSON keystore") from None
    if not isinstance(document, dict) or "crypto" not in {k.lower() for k in document}:
        raise KeystoreError(f"{path} is not an encrypted keystore (no 'crypto' section)")
    return document


def load_account(
    path: Path, *, password: str | None = None, password_file: Path | None = None
) -> LocalAccount:
    """Returns the account in the encrypted keystore at `path`."""
    document = _read_keystore(path)
    secret = resolve_password(path, password, password_file)
    try:
        key = Account.decrypt(document, secret)
    except ValueError:
        raise KeystoreError(f"cannot decrypt keystore {path}: wrong password") from None
    except Exception as exc:
        raise KeystoreError(f"cannot decrypt keystore {path}: {type(exc).__name__}") from None
    return Account.from_key(key)


def keystore_address(path: Path) -> str:
    """Returns the address a keystore names in its clear `address` field (no password needed;
    a watcher's way to know whose node it shows)."""
    value = str(_read_keystore(path).get("address", ""))
    value = value if value.startswith("0x") else "0x" + value
    if not is_address(value):
        raise KeystoreError(f"{path} names no valid address (field 'address')")
    return to_checksum_address(value)


def write_keystore(path: Path, private_key: bytes | str, password: str) -> str:
    """Encrypts `private_key` (scrypt) into a new keystore file with mode 0600; returns the
    address. Refuses to overwrite an existing file: a lost key cannot be recovered."""
    if not password:
        raise KeystoreError("refusing an empty keystore password")
    path = Path(path)
    if path.exists():
        raise KeystoreError(f"{path} exists; choose another path (a keystore is never overwritten)")
    try:
        account = Account.from_key(private_key)
    except Exception:
        raise KeystoreError("not a valid secp256k1 private key (64 hex digits)") from None
    document = Account.encrypt(account.key, password, kdf="scrypt")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(document, f)
        f.flush()
        os.fsync(f.fileno())
    os.link(tmp, path)  # fails if `path` appeared meanwhile; never replaces a keystore
    tmp.unlink()
    return account.address
