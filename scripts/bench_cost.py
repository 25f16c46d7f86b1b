"""What proof of generation costs at the sizes operators run (Qwen2.5 0.5B, 1.5B, 7B shapes),
for full fine-tuning and for a LoRA adapter side by side, per node and chain round.

Models are random-init (nothing is downloaded): a Qwen2 config of each size's shape, with the
seed-test tokenizer and the embedding at Qwen2.5's 151,936 rows (152,064 for 7B); weights'
values do not change what a check costs, only the tokens a random model samples (garbage, which
the seed tokenizer decodes to little text: the proof checks ids, not text).

Columns that are arithmetic on parameter counts (exact, from the config; no model is built):
  trained: parameters a checkpoint holds (all of them, or the adapter's)
  checkpoint: its float32 bytes; a snapshot (one a GRPO step, kept until the beacon opens it)
    takes that much disk, and so does each opened checkpoint a producer pins
  a check fetches: up to OPEN_ROUNDS opened checkpoints (the local rounds of the opened groups);
    the producer uploads that to each of K drawn
    checkers a chain round (K = 10, the ledger's default)
  base once: what a LoRA node of a family fetches or reads once (float32 bytes of the base)
Measured columns (--measure: each in its own process, so peak memory is its own):
  check s: seconds for one checker's whole check of a batch through client.node.proving.Prover
    (the opened checkpoints fetched from a block store into the spool and loaded, every completion
    of each opened group re-drawn), on this machine's CPU, after the producer sampled that batch
    with the node's own generation code from 2 local rounds (a stand-in step moves the weights
    between)
  producer / checker peak: the processes' peak resident memory (ru_maxrss)
  proved: whether the checker's verdict passed (it must)

--save DIR --shape 0.5b writes such a random-init model (float32 safetensors, the seed-test
tokenizer) to DIR as a policy directory a node's [policy].model can name: the manual run of two
LoRA nodes at 0.5B shape in docs/proof-of-generation.md used one.

Usage: python -m scripts.bench_cost [--measure 0.5b,1.5b] [--rank 16] [--max-new-tokens 16]
       python -m scripts.bench_cost --save DIR --shape 0.5b
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from client.policy.adapter import LORA_TARGETS
from scripts import arguments
from scripts.table import Table

REPO = Path(__file__).resolve().parent.parent

# Qwen2.5's published shapes (config.json of each Instruct model)
SHAPES = {
    "0.5b": dict(
        hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864, vocab=151_936, tied=True
    ),
    "1.5b": dict(
        hidden=1536, layers=28, heads=12, kv_heads=2, intermediate=8960, vocab=151_936, tied=True
    ),
    "7b": dict(
        hidden=3584, layers=28, heads=28, kv_heads=4, intermediate=18944, vocab=152_064, tied=False
    ),
}
K_CHECKERS = 10


def linear_shapes(s: dict) -> dict[str, tuple[int, int]]:
    """(in, out) of each of a block's seven linear layers."""
    head = s["hidden"] // s["heads"]
    q, kv = s["heads"] * head, s["kv_heads"] * head
    h, m = s["hidden"], s["intermediate"]
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, m),
        "up_proj": (h, m),
        "down_proj": (m, h),
    }


def parameters(s: dict) -> int:
    """The model's parameters: Qwen2's blocks (q, k, v with biases), norms, embeddings."""
    h = s["hidden"]
    block = sum(i * o for i, o in linear_shapes(s).values())
    head = h // s["heads"]
    block += s["heads"] * head + 2 * s["kv_heads"] * head  # q, k, v biases
    block += 2 * h  # two RMSNorms
    embed = s["vocab"] * h
    return s["layers"] * block + h + embed * (1 if s["tied"] else 2)


def lora_parameters(s: dict, rank: int) -> int:
    return s["layers"] * sum(rank * (i + o) for i, o in linear_shapes(s).values())


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n}"


