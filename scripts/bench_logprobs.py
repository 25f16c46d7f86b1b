"""Whether honest log-probs pass a checker: the sampler's claims against a checker's re-computation.

A sapo.rollouts/5 batch carries each sampled token's log-probability under the distribution it
was drawn from, rounded to 1/LOGPROB_SCALE nats (client.units). A drawn checker re-computes it
from the opened checkpoint, one teacher-forced pass a completion (client.policy.proof.redraw, as
client.node.proving.Prover does), and disputes a batch where any re-drawn token's claim is off by
more than LOGPROB_TOLERANCE. Sampler and checker run other kernels (batched and KV-cached against
one pass; each with its own thread count), so an honest claim differs from the re-computation by
the rounding and their numerics. This measures that difference per thread count of each side,
and what the log-probs add to a batch's bytes.

For each policy and sampling setting: sample --questions x --completions with the node's own
backend at each --sampler-threads, write them as a batch does, then re-compute every token at
each --checker-threads. The table counts checks of 8 completions (what a check re-drew until
issue 57: 2 local rounds x 4; it now re-draws 2 groups whole, 2L completions, 16 at L = 8, so a
check's bound is about twice a table's): the honest checks that would fail at the tolerance and
their one-sided 95% upper bound.

Usage: python -m scripts.bench_logprobs [--policy DIR ...] [--questions 32] [--completions 8]
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch

from client.node.rollouts import generate_local_round, make_batch
from client.policy import TransformersBackend, load_policy
from client.policy.proof import LOGPROB_TOLERANCE, logprob_differences, redraw
from client.store import Sampling
from client.tasks import load_catalog, render_prompt
from client.units import logprob_value
from scripts import arguments
from scripts.table import Table

REPO = Path(__file__).resolve().parent.parent

POLICIES = (".sapo/policies/seed-tiny-0-h64l2", ".sapo/policies/seed-tiny-0-h192l4")
SETTINGS = ((1.0, 1.0), (0.7, 0.9))
PER_CHECK = 8  # the committed tables' unit (see the module doc)


def upper95(failures: int, trials: int) -> float:
    """The one-sided 95% Clopper-Pearson upper bound of a rate seen `failures` times in `trials`."""
    if failures >= trials:
        return 1.0

    def tail(p: float) -> float:  # P(X <= failures) for X ~ Binomial(trials, p)
        return sum(
            math.comb(trials, k) * p**k * (1 - p) ** (trials - k) for k in range(failures + 1)
        )

    low, high = failures / trials, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if tail(mid) > 0.05 else (low, mid)
    return high


def sample(policy, catalog, args, temperature: float, top_p: float, threads: int):
    """One local round of --questions x --completions, as a node samples and writes it."""
    torch.set_num_threads(threads)
    started = time.perf_counter()
    rollouts = generate_local_round(
        policy,
        TransformersBackend(policy),
        catalog,
        seed=b"\x01" * 32,
        round_=7,
        node="0x" + "11" * 20,
        k=0,
        items=args.questions,
        completions=args.completions,
        sampling=Sampling.of(temperature, top_p, args.max_new_tokens),
        weights="0x" + "00" * 32,
    )
    return rollouts, time.perf_counter() - started


def recompute(policy, part, temperature: float, top_p: float, threads: int) -> list[float]:
    """Each completion's largest |claimed - re-computed| log-prob, as a checker computes it."""
    torch.set_num_threads(threads)
    worst = []
    for item in part.items:
        prompt = render_prompt(item.question, policy.tokenizer)
        for row, (ids, claimed) in enumerate(zip(item.token_ids, item.logprobs, strict=True)):
            _, ours = redraw(
                policy, prompt, ids, seed=0, row=row, temperature=temperature, top_p=top_p
            )
            differences = logprob_differences([logprob_value(x) for x in claimed], ours)
            worst.append(max(differences))
    return worst


