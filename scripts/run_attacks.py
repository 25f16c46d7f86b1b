"""The attack table: each adversary strategy (client.devnet.adversary) for --rounds chain rounds
beside --honest honest nodes on a real devnet (anvil, the stores, node processes, real
transactions), then the same devnet with no adversary, and per strategy what it earned.

Columns, per node of the role over chain rounds first..last (rounds every node played whole),
read from the ledger once every round's credit is final (`submissionOf`, `roundInfo`):
  credited      its submissions that earn (the quorum agreed, agreeing stake outweighs the rest)
  votes         agree / dispute / unavailable votes its submissions received, per submission
  pool share    its share of the rounds' rewards (reward_per_round x credited signal / the
                round's credited total)
  vs honest     its payout per round over an honest node's in the same run
  stake share   its share of all active stake at the start (a whale's is [devnet].whale_share,
                a sybil set's together; a stake mover's before it moves any)
  stake lost    stake slashed over the run (its `Slashed` events): its disputed batches
                (settled by the nodes that disputed them) and its votes that lost against a
                verdict (judged by the nodes whose batches they were); the nodes settle by
                themselves, this script does not
  CPU s/round   its process's CPU time per round (/proc utime + stime; its IPFS daemon aside)
The last lines compare the honest nodes' payout per round with and without the adversaries,
and, for a stake mover, the seats it held on the batches it moved stake for beside the seats
the stake it then held would have given it under ledger v3's draw from live stake.

Usage: python -m scripts.run_attacks [--rounds 20 --round-length 20 --honest 3 --adversary all
       --model seed-test --store local --config configs/devnet.toml --node-stake ETH
       --adversary-stake ETH --no-baseline --json F]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from client.chain import Ledger, connect
from client.chain.events import EventReader
from client.config.roles import expand
from client.devnet.control import seats_for_every_node
from client.node.datadir import DataDir
from client.node.eventlog import read_events
from scripts import arguments
from scripts.table import Table
from tests.harness.devnets import DevnetDidNotStart, foreground_devnet

REPO = Path(__file__).resolve().parent.parent

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """A live process's user + system CPU seconds (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def run_devnet(args, adversaries: list[str], label: str) -> dict:
    """Runs one devnet for the measured rounds and until their credit is final; returns what
    each node earned and spent."""
    data_dir = Path(tempfile.mkdtemp(prefix=f"sapo-attack-{label}-"))
    nodes = args.honest + len(expand(adversaries))
    # every node holds a seat on every batch but once in a million (K from
    # seats_for_every_node, as `devnet up` raises it), so the table measures the strategies, not
    # the draw's luck
    env = {
        "SAPO_POLICY__MODEL": args.model,
        "SAPO_LEDGER__CHECKERS": str(max(seats_for_every_node(nodes), args.checkers or 0)),
        **({"SAPO_DEVNET__NODE_STAKE": f"{args.node_stake} ether"} if args.node_stake else {}),
        **(
            {"SAPO_DEVNET__ADVERSARY_STAKE": f"{args.adversary_stake} ether"}
            if args.adversary_stake
            else {}
        ),
    }
    log = data_dir.parent / f"{data_dir.name}.out"
    print(f"[{label}] devnet in {data_dir} (log {log.name})", file=sys.stderr, flush=True)
    try:  # the foreground supervisor, a child of this script: it ends with it
        up, running = foreground_devnet(
            data_dir,
            "--config",
            args.config,
            "--nodes",
            str(args.honest),
            "--round-length",
            str(args.round_length),
            "--store",
            args.store,
            *(arg for name in adversaries for arg in ("--adversary", name)),
            log=log,
            env=env,
        )
    except DevnetDidNotStart:
        sys.exit(f"devnet did not start; see {log}")
    try:
        state = running.public()  # as `devnet up --json` prints it
        ledger = Ledger(connect(state["rpc_url"]), state["ledger"])
        params = ledger.params()
        first = params.round_at(time.time()) + 1  # the first round every node plays whole
        last = first + args.rounds - 1
        final = params.final_after(last) + 1
        nodes = state["nodes"]
        wait_until(params.round_start(first), up, log)
        cpu0 = {n["address"]: cpu_seconds(n["pid"]) for n in nodes}
        block0 = ledger.head()
        stake0 = {n["address"]: ledger.node_info(n["address"]).active_stake for n in nodes}
        total0 = sum(stake0.values())
        wait_until(params.round_start(last + 1), up, log, f"[{label}] rounds {first}..{last}")
        cpu1 = {n["address"]: cpu_seconds(n["pid"]) for n in nodes}
        # the nodes settle what they must once final (their own batches and those they
        # disputed) and have the losing votes judged; a round later it is done
        wait_until(params.round_start(final + 1) + 2, up, log, f"[{label}] credit final, settled")
        rounds = {r: ledger.round_info(r) for r in range(first, last + 1)}
        slashed: dict[str, int] = defaultdict(int)
        for event in EventReader(ledger).read(["Slashed"], from_block=block0):
            slashed[event.args["node"].lower()] += event.args["amount"]
        rows = []
        for node in nodes:
            address = node["address"]
            subs = ledger.submissions([(r, address) for r in range(first, last + 1)])
            subs = [s for s in subs if s.exists]
            paid = sum(
                params.reward_per_round * s.credited // rounds[s.round].total_credited
                for s in subs
                if s.credited
            )
            spent = (
                None
                if cpu0[address] is None or cpu1[address] is None
                else cpu1[address] - cpu0[address]
            )
            rows.append(
                {
                    "role": node.get("role", "honest"),
                    "address": address,
                    "submissions": len(subs),
                    "credited": sum(1 for s in subs if s.credited),
                    "claimed_signal": sum(s.signal for s in subs),
                    "credited_signal": sum(s.credited for s in subs),
                    "agrees": sum(s.agrees for s in subs),
                    "disputes": sum(s.disputes for s in subs),
                    "unavailable": sum(s.unavailable for s in subs),
                    "paid_wei": paid,
                    "stake_share": stake0[address] / total0,
                    "stake_lost_wei": slashed[address.lower()],
                    "seats_moved": moved_seats(Path(node["data_dir"]), first, last),
                    "cpu_s": spent,
                }
            )
        return {
            "label": label,
            "adversaries": adversaries,
            "rounds": [first, last],
            "round_length_s": args.round_length,
            "reward_per_round_wei": params.reward_per_round,
            "quorum": params.quorum,
            "checkers": params.checkers,
            "nodes": rows,
        }
    finally:  # nodes stop one by one (each checkpoints and flushes its outbox)
        up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=600)
        except subprocess.TimeoutExpired:
            up.kill()


