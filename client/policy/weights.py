"""A policy's weights as the bytes proof of generation commits to, and the producer's snapshots.

`weights_bytes` writes every parameter in float32, little-endian, in parameter-name order (tied
parameters once); `load_weights` reads such bytes back into a model of the same architecture.
Their id (client.store.weights) is what each local round of a batch names.

A node samples every local round from the weights its last GRPO step left, and which local rounds
it must publish is drawn only after it submits (client.policy.proof.opened). So it keeps a
snapshot of every checkpoint it sampled from until its submission's beacon is known: `Snapshots`,
one file per checkpoint under `<data_dir>/weights/<round>/`, written once per GRPO step (local
rounds with no step between them share one) and deleted once the opened ones are pinned or the
round's window has closed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

from client.store.weights import WeightsError, weights_id


def _parameters(model) -> list[tuple[str, torch.nn.Parameter]]:
    return sorted(model.named_parameters(), key=lambda item: item[0])


def weights_bytes(model) -> bytes:
    """The canonical bytes of a model's weights (float32, little-endian, by parameter name)."""
    with torch.no_grad():
        flat = torch.cat(
            [p.detach().to("cpu", torch.float32).reshape(-1) for _, p in _parameters(model)]
        )
    return flat.numpy().astype("<f4", copy=False).tobytes()


def parameter_count(model) -> int:
    return sum(p.numel() for _, p in _parameters(model))


def load_weights(model, data: bytes) -> None:
    """Loads canonical weight bytes into `model` (same architecture); WeightsError if the size is
    not the model's."""
    wanted = 4 * parameter_count(model)
    if len(data) != wanted:
        raise WeightsError(f"{len(data)} bytes of weights for a model of {wanted} bytes")
    flat = torch.from_numpy(np.frombuffer(data, dtype="<f4").copy())
    offset = 0
    with torch.no_grad():
        for _, p in _parameters(model):
            n = p.numel()
            p.copy_(flat[offset : offset + n].view_as(p).to(p.device, p.dtype))
            offset += n


class Snapshots:
    """The checkpoints a node sampled from, kept per chain round until their opening."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._step: int | None = None  # the GRPO step of the last snapshot, and its id and file
        self._last: tuple[str, Path] | None = None

    def take(self, model, step: int, round_: int) -> str:
        """Returns the id of the model's current weights and keeps them for `round_` (written
        once per `step`: a local round with no step since the last shares its snapshot)."""
        if self._step != step or self._last is None or not self._last[1].is_file():
            data = weights_bytes(model)
            ident = weights_id(data)
            path = self._write(round_, ident, data)
            self._step, self._last = step, (ident, path)
            return ident
        ident, path = self._last
        target = self.root / str(round_) / f"{ident}.bin"
        if not target.is_file():  # the same weights, sampled again in a later chain round
            target.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.link(path, target)
        return ident

    def _write(self, round_: int, ident: str, data: bytes) -> Path:
        directory = self.root / str(round_)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{ident}.bin"
        if not path.is_file():
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".snap-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        return path

    def read(self, round_: int, ident: str) -> bytes | None:
        """The bytes of checkpoint `ident` sampled from in `round_`, or None if not kept."""
        path = self.root / str(round_) / f"{ident}.bin"
        return path.read_bytes() if path.is_file() else None

    def drop(self, round_: int) -> None:
        shutil.rmtree(self.root / str(round_), ignore_errors=True)

    def drop_before(self, round_: int) -> list[int]:
        """Deletes the snapshots of rounds before `round_`; returns those rounds."""
        if not self.root.is_dir():
            return []
        old = [
            int(p.name) for p in self.root.iterdir() if p.name.isdigit() and int(p.name) < round_
        ]
        for r in old:
            self.drop(r)
        return old

    def rounds(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return sorted(int(p.name) for p in self.root.iterdir() if p.name.isdigit())
