"""Benchmark of the rollout store.

1. Put and verified get of 64 KiB and 512 KiB batches, on both backends: the local directory
   blockstore and a real js-ipfs daemon on loopback.
2. Peer batches across daemons, as nodes fetch them: --daemons js-ipfs daemons, each on its own
   loopback address with a swarm listener; every round each producer pins a batch, and every
   other daemon fetches it with client.store.fetch_from_peers (dial the producer at the
   addresses its metadata would name, fetch over bitswap; else the peers who already have it),
   in a random order. Printed: the fetch time (p50, p95) and the share of the round's peer
   batches fetched, with all daemons up, and with producer 0's daemon killed after it
   published and one peer fetched its batch.

Daemons are started here and stopped at the end. Figures are wall-clock on this machine and
vary with load. Usage: python -m scripts.bench_store [--repeats N] [--daemons 4 --rounds 10]
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from client.devnet import IpfsDaemon
from client.store import (
    IpfsStore,
    LocalStore,
    StoreError,
    decode_batch,
    digest_to_cid,
    fetch_from_peers,
)
from client.store.peers import ipfs_addresses
from scripts import arguments
from scripts.table import Table
from tests.harness.batches import LEDGER, batch_of_size, make_batch


def measure(store, data: bytes, repeats: int) -> tuple[list[float], list[float]]:
    puts, gets = [], []
    for i in range(repeats):
        # a distinct block each time (different round), so no put is a no-op
        blob = data.replace(b'"round":3', f'"round":{1000 + i}'.encode(), 1)
        began = time.perf_counter()
        cid = store.put(blob, round_=1000 + i)
        puts.append(time.perf_counter() - began)
        began = time.perf_counter()
        fetched = store.get(cid)
        decode_batch(fetched)
        gets.append(time.perf_counter() - began)
        assert cid == digest_to_cid(__import__("hashlib").sha256(blob).digest())
    return puts, gets


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def swarm(work: Path, daemons: int, rounds: int, kill_at: int | None) -> dict:
    """Runs the peer-fetch rounds (see the module doc); returns fetch times and shares."""
    rng = random.Random(7)
    hosts = [
        IpfsDaemon(work / f"d{i}", host=f"127.0.0.{i + 2}", swarm=True) for i in range(daemons)
    ]
    for daemon in hosts:
        daemon.start()
    try:
        stores = [
            IpfsStore(d.api, index_dir=work / f"index{i}", timeout_s=5) for i, d in enumerate(hosts)
        ]
        names = [f"0x{i + 1:040x}" for i in range(daemons)]
        addresses = [ipfs_addresses(s.peer(), allow_private=True) for s in stores]
        alive = set(range(daemons))
        times, shares = [], []
        for round_ in range(rounds):
            wanted = got = 0
            for p in sorted(alive):
                batch = make_batch(round_=round_, node=names[p], items=8, text="x" * 400)
                stores[p].put(batch.encode(), round_)
                have = [p]  # who holds it: the producer, then each peer that fetched it
                fetchers = [f for f in alive if f != p]
                rng.shuffle(fetchers)
                for n, f in enumerate(fetchers):
                    if kill_at is not None and round_ == kill_at and p == 0 and n == 1:
                        hosts[0].stop()  # producer 0 leaves after one peer fetched its batch
                        alive.discard(0)
                    wanted += 1
                    sources = [(names[h], addresses[h]) for h in have]
                    began = time.perf_counter()
                    try:
                        fetch_from_peers(
                            stores[f],
                            batch.digest(),
                            sources,
                            connect_timeout_s=2.0,
                            chain_id=31_337,
                            ledger=LEDGER,
                            round_=round_,
                            node=names[p],
                        )
                    except StoreError:
                        continue
                    times.append(time.perf_counter() - began)
                    got += 1
                    have.append(f)
            shares.append(got / wanted if wanted else 1.0)
        # what a peer whose metadata names dead addresses costs a fetcher each time it tries
        dead = {}
        for label, listed in (
            ("refused (nothing listens)", ["/ip4/127.0.0.250/tcp/9", "/ip4/127.0.0.251/tcp/9"]),
            ("black-holed (TEST-NET-1)", ["/ip4/192.0.2.1/tcp/4001", "/ip4/192.0.2.2/tcp/4001"]),
        ):
            meta = {"ipfs": {"id": stores[1].peer()["id"][:-4] + "Zzzz", "addresses": listed}}
            ghost = make_batch(round_=rounds, node=names[0], items=8, text="ghost")
            began = time.perf_counter()
            try:
                fetch_from_peers(
                    stores[1],
                    ghost.digest(),
                    [("dead", ipfs_addresses(meta["ipfs"], allow_private=True))],
                    connect_timeout_s=2.0,
                    chain_id=31_337,
                    ledger=LEDGER,
                    round_=rounds,
                    node=names[0],
                )
            except StoreError:
                dead[label] = time.perf_counter() - began
        return {"times": times, "shares": shares, "dead": dead}
    finally:
        for daemon in hosts:
            daemon.stop()


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--daemons", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-store-"))
    sizes = {"64 KiB": 64 * 1024, "512 KiB": 512 * 1024}
    rows = []
    with IpfsDaemon(work / "ipfs") as daemon:
        stores = {
            "local": LocalStore(work / "local"),
            "ipfs (js-ipfs)": IpfsStore(daemon.api, index_dir=work, timeout_s=30),
        }
        for label, target in sizes.items():
            data = batch_of_size(target).encode()
            for name, store in stores.items():
                puts, gets = measure(store, data, args.repeats)
                mib = len(data) / (1 << 20)
                rows.append(
                    (
                        name,
                        label,
                        len(data),
                        statistics.median(puts) * 1e3,
                        statistics.median(gets) * 1e3,
                        mib / statistics.median(puts),
                        mib / statistics.median(gets),
                    )
                )
    print(
        f"Rollout store, {args.repeats} puts and verified gets per row (median; get includes "
        "sha256 check and schema decode)\n"
    )
    table = Table(
        *("backend", "batch", "bytes", "put ms", "get ms", "put MiB/s", "get MiB/s"),
        float_format=",.1f",
    )
    for row in rows:
        table.row(*row)
    print(table.render())
    print(
        f"\nPeer batches across {args.daemons} js-ipfs daemons (each its own 127.0.0.N), "
        f"{args.rounds} rounds; a fetch = dial + bitswap + sha256 check + decode\n"
    )
    fetched = "batches fetched per round (min, mean)"
    table = Table(
        *("scenario", "fetches", "p50 ms", "p95 ms", fetched),
        float_format=",.1f",
        right=("fetches", "p50 ms", "p95 ms"),
    )
    print(table.header(), flush=True)  # then a row as each scenario is measured
    dead = {}
    for label, kill_at in (
        ("all daemons up", None),
        ("producer 0 killed after publishing", args.rounds // 2),
    ):
        result = swarm(work / label.split()[0], args.daemons, args.rounds, kill_at)
        dead = result["dead"]
        times = [t * 1e3 for t in result["times"]]
        shares = result["shares"]
        line = table.line(
            label,
            len(times),
            percentile(times, 0.5),
            percentile(times, 0.95),
            f"{min(shares):.0%}, {sum(shares) / len(shares):.1%}",
        )
        print(line, flush=True)
    give_up = "seconds to give up"
    table = Table("dead addresses", give_up, float_format=",.1f", right=(give_up,))
    for label, seconds in dead.items():
        table.row(label, seconds)
    table.print(
        "A producer whose metadata names dead addresses: what one fetch attempt costs before "
        "it gives up (2 addresses dialled, 2 s connect time-out, then the daemon is asked "
        "anyway within the store's 5 s time-out)"
    )


if __name__ == "__main__":
    main()
