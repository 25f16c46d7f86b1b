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
