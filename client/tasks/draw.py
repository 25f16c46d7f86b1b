"""The seeded draw: from a ledger task seed to the questions a node must answer that round.

Derivation (reimplement it to audit any node's round; DOMAIN = b"sapo.draw/1"):
  total    = sum of entry weights (catalog file order)
  for k in 0 .. count-1:
    h_k    = sha256(DOMAIN || seed32 || k as 4-byte big-endian)
    pick   = first 8 bytes of h_k, big-endian, mod total -> the entry whose cumulative weight
             range holds it
  dataset seed of an entry = first 8 bytes of sha256(DOMAIN || seed32 || entry id, UTF-8),
             big-endian, shifted right by 1 (63 bits)
  index    = how many earlier draws of the round picked the same entry (0, 1, …)
  question = reasoning_gym.create_dataset(entry.dataset, seed=dataset seed, size=index+1,
             **entry.config)[index]
The same seed gives the same tasks on every machine and in every process; nobody picks tasks.

A chain round holds local rounds k = 0, 1, …; local round k draws from
  local seed = sha256(b"sapo.local-round/1" || ledger task seed of (round, node) || k as 4 bytes)
so every local round has fresh questions and every one is bound to the chain round.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from client.tasks.catalog import Catalog, CatalogError, Entry

DOMAIN = b"sapo.draw/1"


@dataclass(frozen=True)
class Task:
    """One drawn question with what is needed to verify answers to it."""

    entry: str
    seed: int
    index: int
    question: str
    answer: str | None
    item: dict[str, Any] = field(repr=False, compare=False)  # reasoning-gym's entry, for scoring
    dataset: Any = field(repr=False, compare=False)
    dataset_name: str = ""  # the reasoning-gym dataset (the catalog entry's), for its verifier


def _seed32(seed: bytes | str) -> bytes:
    raw = bytes.fromhex(seed.removeprefix("0x")) if isinstance(seed, str) else bytes(seed)
    if len(raw) != 32:
        raise ValueError(f"a task seed is 32 bytes, got {len(raw)}")
    return raw


LOCAL_DOMAIN = b"sapo.local-round/1"


def local_round_seed(task_seed: bytes | str, k: int) -> bytes:
    """Returns the seed local round k of a chain round draws from (see the module docstring)."""
    if not 0 <= k < 2**32:
        raise ValueError(f"a local round number is 0..2^32-1, got {k}")
    return hashlib.sha256(LOCAL_DOMAIN + _seed32(task_seed) + k.to_bytes(4, "big")).digest()


def dataset_seed(seed: bytes | str, entry_id: str) -> int:
    """Returns the reasoning-gym seed of an entry for a task seed (63 bits)."""
    digest = hashlib.sha256(DOMAIN + _seed32(seed) + entry_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def draw_refs(seed: bytes | str, count: int, catalog: Catalog) -> list[tuple[str, int, int]]:
    """Returns (entry id, dataset seed, index) for each of `count` draws from `seed`."""
    if not 0 < count <= 4_096:
        raise ValueError(f"count must be 1..4096, got {count}")
    raw = _seed32(seed)
    bounds = list(itertools.accumulate(e.weight for e in catalog.entries))
    seen: dict[str, int] = {}
    refs = []
    for k in range(count):
        h = hashlib.sha256(DOMAIN + raw + k.to_bytes(4, "big")).digest()
        pick = int.from_bytes(h[:8], "big") % bounds[-1]
        entry = catalog.entries[next(i for i, b in enumerate(bounds) if pick < b)]
        index = seen.get(entry.id, 0)
        seen[entry.id] = index + 1
        refs.append((entry.id, dataset_seed(raw, entry.id), index))
    return refs


_QUIET = threading.RLock()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # Some generators (bf) print progress dots; they must not reach a `--json` stdout. The
    # redirect is the whole process's: two threads interleaving it (the intake's fetch workers
    # and the publisher verify at once) could leave stdout on the other's buffer, so one at a time
    with _QUIET, contextlib.redirect_stdout(io.StringIO()):
        yield


@lru_cache(maxsize=512)
def _dataset(name: str, seed: int, size: int, config_key: str) -> Any:
    import json

    import reasoning_gym

    with _quiet():
        return reasoning_gym.create_dataset(name, seed=seed, size=size, **json.loads(config_key))


def regenerate(catalog: Catalog, entry_id: str, seed: int, index: int) -> Task:
    """Returns the task a reference names: anyone can rebuild a peer's question this way."""
    import json

    entry: Entry = catalog.entry(entry_id)
    if not (0 <= index < 4_096 and 0 <= seed < 2**63):
        raise CatalogError(f"task reference out of range: seed {seed}, index {index}")
    # datasets of one seed share items across sizes; round the size up so the cache is reused
    size = 1 << max(index, 0).bit_length()
    dataset = _dataset(
        entry.dataset, seed, max(size, index + 1), json.dumps(entry.config, sort_keys=True)
    )
    with _quiet():
        item = dataset[index]
    answer = item.get("answer")
    return Task(
        entry=entry_id,
        seed=seed,
        index=index,
        question=item["question"],
        answer=None if answer is None else str(answer),
        item=item,
        dataset=dataset,
        dataset_name=entry.dataset,
    )


def draw(seed: bytes | str, count: int, catalog: Catalog) -> list[Task]:
    """Returns the `count` tasks a node must answer for a task seed."""
    return [regenerate(catalog, *ref) for ref in draw_refs(seed, count, catalog)]
