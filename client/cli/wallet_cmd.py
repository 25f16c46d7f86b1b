"""`sapo wallet`: the node's identity in an encrypted keystore (scrypt, mode 0600).

The password comes from SAPO_KEYSTORE_PASSWORD, --password-file, or a prompt (asked twice for a
new keystore). An imported key is read from a prompt or a file, never from an argument (shell
history and `ps` would keep it). No command prints a private key.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from eth_account import Account

from client.chain.keystore import (
    PASSWORD_ENV,
    KeystoreError,
    load_account,
    resolve_password,
    write_keystore,
)
from client.cli.config_cmd import load_or_exit
from client.cli.console import ConfigOption, Exit, JsonOption, fail, out, print_json

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS

KeystorePath = Annotated[
    Path | None,
    typer.Option("--keystore", help="Keystore file (default: \\[chain].keystore of --config)."),
]
PasswordFile = Annotated[
    Path | None, typer.Option("--password-file", help="Read the password from this file.")
]


def _path(keystore: Path | None, config: Path | None) -> Path:
    if keystore is not None:
        return keystore
    cfg = load_or_exit(config) if config else None
    if cfg is None or cfg.chain.keystore is None:
        fail("no keystore path: pass --keystore PATH or a --config whose [chain].keystore is set")
    return Path(cfg.chain.keystore)


def _new_path(keystore: Path | None, config: Path | None) -> Path:
    """Returns where a new keystore goes; exits 2 when one is there (never overwritten)."""
    path = _path(keystore, config)
    if path.exists():
        fail(f"{path} exists; choose another path (a keystore is never overwritten)")
    return path


def _new_password(path: Path, password_file: Path | None) -> str:
    """Returns the new keystore's password: from the usual sources, or asked twice."""
    if PASSWORD_ENV in os.environ or password_file is not None or not sys.stdin.isatty():
        try:
            return resolve_password(path, None, password_file)
        except KeystoreError as exc:
            fail(str(exc))
    first = getpass.getpass("new keystore password: ")
    if first != getpass.getpass("repeat the password: "):
        fail("the passwords differ; nothing was written")
    return first


def _write(path: Path, key: bytes | str, password: str, as_json: bool) -> None:
    try:
        address = write_keystore(path, key, password)
    except KeystoreError as exc:
        fail(str(exc))
    if as_json:
        print_json({"address": address, "keystore": str(path)})
    else:
        out.print(f"{address}  keystore {path} (encrypted, mode 0600)")
        out.print("Back up the keystore and its password: a lost key cannot be recovered.")


@app.command("new")
def new(
    keystore: KeystorePath = None,
    config: ConfigOption = None,
    password_file: PasswordFile = None,
    as_json: JsonOption = False,
) -> None:
    """Create a new account in a new encrypted keystore."""
    path = _new_path(keystore, config)
    _write(path, Account.create().key, _new_password(path, password_file), as_json)


@app.command("import")
def import_(
    keystore: KeystorePath = None,
    config: ConfigOption = None,
    key_file: Annotated[
        Path | None,
        typer.Option("--key-file", help="File holding the hex private key (else a prompt)."),
    ] = None,
    password_file: PasswordFile = None,
    as_json: JsonOption = False,
) -> None:
    """Import an existing private key into a new encrypted keystore."""
    path = _new_path(keystore, config)
    if key_file is not None:
        try:
            key = key_file.read_text().strip()
        except OSError as exc:
            fail(f"cannot read key file {key_file}: {exc.strerror}")
    elif sys.stdin.isatty():
        key = getpass.getpass("private key (hex, not echoed): ").strip()
    else:
        key = sys.stdin.readline().strip()
    _write(path, key, _new_password(path, password_file), as_json)


@app.command("address")
def address(
    keystore: KeystorePath = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the keystore's address (from the file; no password needed)."""
    path = _path(keystore, config)
    try:
        document = json.loads(path.read_text())
        value = document.get("address")
    except FileNotFoundError:
        fail(f"keystore {path} not found; create one with `sapo wallet new`")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        fail(
            f"{path} is not a JSON keystore (one made by `sapo wallet new`, geth or `cast wallet`)"
        )
    if not value:  # some tools omit the address: decrypting tells it
        try:
            value = load_account(path).address
        except KeystoreError as exc:
            fail(str(exc), Exit.USAGE)
    from eth_utils import to_checksum_address

    checksummed = to_checksum_address("0x" + str(value).removeprefix("0x"))
    if as_json:
        print_json({"address": checksummed, "keystore": str(path)})
    else:
        out.print(checksummed)
