"""The node's trainer as its config makes it (`make_trainer`), on a real tiny policy: whole
completions reach the loss, `[train].kl_coef` pulls the update toward the base model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from client.config import NodeConfig, with_sections
from client.node.assemble import make_trainer
from client.policy import load_policy
from client.policy.encode import Group, completion_tokens, encode_groups
from client.sapo import batch_logprobs
from tests.harness.policies import copied_seed_test

LR = 1e-2  # large, so that a few steps move a 0.1M-parameter policy measurably


@pytest.fixture(scope="module")
def seed_dir(tmp_path_factory: pytest.TempPathFactory, seed_test: Path) -> Path:
    return copied_seed_test(seed_test, tmp_path_factory.mktemp("seed") / "seed-test")


def trainer_for(seed_dir: Path, **sections: dict):
    train = {"learning_rate": LR, "micro_batch": 4} | sections.pop("train", {})
    cfg = with_sections(NodeConfig(), train=train, **sections)
    policy = load_policy(seed_dir, device="cpu", dtype="float32")
    optimizer = torch.optim.Adam(policy.model.parameters(), lr=cfg.train.learning_rate)
    return make_trainer(
        cfg, policy, optimizer, 0, lambda: load_policy(seed_dir, device="cpu", dtype="float32")
    )


def flat(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def groups() -> list[Group]:
    return [
        Group("What is 2 + 3?", ["<answer>5</answer>", "<answer>6</answer>"], [1.0, 0.0], False),
        Group("What is 7 - 4?", ["<answer>1</answer>", "<answer>3</answer>"], [0.0, 1.0], True),
    ]


def test_a_512_token_completion_reaches_the_loss_whole(seed_dir: Path) -> None:
    """The testnet config generates up to 512 tokens; training once cut every completion to 64."""
    trainer = trainer_for(seed_dir, policy={"max_new_tokens": 512})
    long = "<answer>" + "7" * 510 + "</answer>"  # each digit and each tag is one token
    group = Group("What is 3 + 4?", [long, "<answer>7</answer>"], [0.0, 1.0], False)
    length = completion_tokens(trainer.policy.tokenizer, group)
    assert length == 512, f"the test's completion is {length} tokens, not 512"
    stats = trainer.step([group])
    assert stats is not None
    assert stats.tokens == 512 + 3, "every completion token must be in the loss"


def test_a_peers_completion_longer_than_we_generate_is_left_out_not_cut(seed_dir: Path) -> None:
    trainer = trainer_for(seed_dir, policy={"max_new_tokens": 32})
    within = Group("q", ["<answer>" + "1" * 30 + "</answer>", "x"], [1.0, 0.0], True)
    beyond = Group("q", ["<answer>" + "1" * 31 + "</answer>", "x"], [1.0, 0.0], True)
    assert trainer.fits(within) and not trainer.fits(beyond)


def kl_to(trainer, reference) -> float:
    """Returns the mean k3 estimate of KL(policy || reference) over the batch's completion
    tokens (the quantity the KL term penalises)."""
    batch = encode_groups(trainer.policy.tokenizer, groups())
    d = batch_logprobs(reference.model, batch) - batch_logprobs(trainer.policy.model, batch)
    mask = batch.completion_mask[:, 1:].float()
    return float(((torch.exp(d) - d - 1) * mask).sum() / mask.sum())


def test_kl_coef_pulls_the_update_toward_the_reference(seed_dir: Path) -> None:
    plain = trainer_for(seed_dir, train={"kl_coef": 0.0, "learning_rate": 3e-3})
    pulled = trainer_for(seed_dir, train={"kl_coef": 2.0, "learning_rate": 3e-3})
    assert plain.reference is None and pulled.reference is not None
    reference = flat(pulled.reference.model)
    assert torch.equal(flat(plain.policy.model), reference)
    # at the reference the k3 KL term has zero gradient: the first updates are the same
    plain.step(groups())
    first = pulled.step(groups())
    assert torch.allclose(flat(plain.policy.model), flat(pulled.policy.model), atol=1e-6)
    assert first.kl == pytest.approx(0.0, abs=1e-9)
    for _ in range(7):
        plain.step(groups())
        last = pulled.step(groups())
    assert last.kl > 0, "the KL to the reference is measured once the policy moved"
    drift_plain, drift_pulled = kl_to(plain, pulled.reference), kl_to(pulled, pulled.reference)
    assert drift_pulled < drift_plain / 10, (
        f"after 8 steps KL to the reference is {drift_pulled:.4g} with kl_coef 2.0 and "
        f"{drift_plain:.4g} without"
    )
    assert torch.equal(flat(pulled.reference.model), reference), "the reference is frozen"


def test_kl_without_a_reference_is_refused(seed_dir: Path) -> None:
    from client.node.training import Trainer

    cfg = with_sections(NodeConfig(), train={"kl_coef": 0.1})
    policy = load_policy(seed_dir, device="cpu", dtype="float32")
    optimizer = torch.optim.Adam(policy.model.parameters())
    with pytest.raises(ValueError, match=r"kl_coef = 0.1 needs a reference policy"):
        Trainer(policy, optimizer, cfg.train, max_completion_tokens=32)


def test_a_lora_step_moves_the_adapter_and_leaves_the_base_as_it_was(seed_dir: Path) -> None:
    """[policy].adapter = "lora": GRPO steps train the adapter only; the base's weights are the
    ones its content id names, and what the node would snapshot changes with each step."""
    from client.policy import AdapterSpec, adapt
    from client.policy.adapter import base_id
    from client.policy.weights import weights_bytes

    cfg = with_sections(NodeConfig(), train={"learning_rate": LR, "micro_batch": 4})
    policy = adapt(load_policy(seed_dir, device="cpu", dtype="float32"), AdapterSpec(rank=4))
    trained = [p for p in policy.model.parameters() if p.requires_grad]
    named = dict(policy.model.named_parameters())
    assert trained and all("lora_" in n for n, p in named.items() if p.requires_grad)
    optimizer = torch.optim.Adam(trained, lr=LR)
    trainer = make_trainer(cfg, policy, optimizer, 0, lambda: None)
    base = {n: p.detach().clone() for n, p in named.items() if "lora_" not in n}
    snapshot = weights_bytes(policy.model)
    for _ in range(3):
        assert trainer.step(groups()) is not None
    assert weights_bytes(policy.model) != snapshot, "the adapter moved"
    assert all(torch.equal(named[n], before) for n, before in base.items()), "the base is frozen"
    assert base_id(policy.model) == policy.base
