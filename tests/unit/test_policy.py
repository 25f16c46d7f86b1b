"""Policies on a real (tiny) Qwen2 built locally: the seed builder, loading, generation, the
GRPO step on re-encoded rollouts, and exact checkpoint resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from client.policy import (
    PolicyError,
    SeedSpec,
    TransformersBackend,
    build_seed_policy,
    load_checkpoint,
    load_policy,
    save_checkpoint,
)
from client.policy.device import pick_device
from client.policy.encode import Group, encode_groups
from client.sapo import grpo_step
from client.tasks import draw, load_catalog, render_prompt, reward

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def seed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("seed") / "tiny-test"
    build_seed_policy(SeedSpec.tiny_test(), directory)
    return directory


def adam(model) -> torch.optim.Optimizer:
    return torch.optim.Adam(model.parameters(), lr=1e-3)


def test_seed_build_is_deterministic(seed_dir: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    build_seed_policy(SeedSpec.tiny_test(), again)
    a = load_policy(seed_dir, device="cpu", dtype="float32").model.state_dict()
    b = load_policy(again, device="cpu", dtype="float32").model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_seed_tokenizer_splits_digits_and_keeps_answer_tags(seed_dir: Path) -> None:
    tok = load_policy(seed_dir, device="cpu", dtype="float32").tokenizer
    ids = tok.encode("<answer>1234</answer>", add_special_tokens=False)
    assert len(ids) == 6  # <answer>, 1, 2, 3, 4, </answer>
    assert tok.decode(ids) == "<answer>1234</answer>"


def test_missing_policy_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="sapo policy seed"):
        load_policy(tmp_path / "nope", device="cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            pick_device("cuda")


def test_batched_generation_is_seeded_and_shaped(seed_dir: Path) -> None:
    policy = load_policy(seed_dir, device="cpu", dtype="float32")
    backend = TransformersBackend(policy, batch_size=5)  # several batches, left padded
    prompts = [
        render_prompt(t.question, policy.tokenizer)
        for t in draw("0x" + "01" * 32, 3, load_catalog("tiny"))
    ]
    first = backend.generate(prompts, 4, 6, 1.0, 1.0, seed=7)
    again = backend.generate(prompts, 4, 6, 1.0, 1.0, seed=7)
    other = backend.generate(prompts, 4, 6, 1.0, 1.0, seed=8)
    assert [len(c) for c in first.texts] == [4, 4, 4]
    assert first.texts == again.texts and first.texts != other.texts
    assert 0 < first.new_tokens <= 3 * 4 * 6


def test_greedy_generation_matches_transformers_generate(seed_dir: Path) -> None:
    """The written-out loop (shared prefill, left padding, finished rows leaving the batch) gives
    exactly what `model.generate` gives for each prompt on its own."""
    policy = load_policy(seed_dir, device="cpu", dtype="float32")
    tok = policy.tokenizer
    prompts = [
        render_prompt(t.question, tok) for t in draw("0x" + "02" * 32, 6, load_catalog("tiny"))
    ]
    assert len({len(tok.encode(p)) for p in prompts}) > 1  # so left padding is exercised
    ours = TransformersBackend(policy, batch_size=8).generate(prompts, 2, 12, 0.0, 1.0, seed=0)
    stops = [tok.eos_token_id, tok.convert_tokens_to_ids("</answer>")]
    for prompt, pair in zip(prompts, ours.texts, strict=True):
        ids = tok(prompt, return_tensors="pt")
        out = policy.model.generate(
            **ids,
            max_new_tokens=12,
            do_sample=False,
            eos_token_id=stops,
            pad_token_id=tok.pad_token_id,
        )
        new = [t for t in out[0, ids["input_ids"].shape[1] :].tolist() if t not in stops[:1]]
        new = [t for t in new if t != tok.pad_token_id]
        assert pair == [tok.decode(new)] * 2


def test_sampled_completions_end_at_the_answer_tag(seed_dir: Path) -> None:
    policy = load_policy(seed_dir, device="cpu", dtype="float32")
    prompts = [
        render_prompt(t.question, policy.tokenizer)
        for t in draw("0x" + "03" * 32, 4, load_catalog("tiny"))
    ]
    out = TransformersBackend(policy).generate(prompts, 8, 24, 1.0, 0.9, seed=1)
    texts = [t for group in out.texts for t in group]
    assert all(t.count("</answer>") <= 1 for t in texts)
    assert all(t.endswith("</answer>") for t in texts if "</answer>" in t)


def rollout_batch(policy, seed: int = 3):
    tasks = draw(bytes([seed]) * 32, 4, load_catalog("tiny"))
    backend = TransformersBackend(policy)
    out = backend.generate(
        [render_prompt(t.question, policy.tokenizer) for t in tasks], 4, 8, 1.0, 1.0, seed=seed
    )
    groups = []
    for i, (task, texts) in enumerate(zip(tasks, out.texts, strict=True)):
        rewards = [reward(task, t) for t in texts]
        rewards[0] = 1.0 - rewards[0]  # make sure every group has spread for the test
        groups.append(Group(task.question, texts, rewards, external=i >= 2))
    return encode_groups(policy.tokenizer, groups)


def test_grpo_step_on_reencoded_rollouts(seed_dir: Path) -> None:
    policy = load_policy(seed_dir, device="cpu", dtype="float32")
    batch = rollout_batch(policy)
    before = [p.detach().clone() for p in policy.model.parameters()]
    stats = grpo_step(policy.model, adam(policy.model), batch, micro_batch=5)
    assert torch.isfinite(torch.tensor(stats.loss)) and stats.grad_norm > 0
    assert stats.sequences == 16 and stats.tokens > 0 and stats.clip_fraction == 0.0
    assert stats.reward_local is not None and stats.reward_external is not None
    changed = [
        not torch.equal(a, b) for a, b in zip(before, policy.model.parameters(), strict=True)
    ]
    assert any(changed)


def test_micro_batching_does_not_change_the_update(seed_dir: Path) -> None:
    # compared on the gradient the step applied, not on Adam's result: Adam's first step is
    # lr * g / (|g| + eps), which turns the rounding of another summation order into a full-size
    # step wherever |g| is near eps
    results = []
    for micro in (16, 3):
        policy = load_policy(seed_dir, device="cpu", dtype="float32")
        torch.manual_seed(0)
        batch = rollout_batch(policy)
        grpo_step(policy.model, adam(policy.model), batch, micro_batch=micro)
        results.append(torch.cat([p.grad.flatten() for p in policy.model.parameters()]))
    assert results[0].abs().max() > 0
    assert torch.allclose(results[0], results[1], rtol=1e-4, atol=1e-7)


def test_checkpoint_round_trip_gives_the_identical_next_step(seed_dir: Path, tmp_path: Path):
    policy = load_policy(seed_dir, device="cpu", dtype="float32")
    optimizer = adam(policy.model)
    batch1, batch2 = rollout_batch(policy, 3), rollout_batch(policy, 4)
    grpo_step(policy.model, optimizer, batch1)
    save_checkpoint(policy, optimizer, 1, tmp_path / "ckpt")
    continued = grpo_step(policy.model, optimizer, batch2)
    resumed_policy, resumed_opt, step = load_checkpoint(tmp_path / "ckpt", adam)
    assert step == 1
    resumed = grpo_step(resumed_policy.model, resumed_opt, batch2)
    assert resumed.loss == pytest.approx(continued.loss, abs=1e-7)
    for a, b in zip(policy.model.parameters(), resumed_policy.model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-7)


def test_policy_cli_builds_once_and_evaluates(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from client.cli.main import app

    runner = CliRunner()
    args = ["policy", "seed", "--size", "test", "--data-dir", str(tmp_path), "--json"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    built = json.loads(first.stdout)
    assert built["cached"] is False and built["parameters"] > 0
    second = json.loads(runner.invoke(app, args).stdout)
    assert second["cached"] is True and second["path"] == built["path"]
    result = runner.invoke(
        app,
        [
            "policy",
            "eval",
            "--policy",
            built["path"],
            "--questions",
            "10",
            "--device",
            "cpu",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report["per_dataset"]) <= {e.id for e in load_catalog("tiny").entries}
    assert 0.0 <= report["greedy"] <= 1.0 and report["seen_in_pretraining"] is not None
    assert report["unseen"]["questions"] == 10 - report["seen_in_pretraining"]
    missing = runner.invoke(app, ["policy", "eval", "--policy", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "cannot load policy" in missing.output


def test_later_steps_of_a_round_clip_against_the_generating_policy(seed_dir: Path) -> None:
    from client.sapo import batch_logprobs

    policy = load_policy(seed_dir, device="cpu", dtype="float32")
    batch = rollout_batch(policy)
    optimizer = torch.optim.Adam(policy.model.parameters(), lr=0.05)  # big: the ratio moves
    old = batch_logprobs(policy.model, batch)
    first = grpo_step(policy.model, optimizer, batch, old_logprobs=old)
    second = grpo_step(policy.model, optimizer, batch, old_logprobs=old)
    fresh = grpo_step(policy.model, optimizer, batch)  # pi_old = now: nothing to clip
    assert first.clip_fraction == 0.0
    assert second.clip_fraction > 0.0
    assert fresh.clip_fraction == 0.0


def test_seeded_draws_are_checkable_by_anyone_with_the_weights(seed_dir: Path) -> None:
    from client.policy.proof import check_draws
    from client.tasks import reference_answer

    policy = load_policy(seed_dir, device="cpu", dtype="float32")
    tasks = draw("0x" + "02" * 32, 3, load_catalog("tiny"))
    prompts = [render_prompt(t.question, policy.tokenizer) for t in tasks]
    n, seed = 4, 11
    # batch_size 5: one prompt's completions a batch, left padded, rows counted across them
    out = TransformersBackend(policy, batch_size=5).generate(prompts, n, 12, 1.0, 0.9, seed=seed)

    def check(i: int, row: int, ids: list[int]):
        return check_draws(policy, prompts[i], ids, seed=seed, row=row, temperature=1.0, top_p=0.9)

    for i in range(len(prompts)):
        for j in range(n):
            honest = check(i, i * n + j, out.token_ids[i][j])
            assert honest.passed and honest.tokens == len(out.token_ids[i][j]), (i, j, honest)
    # what an answer farmer types in is not what the seed draws from these weights
    stop = policy.tokenizer.encode("</answer>", add_special_tokens=False)
    typed = [
        policy.tokenizer.encode(f"<answer>{reference_answer(t)}", add_special_tokens=False) + stop
        for t in tasks
    ]
    # (unless the seed's draw for that row is exactly the reference answer: then it is honest)
    for i in range(len(tasks)):
        assert check(i, i * n, typed[i]).passed == (typed[i] == out.token_ids[i][0])
    assert any(typed[i] != out.token_ids[i][0] for i in range(len(tasks)))
    # nor is another row's completion (a copy, or a draw made with another seed), unless the
    # two rows happened to draw the same tokens
    for i in range(len(tasks)):
        ours, theirs = out.token_ids[i][0], out.token_ids[i][1]
        assert check(i, i * n, theirs).passed == (theirs == ours)
    # greedy: every token the argmax
    greedy = TransformersBackend(policy).generate(prompts[:1], 1, 8, 0.0, 1.0, seed=0)
    result = check_draws(
        policy, prompts[0], greedy.token_ids[0][0], seed=0, row=0, temperature=0.0, top_p=1.0
    )
    assert result.passed
