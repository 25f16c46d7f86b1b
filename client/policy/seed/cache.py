"""Where seed policies are cached (one directory per spec), and building each once: processes
sharing a cache (a devnet's nodes, a second `sapo policy seed`) wait on a lock for the builder
and follow its progress."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from client.policy.seed.build import build_seed_policy
from client.policy.seed.progress import BuildProgress, read_progress
from client.policy.seed.spec import SeedSpec


def seed_policy_dir(data_root: Path, spec: SeedSpec) -> Path:
    """Returns where the seed policy of `spec` is cached."""
    arch = "" if spec.arch == "qwen2" else f"{spec.arch}-"
    name = f"seed-{arch}{spec.catalog}-{spec.seed}-h{spec.hidden}l{spec.layers}"
    if spec.entries:
        name += "-on-" + "+".join(sorted(spec.entries))
    if spec.steps != spec.recipe_steps:  # a longer (or shorter) pretraining is another policy
        name += f"-s{spec.steps}"
    if spec.tagged != 1.0:
        name += f"-t{spec.tagged:g}"
    if spec.shared_tokenizer:  # a specialist with the generalist's tokenizer
        name += "-shared-tok"
    if spec.heads != spec.recipe.heads:  # the same sizes cut into other attention heads
        name += f"-a{spec.heads}"
    return data_root / "policies" / name


def ensure_seed_policy(
    data_root: Path,
    spec: SeedSpec,
    *,
    force: bool = False,
    minutes: float | None = None,
    progress: Callable[[BuildProgress], None] | None = None,
    poll_s: float = 1.0,
) -> Path:
    """Returns the cached seed policy's directory, building it first if absent (or `force`).

    Processes sharing a cache (a devnet's nodes, a second `sapo policy seed`) build it once: the
    first holds a lock while it builds; the others wait, passing the builder's progress to their
    own `progress` (with `waiting` set) so they can say what they wait for, then find it built.
    A build that was stopped resumes from what it saved (see build_seed_policy).
    """
    import fcntl

    directory = seed_policy_dir(data_root, spec)
    if (directory / "seed-build.json").is_file() and not force:
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process builds it: follow its progress meanwhile
            if force:
                raise SeedBuildBusy(directory) from None
            while True:
                if progress and (seen := read_progress(directory)) is not None:
                    progress(replace(seen, waiting=True))
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(poll_s)
        if force or not (directory / "seed-build.json").is_file():
            build_seed_policy(spec, directory, minutes=minutes, progress=progress)
    return directory


class SeedBuildBusy(RuntimeError):
    """A forced rebuild was asked for while another process builds the same policy."""

    def __init__(self, directory: Path):
        seen = read_progress(directory)
        who = f" (pid {seen.builder_pid}: {seen.describe()})" if seen else ""
        super().__init__(
            f"another process is building {directory.name}{who}; wait for it to finish, "
            "then rebuild with --force"
        )
