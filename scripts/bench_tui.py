"""What a TUI refresh costs with a large swarm: N nodes registered and submitting on a local anvil.

Times the ledger view's first refresh (every event, nodeInfo for all N in JSON-RPC batches), a
refresh with nothing new, one after 10 new submissions, and the peers table's redraw of N rows
in a headless Textual app (a page of them). Then, without a chain, what the view holds as the
swarm ages: `--age-nodes` nodes' submissions and credit over `--age-rounds` rounds folded through
the view's own fold and close (typed events built here, as the chain's decoder gives them),
with the view's memory (tracemalloc) and fold time at 1, 10, 100, ... rounds. Wall-clock on this
machine (varies with load). Usage:
python -m scripts.bench_tui [--nodes 1000] [--age-nodes 10000] [--age-rounds 1000]
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from textual.app import App

from client.chain.artifacts import load_artifact
from client.chain.ledger_events import CreditChanged, Submitted
from client.devnet import Anvil
from client.node.view.ledger import LedgerView
from scripts import arguments
from scripts.table import Table
from tests.harness.ledger_swarm import ETH, Swarm, digest
from tui.widgets.peers import PeersTable


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times), result


class TableApp(App):
    def compose(self):
        yield PeersTable(id="peers-table")


async def table_times(rows) -> tuple[float, float]:
    app = TableApp()
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(PeersTable)
        began = time.perf_counter()
        table.show(tuple(rows))
        await pilot.pause()
        redraw = time.perf_counter() - began
        began = time.perf_counter()
        table.sort_by("stake")
        await pilot.pause()
        sort = time.perf_counter() - began
        changed = [
            replace(r, last_round=(r.last_round or 0) + 1) if i < 10 else r
            for i, r in enumerate(rows)
        ]
        began = time.perf_counter()
        table.show(tuple(changed))
        await pilot.pause()
        return redraw, sort, time.perf_counter() - began


def aging(nodes: int, rounds: int) -> Table:
    """The view's memory and fold time as `nodes` nodes submit and are credited every round for
    `rounds` rounds (no chain: typed events into LedgerView._fold, then its _close, as a refresh
    does; 60-s rounds, final 8 rounds after their own as the devnet's windows make them)."""
    params = SimpleNamespace(final_after=lambda r: r + 7)
    addresses = [f"0x{i:040x}" for i in range(1, nodes + 1)]
    tracemalloc.start()
    # no chain: the view folds and closes only (its reader needs the ABI, never a request)
    offline = SimpleNamespace(contract=SimpleNamespace(abi=load_artifact("SwarmLedger")["abi"]))
    view = LedgerView(offline, addresses[0])
    table = Table(
        "rounds folded", "events", "view memory (MiB)", "fold s per round", float_format=".3f"
    )
    marks = {m for m in (1, 10, 100, 1_000, 10_000) if m <= rounds} | {rounds}
    folded, spent = 0, 0.0
    for round_ in range(rounds):
        events = [
            kind(block_number=round_, tx_hash="0x", log_index=i, round=round_, node=a, **extra)
            for i, a in enumerate(addresses)
            for kind, extra in (
                (Submitted, {"digest": "0x" + "00" * 32, "rollouts": 8, "score": 9, "signal": 3}),
                (CreditChanged, {"credited": True, "round_total_credited": 3}),
            )
        ]
        began = time.perf_counter()
        for e in events:
            view._fold(e)
        view._close(params, round_)
        final = [r for r in view.ours if r + 7 < round_]
        view.tally.outcomes = view._outcomes(lambda r, now=round_: r + 7 < now)
        view.paid_rounds.update(final)  # our node claims its final rounds
        view._forget(round_)
        spent += time.perf_counter() - began
        folded += len(events)
        if round_ + 1 in marks:
            del events
            size = tracemalloc.get_traced_memory()[0]
            table.row(round_ + 1, folded, size / 2**20, spent / (round_ + 1))
    tracemalloc.stop()
    return table


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--age-nodes", type=int, default=10_000)
    parser.add_argument("--age-rounds", type=int, default=1_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Anvil(Path(tmp)) as anvil:
        swarm = Swarm(anvil)
        began = time.perf_counter()
        nodes = [swarm.node(stake=ETH + i * 10**15) for i in range(args.nodes)]
        for i, node in enumerate(nodes):
            node.submit(0, digest(f"n{i}"), 32, 1_000 + i)
        setup = time.perf_counter() - began
        me = nodes[0].account_address
        view = LedgerView(swarm.ledger, me, start_block=0)
        cold, _ = timed(view.refresh)
        idle, _ = timed(view.refresh, repeat=5)
        for node in nodes[1:11]:
            node.add_stake(10**15)
        touched, _ = timed(view.refresh)
        fold, rows = timed(lambda: view.peers({}), repeat=5)
        redraw, sort, update = asyncio.run(table_times(rows))
    print(f"{args.nodes} nodes registered and submitted in {setup:.0f} s (setup, not measured)\n")
    table = Table("step", "wall s", float_format=".3f", right=("wall s",))
    first = f"ledger view: first refresh ({args.nodes} nodeInfo, {2 * args.nodes} events)"
    table.row(first, cold)
    table.row("ledger view: refresh, nothing new (median of 5)", idle)
    table.row("ledger view: refresh after 10 stake changes", touched)
    table.row("peer rows from the view (median of 5)", f"{fold:.4f}")  # sub-millisecond
    table.row(f"peers table: first fill, {len(rows)} rows", redraw)
    table.row(f"peers table: sort {len(rows)} rows", sort)
    table.row("peers table: refresh with 10 rows changed", update)
    print(table.render())
    print(
        f"\nThe read model as the swarm ages ({args.age_nodes:,} nodes, a submission and its "
        "credit each a round)\n"
    )
    print(aging(args.age_nodes, args.age_rounds).render())


if __name__ == "__main__":
    main()