def moved_seats(data_dir: Path, first: int, last: int) -> list[int] | None:
    """A stake mover's seats on the batches of rounds first..last it moved stake for, and those
    its stake at their draws would have given it (its `seats` moves); None for other nodes."""
    events = [
        e
        for e in read_events(DataDir(data_dir).events)
        if e.get("move") == "seats" and first <= e.get("round", -1) <= last
    ]
    if not events:
        return None
    return [len(events), sum(e["held"] for e in events), sum(e["live"] for e in events)]


def wait_until(t: float, up: subprocess.Popen, log, say: str | None = None) -> None:
    if say:
        print(f"{say}: {max(0, t - time.time()):.0f} s", file=sys.stderr, flush=True)
    while time.time() < t:
        if up.poll() is not None:
            sys.exit(f"the devnet stopped; see {log}")
        time.sleep(1)


def by_role(run: dict) -> dict[str, list[dict]]:
    roles: dict[str, list[dict]] = defaultdict(list)
    for row in run["nodes"]:
        roles[row["role"]].append(row)
    return roles


def print_table(run: dict, baseline: dict | None) -> None:
    n = run["rounds"][1] - run["rounds"][0] + 1
    pool = run["reward_per_round_wei"] * n
    roles = by_role(run)
    honest_paid = sum(r["paid_wei"] for r in roles["honest"]) / len(roles["honest"])
    print(
        f"rounds {run['rounds'][0]}..{run['rounds'][1]} ({n} x {run['round_length_s']} s), "
        f"quorum {run['quorum']}, checkers {run['checkers']}, {len(roles['honest'])} honest "
        "nodes; per node of the role (mean over its nodes)\n"
    )
    credited, voted = "credited / submitted", "votes per submission (agree / dispute / unavailable)"
    shares = ("stake share", "pool share", "payout / round vs honest")
    table = Table(
        *("role", "nodes", credited, voted, *shares, "stake lost (ETH)", "CPU s / round"),
        right=(credited, voted, "CPU s / round"),  # "12 / 20", "1.0/0.0/0.0"; "–" when unread
        formats=dict.fromkeys(shares, ".1%"),
    )
    for role, rows in roles.items():
        k = len(rows)
        subs = sum(r["submissions"] for r in rows)
        per = max(1, subs)
        votes = "/".join(
            f"{sum(r[v] for r in rows) / per:.1f}" for v in ("agrees", "disputes", "unavailable")
        )
        paid = sum(r["paid_wei"] for r in rows) / k
        cpu = [r["cpu_s"] for r in rows if r["cpu_s"] is not None]
        table.row(
            role,
            k,
            f"{sum(r['credited'] for r in rows)} / {subs}",
            votes,
            sum(r["stake_share"] for r in rows) / k,
            paid / pool,
            paid / honest_paid,
            sum(r["stake_lost_wei"] for r in rows) / k / 1e18,
            sum(cpu) / len(cpu) / n if cpu else None,
        )
    print(table.render())
    if baseline is not None:
        base_rows = by_role(baseline)["honest"]
        base_n = baseline["rounds"][1] - baseline["rounds"][0] + 1
        base = sum(r["paid_wei"] for r in base_rows) / len(base_rows) / base_n
        now = honest_paid / n
        print(
            f"\nhonest payout per node per round: {now / 1e18:.4f} ETH beside the adversaries, "
            f"{base / 1e18:.4f} ETH with none ({now / base - 1:+.1%})"
        )
    for row in run["nodes"]:
        if row.get("seats_moved"):
            batches, held, live = row["seats_moved"]
            print(
                f"\n{row['role']} {row['address'][:10]}…: on the {batches} batches it added stake "
                f"for once they were on chain, it held {held} seats (its stake as of each "
                f"batch's block); a draw from live stake (ledger v3) would have given it {live}"
            )


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--rounds", type=int, default=20, help="chain rounds measured")
    parser.add_argument("--round-length", type=int, default=20)
    parser.add_argument("--honest", type=int, default=3)
    parser.add_argument("--adversary", action="append", help="default: all")
    parser.add_argument("--model", default="seed-test")
    parser.add_argument("--store", default="local", choices=("ipfs", "local"))
    parser.add_argument("--config", default="configs/devnet.toml")
    parser.add_argument(
        "--checkers",
        type=int,
        help="K, seat trials per node and batch (default: enough that every node holds a seat)",
    )
    parser.add_argument(
        "--node-stake",
        type=int,
        help="ether each node registers with ([devnet].node_stake; a sybil set's 4:2:1 split "
        "needs the honest nodes to hold several times min_stake)",
    )
    parser.add_argument(
        "--adversary-stake",
        type=int,
        help="ether each adversary node registers with ([devnet].adversary_stake; default the "
        "node stake): below it, the honest nodes hold most of the stake, as the rules assume",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the run with none")
    parser.add_argument("--json", type=Path, help="also write both runs' records here")
    args = parser.parse_args()
    attacked = run_devnet(args, args.adversary or ["all"], "attack")
    baseline = None if args.no_baseline else run_devnet(args, [], "baseline")
    if args.json:
        args.json.write_text(json.dumps({"attack": attacked, "baseline": baseline}, indent=1))
    print(f"model {args.model}, store {args.store}, config {args.config}, anvil block time 1 s\n")
    print_table(attacked, baseline)


if __name__ == "__main__":
    main()
