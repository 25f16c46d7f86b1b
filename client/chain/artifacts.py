"""Compiled contract artifacts, committed in contracts/artifacts (scripts/build-contracts)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

ARTIFACTS_DIR = Path(__file__).resolve().parents[2] / "contracts" / "artifacts"


class ArtifactMissing(FileNotFoundError):
    """A contract artifact is absent or unreadable."""


@cache
def load_artifact(name: str) -> dict[str, Any]:
    """Returns the artifact (abi, bytecode, deployedBytecode, compiler) of contract `name`."""
    path = ARTIFACTS_DIR / f"{name}.json"
    try:
        artifact = json.loads(path.read_text())
    except FileNotFoundError:
        raise ArtifactMissing(
            f"{path} not found; run scripts/build-contracts (needs scripts/setup for solc)"
        ) from None
    except json.JSONDecodeError as exc:
        raise ArtifactMissing(f"{path} is not valid JSON ({exc}); rebuild it") from None
    for key in ("abi", "bytecode", "deployedBytecode"):
        if key not in artifact:
            raise ArtifactMissing(f"{path} has no {key!r}; rebuild it with scripts/build-contracts")
    return artifact


@cache
def selectors(name: str, kind: str = "function") -> dict[bytes, str]:
    """The 4-byte selector of each `kind` ("function" or "error") of a committed contract's ABI,
    mapped to its name: what names a transaction's call, or a revert's error, by its first
    four bytes."""
    from eth_utils import keccak

    found = {}
    for item in load_artifact(name)["abi"]:
        if item["type"] == kind:
            signature = f"{item['name']}({','.join(i['type'] for i in item['inputs'])})"
            found[keccak(text=signature)[:4]] = item["name"]
    return found