def build(shape: str, adapter: bool, rank: int):
    """A random-init policy of `shape` (seed 0, so every process builds the same base)."""
    import torch
    from transformers import AutoTokenizer, Qwen2ForCausalLM

    from client.policy import AdapterSpec, Policy, SeedSpec, adapt, ensure_seed_policy

    s = SHAPES[shape]
    tokenizer = AutoTokenizer.from_pretrained(
        ensure_seed_policy(REPO / ".sapo", SeedSpec.tiny_test())
    )
    tokenizer.padding_side = "left"
    config = qwen2_config(
        s,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()
    policy = Policy(f"qwen2.5-{shape}-shape", model, tokenizer, torch.device("cpu"))
    if adapter:
        policy = adapt(policy, AdapterSpec(rank=rank, alpha=2 * rank, targets=LORA_TARGETS))
    return policy


def produce(shape: str, adapter: bool, rank: int, work: Path, max_new_tokens: int) -> dict:
    """The producer: samples a batch of 2 local rounds (2 questions x 2 completions each... 4
    re-drawn rows a round), pins the checkpoints it sampled from; writes the batch."""
    import torch

    from client.node.proving import Snapshots
    from client.node.rollouts import generate_local_round, make_batch, task_seed
    from client.policy import TransformersBackend
    from client.store import LocalStore, Sampling
    from client.store.weights import put_weights
    from client.tasks import load_catalog

    began = time.perf_counter()
    policy = build(shape, adapter, rank)
    built = time.perf_counter() - began
    store = LocalStore(work / "store")
    snapshots = Snapshots(work / "snapshots")
    catalog = load_catalog("tiny")
    ledger, node = "0x5fbdb2315678afecb367f032d93f642f64180aa3", "0x" + "11" * 20
    seed = task_seed(31_337, ledger, 7, node)
    sampling = Sampling.of(1.0, 1.0, max_new_tokens)
    parts, sample_s = [], 0.0
    for k in (0, 1):
        ident = snapshots.take(policy.model, k, 7)
        t0 = time.perf_counter()
        rollouts = generate_local_round(
            policy,
            TransformersBackend(policy),
            catalog,
            seed=seed,
            round_=7,
            node=node,
            k=k,
            items=2,
            completions=2,
            sampling=sampling,
            weights=ident,
        )
        sample_s += time.perf_counter() - t0
        parts.append(rollouts.part)
        put_weights(store, snapshots.read(7, ident), 7)
        with torch.no_grad():  # a stand-in GRPO step: every trained weight moves
            for p in policy.model.parameters():
                if p.requires_grad:
                    p.add_(1e-3 * torch.randn_like(p))
    batch = make_batch(
        chain_id=31_337,
        ledger=ledger,
        round_=7,
        node=node,
        catalog=catalog,
        model=policy.descriptor(),
        sampling=sampling,
        local_rounds=parts,
    )
    (work / "batch.json").write_bytes(batch.encode())
    snapshot = max(p.stat().st_size for p in (work / "snapshots" / "7").glob("*.bin"))
    return {
        "build_s": built,
        "sample_s": sample_s,
        "snapshot_bytes": snapshot,
        "parameters": policy.parameters,
    }


def prove(shape: str, adapter: bool, rank: int, work: Path) -> dict:
    """The checker: its own policy of the family, a Prover, the opened checkpoints fetched
    from the producer's store into its spool, the batch checked."""
    from client.node.proving import Prover, opened
    from client.node.rollouts import generation_seed
    from client.store import LocalStore, decode_batch
    from client.store.weights import get_weights

    policy = build(shape, adapter, rank)
    prover = Prover(policy)
    batch = decode_batch((work / "batch.json").read_bytes())
    problem = prover.model_problem(batch)
    if problem:
        return {"proved": False, "reason": problem}
    began = time.perf_counter()
    store = LocalStore(work / "store")
    beacon = 12345
    files, fetched = {}, 0
    for k in opened(beacon, batch):
        ident = batch.local_rounds[k].weights
        dest = work / f"spool-{k}.f32"
        manifest = get_weights(store, ident, dest, parameters=prover.parameters, network=False)
        files[ident], fetched = dest, fetched + manifest.bytes
    result = prover.check(
        batch,
        beacon=beacon,
        weights=files,
        generation_seed=lambda k: generation_seed(7, batch.node, k),
    )
    return {
        "proved": result.passed,
        "reason": result.reason,
        "check_s": time.perf_counter() - began,
        "fetched_bytes": fetched,
        "redrawn": result.redrawn,
        "tokens": result.tokens,
    }


def qwen2_config(shape: dict, **extra):
    """A Qwen2 config of `shape` (one of SHAPES), random-init: nothing is downloaded."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=shape["vocab"],
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        intermediate_size=shape["intermediate"],
        tie_word_embeddings=shape["tied"],
        **extra,
    )


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measured(shape: str, adapter: bool, rank: int, max_new_tokens: int) -> dict:
    """Producer and checker, each its own process (its own peak memory)."""
    with tempfile.TemporaryDirectory(prefix="sapo-cost-") as tmp:
        out = {}
        for role in ("produce", "prove"):
            cmd = [
                sys.executable,
                "-m",
                __spec__.name,
                "--_role",
                role,
                "--_shape",
                shape,
                "--_work",
                tmp,
                "--rank",
                str(rank),
                "--max-new-tokens",
                str(max_new_tokens),
            ]
            if adapter:
                cmd.append("--_adapter")
            done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{role} {shape} failed:\n{done.stderr[-3000:]}")
            out[role] = json.loads(done.stdout.strip().splitlines()[-1])
        return out


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--measure", default="", help="shapes to build and run: 0.5b,1.5b")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--save", help="write a random-init model of --shape to this directory")
    parser.add_argument("--shape", default="0.5b", choices=tuple(SHAPES))
    parser.add_argument("--_role", help=argparse.SUPPRESS)
    parser.add_argument("--_shape", help=argparse.SUPPRESS)
    parser.add_argument("--_work", help=argparse.SUPPRESS)
    parser.add_argument("--_adapter", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._role:
        import torch

        torch.set_num_threads(max(1, torch.get_num_threads()))
        work = Path(args._work)
        if args._role == "produce":
            row = produce(args._shape, args._adapter, args.rank, work, args.max_new_tokens)
        else:
            row = prove(args._shape, args._adapter, args.rank, work)
        print(json.dumps(row | {"peak_bytes": peak_rss()}))
        return
    if args.save:
        target = Path(args.save)
        if target.exists():
            raise SystemExit(f"{target} exists: name a new directory")
        policy = build(args.shape, False, args.rank)
        policy.model.save_pretrained(target, safe_serialization=True)
        policy.tokenizer.save_pretrained(target)
        print(
            f"{target}: a random-init Qwen2.5-{args.shape}-shape model, {policy.parameters:,} "
            "parameters, with the seed-test tokenizer"
        )
        return
    measure = [m for m in args.measure.split(",") if m]
    unknown = [m for m in measure if m not in SHAPES]
    if unknown:
        raise SystemExit(f"--measure: unknown shapes {unknown} (known: {', '.join(SHAPES)})")
    from client.node.proving import OPEN_ROUNDS
    from client.store.weights import MAX_WEIGHTS_BYTES

    print(
        f"LoRA rank {args.rank}, alpha {2 * args.rank} on {', '.join(LORA_TARGETS)}; OPEN_ROUNDS = "
        f"{OPEN_ROUNDS}, K = {K_CHECKERS} checkers; float32 checkpoints. Measured on this CPU "
        f"(--max-new-tokens {args.max_new_tokens}); '–' where not measured (7B: by formula).\n"
    )
    columns = ("shape", "training", "parameters", "trained", "checkpoint (= disk per snapshot)")
    columns += ("a check fetches", "producer uploads a round (K checks)", "base once", "check s")
    columns += ("producer peak", "checker peak", "proved")
    # a row printed as it is measured: alignment by name (counts as "494M", sizes as "2.0 GB")
    table = Table(*columns, right=columns[2:-1], formats={"check s": ".1f"})
    print(table.header())
    for shape, s in SHAPES.items():
        total = parameters(s)
        for adapter in (False, True):
            trained = lora_parameters(s, args.rank) if adapter else total
            ckpt = 4 * trained
            cells: list[object] = [None] * 4
            if ckpt > MAX_WEIGHTS_BYTES:  # split() refuses it: no manifest, no proof
                cells[-1] = f"no: a checkpoint over {human(MAX_WEIGHTS_BYTES)} cannot be published"
            elif shape in measure:
                m = measured(shape, adapter, args.rank, args.max_new_tokens)
                produced, proved = m["produce"], m["prove"]
                if produced["snapshot_bytes"] != ckpt or produced["parameters"] != total + (
                    trained if adapter else 0
                ):
                    raise SystemExit(
                        f"{shape}: the built model's counts ({produced}) are not the formula's "
                        f"({total} parameters, {ckpt} bytes a checkpoint)"
                    )
                cells = [
                    proved.get("check_s", 0.0),
                    human(produced["peak_bytes"]),
                    human(proved["peak_bytes"]),
                    "yes" if proved["proved"] else f"NO: {proved['reason']}",
                ]
            line = table.line(
                shape,
                "LoRA" if adapter else "full",
                f"{total / 1e6:,.0f}M",
                f"{trained / 1e6:,.1f}M",
                human(ckpt),
                human(OPEN_ROUNDS * ckpt),
                human(K_CHECKERS * OPEN_ROUNDS * ckpt),
                human(4 * total) if adapter else None,
                *cells,
            )
            print(line, flush=True)


if __name__ == "__main__":
    main()
