"""The chain's gas per node per round on a devnet of real training nodes, from anvil's own
blocks: the ledger's lane (`sapo devnet up`) against the root lane (`sapo devnet up
--root-lane`: a round book beside the ledger and an aggregator the honest nodes send their
batches and votes to).

Each lane starts its own devnet (configs/devnet.toml, the seed-test policy, local rounds capped
at 2 a chain round as the tests run it), lets it warm up until every kind of transaction its
rounds send has come (the root lane's first bonds released: the book's challenge window of
round 0 closed), then reads every block of the measured rounds and every transaction's receipt:
gas by sender (the nodes, the aggregator) and by function, per chain round. "Per node" divides
everything the swarm sent (the aggregator's posts too) by the training nodes. The chain's
Mgas/s is at 60-s rounds, as docs/scaling.md counts it.

--light N1,N2 runs the root lane once more per N with N light nodes beside the training nodes
(`sapo devnet up --light N`, client.devnet.light): "per node" then divides by training and light
nodes. Each run also reads, over the measured rounds, the CPU seconds of the aggregator's
process, of the light nodes' process (per light node) and of each training node's process, the
growth of node 0's journal, and how many of the training nodes' batches the book's verdict roots
credited (all of them, when the lights cost the real nodes nothing they notice), and, last, how
long `sapo devnet status`'s read of the book's verdict lists (the last day of rounds) takes: a
first call that keeps what the rounds that stand credit, a read of every list as each call did
before it kept that, and the next call.

A script, not a test: each lane runs some minutes of wall time.

Usage: python -m scripts.bench_devnet_gas [--nodes 3 --rounds 8 --round-length 20
       --lanes ledger,root] [--light 100,1000]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from client.chain import Ledger, connect
from client.chain.artifacts import selectors
from client.chain.book import RoundBook
from client.config import load_config
from client.node.aggregation.claims import Claimant, NoClaim
from client.node.datadir import DataDir
from client.store import open_store
from scripts import arguments
from scripts.table import Table
from tests.harness.devnets import (
    CAPPED_LOCAL_ROUNDS,
    DevnetDidNotStart,
    foreground_devnet,
    stop_devnet,
)

ROUND_S_AT_SCALE = 60  # the figure of the chain's load: 60-s rounds


def functions() -> dict[bytes, str]:
    """Every function of the ledger, the book and its judge, by selector."""
    return selectors("SwarmLedger") | selectors("RoundBook") | selectors("RoundJudge")


def warm_round(params, lane: str) -> int:
    """The first round whose rounds send every kind of transaction the lane's steady state does:
    v4's first appeal window closed (settlements, claims); the root lane's round 0 challenge
    window closed (bonds released)."""
    w, c, a = params.submit_rounds, params.challenge_rounds, params.appeal_rounds
    if lane == "root":
        return w + 1 + c + 1 + c + 1  # RoundBook: challengeEnd(0) + 1
    return w + 2 * c + a + 1


def gas_of_rounds(w3, params, first: int, last: int, who: dict[str, str], names: dict) -> dict:
    """Per round first..last: gas by sender kind, and calls and gas by function."""
    per_round: dict[int, Counter] = {q: Counter() for q in range(first, last + 1)}
    calls: Counter = Counter()
    gas: Counter = Counter()
    since, until = params.round_start(first), params.round_start(last + 1)
    head = w3.eth.block_number
    number = head
    while number > 0 and w3.eth.get_block(number).timestamp >= since:
        number -= 1
    for n in range(number, head + 1):
        block = w3.eth.get_block(n, full_transactions=True)
        if not since <= block.timestamp < until:
            continue
        q = params.round_at(block.timestamp)
        for tx in block.transactions:
            receipt = w3.eth.get_transaction_receipt(tx.hash)
            kind = who.get(tx["from"].lower(), "other")
            name = names.get(bytes(tx.input[:4]), "?")
            per_round[q][kind] += receipt.gasUsed
            calls[(kind, name)] += 1
            gas[(kind, name)] += receipt.gasUsed
    return {"rounds": per_round, "calls": calls, "gas": gas}


def cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def processes(state) -> dict[str, int]:
    """The pids whose CPU is read: the aggregator, the light nodes, each training node."""
    pids = {f"node-{n.index}": n.pid for n in state.nodes}
    if state.aggregator is not None:
        pids["aggregator"] = state.aggregator.pid
    if state.light is not None:
        pids["light"] = state.light.pid
    return pids


def real_credited(state, first: int, last: int) -> tuple[int, int]:
    """(the training nodes' batches the book's verdict roots of first..last credit, the
    batches there were: nodes x rounds)."""
    cfg = load_config(state.config)
    ledger = Ledger(connect(state.rpc_url), state.ledger)
    book = RoundBook(ledger.w3, state.aggregator.book)
    reader = Claimant(ledger, book, open_store(cfg.store), allow_private_peers=True)
    real = {n.address.lower() for n in state.nodes}
    try:
        rounds = reader.credits(first, last)
    except NoClaim:
        return -1, len(real) * (last - first + 1)
    found = sum(1 for credits in rounds.values() for c in credits if c.producer.lower() in real)
    return found, len(real) * (last - first + 1)


def status_reads(state) -> dict[str, float]:
    """Seconds of `devnet status`'s read of the book's day of verdict lists (book_credited):
    the first call keeping what stands; every list, as each call read before; the next call."""
    from client.chain.audit import Auditor
    from client.chain.events import EventReader
    from client.devnet.state import BOOK_CREDITS
    from client.devnet.status import book_credited

    cfg = load_config(state.config)
    ledger = Ledger(connect(state.rpc_url), state.ledger)
    day = Auditor(ledger, EventReader(ledger)).day_of_rounds()
    kept = Path(tempfile.mkdtemp(prefix="sapo-bench-status-")) / BOOK_CREDITS
    seconds = {}
    # the first call fetches the lists into this machine's daemon: the two after it read them
    # as warm, so "every list" (before) and "next" differ by what was kept, nothing else
    for name, path in (("first keeping", kept), ("every list", None), ("next", kept)):
        started = time.perf_counter()
        book_credited(cfg, ledger, day, [], kept=path)
        seconds[name] = time.perf_counter() - started
    seconds["rounds"] = day[1] - day[0] + 1
    return seconds


def run_lane(lane: str, args, light: int = 0) -> dict:
    data_dir = Path(tempfile.mkdtemp(prefix=f"sapo-bench-gas-{lane}-{light}-"))
    log = data_dir.parent / f"{data_dir.name}.out"
    env = {
        "SAPO_POLICY__MODEL": "seed-test",
        "SAPO_TRAIN__ROUNDS_PER_UPDATE": "1",
        "SAPO_SAPO__MAX_LOCAL_ROUNDS": CAPPED_LOCAL_ROUNDS,
    }
    extra = ["--root-lane"] if lane == "root" else []
    if light:
        extra += ["--light", str(light)]
    try:
        up, state = foreground_devnet(
            data_dir,
            "--config",
            "configs/devnet.toml",
            "--nodes",
            str(args.nodes),
            "--round-length",
            str(args.round_length),
            *extra,
            log=log,
            env=env,
        )
    except DevnetDidNotStart:
        sys.exit(f"devnet did not start; see {log}")
    try:
        w3 = connect(state.rpc_url)
        params = Ledger(w3, state.ledger).params()
        first = max(warm_round(params, lane), params.round_at(time.time()) + 1)
        last = first + args.rounds - 1
        journal = DataDir(state.nodes[0].data_dir).journal if state.nodes else None
        cpu: dict[str, float] = {}
        size = 0
        while params.round_at(time.time()) <= last:
            if up.poll() is not None:
                sys.exit(f"the devnet stopped; see {log}")
            if not cpu and params.round_at(time.time()) >= first:  # the measured rounds begin
                cpu = {name: cpu_s(pid) for name, pid in processes(state).items()}
                size = journal.stat().st_size if journal else 0
            time.sleep(1)
        cpu = {name: cpu_s(pid) - cpu.get(name, 0.0) for name, pid in processes(state).items()}
        grown = (journal.stat().st_size - size) if journal else 0
        who = {node.address.lower(): "nodes" for node in state.nodes}
        if state.aggregator is not None:
            who[state.aggregator.address.lower()] = "aggregator"
        if state.light is not None:
            who |= {a.lower(): "light" for a in _roster(state.light.roster)}
        measured = gas_of_rounds(w3, params, first, last, who, functions())
        # the verdicts of the measured rounds are posted some rounds later
        verdict = params.round_at(time.time())
        while (
            lane == "root" and verdict <= last + params.submit_rounds + params.challenge_rounds + 2
        ):
            time.sleep(2)
            verdict = params.round_at(time.time())
        credited = real_credited(state, first, last) if lane == "root" else None
        status = status_reads(state) if lane == "root" else None
    finally:
        stop_devnet(up)
    measured |= {
        "lane": lane,
        "first": first,
        "last": last,
        "log": log,
        "light": light,
        "cpu": cpu,
        "journal": grown,
        "credited": credited,
        "status": status,
    }
    return measured


def _roster(path: Path) -> list[str]:
    from client.devnet.light import Roster

    return Roster.load(path).addresses


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=8, help="chain rounds measured")
    parser.add_argument("--round-length", type=int, default=20)
    parser.add_argument("--lanes", default="ledger,root")
    parser.add_argument(
        "--light", default="", help="light node counts, each a root-lane run of its own (100,1000)"
    )
    args = parser.parse_args()
    lanes = [lane for lane in args.lanes.split(",") if lane]
    if unknown := set(lanes) - {"ledger", "root"}:
        parser.error(f"--lanes: ledger or root, not {sorted(unknown)}")
    try:
        lights = [int(n) for n in args.light.split(",") if n]
    except ValueError:
        parser.error(f"--light: comma-separated counts, not {args.light!r}")
    runs = [run_lane(lane, args) for lane in lanes]
    runs += [run_lane("root", args, light) for light in lights]

    print(f"\n{args.nodes} training nodes, {args.round_length}-s rounds, from receipts\n")
    table = Table(
        "lane",
        "light nodes",
        "rounds",
        "gas / round (mean)",
        "min",
        "max",
        "nodes' own",
        "aggregator's",
        "gas / node / round",
        f"Mgas/s at {ROUND_S_AT_SCALE}-s rounds",
        formats={f"Mgas/s at {ROUND_S_AT_SCALE}-s rounds": ".4f"},
    )
    for run in runs:
        totals = [sum(c.values()) for c in run["rounds"].values()]
        count = len(totals)
        mean = statistics.fmean(totals)
        table.row(
            run["lane"],
            run["light"],
            f"{run['first']}..{run['last']}",
            round(mean),
            min(totals),
            max(totals),
            round(sum(c["nodes"] for c in run["rounds"].values()) / count),
            round(sum(c["aggregator"] for c in run["rounds"].values()) / count),
            round(mean / (args.nodes + run["light"])),
            mean / ROUND_S_AT_SCALE / 1e6,
        )
    table.print()
    print()
    work = Table(
        "lane",
        "light nodes",
        "aggregator CPU s / round",
        "light nodes' CPU s / round / light node",
        "training node CPU s / round (mean)",
        "node 0's journal bytes / round",
        "training batches credited",
        formats={
            "aggregator CPU s / round": ".2f",
            "light nodes' CPU s / round / light node": ".4f",
            "training node CPU s / round (mean)": ".1f",
        },
    )
    for run in runs:
        count = run["last"] - run["first"] + 1
        cpu = run["cpu"]
        nodes = [v for k, v in cpu.items() if k.startswith("node-")]
        credited = run["credited"]
        work.row(
            run["lane"],
            run["light"],
            cpu.get("aggregator", 0.0) / count,
            cpu.get("light", 0.0) / count / run["light"] if run["light"] else 0.0,
            statistics.fmean(nodes) / count if nodes else 0.0,
            round(run["journal"] / count),
            "-" if credited is None else f"{credited[0]} of {credited[1]}",
        )
    work.print()
    print()
    reads = Table(
        "lane",
        "light nodes",
        "rounds read",
        "s, first call keeping",
        "s reading every list (before)",
        "s, next call",
        formats=dict.fromkeys(
            ("s, first call keeping", "s reading every list (before)", "s, next call"), ".2f"
        ),
    )
    for run in runs:
        if run["status"] is not None:
            t = run["status"]
            reads.row(
                run["lane"],
                run["light"],
                int(t["rounds"]),
                t["first keeping"],
                t["every list"],
                t["next"],
            )
    print("`sapo devnet status`: the book's verdict lists of the last day of rounds")
    reads.print()
    print()
    calls = Table(
        "lane", "light nodes", "sender", "function", "calls / round", "gas / round", "gas / call"
    )
    for run in runs:
        count = run["last"] - run["first"] + 1
        for (kind, name), n in sorted(run["calls"].items(), key=lambda kv: -run["gas"][kv[0]]):
            spent = run["gas"][(kind, name)]
            calls.row(
                run["lane"],
                run["light"],
                kind,
                name,
                n / count,
                round(spent / count),
                round(spent / n),
            )
    calls.print()


if __name__ == "__main__":
    main()
