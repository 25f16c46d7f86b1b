"""Whether forging part of a batch pays (issue 57, docs/proof-of-generation.md "What it misses"):
the escape probability and the expected gain of a producer that forges a share phi of its
batch's learning signal (completions it wrote by hand, reference answers being public, rather
than sampled), before and after the openings were drawn by signal.

The producer learns its beacon before it serves anything, so a forger whose forged part is
opened withholds the whole batch: checkers vote "unavailable", which cancels the batch's credit
and slashes nobody. Its payoff is therefore V (the credit of the whole batch) when nothing forged
is opened and 0 when something is; the honest alternative, the same batch without its forged
part, earns (1 - phi) V. Gain = P(escape) V - (1 - phi) V, in units of V.

- before: the beacon opened OPEN_ROUNDS = 2 of a batch's local rounds, alike, whatever they
  held. The forger's best layout puts the forged groups in one local round beside as many
  one-item honest rounds as the format allows (512 local rounds): P(escape) = 1 - 2/512,
  whatever phi is.
- after (client.node.proving.openings): OPENED_GROUPS = 2 groups, each drawn with probability
  its signal / the batch's; every checker re-draws every completion of both. However the forged
  signal is laid out, P(escape) = (1 - phi)^2, and the gain -phi (1 - phi) is below 0 for every
  phi in (0, 1). (One opened group would make it 0: a fair bet; two make it a losing one.)

Each row is also measured with the real rules on a real batch: 512 groups of equal signal
(rewards 1, 0, 1, 0), 512 phi of them forged, laid out either "concentrated" (the forged groups
in one local round, each honest group a local round of its own) or "spread" (every group a local
round of its own); `openings` (after) and the former draw of two local rounds alike (before) over
--beacons beacons, with a 95% Wilson interval.

Usage: python -m scripts.odds_forging [--beacons N]
"""

from __future__ import annotations

import hashlib
import math

from scripts import arguments
from scripts.table import Table

SHARES = ((1, 512), (1, 64), (1, 8), (1, 2))
MAX_LOCAL_ROUNDS = 512
OLD_OPEN_ROUNDS = 2


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def layout(forged_groups: int, total: int, concentrated: bool):
    """A batch of `total` groups of signal 2.0, `forged_groups` of them forged (in one local round
    when `concentrated`, else each in its own); every honest group a local round of its own.
    Returns the batch and the forged groups as (k, i)."""
    from client.store import Item, LocalRound, ModelDescriptor, RolloutBatch, Sampling, TaskRef

    group = Item(
        task=TaskRef(entry="basic_arithmetic", seed=1, index=0),
        question="q",
        completions=["a"] * 4,
        token_ids=[[1]] * 4,
        rewards=[10_000, 0, 10_000, 0],
        logprobs=[[0]] * 4,
    )
    rounds = [[group] for _ in range(total - forged_groups)]
    if concentrated:
        forged = {(len(rounds), i) for i in range(forged_groups)}
        rounds.append([group] * forged_groups)
    else:
        forged = {(len(rounds) + i, 0) for i in range(forged_groups)}
        rounds += [[group] for _ in range(forged_groups)]
    batch = RolloutBatch(
        chain_id=1,
        ledger="0x" + "11" * 20,
        round=0,
        node="0x" + "22" * 20,
        catalog_digest="0x" + "33" * 32,
        model=ModelDescriptor(name="m", parameters=1, tokenizer="t:2"),
        sampling=Sampling.of(1.0, 1.0, 8),
        local_rounds=[
            LocalRound(k=k, weights="0x" + f"{k:064x}", items=items)
            for k, items in enumerate(rounds)
        ],
    )
    return batch, forged


def old_opened(beacon: int, local_rounds: int) -> set[int]:
    """The former openings: OLD_OPEN_ROUNDS distinct local rounds, alike, from the beacon."""
    if local_rounds <= OLD_OPEN_ROUNDS:
        return set(range(local_rounds))
    picked: list[int] = []
    i = 0
    key = beacon.to_bytes(32, "big")
    while len(picked) < OLD_OPEN_ROUNDS:
        h = hashlib.sha256(b"sapo.open/1" + key + i.to_bytes(4, "big")).digest()
        n = int.from_bytes(h[:8], "big") % local_rounds
        if n not in picked:
            picked.append(n)
        i += 1
    return set(picked)


def rate(escaped: int, n: int) -> str:
    low, high = wilson(escaped, n)
    return f"{escaped / n:.4f} [{low:.4f}, {high:.4f}]"


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--beacons", type=int, default=20_000, help="beacons per row (20,000)")
    args = parser.parse_args()
    if not 100 <= args.beacons <= 10_000_000:
        parser.error("--beacons: between 100 and 10,000,000")
    from client.node.proving import OPENED_GROUPS, openings

    n = args.beacons
    print(
        "Forging a share phi of a batch's signal: P(escape) exact, then measured [95% interval];"
        f" gain in units of the batch's credit V (honest alternative: (1 - phi) V); {n:,} beacons"
        " a row."
    )
    table = Table(
        *("phi", "layout", "local rounds"),
        *("before: P(escape)", "measured", "before: gain"),
        *("after: P(escape)", "measured", "after: gain"),
        right=("phi", "measured"),  # "1/8"; a rate and its interval
        formats={
            "before: P(escape)": ".4f",
            "before: gain": "+.4f",
            "after: P(escape)": ".4f",
            "after: gain": "+.4f",
        },
    )
    total = 512
    for num, den in SHARES:
        phi = num / den
        forged_groups = total * num // den
        for concentrated in (True, False):
            batch, forged = layout(forged_groups, total, concentrated)
            rounds = len(batch.local_rounds)
            forged_rounds = {k for k, _ in forged}
            # before: escape when no forged round is among the two drawn alike
            before = math.comb(rounds - len(forged_rounds), 2) / math.comb(rounds, 2)
            before_seen = sum(not forged_rounds & old_opened(b, rounds) for b in range(n))
            after = (1 - phi) ** OPENED_GROUPS
            after_seen = sum(not forged.intersection(openings(b, batch)) for b in range(n))
            table.row(
                f"{num}/{den}",
                "concentrated" if concentrated else "spread",
                rounds,
                before,
                rate(before_seen, n),
                before - (1 - phi),
                after,
                rate(after_seen, n),
                after - (1 - phi),
            )
    table.print()
    print(
        "\nbefore: a forged local round was opened only when it was one of the two rounds drawn; "
        "after: each draw lands on forged signal with probability phi, so forging any share "
        "loses phi (1 - phi) V in expectation."
    )


if __name__ == "__main__":
    main()
