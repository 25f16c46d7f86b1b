"""The node's policy path on a GPU, end to end, on a saved policy: seeded generation, the
Trainer's GRPO step, a checkpoint saved and loaded back, and the proof of generation of the
trained weights checked on the GPU and, after moving the weights as a peer fetches them, on the
CPU. CI has no GPU; run this where one is (an operator's first check, or a developer's). Exits 1
if any check fails.

Usage: python -m scripts.check_gpu --policy DIR [--device cuda] [--dtype float32|bfloat16]
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

import torch

from client.config.models import TrainSection
from client.node.training import Trainer
from client.policy import TransformersBackend, load_checkpoint, load_policy
from client.policy.encode import Group
from client.policy.proof import check_draws
from client.policy.weights import load_weights, weights_bytes
from client.tasks import draw, load_catalog, render_prompt, reward
from scripts import arguments

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--policy", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    args = parser.parse_args()
    failed: list[str] = []

    def report(name: str, ok: bool, detail: str) -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
        if not ok:
            failed.append(name)

    policy = load_policy(args.policy, device=args.device, dtype=args.dtype)
    print(f"{args.policy}: {policy.parameters:,} parameters on {policy.device} ({args.dtype})")
    tasks = draw(bytes(32), 8, load_catalog("tiny"))
    prompts = [render_prompt(t.question, policy.tokenizer) for t in tasks]
    backend = TransformersBackend(policy)
    seed, n = 7, 8
    out = backend.generate(prompts, n, 32, 1.0, 1.0, seed)
    report(
        "generate", out.new_tokens > 0, f"{len(prompts)} x {n} completions, {out.new_tokens} tokens"
    )

    def make_optimizer(model):
        return torch.optim.Adam(model.parameters(), lr=1e-3)

    trainer = Trainer(policy, make_optimizer(policy.model), TrainSection(), 32)
    groups = [
        Group(t.question, texts, [reward(t, c) for c in texts], external=False)
        for t, texts in zip(tasks, out.texts, strict=True)
    ]
    before = weights_bytes(policy.model)
    stats = trainer.step(groups)
    moved = weights_bytes(policy.model) != before
    report(
        "GRPO step (Trainer.step)",
        stats is not None and math.isfinite(stats.loss) and moved,
        "no groups with signal"
        if stats is None
        else f"loss {stats.loss:.4f}, grad norm {stats.grad_norm:.3f}, {stats.tokens} tokens, "
        f"weights changed: {moved}",
    )

    with tempfile.TemporaryDirectory() as tmp:
        saved = trainer.checkpoint(Path(tmp))
        back, _, steps = load_checkpoint(
            saved, make_optimizer, device=args.device, dtype=args.dtype
        )
        same = weights_bytes(back.model) == weights_bytes(policy.model)
        report(
            "checkpoint round trip",
            same and steps == trainer.steps,
            f"{saved.name}: step {steps}, weights equal: {same}",
        )

    out = backend.generate(prompts, n, 32, 1.0, 1.0, seed + 1)
    cpu = load_policy(args.policy, device="cpu", dtype="float32")
    load_weights(cpu.model, weights_bytes(policy.model))  # as a checker loads an opened checkpoint
    for checker, where in ((policy, f"{args.device} {args.dtype}"), (cpu, "cpu float32")):
        passed, worst = 0, 1.0
        for i, prompt in enumerate(prompts):
            for j, ids in enumerate(out.token_ids[i]):
                result = check_draws(
                    checker, prompt, ids, seed=seed + 1, row=i * n + j, temperature=1.0, top_p=1.0
                )
                passed += result.passed
                worst = min(worst, result.min_margin)
        total = len(prompts) * n
        report(
            f"proof of generation, trained weights, checked on {where}",
            passed == total,
            f"{passed}/{total} completions pass, smallest margin {worst:.2e}",
        )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
