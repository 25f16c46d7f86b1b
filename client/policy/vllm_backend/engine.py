"""What runs in vLLM's engine processes, loaded there by name: the worker extension that loads the
trainer's weights in place, the logits processor that makes every sampled token the protocol's
draw, and a watch that ends the engine when the process that owns it dies.

The draws are the protocol's (client.policy.sampling.Draws): the logits processor (`SeededDraws`)
sees each sequence's raw logits before vLLM's own sampling, takes the draw the call's seed gives
that row and step by inverse CDF at the batch's temperature and top-p (the same `pick` the
transformers backend uses), and leaves vLLM only that token to sample. A completion is therefore
the seeded draw of the engine's logits, and `check_draws` on the transformers model accepts it up
to the numerics of the two implementations. The worker extension reloads weights as TRL's
colocate mode loads its trainer's weights, through vLLM's in-place reload."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import torch

from client.pids import pid_alive
from client.policy.sampling import Draws, pick
from client.policy.vllm_backend.environment import OWNER_ENV, SCRATCH_ENV, _environment

EXTRA_ARG = "sapo_draw"  # SamplingParams.extra_args key: [seed, row, temperature, top_p]


def _watch_owner() -> None:
    """In the engine's worker process (it imports this module for SapoWorker): when the process
    that owns the engine dies without closing it (SIGKILL, the OOM killer), vLLM's engine core
    and worker would live on, orphaned, holding their memory and cores (measured), and the
    model copy in /dev/shm would stay. A thread here notices within a second, removes the
    scratch directory, and kills the worker's ancestors up to the owner (the engine core), then
    the worker."""
    owner = int(os.environ.get(OWNER_ENV) or 0)
    if not owner or owner == os.getpid():
        return
    chain, pid = [], os.getppid()
    while pid not in (0, 1, owner) and len(chain) < 4:  # the engine core (and any in between)
        chain.append(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    # the walk ends at init (pid 1) when the owner died while the engine started: its engine
    # core was re-parented before this worker came up, and is as orphaned as a later death
    # would leave it (measured: an engine left behind for the rest of a test run)
    orphaned = pid in (0, 1) and not pid_alive(owner)
    if pid != owner and not orphaned:
        return  # not started by a backend's engine as we know it: leave it alone

    scratch = os.environ.get(SCRATCH_ENV)

    def watch() -> None:
        while not orphaned and pid_alive(owner):
            time.sleep(1.0)
        if scratch and Path(scratch).name.startswith("sapo-vllm-"):
            shutil.rmtree(scratch, ignore_errors=True)
        for ancestor in chain:
            with contextlib.suppress(ProcessLookupError):
                os.kill(ancestor, signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="sapo-vllm-owner", daemon=True).start()


class SapoWorker:
    """Worker extension (vLLM's `worker_extension_cls`): what the backend calls by RPC."""

    def sapo_load_weights(self, path: str) -> int:
        """Loads a safetensors file of the policy's (Hugging Face-named) weights into the
        engine's model in place; returns how many tensors it read."""
        from safetensors.torch import load_file

        state = load_file(path)
        # vLLM's in-place reload: loads checkpoint-format tensors and re-runs the per-layer
        # processing (on CPU, the linear layers' repacking) that a plain load_weights would miss
        runner = self.model_runner  # type: ignore[attr-defined]
        runner.reload_weights(weights_iterator=iter(state.items()), is_checkpoint_format=True)
        from vllm.platforms import current_platform

        if current_platform.is_cpu():
            # on CPU a linear layer computes with a packed copy of its weight made at load
            # (`cpu_linear`); the reload re-packs the layers it loaded, but not a head tied to
            # the embeddings (it receives no weight of its own), whose logits would stay the old
            # weights' (measured: 1.28 off after one change). Re-pack every layer that keeps its
            # weight.
            from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

            for module in runner.model.modules():
                weight = getattr(module, "weight", None)
                kept = weight is not None and weight.ndim == 2 and weight.numel() > 0
                if kept and hasattr(module, "cpu_linear"):
                    dispatch_cpu_unquantized_gemm(module, remove_weight=False)
        return len(state)


def _logits_processor_base():
    _environment()
    from vllm.v1.sample.logits_processor import LogitsProcessor

    return LogitsProcessor


_watch_owner()

try:  # the class exists only where vLLM does (it is loaded by name in the engine's process)
    _Base = _logits_processor_base()
except ImportError:  # pragma: no cover - without the extra, VllmBackend refuses first
    _Base = object


class SeededDraws(_Base):  # type: ignore[misc, valid-type]
    """Makes each sampled token the protocol's draw (Draws): for every sequence whose sampling
    params carry `extra_args[EXTRA_ARG] = [seed, row, temperature, top_p]`, the next token is
    `pick(raw logits, temperature, top_p, u)` with u the seed's uniform for (row, tokens so far);
    every other token's logit becomes -inf. Not argmax-invariant, so vLLM applies it to the raw
    logits, before its own temperature and top-p (which the backend sets to 1)."""

    def __init__(self, vllm_config, device, is_pin_memory):  # vLLM's signature
        self.rows: dict[int, tuple[Draws, int, float, float, list[int]]] = {}

    @classmethod
    def validate_params(cls, sampling_params) -> None:
        draw = (sampling_params.extra_args or {}).get(EXTRA_ARG)
        if draw is None:
            return
        ok = (
            isinstance(draw, list | tuple)
            and len(draw) == 4
            and isinstance(draw[0], int)
            and isinstance(draw[1], int)
            and draw[1] >= 0
            and float(draw[2]) > 0
            and 0 < float(draw[3]) <= 1
        )
        if not ok:
            raise ValueError(f"{EXTRA_ARG} must be [seed, row >= 0, temperature > 0, top_p]")

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update) -> None:
        if batch_update is None:
            return
        from vllm.v1.sample.logits_processor import MoveDirectionality

        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _prompt, output in batch_update.added:
            draw = (params.extra_args or {}).get(EXTRA_ARG)
            if draw is None:
                self.rows.pop(index, None)
            else:
                seed, row, temperature, top_p = draw
                self.rows[index] = (Draws(seed), row, float(temperature), float(top_p), output)
        for a, b, direction in batch_update.moved:
            first, second = self.rows.pop(a, None), self.rows.pop(b, None)
            if first is not None:
                self.rows[b] = first
            if direction == MoveDirectionality.SWAP and second is not None:
                self.rows[a] = second

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        by_setting: dict[tuple[float, float], list[int]] = {}
        for index, (_, _, temperature, top_p, _) in self.rows.items():
            by_setting.setdefault((temperature, top_p), []).append(index)
        for (temperature, top_p), indices in by_setting.items():
            u = []
            for index in indices:
                draws, row, _, _, output = self.rows[index]
                u.append(draws.uniform(row, len(output)))
            at = torch.tensor(indices, device=logits.device)
            tokens = pick(logits[at], temperature, top_p, u)
            only = torch.full((len(indices), logits.shape[-1]), float("-inf"), device=logits.device)
            only[torch.arange(len(indices), device=logits.device), tokens] = 0.0
            logits[at] = only.to(logits.dtype)
        return logits
