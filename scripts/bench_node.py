"""Where a node's time goes on a real devnet (anvil with a block a second, js-ipfs, N node
processes): per node, the share of wall time its compute stage spent generating or training
(busy) and waiting on chain or IPFS I/O with work to do (blocked), its local rounds per chain
round, and the seconds of every stage over the window, compute (generate, train, checkpoint)
and the I/O that runs beside it (pin, submit, attest; discover, fetch, verify).

With --metrics S every node serves its Prometheus metrics (`devnet up --metrics`) and a scraper
here GETs each node's /metrics every S seconds through the window, as Prometheus would; the
scrapes' count, failures and latency are printed below the table (compare the busy share with
a run without it).

A script, not a test: it runs the swarm for some rounds and reads each node's journal through
the read model (client.node.view.journal), once every node has written the compute span that was
running when the window closed (spans are written when they end).

Usage: python -m scripts.bench_node [--nodes 3 --rounds 10 --round-length 60 --model seed|seed-test
       --adapter none|lora --store ipfs|local --config configs/devnet.toml --metrics 5]
"""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

from client.node.eventlog import BUSY, COMPUTE, Span
from client.node.view.journal import NodeView
from scripts import arguments
from scripts.table import Table
from tests.harness.devnets import DevnetDidNotStart, foreground_devnet

REPO = Path(__file__).resolve().parent.parent

IO = (Span.PIN, Span.SUBMIT, Span.ATTEST, Span.DISCOVER, Span.FETCH, Span.VERIFY, Span.PROVE)


def covered(view: NodeView, until: float) -> bool:
    """Whether the node's journal holds a compute span that ends at or after `until`."""
    compute = {str(s) for s in COMPUTE}
    return view.journal is not None and any(
        stage in compute for _, _, stage in view.journal.spans(until)
    )


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=10, help="chain rounds measured")
    parser.add_argument("--round-length", type=int, default=60)
    parser.add_argument("--model", default="seed")
    parser.add_argument("--adapter", default="none", choices=("none", "lora"))
    parser.add_argument("--store", default="ipfs", choices=("ipfs", "local"))
    parser.add_argument("--config", default="configs/devnet.toml")
    parser.add_argument(
        "--metrics", type=float, default=0, help="scrape every node's /metrics every S seconds"
    )
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="sapo-bench-node-"))
    env = {"SAPO_POLICY__MODEL": args.model, "SAPO_POLICY__ADAPTER": args.adapter}
    log = data_dir.parent / f"{data_dir.name}.out"
    try:  # the foreground supervisor, a child of this script: it ends with it
        up, state = foreground_devnet(
            data_dir,
            "--config",
            args.config,
            "--nodes",
            str(args.nodes),
            "--round-length",
            str(args.round_length),
            "--store",
            args.store,
            *(["--metrics"] if args.metrics else []),
            log=log,
            env=env,
        )
    except DevnetDidNotStart:
        sys.exit(f"devnet did not start; see {log}")
    try:
        config = state.public()
        from client.chain import Ledger, connect

        params = Ledger(connect(config["rpc_url"]), config["ledger"]).params()
        first = params.round_at(time.time()) + 1  # the first round every node plays whole
        last = first + args.rounds - 1
        done = threading.Event()
        scrapes: list[float | None] = []  # seconds per scrape; None: it failed
        if args.metrics:
            urls = [node.metrics for node in state.nodes]
            threading.Thread(
                target=scrape_every, args=(urls, args.metrics, done, scrapes), daemon=True
            ).start()
        while params.round_at(time.time()) <= last:
            if up.poll() is not None:
                sys.exit(f"the devnet stopped; see {log}")
            time.sleep(2)
        done.set()
        since, until = params.round_start(first), params.round_start(last + 1)
        views = [NodeView(node.data_dir) for node in state.nodes]
        # a span is written when it ends: wait for each node's compute span that was running
        # when the window closed (a GRPO update takes seconds), or its busy share is read short
        deadline = time.time() + 300
        while time.time() < deadline and not all(covered(v, until) for v in views):
            time.sleep(1)
        late = [i for i, v in enumerate(views) if not covered(v, until)]
        shares = [v.shares(since, until) for v in views]
        local = []
        for v in views:
            counts = [r.local_rounds for r in v.rounds() if first <= r.round <= last]
            local.append(sum(c or 0 for c in counts) / args.rounds)
        verdicts = [  # what each node made of its peers' batches, proofs included
            Counter(r["verdict"] for r in (v.journal.peers.peer_verdicts() if v.journal else []))
            for v in views
        ]
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(timeout=180)
    print(
        f"{args.nodes} nodes, chain rounds {first}..{last} ({args.rounds} x "
        f"{args.round_length} s), model {args.model}, adapter {args.adapter}, store "
        f"{args.store}, config {args.config}; anvil block time 1 s\n"
    )
    per_round = "local rounds / chain round"
    table = Table(
        *("node", "busy share", "blocked share", per_round, "peer batches"),
        formats={"busy share": ".3f", "blocked share": ".3f", per_round: ".1f"},
    )
    for i, (s, n, v) in enumerate(zip(shares, local, verdicts, strict=True)):
        seen = ", ".join(f"{count} {verdict}" for verdict, count in sorted(v.items())) or "none"
        table.row(f"node-{i}", s.busy_share, s.blocked_share, n, seen)
    print(table.render())
    if late:
        print(
            "note: " + ", ".join(f"node-{i}" for i in late) + " wrote no compute span past the "
            "window's end in 300 s: its busy share misses the span still running then\n"
        )
    if args.metrics:
        took = sorted(t for t in scrapes if t is not None)
        print(
            f"\n/metrics scraped every {args.metrics:g} s on each node: {len(scrapes)} scrapes, "
            f"{scrapes.count(None)} failed; seconds per scrape: median "
            f"{took[len(took) // 2] if took else float('nan'):.3f}, "
            f"max {took[-1] if took else float('nan'):.3f}"
        )
    stages = [*COMPUTE, Span.BLOCKED, *IO]
    table = Table("stage", "kind", *(f"node-{i}" for i in range(len(shares))))
    for stage in stages:
        kind = (
            "busy"
            if stage in BUSY
            else "compute"
            if stage in COMPUTE
            else ("blocked" if stage == Span.BLOCKED else "I/O")
        )
        table.row(str(stage), kind, *(s.stage_s.get(str(stage), 0.0) / args.rounds for s in shares))
    table.print(
        "seconds per chain round, by stage (compute runs on one thread; the I/O stages run "
        "beside it on two others)"
    )


def scrape_every(urls, every_s: float, done: threading.Event, out: list) -> None:
    """GETs each URL every `every_s` seconds until `done`, recording each scrape's seconds."""
    while not done.wait(every_s):
        for url in urls:
            began = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - loopback
                    answer.read()
                out.append(time.perf_counter() - began)
            except OSError:
                out.append(None)


if __name__ == "__main__":
    main()
