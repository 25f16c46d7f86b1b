"""What checking seeded draws costs and catches (client.policy.proof, the core of proof of
generation: docs/proof-of-generation.md), on a locally built seed policy, on this machine's CPU.

It samples questions x completions with the node's backend (seeded inverse-CDF draws), then
checks every completion by one teacher-forced pass, and prints:
  - honest completions: the share that pass, the smallest margin of a draw inside its interval
    (how far numerics are from flipping a token), the tokens checked;
  - forgeries, each checked against the same seeds: the reference answer typed in (what an answer
    farmer sends), the completion of another row (a copy, or a draw with the wrong seed), and the
    honest completion of a policy with other weights (another model);
  - seconds per check against seconds per generated completion.

Usage: python -m scripts.bench_proof [--model seed-test|seed] [--questions 16] [--completions 8]
       [--temperature 1.0] [--top-p 1.0] [--max-new-tokens 32]
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from client.policy import SeedSpec, TransformersBackend, ensure_seed_policy, load_policy
from client.policy.proof import check_draws
from client.tasks import draw, load_catalog, reference_answer, render_prompt
from scripts import arguments
from scripts.table import Table

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--model", default="seed-test", choices=("seed-test", "seed"))
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--completions", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--cache", default=str(REPO / ".sapo"), help="seed policy cache")
    args = parser.parse_args()
    size = SeedSpec.tiny_test if args.model == "seed-test" else SeedSpec
    policy = load_policy(ensure_seed_policy(Path(args.cache), size(seed=0)), device="cpu")
    other = load_policy(ensure_seed_policy(Path(args.cache), size(seed=1)), device="cpu")
    catalog = load_catalog("tiny")
    tasks = draw(os.urandom(32), args.questions, catalog)
    prompts = [render_prompt(t.question, policy.tokenizer) for t in tasks]
    n, seed = args.completions, 20_261_124
    t0 = time.perf_counter()
    out = TransformersBackend(policy).generate(
        prompts, n, args.max_new_tokens, args.temperature, args.top_p, seed
    )
    generate_s = time.perf_counter() - t0
    theirs = TransformersBackend(other).generate(
        prompts, n, args.max_new_tokens, args.temperature, args.top_p, seed
    )

    def check(prompt: int, row: int, ids: list[int]):
        return check_draws(
            policy,
            prompts[prompt],
            ids,
            seed=seed,
            row=row,
            temperature=args.temperature,
            top_p=args.top_p,
        )

    honest, margins, tokens = [], [], 0
    t0 = time.perf_counter()
    for i in range(len(prompts)):
        for j in range(n):
            result = check(i, i * n + j, out.token_ids[i][j])
            honest.append(result.passed)
            margins.append(result.min_margin)
            tokens += result.tokens
    check_s = time.perf_counter() - t0
    # per forgery: (passed, identical to the honest draw of that row: then it is no forgery)
    forged: dict[str, list[tuple[bool, bool]]] = {
        "reference answer": [],
        "another row": [],
        "another model": [],
    }
    stop = policy.tokenizer.encode("</answer>", add_special_tokens=False)
    for i, task in enumerate(tasks):
        typed = (
            policy.tokenizer.encode(f"<answer>{reference_answer(task)}", add_special_tokens=False)
            + stop
        )
        for j in range(n):
            row = i * n + j
            mine = out.token_ids[i][j]
            for name, ids in (
                ("reference answer", typed),
                ("another row", out.token_ids[i][(j + 1) % n]),
                ("another model", theirs.token_ids[i][j]),
            ):
                forged[name].append((check(i, row, ids).passed, ids == mine))
    total = len(honest)
    print(
        f"{args.model} policy, {args.questions} questions x {n} completions, temperature "
        f"{args.temperature}, top-p {args.top_p}, at most {args.max_new_tokens} new tokens, CPU "
        f"({os.cpu_count()} cores)\n"
    )
    identical = "of which identical to the honest draw"
    table = Table("completions checked", "pass", identical, "note", right=("pass",))  # "7/8"
    table.row(
        "honest (sampled with the seed)",
        f"{sum(honest)}/{total}",
        None,
        f"smallest margin {min(margins):.2e}; {tokens} tokens",
    )
    for name, results in forged.items():
        passed = sum(p for p, _ in results)
        same = sum(p and s for p, s in results)
        differ = sum(not s for _, s in results)
        table.row(
            f"forged: {name}",
            f"{passed}/{len(results)}",
            same,
            f"{passed - same} of the {differ} that differ pass",
        )
    print(table.render())
    print(
        f"\ngeneration {generate_s / total * 1e3:.1f} ms per completion (batched); check "
        f"{check_s / total * 1e3:.1f} ms per completion (one teacher-forced pass each, unbatched)"
    )


if __name__ == "__main__":
    main()
