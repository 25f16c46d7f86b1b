"""Issue 40's whale on the real ledger: a fresh anvil, the committed SwarmLedger (K seat trials,
quorum Q, appeals of A trials), --honest honest nodes of 1 ether and one address holding --share
of all stake. Each of --batches honest producers submits a batch in round 0; every honest node
the beacon seats on a committee agrees (the batches are honest), and the whale, wherever it is
seated, disputes (--mode dispute) or votes unavailable (--mode unavailable). Once the first
committees' window closes, each producer whose batch was not credited appeals (as its client
does); the appeal committees vote the same way. Once final, each producer has the votes that
lost against its batch judged (`settleVotes`, as its client does).

Every transaction is real (one signed transaction per vote, appeal and judgement); who holds
seats is recomputed from the beacons and the stakes (client.chain.models: the ledger's draw,
which `test_ledger` checks against `seatsOf`). Prints what the whale did to the honest batches
before and after the appeals, and what it lost (markdown). The beacons are block hashes, so a
run's counts vary with its blocks; the arithmetic of the rule is python -m scripts.odds_credit.

Usage: python -m scripts.odds_whale [--honest 100] [--share 0.10] [--batches 40] [--mode dispute]
                           [--checkers 10] [--quorum 3] [--appeal-checkers 40]
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

from client.chain.models import Beacon
from client.devnet import Anvil
from scripts import arguments
from scripts.table import Table
from tests.harness.ledger_swarm import ETH, Swarm, digest

ROOT = Path(__file__).resolve().parents[1]

SCORE, SIGNAL = 40_000, 20_000  # every honest batch's claim (8 rollouts)


def seated(beacon: Beacon, nodes: list, stakes: dict, total: int, trials: int) -> dict:
    """Each node's seats on a committee drawn by `beacon` (the producer excluded)."""
    found = {}
    for node in nodes:
        address = node.account_address
        if address == beacon.node:
            continue
        seats = beacon.seats(address, stakes[address], total, trials)
        if seats:
            found[address] = seats
    return found


def vote(ledger, round_: int, producer: str, honest: bool, mode: str) -> None:
    if honest:
        ledger.attest(round_, producer, SCORE, SIGNAL)
    elif mode == "dispute":
        ledger.attest(round_, producer, 0, SIGNAL + 1, 1)
    else:
        ledger.report_unavailable(round_, producer)


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--honest", type=int, default=100)
    parser.add_argument("--share", type=float, default=0.10, help="the whale's share of stake")
    parser.add_argument("--batches", type=int, default=40, help="honest batches (<= --honest)")
    parser.add_argument("--mode", choices=("dispute", "unavailable"), default="dispute")
    parser.add_argument("--checkers", type=int, default=10, help="K")
    parser.add_argument("--quorum", type=int, default=3, help="Q")
    parser.add_argument("--appeal-checkers", type=int, default=40, help="A's seat trials")
    args = parser.parse_args()
    if not 0 < args.share < 0.5 or not 1 <= args.batches <= args.honest:
        parser.error("need 0 < --share < 0.5 and 1 <= --batches <= --honest")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sapo-whale-") as tmp, Anvil(Path(tmp)) as anvil:
        swarm = Swarm(
            anvil,
            checkers=args.checkers,
            quorum=args.quorum,
            appeal_checkers=args.appeal_checkers,
        )
        honest = [swarm.node(ETH) for _ in range(args.honest)]
        whale_stake = math.ceil(args.share * args.honest * ETH / (1 - args.share))
        whale = swarm.node(whale_stake)
        nodes = [*honest, whale]
        stakes = {n.account_address: n.node_info(n.account_address).active_stake for n in nodes}
        total = sum(stakes.values())
        w = whale.account_address
        producers = honest[: args.batches]
        for p in producers:
            p.submit(0, digest(p.account_address), 8, SCORE, SIGNAL)
        swarm.await_beacon(0)
        for p in producers:  # stored by each producer's client (its votes take many blocks)
            p.draw_beacon(0, p.account_address)
        by_address = {n.account_address: n for n in nodes}

        first: dict[str, dict] = {}
        for p in producers:
            beacon = swarm.ledger.beacon(0, p.account_address)
            seats = seated(beacon, nodes, stakes, total, args.checkers)
            for address in seats:
                vote(by_address[address], 0, p.account_address, address != w, args.mode)
            first[p.account_address] = seats
        subs = {p.account_address: swarm.ledger.submission(0, p.account_address) for p in producers}
        drawn = sum(1 for s in first.values() if w in s)
        quorate = [a for a, s in first.items() if len(s) - (w in s) >= args.quorum]
        cancelled = [a for a in quorate if not subs[a].credited]

        swarm.goto(swarm.ledger.params().close(0) + 1)  # the appeal round
        appealed = [a for a, s in subs.items() if not s.credited]
        for a in appealed:
            by_address[a].appeal(0)
        swarm.mine(2)
        for a in appealed:
            by_address[a].draw_beacon(0, a)
        appeal_seats = 0
        for a in appealed:
            appeal = by_address[a].appeal_of(0, a)  # a Beacon: it draws the appeal's committee
            seats = seated(appeal, nodes, stakes, total, args.appeal_checkers)
            appeal_seats += seats.get(w, 0)
            for address in seats:
                vote(by_address[address], 0, a, address != w, args.mode)
        swarm.goto(swarm.ledger.params().final_after(0) + 1)
        after = {a: swarm.ledger.submission(0, a) for a in subs}
        still = [a for a in quorate if not after[a].credited]
        before_stake = whale.node_info(w).active_stake
        for a in subs:
            by_address[a].settle_votes(0, a, [w])
        lost = before_stake - whale.node_info(w).active_stake
        votes = sum(1 for a in subs if whale.vote_of(w, 0, a)[0] or whale.vote_of(w, 0, a)[1])

    print(
        f"\nanvil: {args.honest} honest nodes of 1 ether, one address with {args.share:.0%} of "
        f"stake ({whale_stake / ETH:.2f} ether) voting {args.mode} wherever seated; K = "
        f"{args.checkers}, Q = {args.quorum}, appeals of {args.appeal_checkers} trials; "
        f"{args.batches} honest batches ({time.monotonic() - started:.0f} s)"
    )
    # counts as plain ints (the chain test reads them back with int()); the stake lost in ether
    table = Table("what", "count", right=("count",), formats={"count": "d"})
    table.row("honest batches", len(subs))
    table.row("... on whose first committee the whale held a seat", drawn)
    table.row("... that at least Q honest seated checkers agreed with", len(quorate))
    table.row("of those, not credited by the first committee", len(cancelled))
    table.row("batches appealed by their producers (not credited)", len(appealed))
    table.row("the whale's seats on the appeal committees", appeal_seats)
    table.row("of the Q-agreed batches, not credited after the appeals", len(still))
    table.row("batches credited in the end", sum(1 for s in after.values() if s.credited))
    table.row("the whale's votes", votes)
    table.row(
        "the whale's stake lost to judged votes",
        f"{lost / ETH:.4f} ether ({lost / whale_stake:.1%})",
    )
    table.print()


if __name__ == "__main__":
    main()
