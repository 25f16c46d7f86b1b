"""Peers' completions trained as off-policy samples ([sapo].external_correction), on the real loss
and a real tiny policy: the completions are sampled by the node's own sampler, which writes each
token's log-probability as a batch carries it, and the trainer is the one the config makes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from client.config import NodeConfig, with_sections
from client.node.assemble import make_trainer
from client.policy import TransformersBackend, load_policy
from client.policy.encode import Group, encode_groups
from client.sapo import importance_weights, old_logprobs
from client.store.batch import Sampled
from client.tasks import render_prompt
from tests.harness.policies import copied_seed_test

LR = 1e-2
T, TOP_P = 0.9, 0.95
QUESTIONS = ["What is 2 + 3?", "What is 7 - 4?"]


@pytest.fixture(scope="module")
def seed_dir(tmp_path_factory: pytest.TempPathFactory, seed_test: Path) -> Path:
    return copied_seed_test(seed_test, tmp_path_factory.mktemp("seed") / "seed-test")


@pytest.fixture(scope="module")
def sampled(seed_dir: Path):
    """Two questions' 4 completions each, drawn by the seed policy at T 0.9 / top-p 0.95, with
    the log-probs the sampler reports, and the batch label of its tokenizer."""
    policy = load_policy(seed_dir, device="cpu", dtype="float32")
    prompts = [render_prompt(q, policy.tokenizer) for q in QUESTIONS]
    out = TransformersBackend(policy).generate(prompts, 4, 12, T, TOP_P, seed=11)
    return out, policy.descriptor()["tokenizer"]


def trainer_for(seed_dir: Path, **sapo):
    cfg = with_sections(NodeConfig(), train={"learning_rate": LR, "micro_batch": 4}, sapo=sapo)
    policy = load_policy(seed_dir, device="cpu", dtype="float32")
    optimizer = torch.optim.Adam(policy.model.parameters(), lr=cfg.train.learning_rate)
    return make_trainer(cfg, policy, optimizer, 0, lambda: None)


def groups(sampled, logprobs=None, tokenizer=None) -> list[Group]:
    """A local group (not weighed) and the two sampled groups as a peer's (rewards 1, 0, 1, 0),
    with the sampler's log-probs unless `logprobs` replaces them."""
    out, label = sampled
    local = Group("What is 1 + 1?", ["<answer>2</answer>", "<answer>3</answer>"], [1.0, 0.0], False)
    peers = []
    for i, question in enumerate(QUESTIONS):
        how = Sampled(
            out.token_ids[i],
            out.sampled_logprobs[i] if logprobs is None else logprobs[i],
            T,
            TOP_P,
            tokenizer or label,
        )
        peers.append(Group(question, out.texts[i], [1.0, 0.0, 1.0, 0.0], True, how))
    return [local, *peers]


def learner_logprobs(trainer, sampled) -> list[list[list[float]]]:
    """The learner's own log-prob of each sampled token at the producer's T and top-p, as the
    trainer computes them: what a producer with identical weights would claim, to the bit."""
    batch = encode_groups(trainer.policy.tokenizer, groups(sampled))
    _, learner = old_logprobs(trainer.policy.model, batch, trainer.train.micro_batch)
    out, rows = sampled[0], []
    mask = batch.completion_mask[:, 1:].bool()
    for i in range(len(QUESTIONS)):
        rows.append([learner[2 + 4 * i + j][mask[2 + 4 * i + j]].tolist() for j in range(4)])
    assert [len(r) for r in rows[0]] == [len(ids) for ids in out.token_ids[0]]
    return rows


