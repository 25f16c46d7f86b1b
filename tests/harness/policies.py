"""The session's seed-test policy (conftest's `seed_test`), copied where a test or a node needs
it."""

from __future__ import annotations

import shutil
from pathlib import Path


def cached_seed_test(built: Path, cache_dir: Path) -> Path:
    """Puts the session's seed-test policy (`built`) where a node whose [policy].cache_dir is
    `cache_dir` looks for it; returns `cache_dir`."""
    from client.policy import SeedSpec, seed_policy_dir

    target = seed_policy_dir(cache_dir, SeedSpec.tiny_test())
    if not target.exists():
        shutil.copytree(built, target)
    return cache_dir


def copied_seed_test(built: Path, directory: Path) -> Path:
    """A copy of the session's seed-test policy at `directory` (a module's own, to load)."""
    shutil.copytree(built, directory)
    return directory


def loaded_seed_test(seed_test: Path, directory: Path):
    """The seed-test policy, copied to `directory` and loaded on the CPU (a module's fixture)."""
    from client.policy import load_policy  # lazily: torch

    return load_policy(copied_seed_test(seed_test, directory), device="cpu", dtype="float32")
