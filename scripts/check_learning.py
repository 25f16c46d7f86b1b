"""Does GRPO make a policy better on fresh questions? Prints the training curve and held-out
reward before and after, for one setting. A script, not a test: it takes minutes and its answer
is a measurement.

Each round draws new questions (never a fixed pool), generates L completions per question,
scores them with the real verifiers, and takes GRPO step(s) on the groups with signal.
The defaults are the setting that made the 1.9M seed policy better (64 questions x 8 completions,
one GRPO step a round at lr 2e-4: held-out sampled reward 0.27 -> 0.33 in 100 rounds, on two
seeds).
Usage: python -m scripts.check_learning --policy DIR [--rounds 200 --questions 64 --completions 8
       --lr 2e-4 --temperature 1.0 --kl 0 --steps 1 --negative-weight 1 --eval-questions 500
       --eval-every 50 --seed 1 --threads N --out FILE.json --save DIR]
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path

import torch

from client.policy import TransformersBackend, evaluate, load_policy
from client.policy.encode import Group, encode_groups
from client.sapo import batch_logprobs, grpo_step, has_signal
from client.tasks import draw, load_catalog, render_prompt, reward
from scripts import arguments
from scripts.table import Table


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--policy", required=True)
    parser.add_argument("--catalog", default="tiny")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--completions", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--kl", type=float, default=0.0, help="KL weight to the starting policy")
    parser.add_argument("--steps", type=int, default=1, help="optimizer steps per round")
    parser.add_argument(
        "--negative-weight",
        type=float,
        default=1.0,
        help="scale of negative advantages (1: GRPO as in the paper; 0: only completions that "
        "beat their group's mean are reinforced)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--eval-questions", type=int, default=500)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument(
        "--pool",
        type=int,
        default=0,
        help="train on a fixed pool of this many questions instead of fresh "
        "ones (a sanity check of the update: reward on the pool must rise)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument("--out", type=Path, help="write the curve as JSON here")
    parser.add_argument("--save", type=Path, help="save the trained policy in this directory")
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    policy = load_policy(args.policy, device="cpu", dtype="float32")
    catalog = load_catalog(args.catalog)
    backend = TransformersBackend(policy)
    optimizer = torch.optim.Adam(policy.model.parameters(), lr=args.lr)
    reference = copy.deepcopy(policy.model).eval() if args.kl > 0 else None

    trained: set[str] = set()  # every question RL has trained on so far

    def held_out() -> dict:
        return evaluate(
            policy, catalog, questions=args.eval_questions, seed=10_000 + args.seed, trained=trained
        )

    def unseen(e: dict) -> str:
        text = ""
        for key, what in (("unseen", "not seen in pretraining"), ("untrained", "never RL-trained")):
            if u := e.get(key):
                text += (
                    f"; on the {u['questions']} {what}: greedy {u['greedy']:.3f} "
                    f"sampled {u['sampled']:.3f}"
                )
        return text

    pool = (
        draw(hashlib.sha256(b"sapo.learn/pool").digest(), args.pool, catalog) if args.pool else []
    )
    before = held_out()
    print(
        f"held-out before: greedy {before['greedy']:.3f} sampled {before['sampled']:.3f}"
        f"{unseen(before)}"
    )
    # a row a round, printed as it ends (the held-out lines between them): alignment by name
    columns = ("round", "train reward", "groups w/ signal", "loss", "clip", "grad norm", "s")
    table = Table(
        *columns,
        right=columns,
        formats={"train reward": ".3f", "loss": ".4f", "clip": ".3f", "grad norm": ".3f"},
        float_format=".1f",
    )
    print(table.header())
    kept = ("greedy", "sampled", "unseen", "untrained", "per_dataset")
    curve, evals = [], [{"round": 0, **{k: before[k] for k in kept}}]
    for round_ in range(1, args.rounds + 1):
        began = time.perf_counter()
        if args.pool:
            start = (round_ - 1) * args.questions
            tasks = [pool[(start + k) % len(pool)] for k in range(args.questions)]
        else:
            seed = hashlib.sha256(f"sapo.learn/1:{args.seed}:{round_}".encode()).digest()
            tasks = draw(seed, args.questions, catalog)
        trained.update(t.question for t in tasks)
        out = backend.generate(
            [render_prompt(t.question, policy.tokenizer) for t in tasks],
            args.completions,
            args.max_new_tokens,
            args.temperature,
            1.0,
            seed=round_,
        )
        groups = [
            Group(t.question, texts, [reward(t, c) for c in texts], external=False)
            for t, texts in zip(tasks, out.texts, strict=True)
        ]
        mean_reward = sum(sum(g.rewards) for g in groups) / (len(groups) * args.completions)
        useful = [g for g in groups if has_signal(g.rewards)]
        stats = None
        if useful:
            batch = encode_groups(policy.tokenizer, useful)
            if args.negative_weight != 1.0:
                adv = batch.advantages
                batch = replace(
                    batch, advantages=torch.where(adv < 0, adv * args.negative_weight, adv)
                )
            old = batch_logprobs(policy.model, batch, 64)  # pi_old for every step of the round
            for _ in range(args.steps):
                stats = grpo_step(
                    policy.model,
                    optimizer,
                    batch,
                    micro_batch=64,
                    ref_model=reference,
                    kl_coef=args.kl,
                    old_logprobs=old,
                )
        seconds = time.perf_counter() - began
        curve.append(
            {
                "round": round_,
                "reward": mean_reward,
                "signal_groups": len(useful),
                "loss": stats.loss if stats else None,
            }
        )
        line = table.line(
            round_,
            mean_reward,
            f"{len(useful)}/{len(groups)}",
            stats.loss if stats else 0,
            stats.clip_fraction if stats else 0,
            stats.grad_norm if stats else 0,
            seconds,
        )
        print(line, flush=True)
        if round_ % args.eval_every == 0 or round_ == args.rounds:
            e = held_out()
            evals.append({"round": round_, **{k: e.get(k) for k in kept}})
            print(
                f"held-out at round {round_}: greedy {e['greedy']:.3f} "
                f"sampled {e['sampled']:.3f}{unseen(e)}",
                flush=True,
            )
    after = evals[-1]
    print(
        f"\nheld-out: greedy {before['greedy']:.3f} -> {after['greedy']:.3f}, "
        f"sampled {before['sampled']:.3f} -> {after['sampled']:.3f}"
    )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "curve": curve,
                    "held_out": evals,
                },
                indent=1,
            )
        )
    if args.save:
        policy.model.save_pretrained(args.save)
        policy.tokenizer.save_pretrained(args.save)


if __name__ == "__main__":
    main()
