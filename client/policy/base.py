"""A policy's frozen base as a bundle (client.store.base): what a node of a family pins for the
family's next node, and how a fetched one is checked before any node loads it.

The bundle's tensors and bytes are exactly what the base id hashes (client.policy.adapter:
`base_parameters`, float32, in name order), so a bundle's `weights` is its model family, and a
base loaded from a fetched bundle must give that id again (`load_fetched`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch

from client.policy.adapter import base_id, base_parameters
from client.store.base import BASE_FILES, BaseBundle, BaseError, describe, publish_base


def base_tensors(model) -> list[tuple[str, tuple[int, ...]]]:
    """The base's parameters as a bundle lists them: (name, shape), in the base id's order."""
    return [(name, tuple(p.shape)) for name, p in base_parameters(model)]


def base_pieces(model) -> Iterator[bytes]:
    """The base's float32 little-endian bytes, a parameter at a time (the base id's bytes)."""
    with torch.no_grad():
        for _, p in base_parameters(model):
            yield p.detach().to("cpu", torch.float32).reshape(-1).numpy().astype("<f4").tobytes()


def source_files(source: str | Path | None) -> dict[str, bytes]:
    """The config and tokenizer files of the directory a policy was loaded from (a local directory,
    or a Hugging Face name's cached snapshot), byte for byte: what a bundle carries."""
    if source is None:
        raise BaseError("the policy was not loaded from a directory: no files to bundle")
    directory = Path(str(source))
    if not directory.is_dir():
        try:
            from huggingface_hub import snapshot_download

            directory = Path(snapshot_download(str(source), local_files_only=True))
        except Exception as exc:  # not cached, or not a hub name: the message says which
            raise BaseError(f"no local files for {source!r}: {str(exc).splitlines()[0]}") from None
    # an empty file says nothing a loader needs (and a bundle's files are never empty)
    present = [directory / n for n in BASE_FILES if (directory / n).is_file()]
    files = {path.name: path.read_bytes() for path in present if path.stat().st_size > 0}
    if "config.json" not in files:
        raise BaseError(f"{directory} has no config.json")
    return files


def bundle_of(policy) -> BaseBundle:
    """The bundle of `policy`'s base (nothing is stored): its id is what `[policy].base` names."""
    return describe(
        source_files(policy.source), base_tensors(policy.model), base_pieces(policy.model)
    )


def publish(store, policy) -> BaseBundle:
    """Pins `policy`'s base in `store` (kept while the node runs it) and returns its bundle."""
    return publish_base(
        store, source_files(policy.source), base_tensors(policy.model), base_pieces(policy.model)
    )


def load_fetched(directory: Path, bundle: BaseBundle, device: str = "cpu", dtype: str = "float32"):
    """Loads a fetched base and checks it end to end: its parameters are the bundle's tensors and
    its base id is the bundle's `weights` (a config that reshaped or renamed the bytes, or a model
    class that ignores some, would give another). Returns the policy; raises BaseError."""
    from client.policy import PolicyError, load_policy

    try:
        policy = load_policy(directory, device=device, dtype=dtype)
    except PolicyError as exc:
        raise BaseError(f"the fetched base does not load: {exc}") from None
    except Exception as exc:  # a loader refusing a stranger's files, whatever its type
        line = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise BaseError(f"the fetched base does not load: {line}") from None
    listed = [(t.name, tuple(t.shape)) for t in bundle.tensors]
    if base_tensors(policy.model) != listed:
        raise BaseError("the fetched base's model has other parameters than its bundle lists")
    if (found := base_id(policy.model)) != bundle.weights:
        raise BaseError(f"the fetched base loads as base {found[:12]}…, not {bundle.weights[:12]}…")
    return policy
