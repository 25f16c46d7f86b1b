"""Benchmark of the SwarmLedger on a local anvil: gas per operation, and audit query times.

Prints two tables. Gas is exact (deterministic for a given build): each transaction's gas used,
and its execution gas (less the 21,000 every transaction pays and its calldata's 4/16 gas a byte:
what the contract's code costs, what `forge test --gas-report` and the goals count); times are
wall-clock on this machine and vary with load.
Usage: python -m scripts.bench_ledger [--submissions N]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from client.chain.audit import Auditor
from client.chain.events import EventReader
from client.devnet import Anvil
from scripts import arguments
from scripts.table import Table
from tests.harness.ledger_swarm import ETH, FAMILY, Swarm, digest

GOALS = {  # issue 23: submit <= 80k, attest <= 65k
    "submit (later in round)": 80_000,
    "submit (first in round)": 80_000,
    "attest (agreeing, draws the beacon)": 65_000,
    "attest (agreeing)": 65_000,
    "attest (completes the quorum)": 65_000,
    "attest (disputing)": 65_000,
    "reportUnavailable (cancels credit)": 65_000,
}


INTRINSIC = 21_000


def execution_gas(swarm: Swarm, result) -> int:
    """A transaction's gas less the intrinsic 21,000 and its calldata (EIP-2028 prices)."""
    data = bytes(swarm.w3.eth.get_transaction(result.tx_hash)["input"])
    calldata = sum(16 if b else 4 for b in data)
    return result.gas_used - INTRINSIC - calldata


def gas_table(swarm: Swarm) -> list[tuple[str, int, int]]:
    rows = []
    nodes = [swarm.node(register=False) for _ in range(4)]
    rows.append(("register (first node)", nodes[0].register('{"model":"tiny"}', 2 * ETH, FAMILY)))
    rows.append(("register (later node)", nodes[1].register('{"model":"tiny"}', 2 * ETH, FAMILY)))
    nodes[2].register('{"model":"tiny"}', 10 * ETH, FAMILY)
    nodes[3].register('{"model":"tiny"}', 20 * ETH, FAMILY)
    swarm.bind(swarm.account()).fund(100 * ETH)
    a, b, c, d = nodes  # quorum 2 of every node (checkers 255)
    sub = a.submit(0, digest("a0"), 64, 30_000, 12_000)
    rows.append(("submit (first in round)", sub))
    rows.append(("submit (later in round)", b.submit(0, digest("b0"), 64, 20_000, 8_000)))
    swarm.await_beacon(0)
    for label, checker in [
        ("attest (agreeing, draws the beacon)", b),
        ("attest (completes the quorum)", c),
        ("attest (agreeing)", d),
    ]:
        rows.append((label, checker.attest(0, a.account_address, 30_000, 12_000)))
    rows.append(("attest (disputing)", c.attest(0, b.account_address, 0, 0)))
    a.attest(0, b.account_address, 20_000, 8_000)  # b: 2 ETH agree, 10 dispute: slashed at settle
    cancel = swarm.node(40 * ETH)  # registered after the beacon: next round's checker
    for r in range(1, 11):
        swarm.goto(r)
        a.submit(r, digest(f"a{r}"), 64, 30_000, 12_000)
        swarm.await_beacon(r)
        b.attest(r, a.account_address, 30_000, 12_000)
        c.attest(r, a.account_address, 30_000, 12_000)
        if r == 1:  # 12 ETH agreeing, 40 ETH could not fetch it: credit cancelled
            rows.append(
                (
                    "reportUnavailable (cancels credit)",
                    cancel.report_unavailable(1, a.account_address),
                )
            )
    swarm.goto(14)
    rows.append(("settle (agreed)", c.settle(0, a.account_address)))
    rows.append(("settle (disputed: slash)", c.settle(0, b.account_address)))
    rows.append(("claim 1 round", a.claim([0])))
    rows.append(("claim 9 rounds", a.claim(list(range(2, 11)))))
    return [(label, tx.gas_used, execution_gas(swarm, tx)) for label, tx in rows]


def audit_table(swarm: Swarm, submissions: int) -> list[tuple[str, float, str]]:
    node, peer = swarm.node(), swarm.node()
    start = swarm.ledger.current_round() + 1
    began = time.perf_counter()
    for i in range(submissions):
        swarm.goto(start + i)
        node.submit(start + i, digest(f"n{i}"), 64, 10_000 + i, 5_000 + i)
        if i % 10 == 0:
            swarm.await_beacon(start + i)
            peer.attest(start + i, node.account_address, 10_000 + i, 5_000 + i)
    setup_s = time.perf_counter() - began
    reader = EventReader(swarm.ledger, chunk_blocks=2_000, start_block=swarm.deploy_tx.block_number)
    auditor = Auditor(swarm.ledger, reader)
    rows = [(f"setup: {submissions} submits + {submissions // 10} attests", setup_s, "")]
    for label, call in [
        ("audit node (events + submissionOf each)", lambda: auditor.node(node.account_address)),
        ("audit round", lambda: auditor.round(start + submissions // 2)),
        ("audit submission", lambda: auditor.submission(start, node.account_address)),
        ("audit leaderboard (events only)", lambda: auditor.leaderboard()),
        (
            "scan Submitted events of the node",
            lambda: list(reader.read(["Submitted"], node=node.account_address)),
        ),
    ]:
        began = time.perf_counter()
        result = call()
        elapsed = time.perf_counter() - began
        size = (
            len(result)
            if isinstance(result, list)
            else (len(getattr(result, "submissions", [])) or "")
        )
        rows.append((label, elapsed, str(size)))
    return rows


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--submissions", type=int, default=1_000)
    args = parser.parse_args()
    with Anvil(Path(tempfile.mkdtemp(prefix="bench-ledger-"))) as anvil:
        swarm = Swarm(anvil, quorum=2)
        gas = Table(
            "operation", "tx gas", "execution gas", "goal (execution)", right=("goal (execution)",)
        )
        for label, tx, execution in gas_table(swarm):
            goal = GOALS.get(label)
            verdict = f"<= {goal:,} {'ok' if execution <= goal else 'OVER'}" if goal else None
            gas.row(label, tx, execution, verdict)
        print(f"SwarmLedger gas (deployment: {swarm.deploy_tx.gas_used:,})\n")
        print(gas.render())
        audit = Table("query", "seconds", "rows", right=("rows",))  # rows: a count, or ""
        for label, seconds, rows in audit_table(swarm, args.submissions):
            audit.row(label, seconds, rows)
        audit.print(
            f"Audit queries against a node with {args.submissions} submissions "
            "(anvil on loopback, wall-clock)"
        )


if __name__ == "__main__":
    main()
