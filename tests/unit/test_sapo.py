"""The SAPO algorithm against hand-computed numbers and stated properties (tensors only)."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from client.sapo import (
    Candidate,
    UniformSampler,
    group_advantages,
    grpo_loss,
    has_signal,
    importance_weights,
    token_logprobs,
    training_set,
)


def example():
    # two sequences of 3 tokens; the second has one padding token (ratio 100: must not count)
    ratios = torch.tensor([[1.0, 1.5, 0.5], [0.5, 1.5, 100.0]])
    logp_old = torch.log(torch.tensor([[0.5, 0.4, 0.6], [0.3, 0.2, 0.001]]))
    logp_new = (logp_old + torch.log(ratios)).requires_grad_(True)
    advantages = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    return logp_new, logp_old, advantages, mask


def test_loss_by_hand_token_mean() -> None:
    logp_new, logp_old, adv, mask = example()
    loss, stats = grpo_loss(logp_new, logp_old, adv, mask, eps_low=0.2, eps_high=0.28)
    # per token: -1, -1.28 (clipped high), -0.5 ; +1.6 (clipped low), +3.0 ; padding ignored
    assert math.isclose(float(loss.detach()), (-1 - 1.28 - 0.5 + 1.6 + 3.0) / 5, rel_tol=1e-5)
    assert math.isclose(stats.clip_fraction, 2 / 5, rel_tol=1e-6)
    assert stats.tokens == 5
    loss.backward()
    grad = logp_new.grad
    # d(-ratio*A)/dlogp = -ratio*A, divided by the 5 tokens; zero where the clip is active
    expected = torch.tensor([[-0.2, 0.0, -0.1], [0.0, 0.6, 0.0]])
    assert torch.allclose(grad, expected, atol=1e-6), grad


def test_importance_weights_by_hand() -> None:
    # three sequences of 3 tokens: a local one, and two peers' (the last padded at its end)
    learner = torch.log(torch.tensor([[0.5, 0.5, 0.5], [0.5, 0.4, 0.9], [0.2, 0.1, 0.0]]))
    producer = torch.log(torch.tensor([[0.9, 0.9, 0.9], [0.5, 0.1, 0.3], [0.8, 0.9, 1.0]]))
    learner[2, 2] = producer[2, 2] = 0.0  # padding: 0 as the encoder leaves it
    mask = torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 0]])
    corrected = torch.tensor([False, True, True])
    adv = torch.tensor([1.0, 1.0, -1.0])
    w, keep, stats = importance_weights(
        learner, producer, mask, corrected, adv, correction="tis", cap=2.0, kl_max=0.5
    )
    # ratios: local untouched; 1, 4 (capped at 2), 3 (capped); 0.25, 0.111…
    expected = torch.tensor([[1.0, 1.0, 1.0], [1.0, 2.0, 2.0], [0.25, 1 / 9, 1.0]])
    assert torch.allclose(w, expected, atol=1e-6), w
    assert bool(keep.all()) and stats.sequences == 2 and stats.tokens == 5
    assert math.isclose(stats.truncated, 2 / 5) and stats.filtered is None
    assert math.isclose(stats.ratio_mean, (1 + 4 + 3 + 0.25 + 1 / 9) / 5, rel_tol=1e-6)
    # f-tis: the negative-advantage peer sequence is mean(log(0.8/0.2), log(0.9/0.1)) = 1.79
    # nats off-policy: dropped at 0.5, kept at 2; the positive one is never dropped
    for kl_max, dropped in ((0.5, [False, False, True]), (2.0, [False, False, False])):
        _, keep, stats = importance_weights(
            learner, producer, mask, corrected, adv, correction="f-tis", cap=2.0, kl_max=kl_max
        )
        assert (~keep).tolist() == dropped and stats.filtered == sum(dropped) / 2
    # none: nothing weighed
    w, keep, stats = importance_weights(
        learner, producer, mask, corrected, adv, correction="none", cap=2.0, kl_max=0.5
    )
    assert bool((w == 1).all()) and bool(keep.all()) and stats.ratio_mean is None


def test_loss_by_hand_seq_mean() -> None:
    logp_new, logp_old, adv, mask = example()
    loss, _ = grpo_loss(logp_new, logp_old, adv, mask, agg="seq-mean")
    assert math.isclose(float(loss.detach()), ((-2.78 / 3) + (4.6 / 2)) / 2, rel_tol=1e-5)


def test_zero_spread_group_contributes_nothing() -> None:
    rewards = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0]])
    adv = group_advantages(rewards)
    assert torch.equal(adv[0], torch.zeros(4))
    logp_old = torch.full((2, 4), -1.0)
    logp_new = (logp_old + 0.3).requires_grad_(True)
    per_seq_adv = adv[:, 0]  # one advantage per sequence: take sequence 0 of each group
    loss, _ = grpo_loss(logp_new, logp_old, per_seq_adv, torch.ones(2, 4))
    loss.backward()
    assert torch.equal(logp_new.grad[0], torch.zeros(4))


def test_advantages_by_hand() -> None:
    adv = group_advantages(torch.tensor([[0.0, 0.0, 1.0, 1.0]]))
    std = math.sqrt(1 / 3)  # sample std of (0, 0, 1, 1)
    assert torch.allclose(adv, torch.tensor([[-0.5, -0.5, 0.5, 0.5]]) / (std + 1e-4), atol=1e-6)
    with pytest.raises(ValueError):
        group_advantages(torch.tensor([1.0, 0.0]))


def test_kl_term_is_zero_at_the_reference_and_positive_away() -> None:
    logp_old = torch.full((1, 3), -1.0)
    mask = torch.ones(1, 3)
    adv = torch.zeros(1)
    at_ref, stats = grpo_loss(logp_old.clone(), logp_old, adv, mask, logp_ref=logp_old, kl_coef=0.1)
    assert float(at_ref.detach()) == 0.0 and stats.kl == 0.0
    away, stats = grpo_loss(logp_old + 0.5, logp_old, adv, mask, logp_ref=logp_old, kl_coef=0.1)
    assert stats.kl > 0 and float(away.detach()) > 0


def test_token_logprobs() -> None:
    logits = torch.tensor([[[0.0, math.log(3.0)]]])  # p = (0.25, 0.75)
    assert torch.allclose(
        token_logprobs(logits, torch.tensor([[1]])), torch.tensor([[math.log(0.75)]])
    )


def test_shape_mismatch_is_refused() -> None:
    with pytest.raises(ValueError, match="shape mismatch"):
        grpo_loss(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2), torch.ones(2, 3))


# ---------------------------------------------------------------------------------- the sampler

rewards = st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=2, max_size=8).map(tuple)
candidates = st.lists(
    st.builds(Candidate, key=st.uuids(), rewards=rewards, verified=st.booleans()), max_size=30
)


@settings(max_examples=500, deadline=None)
@given(candidates, st.integers(0, 12), st.integers(0, 2**32))
def test_sampler_properties(pool: list[Candidate], j: int, seed: int) -> None:
    selection = UniformSampler().select(pool, j, random.Random(seed))
    assert len(selection.items) <= j
    assert all(c.verified for c in selection.items), "never an unverified item"
    assert all(has_signal(c.rewards) for c in selection.items), "never a zero-advantage group"
    assert len({c.key for c in selection.items}) == len(selection.items), "no repeats"
    eligible = [c for c in pool if c.verified and has_signal(c.rewards)]
    assert len(selection.items) == min(j, len(eligible))
    assert selection.shortfall == j - len(selection.items)


def test_sampler_is_uniform_over_eligible_items() -> None:
    pool = [Candidate(key=i, rewards=(0.0, 1.0)) for i in range(10)]
    pool += [
        Candidate(key=100, rewards=(1.0, 1.0)),
        Candidate(key=101, rewards=(0.0, 1.0), verified=False),
    ]
    rng = random.Random(7)
    counts = Counter(
        c.key for _ in range(20_000) for c in UniformSampler().select(pool, 3, rng).items
    )
    assert set(counts) == set(range(10))
    expected = 20_000 * 3 / 10
    chi2 = sum((counts[k] - expected) ** 2 / expected for k in range(10))
    assert chi2 < 27.9, f"not uniform: chi2 {chi2:.1f} (9 dof, p=0.001 bound 27.9), {counts}"


def test_training_set_mixes_i_local_and_j_external() -> None:
    local = [Candidate(key=f"l{i}", rewards=(0.0, 1.0), external=False) for i in range(3)]
    local.append(Candidate(key="flat", rewards=(1.0, 1.0), external=False))
    external = [Candidate(key=f"e{i}", rewards=(0.0, 1.0)) for i in range(2)]
    items, selection, dropped = training_set(local, external, 4, random.Random(0))
    assert dropped == 1 and selection.shortfall == 2
    assert [c.key for c in items[:3]] == ["l0", "l1", "l2"]
    assert {c.key for c in items[3:]} == {"e0", "e1"}
