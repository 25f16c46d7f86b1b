"""Benchmark of the SwarmLedger on a local anvil: gas per operation, and audit query times.

Prints two tables. Gas is exact (deterministic for a given build): each transaction's gas used,
and its execution gas (less the 21,000 every transaction pays and its calldata's 4/16 gas a byte:
what the contract's code costs, what `forge test --gas-report` and the goals count); times are
wall-clock on this machine and vary with load.
The audit queries run after N rounds of one submission each, --blocks-per-round blocks a round:
a report on some rounds (round, submission, the leaderboard of the last 10 rounds) reads only
those rounds' blocks, so its time should not grow with N; the node's whole history and the
leaderboard of every round do.
Usage: python -m scripts.bench_ledger [--submissions N]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from web3 import Web3

from client.chain import Ledger
from client.chain.audit import Auditor
from client.chain.events import EventReader
from client.config.models import StoreSection
from client.devnet import Anvil
from client.node.intake.discovery import discover, window_start
from client.node.journal import Journal
from client.node.view.ledger import LedgerView
from scripts import arguments
from scripts.bench_swarm_chain import CountingSession
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
    swarm.goto(16)  # round 10 is final (final_after(10) = 15)
    rows.append(("settle (agreed)", c.settle(0, a.account_address)))
    rows.append(("settle (disputed: slash)", c.settle(0, b.account_address)))
    rows.append(("claim 1 round", a.claim([0])))
    rows.append(("claim 9 rounds", a.claim(list(range(2, 11)))))
    return [(label, tx.gas_used, execution_gas(swarm, tx)) for label, tx in rows]


def audit_table(
    swarm: Swarm, submissions: int, blocks_per_round: int, producers: int
) -> list[tuple[str, float, str, str]]:
    node, peer = swarm.node(), swarm.node()
    others = [swarm.node() for _ in range(producers)]
    start = swarm.ledger.current_round() + 1
    began = time.perf_counter()
    for i in range(submissions):
        swarm.goto(start + i)
        node.submit(start + i, digest(f"n{i}"), 64, 10_000 + i, 5_000 + i)
        for j, other in enumerate(others):
            other.submit(start + i, digest(f"o{j}-{i}"), 64, 10_000 + j, 5_000 + j)
        if i % 10 == 0:
            swarm.await_beacon(start + i)
            peer.attest(start + i, node.account_address, 10_000 + i, 5_000 + i)
        if blocks_per_round > 1:
            swarm.mine(blocks_per_round - 1)
    setup_s = time.perf_counter() - began
    session = CountingSession()
    w3 = Web3(Web3.HTTPProvider(swarm.url, session=session))
    ledger = Ledger(w3, swarm.ledger.address)
    deployed = swarm.deploy_tx.block_number
    reader = EventReader(ledger, chunk_blocks=2_000, start_block=deployed)
    auditor = Auditor(ledger, reader)
    last = start + submissions - 1
    params = ledger.params()
    me = node.account_address
    tmp = Path(tempfile.mkdtemp(prefix="bench-ledger-journal-"))
    retain = StoreSection.model_fields["retain_rounds"].default

    def view(lookback: int | None) -> LedgerView:
        v = LedgerView(ledger, me, start_block=deployed, keep_rounds=60, lookback_rounds=lookback)
        v.clock = swarm.now
        v.refresh()
        return v

    def discovery(name: str, windowed: bool) -> list:
        journal = Journal(tmp / f"{name}.sqlite")
        current = params.round_at(swarm.now())
        first = (
            (lambda: window_start(ledger, params, current, retain, deployed)) if windowed else None
        )
        discover(EventReader(ledger, chunk_blocks=2_000, start_block=deployed), journal, "", first)
        found = journal.peers.peer_submissions(0)
        journal.close()
        return found

    made = submissions * (1 + producers)
    rows = [(f"setup: {made} submits + {submissions // 10} attests", setup_s, "", "")]
    for label, call in [
        ("audit node (events + submissionOf each)", lambda: auditor.node(me)),
        ("audit round", lambda: auditor.round(start + submissions // 2)),
        ("audit submission", lambda: auditor.submission(start, me)),
        ("audit leaderboard, every round", lambda: auditor.leaderboard(start, last)),
        ("audit leaderboard, the last 10 rounds", lambda: auditor.leaderboard(last - 9, last)),
        (
            "for comparison: Submitted and CreditChanged since the deploy",
            lambda: list(reader.read(["Submitted", "CreditChanged"])),
        ),
        ("scan Submitted events of the node", lambda: list(reader.read(["Submitted"], node=me))),
        ("TUI view's first refresh, from the deploy", lambda: view(None)),
        ("TUI view's first refresh, 60 rounds back", lambda: view(60)),
        ("node's first discovery, from the deploy", lambda: discovery("deploy", False)),
        (
            f"node's first discovery, from the oldest round kept (retain {retain})",
            lambda: discovery("window", True),
        ),
    ]:
        session.requests = 0
        began = time.perf_counter()
        result = call()
        elapsed = time.perf_counter() - began
        size = (
            len(result)
            if isinstance(result, list)
            else (len(getattr(result, "submissions", [])) or "")
        )
        rows.append((label, elapsed, str(session.requests), str(size)))
    return rows


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--submissions", type=int, default=1_000)
    parser.add_argument(
        "--producers", type=int, default=0, help="other nodes submitting in each audit round"
    )
    parser.add_argument(
        "--blocks-per-round",
        type=int,
        default=30,
        help="blocks mined in each of the audit's rounds (30: a 60-s round of 2-s blocks)",
    )
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
        # rows: a count, or ""
        audit = Table("query", "seconds", "requests", "rows", right=("requests", "rows"))
        for label, seconds, requests, rows in audit_table(
            swarm, args.submissions, args.blocks_per_round, args.producers
        ):
            audit.row(label, seconds, requests, rows)
        audit.print(
            f"Audit queries against a node with {args.submissions} submissions, one a round, "
            f"{args.blocks_per_round} blocks a round, {args.producers} other producers a round "
            "(anvil on loopback, wall-clock)"
        )


if __name__ == "__main__":
    main()