def flat(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_identical_weights_give_ratio_one_and_tis_is_todays_update(seed_dir, sampled) -> None:
    none, tis = trainer_for(seed_dir), trainer_for(seed_dir, external_correction="tis")
    exact = learner_logprobs(tis, sampled)
    a = none.step(groups(sampled, exact))
    b = tis.step(groups(sampled, exact))
    assert torch.equal(flat(none.policy.model), flat(tis.policy.model)), "tis moved otherwise"
    assert a.loss == b.loss and a.offpolicy is None
    assert b.offpolicy.sequences == 8 and b.offpolicy.ratio_mean == 1.0
    assert b.offpolicy.truncated == 0.0 and b.offpolicy.filtered is None
    # through the sampler's own numbers (KV-cached batched sampling against the trainer's one
    # teacher-forced pass): the same weights, so the ratio is 1 up to float32 numerics
    fresh = trainer_for(seed_dir, external_correction="tis")
    stats = fresh.step(groups(sampled))
    assert abs(stats.offpolicy.ratio_mean - 1.0) < 1e-4, stats.offpolicy


def test_a_producer_far_from_the_learner_is_capped_at_tis_cap(seed_dir, sampled) -> None:
    out = sampled[0]
    # it claims each token was unlikely (e^-30): ratios of about e^30 without the cap
    far = [[[-30.0] * len(ids) for ids in rows] for rows in out.token_ids]
    trainer = trainer_for(seed_dir, external_correction="tis", tis_cap=3.0)
    batch = encode_groups(trainer.policy.tokenizer, groups(sampled, far))
    _, learner = old_logprobs(trainer.policy.model, batch)
    mask = batch.completion_mask[:, 1:]
    weights, keep, stats = importance_weights(
        learner,
        batch.behaviour,
        mask,
        batch.corrected,
        batch.advantages,
        correction="tis",
        cap=3.0,
        kl_max=0.5,
    )
    external = batch.corrected[:, None] & mask.bool()
    assert torch.all(weights[external] == 3.0) and torch.all(weights[~external] == 1.0)
    assert bool(keep.all()) and stats.truncated == 1.0 and stats.ratio_mean > 1e10
    step = trainer.step(groups(sampled, far))
    assert step.offpolicy.truncated == 1.0 and torch.isfinite(flat(trainer.policy.model)).all()


def test_f_tis_drops_the_far_off_policy_negative_advantage_completions(seed_dir, sampled) -> None:
    out = sampled[0]
    # it claims it was sure of every token: the learner finds each completion mean(-log p)
    # nats off its own policy
    sure = [[[0.0] * len(ids) for ids in rows] for rows in out.token_ids]
    filtered = trainer_for(seed_dir, external_correction="f-tis", offpolicy_filter=0.01)
    kept_all = trainer_for(seed_dir, external_correction="f-tis", offpolicy_filter=100.0)
    dropped = filtered.step(groups(sampled, sure))
    kept = kept_all.step(groups(sampled, sure))
    # the four wrong completions (reward 0, advantage < 0) of the peer's eight are left out
    assert dropped.offpolicy.filtered == 0.5 and kept.offpolicy.filtered == 0.0
    wrong = sum(len(out.token_ids[i][j]) for i in range(2) for j in (1, 3))
    assert kept.tokens - dropped.tokens == wrong
    assert not torch.equal(flat(filtered.policy.model), flat(kept_all.policy.model))


def test_another_tokenizers_completions_are_trained_as_text_and_counted(seed_dir, sampled) -> None:
    trainer = trainer_for(seed_dir, external_correction="f-tis")
    foreign = "seed-llama-test:512:0123456789abcdef"
    stats = trainer.step(groups(sampled, tokenizer=foreign))
    assert stats.offpolicy is None and trainer.unweighed == 8
    batch = encode_groups(trainer.policy.tokenizer, groups(sampled, tokenizer=foreign))
    assert batch.corrected is None


def test_a_peers_token_id_outside_the_vocabulary_is_trained_as_text_not_a_stopped_step(
    seed_dir, sampled
) -> None:
    # issue 57: a hostile peer's completion carries one id past the vocabulary (decoding drops
    # it, so its text passes): trained on its ids, the embedding lookup raised and the step died
    trainer = trainer_for(seed_dir, external_correction="f-tis")
    out, label = sampled
    poisoned = [[list(ids) for ids in row] for row in out.token_ids]
    poisoned[0][1][0] = len(trainer.policy.tokenizer) + 7  # its log-probs still line up
    hostile = groups(
        (type(out)(out.texts, out.new_tokens, poisoned, None, out.sampled_logprobs), label)
    )
    peer_items = [g for g in hostile if g.external]
    assert trainer.fits(peer_items[0]) and trainer.fits(peer_items[1])  # each can be trained on
    before = flat(trainer.policy.model).clone()
    stats = trainer.step(hostile)
    assert stats is not None and not torch.equal(before, flat(trainer.policy.model))
    # the poisoned group is re-encoded from its text (not weighed); the clean one still is
    assert trainer.unweighed == 4 and stats.offpolicy is not None
