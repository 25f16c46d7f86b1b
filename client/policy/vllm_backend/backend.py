"""The backend in the node's process (`VllmBackend`), with the transformers backend's interface.

- **The engine** runs in a process of its own (vLLM's V1 engine core), started from a copy of the
  policy as it is in memory (written to a temporary directory), so a node that resumed from a
  checkpoint generates from the checkpoint. The engine's process keeps vLLM's CPU thread binding
  and its `torch.set_num_threads` patch away from the trainer's process.
- **Weights follow training** without a restart: before a `generate`, if the trainer has taken a
  step since the engine last loaded weights (`Policy.version`), the backend writes the weights
  (safetensors, in shared memory where the host has it) and the engine's worker loads them into
  its model in place (`SapoWorker.sapo_load_weights`), then forgets its prefix cache (KV
  computed by the old weights).
- **The draws are the protocol's**: each sampled request carries its seed, row, temperature and
  top-p for the engine's `SeededDraws` (see engine); greedy calls are vLLM's own argmax."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from client.policy.policy import Policy, PolicyError
from client.policy.proof import logprobs_batch
from client.policy.sampling import STOP, Completions, Stopping
from client.policy.vllm_backend.engine import EXTRA_ARG, SapoWorker, SeededDraws
from client.policy.vllm_backend.environment import OWNER_ENV, SCRATCH_ENV, _import_vllm
from client.policy.vllm_backend.shape import check_shape, kv_cache_bytes


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
                logits_processors=[f"{SeededDraws.__module__}:SeededDraws"],
                worker_extension_cls=f"{SapoWorker.__module__}.SapoWorker",
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
