"""What a holder of a share f of all stake does to the ledger's credit, before and after votes by
seat (issue 40): exact binomial arithmetic (client/chain/odds.py) on v3's rule (drawn with
probability min(1, K * stake share), a vote weighs its stake) and on the seat rule (each node
holds Binomial(K, its share) seats, a vote counts once per seat).

For f = 1%, 5%, 10%, 20%, 33% held by one address or by round(f * N) equal stakes, at N = 100,
1,000 and 10,000 nodes, prints (markdown):
  1. P(an honest batch loses its credit): at least Q honest checkers agree, and the adversary's
     votes against it (disputes or unavailable votes, which count alike) outweigh them;
  2. P(a free claim of the adversary is credited): Q of its other addresses agree and outweigh
     every honest checker, all voting unavailable (one address cannot check its own batch: 0);
  3. the seat rule with the appeal (SwarmLedger.appeal) to a fresh committee of A seat trials
     (default 4K, [ledger].appeal_checkers) that the producer's client files when a verdict went
     against its own re-check: P(both verdicts lost), the two draws independent (a fresh beacon);
  4. beside 2, a free claim whose producer appeals when it was not credited (appeals serve
     cheaters too: a second draw, at the price of twice slashBps when the appeal disputes it);
  5. P(an honest batch draws fewer than Q distinct checkers) among N equal stakes, on its
     first committee and on its appeal's: what a small model family risks by its size alone.

Within a model family (ledger v4 draws a batch's committee from its producer's family alone),
N is the family's node count and f a share of the family's stake: `--sizes 5,10,30` re-runs the
tables for families of those sizes.

Usage: python -m scripts.odds_credit [--checkers K] [--quorum Q] [--appeal-seats A]
       [--sizes N,N,...]
"""

from __future__ import annotations

from client.chain import odds
from scripts import arguments
from scripts.table import Table

SHARES = (0.01, 0.05, 0.10, 0.20, 0.33)
SIZES = (100, 1_000, 10_000)


def cell(p: float) -> str:
    return "0" if p < 1e-12 else f"{p:.2e}"


def odds_table(*columns: str) -> Table:
    """N and f, then probabilities (cells of `cell`, right-aligned)."""
    return Table(*columns, right=columns, formats={"f": ".0%"} if "f" in columns else None)


def lost_table(k: int, q: int, appeal: int, sizes=SIZES) -> None:
    table = odds_table(
        *("N", "f", "v3, one address", "seats, one address", "v3, many", "seats, many"),
        f"seats + appeal of {appeal}, one address",
    )
    for n in sizes:
        for f in SHARES:
            seats_one = odds.seats_honest_batch_lost(n, f, True, k, q)
            appealed = seats_one * odds.seats_honest_batch_lost(n, f, True, appeal, q)
            table.row(
                n,
                f,
                cell(odds.v3_honest_batch_lost(n, f, True, k, q)),
                cell(seats_one),
                cell(odds.v3_honest_batch_lost(n, f, False, k, q)),
                cell(odds.seats_honest_batch_lost(n, f, False, k, q)),
                cell(appealed),
            )
    table.print(f"P(an honest batch loses its credit), K = {k}, Q = {q}")


def free_claim_table(k: int, q: int, appeal: int, sizes=SIZES) -> None:
    table = odds_table("N", "f", "v3", "seats", f"seats + its own appeal of {appeal}")
    for n in sizes:
        for f in SHARES:
            first = odds.seats_free_claim_credited(n, f, k, q)
            again = odds.seats_free_claim_credited(n, f, appeal, q)
            table.row(
                n,
                f,
                cell(odds.v3_free_claim_credited(n, f, k, q)),
                cell(first),
                cell(first + (1 - first) * again),
            )
    table.print(f"P(a free claim is credited), many equal stakes, K = {k}, Q = {q}")


def unfilled_table(k: int, q: int, appeal: int, sizes) -> None:
    table = odds_table("N", "first committee", f"appeal of {appeal}", "both")
    for n in sizes:
        first, again = odds.unfilled_committee(n, k, q), odds.unfilled_committee(n, appeal, q)
        table.row(n, cell(first), cell(again), cell(first * again))
    table.print(f"P(fewer than Q distinct checkers drawn), N equal stakes, K = {k}, Q = {q}")


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--checkers", type=int, default=10, help="K (default 10)")
    parser.add_argument("--quorum", type=int, default=3, help="Q (default 3)")
    parser.add_argument("--appeal-seats", type=int, help="A (default 4K)")
    parser.add_argument(
        "--sizes",
        default=",".join(str(n) for n in SIZES),
        help="N: node counts (of the swarm, or of one model family), comma-separated",
    )
    args = parser.parse_args()
    try:
        sizes = tuple(int(n) for n in args.sizes.split(","))
    except ValueError:
        parser.error(f"--sizes {args.sizes!r}: node counts, comma-separated (e.g. 5,10,30)")
    if not all(2 <= n <= 1_000_000 for n in sizes):
        parser.error("--sizes: each node count must be between 2 and 1,000,000")
    if not 1 <= args.quorum <= args.checkers <= 255:
        parser.error("need 1 <= quorum <= checkers <= 255")
    appeal = args.appeal_seats or 4 * args.checkers
    if not args.quorum <= appeal <= 1_000:
        parser.error("need quorum <= appeal seats <= 1000")
    lost_table(args.checkers, args.quorum, appeal, sizes)
    free_claim_table(args.checkers, args.quorum, appeal, sizes)
    unfilled_table(args.checkers, args.quorum, appeal, sizes)


if __name__ == "__main__":
    main()
