"""Benchmark of a policy on this machine's CPU (or GPU, --device cuda): generation tokens/s batched
vs one prompt at a time (and, with --vllm, on the vLLM engine: the protocol's seeded draws, vLLM's
own sampler, and loading new weights after a step), and the time and peak memory of one GRPO
step for a round of Q questions x L completions. Prints tables.
Usage: python -m scripts.bench_policy --policy DIR [--questions 8 --completions 8] [--vllm]
       [--device cpu|cuda --dtype float32|bfloat16]
       [--shape HIDDEN,LAYERS,HEADS]   (a randomly initialised Qwen2 of that shape, with DIR's
                                        tokenizer: a larger self-made model; no download)
"""

from __future__ import annotations

import resource
import tempfile
import time

import torch

from client.policy import TransformersBackend, load_policy
from client.policy.encode import Group, encode_groups
from client.sapo import grpo_step
from client.tasks import draw, load_catalog, render_prompt, reward
from scripts import arguments
from scripts.table import Table


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--policy", required=True)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--completions", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3, help="timings are the best of these")
    parser.add_argument("--vllm", action="store_true", help="also generate on the vLLM engine")
    parser.add_argument("--shape", help="HIDDEN,LAYERS,HEADS: a random-init model of this shape")
    parser.add_argument(
        "--no-single",
        action="store_true",
        help="skip one-sequence-at-a-time generation (slow on large models)",
    )
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    args = parser.parse_args()
    policy = load_policy(args.policy, device=args.device, dtype=args.dtype)
    if args.shape:
        policy = random_model(policy, *map(int, args.shape.split(",")), args.device, args.dtype)
    where = (
        f"{torch.cuda.get_device_name()} ({args.dtype})"
        if args.device == "cuda"
        else f"{torch.get_num_threads()} CPU threads ({args.dtype})"
    )
    tasks = draw(bytes(32), args.questions, load_catalog("tiny"))
    prompts = [render_prompt(t.question, policy.tokenizer) for t in tasks]
    q, n, m = args.questions, args.completions, args.max_new_tokens
    print(
        f"policy {args.policy}: {policy.parameters:,} parameters, {where}; a round = {q} "
        f"questions x {n} completions, <= {m} new tokens\n"
    )

    rows = []
    batched = TransformersBackend(policy, batch_size=q * n)
    batched.generate(prompts[:1], 1, 4, 1.0, 1.0, seed=0)  # warm up

    def all_at_once():
        return [batched.generate(prompts, n, m, 1.0, 1.0, seed=1)]

    def one_at_a_time():  # one sequence per call: prompt i, completion j
        single = TransformersBackend(policy, batch_size=1)
        return [single.generate([p], 1, m, 1.0, 1.0, seed=j) for p in prompts for j in range(n)]

    runs = [("transformers, batched (all prompts x n at once)", all_at_once)]
    if not args.no_single:
        runs.append(("transformers, one sequence at a time", one_at_a_time))
    engine = None
    if args.vllm:
        from client.policy.vllm_backend import VllmBackend

        began = time.perf_counter()
        engine = VllmBackend(policy)
        print(f"vLLM engine started in {time.perf_counter() - began:.1f} s")
        engine.generate(prompts[:1], 1, 4, 1.0, 1.0, seed=0)  # warm up
        params = engine._params(m, temperature=1.0, top_p=1.0, seed=1, n=n)
        requests = [{"prompt_token_ids": policy.tokenizer(p)["input_ids"]} for p in prompts]

        def vllm_seeded():
            return [engine.generate(prompts, n, m, 1.0, 1.0, seed=1)]

        def vllm_own():  # vLLM's sampler (not the protocol's draws: a checker would refuse)
            outs = engine.llm.generate(requests, params, use_tqdm=False)
            tokens = sum(len(c.token_ids) for o in outs for c in o.outputs)
            return [type("Out", (), {"new_tokens": tokens})()]

        runs += [
            ("vLLM, the protocol's seeded draws", vllm_seeded),
            ("vLLM, its own sampler (for comparison)", vllm_own),
        ]
    for label, run in runs:
        best = None
        for _ in range(args.repeats):  # best of a few: this machine is shared and noisy
            began = time.perf_counter()
            outs = run()
            seconds = time.perf_counter() - began
            best = seconds if best is None else min(best, seconds)
        tokens = sum(o.new_tokens for o in outs)
        rows.append((label, tokens, best, tokens / best))
    completions = all_at_once()[0]
    table = Table("generation", "new tokens", "seconds", "tokens/s", formats={"tokens/s": ",.0f"})
    for row in rows:
        table.row(*row)
    print(table.render())
    if not args.no_single:
        print(f"\nbatched / one-at-a-time: {rows[0][3] / rows[1][3]:.1f}x")
    if engine is not None:
        print(f"vLLM seeded / transformers batched: {rows[-2][3] / rows[0][3]:.2f}x")
        loads = []
        for _ in range(args.repeats):
            policy.version += 1
            began = time.perf_counter()
            engine.sync()
            loads.append(time.perf_counter() - began)
        print(
            f"vLLM weight load after a step (write, reload in place, reset cache): "
            f"{min(loads):.3f} s (best of {args.repeats})"
        )
        engine.close()
    print()

    groups = [
        Group(t.question, texts, [reward(t, c) for c in texts], external=i >= q // 2)
        for i, (t, texts) in enumerate(zip(tasks, completions.texts, strict=True))
    ]
    batch = encode_groups(policy.tokenizer, groups)
    optimizer = torch.optim.Adam(policy.model.parameters(), lr=1e-5)
    memory = "peak GPU MiB" if args.device == "cuda" else "peak RSS MiB"
    table = Table("GRPO step", "sequences", "tokens", "seconds", memory, formats={memory: ",.0f"})
    for micro in (q * n, 16):
        began = time.perf_counter()
        stats = grpo_step(policy.model, optimizer, batch, micro_batch=micro)
        if args.device == "cuda":
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() / 2**20
        else:
            peak = peak_rss_mib()
        table.row(
            f"micro-batch {micro}",
            stats.sequences,
            stats.tokens,
            time.perf_counter() - began,
            peak,
        )
    print(table.render())


def random_model(policy, hidden: int, layers: int, heads: int, device="cpu", dtype="float32"):
    """A randomly initialised Qwen2 of the given shape with `policy`'s tokenizer, saved and
    loaded back as any policy is (for tokens/s only: its text is noise)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(policy.tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 8 // 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=policy.model.config.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=policy.tokenizer.eos_token_id,
        eos_token_id=policy.tokenizer.eos_token_id,
        pad_token_id=policy.tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    directory = tempfile.mkdtemp(prefix="bench-policy-")
    Qwen2ForCausalLM(config).save_pretrained(directory)
    policy.tokenizer.save_pretrained(directory)
    return load_policy(directory, device=device, dtype=dtype)


if __name__ == "__main__":
    main()
