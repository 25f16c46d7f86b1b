"""What reading a node's journal costs as the node ages: the read model's calls that /metrics,
the TUI and `sapo devnet status` make (client.node.view.journal.NodeView), on journals of N chain
rounds written as a node writes them.

Each journal holds N rounds of 30 s (20,160 is a week, 80,640 four), 15 local rounds each with
their metrics row, a confirmed submission (one in 20 rounds skipped), four outbox entries, three
peers' verified batches and two trained-on items of each. The rows are written in bulk through
the journal's own connection (the schema and row shapes of client.node.journal), then the node
opens it once (as a restart would: it adds the indexes). Times are the best of --repeat calls of
a reader that has read the journal once before (the first reading of a new reader reads every
local round's row once), on this machine's CPU.

Calls: `totals` (a /metrics scrape's journal part: local rounds, tokens, rounds per phase, the
outbox, verdicts), `window` (busy share and local rounds per chain round over the last 10 rounds),
`summary` (a `sapo devnet status` line and the TUI's header), `peer_counts` (the TUI's peers
table).

Usage: python -m scripts.bench_journal [--rounds 2000 20160 80640] [--repeat 5]
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from client.node.journal import Journal
from client.node.view.journal import NodeView
from scripts import arguments
from scripts.table import Table

REPO = Path(__file__).resolve().parent.parent

ROUND_S = 30.0
LOCAL = 15
PEERS = ("0x" + "a" * 40, "0x" + "b" * 40, "0x" + "c" * 40)


def write(journal: Journal, rounds: int, now: float) -> float:
    """Writes `rounds` chain rounds ending now; returns their genesis."""
    genesis = now - ROUND_S * rounds
    metrics = {"new_tokens": 300, "tokens": 500, "reward_local": 0.5, "loss": 0.1}
    with journal.db.tx() as db:
        for start in range(0, rounds, 5_000):
            chunk = range(start, min(rounds, start + 5_000))
            db.executemany(
                "INSERT INTO rounds (round, phase, digest, cid, claimed, signal, rollouts, "
                "local_rounds, tx_hash, updated) VALUES (?, ?, '0x', 'bafy', 32000, 900, 64, ?, "
                "'0x', ?)",
                [
                    (r, "skipped" if r % 20 == 0 else "confirmed", LOCAL, genesis + ROUND_S * r)
                    for r in chunk
                ],
            )
            db.executemany(
                "INSERT INTO metrics (round, k, data) VALUES (?, ?, ?)",
                [
                    (r, k, json.dumps(metrics | {"step": r * LOCAL + k}, sort_keys=True))
                    for r in chunk
                    for k in range(LOCAL)
                ],
            )
            db.executemany(
                "INSERT INTO outbox (key, kind, round, payload, status, created, updated) "
                "VALUES (?, ?, ?, '{}', 'done', ?, ?)",
                [
                    (f"{kind}:{r}", kind, r, genesis + ROUND_S * r, genesis + ROUND_S * r)
                    for r in chunk
                    for kind in ("pin", "submit", "attest", "claim")
                ],
            )
            db.executemany(
                "INSERT INTO peer_batches (round, node, digest, verdict, fetched) "
                "VALUES (?, ?, '0x', 'verified', ?)",
                [(r, p, genesis + ROUND_S * r) for r in chunk for p in PEERS],
            )
            db.executemany(
                "INSERT INTO used_items VALUES (?, ?, ?)",
                [(r, p, i) for r in chunk for p in PEERS for i in range(2)],
            )
    return genesis


def best(call, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


CALLS = ("totals", "window", "summary", "peer_counts")


def measure(rounds: int, repeat: int) -> tuple[float, list[float | None]]:
    """The journal's size (MB) and each call's best time (ms; None where this client lacks it)."""
    with tempfile.TemporaryDirectory(prefix="sapo-bench-journal-") as tmp:
        now = time.time()
        journal = Journal(Path(tmp) / "journal.sqlite")
        genesis = write(journal, rounds, now)
        journal.close()
        Journal(Path(tmp) / "journal.sqlite").close()  # the node's next start
        view = NodeView(Path(tmp))
        view.totals()  # a reader's first reading
        made = {
            "totals": view.totals,
            "window": lambda: view.window(genesis, ROUND_S, now),
            "summary": lambda: view.summary(genesis, ROUND_S, now),
            "peer_counts": view.peer_counts,
        }
        if not hasattr(view, "window"):  # a client from before it (run from an old checkout)
            del made["window"]
        ms = [best(made[c], repeat) * 1000 if c in made else None for c in CALLS]
        size = (Path(tmp) / "journal.sqlite").stat().st_size / 2**20
        view.close()
    return size, ms


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--rounds", type=int, nargs="+", default=[2_000, 20_160, 80_640])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"milliseconds per call, best of {args.repeat} (30 s rounds, {LOCAL} local rounds each)")
    columns = ("chain rounds", "journal MB", *CALLS)
    table = Table(*columns, right=columns, formats={"journal MB": ",.0f"})
    print()
    print(table.header())  # then a row as each size is measured
    for rounds in args.rounds:
        size, ms = measure(rounds, args.repeat)
        print(table.line(rounds, size, *ms), flush=True)


if __name__ == "__main__":
    main()
