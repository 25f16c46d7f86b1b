"""The learning-signal rule: what a batch earns (client.credit)."""

from __future__ import annotations

import random

from client.credit import batch_signal, group_signal
from client.units import SCORE_SCALE

ONE = SCORE_SCALE


def test_all_correct_and_all_wrong_groups_earn_nothing():
    assert group_signal([ONE] * 8) == 0
    assert group_signal([0] * 8) == 0
    assert group_signal([3_000] * 8) == 0  # equal partial credit: no advantage either
    assert batch_signal([[ONE] * 8, [0] * 8]) == 0


def test_binary_groups_earn_most_when_half_are_right():
    # 2 k (L - k) / L for k of L correct
    earned = [group_signal([ONE] * k + [0] * (8 - k)) for k in range(9)]
    assert earned == [2 * k * (8 - k) * ONE // 8 for k in range(9)]
    assert max(earned) == earned[4] == 4 * ONE
    assert earned == earned[::-1]  # k right or k wrong: the same information


def test_a_near_tie_earns_a_hair_not_a_group():
    assert group_signal([ONE] + [ONE - 1] * 7) < 2
    assert group_signal([ONE] + [0] * 7) == 2 * 7 * ONE // 8


def test_the_rule_is_exact_integers_and_bounded_by_the_rollouts():
    rng = random.Random(7)
    for _ in range(500):
        rewards = [
            rng.choice([0, ONE, rng.randrange(ONE + 1)]) for _ in range(rng.randrange(1, 65))
        ]
        signal = group_signal(rewards)
        assert isinstance(signal, int)
        assert 0 <= signal <= len(rewards) * ONE // 2  # the ledger's bound is rollouts * ONE
        assert signal == group_signal(list(reversed(rewards)))  # order does not matter
