"""What sharing a base costs (issue 41): one node pins its model's base as a `sapo.base/1`
bundle, a newcomer of its family fetches it from that node over IPFS and checks it, with the
client's own code (client.policy.base, client.store.base) on real js-ipfs daemons, each on its
own loopback address (bitswap between them, as between two hosts' daemons).

Printed, per model: its parameters and base bytes (float32), the bundle's size, and seconds (and
MB/s of base) for each step: hashing the base into its bundle id (what `sapo policy id --bundle`
and every sharing node's start do); pinning it on the producer's daemon; fetching it on a
newcomer's (dialled as its metadata names it; every block checked; written as
model.safetensors), once asking for one block at a time and once for the node's IN_FLIGHT at
once, each newcomer with a daemon of its own; and loading and checking the fetched model (its
base id must be the family's again). The last column is the peak resident memory of this one
process, which does all of it: a fetch holds a block a request in flight, a publish one
parameter and one block.

A model is a policy directory: `python -m scripts.bench_cost --save DIR --shape 0.5b` writes a
random-init one of Qwen2.5-0.5B's shape (nothing is downloaded); the default is the seed-test
policy, built if absent. Figures are wall-clock on this machine (js-ipfs 0.66 over loopback; kubo
is faster) and vary with load.
Usage: python -m scripts.bench_base [--model DIR ...] [--in-flight 1,8]
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

from client.devnet import IpfsDaemon
from client.node.bases import IN_FLIGHT
from client.policy import SeedSpec, ensure_seed_policy, load_policy
from client.policy.adapter import base_id
from client.policy.base import bundle_of, load_fetched, publish
from client.store import IpfsStore
from client.store.base import fetch_base, fetch_bundle
from client.store.peers import ipfs_addresses
from scripts import arguments
from scripts.table import Table


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.1f} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1000
    return f"{n:.1f} TB"


def bench(model: Path, work: Path, in_flight: list[int]) -> list[dict]:
    policy = load_policy(model, device="cpu", dtype="float32")
    size = 4 * sum(p.numel() for _, p in _base(policy))
    started = time.perf_counter()
    bundle = bundle_of(policy)
    hashed = time.perf_counter() - started
    daemons = [IpfsDaemon(work / "a", host="127.0.0.2", swarm=True).start()]
    rows = []
    try:
        producer = IpfsStore(daemons[0].api, index_dir=work / "index-a", timeout_s=30)
        started = time.perf_counter()
        published = publish(producer, policy)
        pinned = time.perf_counter() - started
        assert published.id() == bundle.id()
        del policy  # a newcomer has no copy of it
        found = ipfs_addresses(producer.peer(), allow_private=True)
        for i, n in enumerate(in_flight):
            # each newcomer its own daemon: nothing of the base is in it yet
            daemon = IpfsDaemon(work / f"n{i}", host=f"127.0.0.{3 + i}", swarm=True).start()
            daemons.append(daemon)
            clients = [
                IpfsStore(daemon.api, index_dir=work / f"index-n{i}", timeout_s=30)
                for _ in range(n)
            ]
            assert clients[0].connect(list(found.dialable))[0] is not None, "no connection"
            started = time.perf_counter()
            fetched = fetch_bundle(clients[0], bundle.id())
            fetch_base(clients[0], fetched, work / f"fetched-{i}", helpers=clients[1:])
            fetch_s = time.perf_counter() - started
            started = time.perf_counter()
            loaded = load_fetched(work / f"fetched-{i}", fetched)
            check_s = time.perf_counter() - started
            assert base_id(loaded.model) == bundle.weights
            del loaded
            daemon.stop()
            rows.append(
                {
                    "model": model.name,
                    "parameters": size // 4,
                    "bytes": size,
                    "bundle": len(bundle.encode()),
                    "hash": hashed,
                    "pin": pinned,
                    "in_flight": n,
                    "fetch": fetch_s,
                    "check": check_s,
                    "peak": peak_rss(),
                }
            )
    finally:
        for daemon in daemons:
            daemon.stop()
    return rows


def _base(policy):
    from client.policy.adapter import base_parameters

    return base_parameters(policy.model)


def main() -> int:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument(
        "--model",
        action="append",
        type=Path,
        help="a policy directory (repeatable; default: the seed-test policy)",
    )
    parser.add_argument(
        "--in-flight",
        default=f"1,{IN_FLIGHT}",
        help=f"blocks a newcomer asks for at once, one newcomer each (default 1,{IN_FLIGHT}: "
        "one at a time, and the node's own setting)",
    )
    args = parser.parse_args()
    in_flight = [int(n) for n in args.in_flight.split(",") if n.strip()]
    if not in_flight or min(in_flight) < 1:
        parser.error("--in-flight: counts of at least 1, e.g. 1,8")
    models = args.model or [ensure_seed_policy(Path(".sapo/policies"), SeedSpec.tiny_test())]
    for model in models:
        if not (model / "config.json").is_file():
            parser.error(f"{model} is not a policy directory (no config.json)")
    rows = []
    for model in models:
        with tempfile.TemporaryDirectory(prefix="sapo-bench-base-") as tmp:
            rows.extend(bench(model, Path(tmp), in_flight))
            print(f"{model}: done", file=sys.stderr, flush=True)
    sizes = ("base (float32)", "bundle", "peak memory")  # "1.2 MB"
    times = ("hash", "pin on producer", "fetch on newcomer", "load and check")  # "0.4 s (…)"
    table = Table(
        *("model", "parameters", "base (float32)", "bundle", "hash", "pin on producer"),
        *("blocks in flight", "fetch on newcomer", "load and check", "peak memory"),
        right=sizes + times,
    )
    for r in rows:
        rate = r["bytes"] / 1e6

        def cell(seconds: float, rate: float = rate) -> str:
            return f"{seconds:.1f} s ({rate / seconds:.0f} MB/s)"

        table.row(
            r["model"],
            r["parameters"],
            human(r["bytes"]),
            human(r["bundle"]),
            cell(r["hash"]),
            cell(r["pin"]),
            r["in_flight"],
            cell(r["fetch"]),
            f"{r['check']:.1f} s",
            human(r["peak"]),
        )
    print(table.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