def batch_bytes(policy, catalog, part, temperature, top_p, max_new_tokens) -> tuple[int, int]:
    """The batch of `part` in bytes as v5 writes it, and as v4 would have (no log-probs)."""
    batch = make_batch(
        chain_id=31_337,
        ledger="0x" + "22" * 20,
        round_=7,
        node="0x" + "11" * 20,
        catalog=catalog,
        model=policy.descriptor(),
        sampling=Sampling.of(temperature, top_p, max_new_tokens),
        local_rounds=[part],
    )
    doc = json.loads(batch.encode())
    doc["schema"] = "sapo.rollouts/4"
    for lr in doc["local_rounds"]:
        for item in lr["items"]:
            del item["logprobs"]
    from client.store.batch import canonical_json

    return len(batch.encode()), len(canonical_json(doc))


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--policy", action="append", help="a policy directory (repeatable)")
    parser.add_argument("--catalog", default="tiny")
    parser.add_argument("--questions", type=int, default=32)
    parser.add_argument("--completions", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--sampler-threads", default="1,2")
    parser.add_argument("--checker-threads", default="1,2")
    args = parser.parse_args()
    catalog = load_catalog(args.catalog)
    samplers = [int(x) for x in args.sampler_threads.split(",")]
    checkers = [int(x) for x in args.checker_threads.split(",")]
    print(
        f"tolerance {LOGPROB_TOLERANCE:g} nats; a check re-draws {PER_CHECK} completions; "
        f"{args.questions} questions x {args.completions} completions a row, float32, CPU "
        f"({torch.get_num_threads()} threads available)\n"
    )
    largest, median = "largest difference (nats)", "median of completions' largest"
    upper = "95% upper bound per check"
    numbers = ("sampler threads", "checker threads", "completions", "tokens", largest, median)
    numbers += ("tokens over tolerance", "checks failed", upper)  # "checks failed": "0 / 32"
    table = Table(
        "policy",
        "T, top-p",
        *numbers,
        right=numbers,
        formats={largest: ".2e", median: ".2e", upper: ".1e"},
    )
    print(table.header())  # then a row as each is measured
    sizes = []
    for directory in args.policy or POLICIES:
        policy = load_policy(REPO / directory, device="cpu", dtype="float32")
        policy.model.eval()
        for temperature, top_p in SETTINGS:
            for s_threads in samplers:
                rollouts, _ = sample(policy, catalog, args, temperature, top_p, s_threads)
                part = rollouts.part
                tokens = sum(len(ids) for item in part.items for ids in item.token_ids)
                v5, v4 = batch_bytes(policy, catalog, part, temperature, top_p, args.max_new_tokens)
                if s_threads == samplers[0]:  # the same draws at any thread count
                    sizes.append((Path(directory).name, temperature, top_p, tokens, v4, v5))
                for c_threads in checkers:
                    worst = recompute(policy, part, temperature, top_p, c_threads)
                    over_tokens = sum(1 for w in worst if w > LOGPROB_TOLERANCE)
                    checks = [worst[i : i + PER_CHECK] for i in range(0, len(worst), PER_CHECK)]
                    failed = sum(1 for c in checks if max(c) > LOGPROB_TOLERANCE)
                    ordered = sorted(worst)
                    line = table.line(
                        Path(directory).name,
                        f"{temperature:g}, {top_p:g}",
                        s_threads,
                        c_threads,
                        len(worst),
                        tokens,
                        max(worst),
                        ordered[len(ordered) // 2],
                        over_tokens,
                        f"{failed} / {len(checks)}",
                        upper95(failed, len(checks)),
                    )
                    print(line, flush=True)
    added = Table("policy", "T, top-p", "tokens", "v4 bytes", "v5 bytes", "added per token")
    for name, temperature, top_p, tokens, v4, v5 in sizes:
        added.row(name, f"{temperature:g}, {top_p:g}", tokens, v4, v5, (v5 - v4) / tokens)
    added.print("What the log-probs add to a batch (one local round as above, canonical bytes):")


if __name__ == "__main__":
    main()
