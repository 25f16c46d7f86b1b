"""What the ledger's checker draw costs and buys at swarm sizes the devnet cannot run: exact
binomial arithmetic on the ledger's rule (contracts/lib/SeatDraw.sol, contracts/lib/Tally.sol:
each staked node other than the producer holds Binomial(K, its share of stake) seats on a
batch's committee, a vote counts once per seat; a batch earns once Q distinct checkers agree
and their seats are at least the disputing + unavailable seats).

Equal stakes are assumed (unequal stake: python -m scripts.odds_credit).
Prints two tables (markdown):
  1. per swarm size N: seats and distinct checkers per batch (means), P(fewer than Q distinct
     checkers: the batch cannot earn however honest), batches each node checks per round;
  2. colluders holding a fraction f of the stake, every one of them agreeing with a free claim
     of theirs and every honest drawn checker voting it unavailable: P(the claim is credited) per
     batch, and P(at least one is) when M identities of the cartel each submit one. (Each
     submission has its own beacon, unknown when it is sent: a cartel cannot pick the identity
     whose committee is friendly, only submit from all of them; a free claim that fails costs
     nothing but gas, as unavailable votes never slash, so the M columns are what it gets.)

Usage: python -m scripts.odds_scale [--checkers K] [--quorum Q]
"""

from __future__ import annotations

from client.chain.odds import binom_pmf, seats_free_claim_credited
from scripts import arguments
from scripts.table import Table


def sizes_table(k: int, q: int, sizes: list[int]) -> None:
    short_of_q = f"P(fewer than Q={q})"
    table = Table(
        *("nodes N", "seats per batch (mean)", "distinct checkers (mean)", short_of_q),
        "batches each node checks per round",
        float_format=".2f",
        formats={short_of_q: ".3%"},
    )
    for n in sizes:
        seated = 1 - (1 - 1 / n) ** k  # a node's chance of at least one seat
        short = float(binom_pmf(n - 1, seated, n - 1)[:q].sum())
        mean = (n - 1) * seated
        table.row(n, k * (n - 1) / n, mean, short, mean)
    table.print()


def collusion_table(k: int, q: int, n: int, fractions: list[float], grinds: list[int]) -> None:
    table = Table(
        "colluding stake f",
        *(f"M={m}" for m in grinds),
        float_format=".2e",
        formats={"colluding stake f": ".0%"},
    )
    for f in fractions:
        win = seats_free_claim_credited(n, f, k, q)
        table.row(f, *(1 - (1 - win) ** m for m in grinds))
    table.print(f"N = {n:,} nodes, K = {k}, Q = {q}: P(a colluders' free claim is credited)")


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--checkers", type=int, default=10, help="K (default 10)")
    parser.add_argument("--quorum", type=int, default=3, help="Q (default 3)")
    args = parser.parse_args()
    if not 1 <= args.quorum <= args.checkers:
        parser.error("need 1 <= quorum <= checkers")
    k, q = args.checkers, args.quorum
    print(f"K = {k} seats per batch (each node draws K trials at its share), quorum Q = {q}")
    sizes_table(k, q, [3, 10, 100, 1_000, 10_000])
    for n in (100, 10_000):
        collusion_table(k, q, n, [0.05, 0.10, 0.20, 0.33, 0.45], [1, 10, 100])


if __name__ == "__main__":
    main()
