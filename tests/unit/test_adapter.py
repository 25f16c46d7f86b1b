"""LoRA adapters over a content-addressed base (client.policy.adapter): what a node commits to,
snapshots and publishes is the adapter only; a checker of the same base proves its batches
sharing one base in memory, and a checker of another base names the family it lacks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from client.node.proving import Prover, Snapshots, opened_rows
from client.node.rollouts import generation_seed
from client.policy import AdapterSpec, adapt, load_checkpoint, load_policy, save_checkpoint
from client.policy.adapter import base_id
from client.policy.weights import load_weights, parameter_count, weights_bytes
from client.store.batch import decode_batch
from client.store.weights import weights_id
from tests.harness.batches import NODE, round_7_batch
from tests.harness.policies import copied_seed_test

SPEC = AdapterSpec(rank=4, alpha=8)


def lora_params(model) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    """A LoRA policy over the seed-test base and an honest round-7 batch of two local rounds,
    the second sampled after a (stand-in) step moved the adapter."""
    from tests.harness.batches import two_sampled_rounds

    root = tmp_path_factory.mktemp("adapter")
    copied_seed_test(seed_test, root / "seed")
    plain = load_policy(root / "seed", device="cpu", dtype="float32")
    full_bytes = len(weights_bytes(plain.model))
    policy = adapt(plain, SPEC)

    def step(policy) -> None:  # what a GRPO step does to the adapter, coarsely
        for n, p in policy.model.named_parameters():
            if "lora_B" in n:
                p.add_(0.5 * torch.randn_like(p))

    parts, weights = two_sampled_rounds(policy, Snapshots(root / "weights"), step)
    batch = round_7_batch(policy, parts)
    return {
        "policy": policy,
        "batch": batch,
        "weights": weights,
        "root": root,
        "full_bytes": full_bytes,
    }


def check(prover: Prover, world, batch=None):
    return prover.check(
        batch or world["batch"],
        beacon=12345,
        weights=world["weights"],
        generation_seed=lambda k: generation_seed(7, NODE, k),
    )


def test_a_checkpoint_is_the_adapter_only_and_the_base_is_named_by_its_content(world) -> None:
    policy = world["policy"]
    adapter = lora_params(policy.model)
    assert parameter_count(policy.model) == adapter
    data = weights_bytes(policy.model)
    assert len(data) == 4 * adapter < world["full_bytes"] / 4  # the adapter, not the model
    snapshot = world["root"] / "weights" / "7"
    assert {p.stat().st_size for p in snapshot.glob("*.bin")} == {4 * adapter}
    # the base id is the id the plain model's own checkpoint would have: any node holding
    # those weights computes it, with or without an adapter attached
    plain = load_policy(world["root"] / "seed", device="cpu", dtype="float32")
    assert policy.base == base_id(plain.model) == weights_id(weights_bytes(plain.model))
    described = world["batch"].model
    assert described.base == policy.base
    assert described.adapter.model_dump() == SPEC.describe()
    # the batch with its model descriptor survives its canonical bytes
    assert decode_batch(world["batch"].encode()) == world["batch"]


@pytest.mark.slow
def test_a_checker_of_the_same_base_proves_the_batch_sharing_its_base_weights(world) -> None:
    prover = Prover(world["policy"])
    mine = dict(world["policy"].model.named_parameters())
    theirs = dict(prover.policy.model.named_parameters())
    shared = [n for n in theirs if "lora_" not in n and theirs[n] is mine[n]]
    assert shared and len(shared) == sum("lora_" not in n for n in theirs)  # one base in memory
    assert all(theirs[n] is not mine[n] for n in theirs if "lora_" in n)  # its own adapter
    result = check(prover, world)
    assert result.passed, result.reason
    rows = sum(len(r) for r in opened_rows(12345, world["batch"]).values())
    assert result.redrawn == rows >= 4 and result.tokens > rows  # every opened group, whole
    # loading a checkpoint into the checker's adapter leaves the node's own policy alone
    before = weights_bytes(world["policy"].model)
    load_weights(prover.policy.model, next(iter(world["weights"].values())))
    assert weights_bytes(world["policy"].model) == before
    # a forged checkpoint (another adapter, far from the one sampled from) is not the draw's
    generator = torch.Generator().manual_seed(0)
    forged = {
        ident: (3 * torch.randn(len(data) // 4, generator=generator)).numpy().tobytes()
        for ident, data in world["weights"].items()
    }
    refused = prover.check(
        world["batch"],
        beacon=12345,
        weights=forged,
        generation_seed=lambda k: generation_seed(7, NODE, k),
    )
    assert not refused.passed and "not the seeded draw" in refused.reason


def test_a_checker_without_the_base_or_the_adapter_shape_names_what_it_lacks(
    world, tmp_path: Path
) -> None:
    batch = world["batch"]
    # another base: the same seed policy with one weight changed is another family
    other = load_policy(world["root"] / "seed", device="cpu", dtype="float32")
    with torch.no_grad():
        other.model.model.norm.weight.mul_(1.01)
    problem = Prover(adapt(other, SPEC)).model_problem(batch)
    assert problem and "another model family" in problem and batch.model.base[:12] in problem
    # the same base, an adapter of another rank
    same = load_policy(world["root"] / "seed", device="cpu", dtype="float32")
    problem = Prover(adapt(same, AdapterSpec(rank=8, alpha=16))).model_problem(batch)
    assert problem and "rank 4" in problem and "rank 8" in problem
    # a checker that trains every weight cannot load an adapter's checkpoint
    full = load_policy(world["root"] / "seed", device="cpu", dtype="float32")
    problem = Prover(full).model_problem(batch)
    assert problem and "trains a LoRA adapter" in problem
    result = Prover(full).check(
        batch,
        beacon=1,
        weights=world["weights"],
        generation_seed=lambda k: generation_seed(7, NODE, k),
    )
    assert not result.passed and result.redrawn == 0


def test_an_adapter_checkpoint_saves_the_adapter_and_resumes_over_its_base(
    world, tmp_path: Path
) -> None:
    policy = world["policy"]
    optimizer = torch.optim.Adam([p for p in policy.model.parameters() if p.requires_grad])
    path = save_checkpoint(policy, optimizer, 3, tmp_path / "checkpoint")
    on_disk = sum(p.stat().st_size for p in path.glob("*.safetensors"))
    assert on_disk < world["full_bytes"] / 4  # the adapter, not the base

    def make_optimizer(model):
        return torch.optim.Adam([p for p in model.parameters() if p.requires_grad])

    resumed, _, step = load_checkpoint(path, make_optimizer)
    assert step == 3 and resumed.adapter == SPEC and resumed.base == policy.base
    assert weights_bytes(resumed.model) == weights_bytes(policy.model)
    # a base that changed under the checkpoint is refused with what to do
    moved = tmp_path / "moved-base"
    copied_seed_test(world["root"] / "seed", moved)
    model_file = next(moved.glob("*.safetensors"))
    import json

    meta = json.loads((path / "sapo.json").read_text())
    meta["base_source"] = str(moved)
    (path / "sapo.json").write_text(json.dumps(meta))
    from safetensors.torch import load_file, save_file

    tensors = load_file(model_file)
    name = next(n for n in tensors if n.endswith("norm.weight"))
    tensors[name] = tensors[name] * 1.01
    save_file(tensors, model_file, metadata={"format": "pt"})
    from client.policy import PolicyError

    with pytest.raises(PolicyError, match="restore that base"):
        load_checkpoint(path, make_optimizer)


def test_the_cost_tables_counts_are_the_models_at_qwen25_shapes() -> None:
    """scripts/bench_cost.py prints bytes from parameter counts it computes from each shape; the
    models themselves (built on the meta device: no memory) have exactly those counts, and LoRA
    rank 16 on the seven linear layers of 0.5B is ~8.8M parameters, 35 MB in float32."""
    from transformers import Qwen2ForCausalLM

    from client.policy.adapter import attach_lora
    from scripts import bench_cost as module

    for shape in ("0.5b", "1.5b", "7b"):
        s = module.SHAPES[shape]
        config = module.qwen2_config(s)
        with torch.device("meta"):
            model = Qwen2ForCausalLM(config)
        assert sum(p.numel() for p in model.parameters()) == module.parameters(s), shape
        adapted = attach_lora(model, AdapterSpec(rank=16, alpha=32))
        assert lora_params(adapted) == module.lora_parameters(s, 16), shape
    assert module.lora_parameters(module.SHAPES["0.5b"], 16) * 4 == 35_192_832


def test_an_adapter_on_modules_the_model_lacks_names_the_ones_it_has(world) -> None:
    from client.policy import PolicyError

    plain = load_policy(world["root"] / "seed", device="cpu", dtype="float32")
    with pytest.raises(PolicyError) as info:
        adapt(plain, AdapterSpec(targets=("c_attn", "q_proj")))
    assert "['c_attn']" in str(info.value) and "q_proj" in str(info.value)


def test_the_llama_seed_is_another_model_family_and_a_checker_says_so(world) -> None:
    """`sapo policy seed --arch llama`: a Llama-architecture seed policy with a tokenizer of its
    own. Its family differs from the Qwen2-style seed's with an adapter (another base) and
    without (another architecture and tokenizer); a Qwen2-style checker names what it lacks."""
    from typer.testing import CliRunner

    from client.cli.main import app
    from client.policy import SeedSpec, ensure_seed_policy
    from client.policy.family import architecture_id, family_id, policy_family

    spec = SeedSpec.of("test", 0, "tiny", arch="llama")
    assert spec.vocab_size < SeedSpec.tiny_test().vocab_size
    directory = ensure_seed_policy(world["root"] / "cache", spec)
    assert directory.name == "seed-llama-tiny-0-h64l2"
    llama = load_policy(directory, device="cpu", dtype="float32")
    qwen = load_policy(world["root"] / "seed", device="cpu", dtype="float32")
    assert type(llama.model).__name__ == "LlamaForCausalLM"
    assert type(qwen.model).__name__ == "Qwen2ForCausalLM"
    assert llama.descriptor()["tokenizer"] != qwen.descriptor()["tokenizer"]
    # the answer format survives the other tokenizer (the verifiers read the text)
    ids = llama.tokenizer.encode("<answer>42</answer>", add_special_tokens=False)
    assert llama.tokenizer.decode(ids) == "<answer>42</answer>"
    # families: the base's id with an adapter, the architecture's without; both differ
    assert family_id(llama.model, llama.tokenizer, adapted=True) == base_id(llama.model)
    assert architecture_id(llama.model, llama.tokenizer) != architecture_id(
        qwen.model, qwen.tokenizer
    )
    assert policy_family(world["policy"]) == world["policy"].base == base_id(qwen.model)
    # two loads of one model are one family (nothing of where it was loaded from counts)
    again = load_policy(world["root"] / "seed", device="cpu", dtype="float32")
    assert architecture_id(again.model, again.tokenizer) == architecture_id(
        qwen.model, qwen.tokenizer
    )
    printed = CliRunner().invoke(app, ["policy", "id", str(directory), "--adapter", "lora"])
    assert printed.exit_code == 0 and printed.output.strip() == base_id(llama.model)
    # a Llama-style checker drawn on the Qwen2-style adapter's batch could not load it
    problem = Prover(adapt(llama, SPEC)).model_problem(world["batch"])
    assert problem and "another model family" in problem, problem
