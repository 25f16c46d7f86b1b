"""Task catalogs: named reasoning-gym datasets with their configuration and draw weights.

A catalog is a TOML file (configs/tasks/<name>.toml). Its digest is the sha256 of its canonical
JSON encoding (sorted keys, no whitespace, the `entries` in file order); the ledger pins that
digest at deployment, so every node and auditor draws from the same tasks.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from client.config.files import load_toml_model

CATALOG_DIR = Path(__file__).resolve().parents[2] / "configs" / "tasks"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


# reasoning-gym datasets whose score_answer (and what it calls) was read for what a stranger's
# answer can make it do: every node scores its peers' answers with them, so a catalog may name
# no other (client.tasks.verify scores some of them itself, or bounds their answers first)
AUDITED = frozenset(
    {
        "arc_1d",
        "base_conversion",
        "basic_arithmetic",
        "bf",
        "binary_matrix",
        "calendar_arithmetic",
        "chain_sum",
        "count_bits",
        "decimal_arithmetic",
        "fraction_simplification",
        "leg_counting",
        "letter_counting",
        "propositional_logic",
        "spell_backward",
    }
)


class CatalogError(Exception):
    """A catalog cannot be loaded, or it is not the one a ledger pins."""


class Entry(BaseModel):
    """One dataset of the catalog: its id in task references, the reasoning-gym dataset name,
    the generator's configuration and an integer draw weight."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=_NAME.pattern)
    dataset: str = Field(min_length=1, max_length=64)
    weight: int = Field(gt=0, le=1_000_000)
    config: dict[str, Any] = Field(default_factory=dict)

    @field_validator("dataset")
    @classmethod
    def _audited(cls, value: str) -> str:
        if value not in AUDITED:
            raise ValueError(
                f"reasoning-gym dataset {value!r}: its verifier has not been read for what a "
                "stranger's answer can make it do (every node scores its peers' answers with it; "
                "binary_matrix's ran any Python an answer held), so a node will not run it; "
                f"audited: {', '.join(sorted(AUDITED))} (client.tasks.catalog.AUDITED)"
            )
        return value

    @field_validator("config")
    @classmethod
    def _no_seed_or_size(cls, value: dict[str, Any]) -> dict[str, Any]:
        reserved = {"seed", "size"} & set(value)
        if reserved:
            raise ValueError(f"{sorted(reserved)} are set by the draw, not the catalog")
        return value


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=_NAME.pattern)
    entries: list[Entry] = Field(min_length=1, max_length=1_000)

    @model_validator(mode="after")
    def _unique_ids(self) -> Catalog:
        ids = [e.id for e in self.entries]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"entry ids must be unique; repeated: {duplicates}")
        return self

    def canonical(self) -> bytes:
        """Returns the canonical bytes the digest is taken over."""
        return json.dumps(
            self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")

    def digest(self) -> bytes:
        """Returns sha256 of the canonical encoding: what the ledger pins as catalogDigest."""
        return hashlib.sha256(self.canonical()).digest()

    def entry(self, entry_id: str) -> Entry:
        for entry in self.entries:
            if entry.id == entry_id:
                return entry
        raise CatalogError(f"catalog {self.name!r} has no entry {entry_id!r}")

    def check_datasets(self) -> None:
        """Raises CatalogError unless every entry builds with reasoning-gym as configured."""
        import reasoning_gym

        for entry in self.entries:
            try:
                reasoning_gym.create_dataset(entry.dataset, seed=0, size=1, **entry.config)[0]
            except Exception as exc:
                raise CatalogError(
                    f"catalog {self.name!r} entry {entry.id!r}: reasoning-gym dataset "
                    f"{entry.dataset!r} refuses this configuration: {type(exc).__name__}: {exc}"
                ) from None


def load_catalog(name_or_path: str | Path) -> Catalog:
    """Returns the catalog named (configs/tasks/<name>.toml) or at a path."""
    text = str(name_or_path)
    path = Path(text) if text.endswith(".toml") or "/" in text else CATALOG_DIR / f"{text}.toml"
    known = ", ".join(sorted(p.stem for p in CATALOG_DIR.glob("*.toml")))
    missing = f"no catalog {text!r} ({path}); known: {known}"
    return load_toml_model(path, Catalog, CatalogError, missing=missing, whole="catalog")


def check_against_ledger(catalog: Catalog, ledger_digest: str) -> None:
    """Raises CatalogError when the ledger pins another catalog than this node's."""
    ours = "0x" + catalog.digest().hex()
    if ours != ledger_digest.lower():
        raise CatalogError(
            f"the ledger pins task catalog {ledger_digest} but catalog {catalog.name!r} here has "
            f"digest {ours}: use the catalog the swarm was deployed with (configs/tasks/*.toml "
            "must match byte for byte in content) or join another ledger"
        )
