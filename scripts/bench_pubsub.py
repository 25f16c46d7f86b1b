"""What the root lane's vote relay ([root_lane].relay_votes, client.node.publishing.relay) costs
and delivers, on real js-ipfs daemons through kubo's pubsub RPC (client.store.pubsub).

For pubsub off (a daemon as a devnet ran it before the relay) and on: two daemons on their own
loopback addresses, connected as a checker's daemon is to the producer's it fetched from; with
pubsub on, the second subscribed to a producer's topic. Printed:
1. the CPU of each daemon over --idle seconds with nothing published (gossipsub's heartbeat is
   what pubsub adds to an idle daemon);
2. with pubsub on, --messages relay-sized messages (a signed vote and its receipt, ~1.1 KB)
   published by the first daemon, one every --every seconds: how many arrived, and the latency
   from publish to the subscriber's read (p50, p95, max), and the publisher's CPU per message.

Figures are wall-clock and CPU on this machine and vary with its load.
Usage: python -m scripts.bench_pubsub [--idle 60] [--messages 200] [--every 0.05]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from client.devnet import IpfsDaemon, start_daemons
from client.store import IpfsStore
from client.store.pubsub import PubSub, PubSubRefused
from scripts import arguments
from scripts.table import Table

TOPIC = "sapo/votes/1/31337/0x" + "b0" * 20 + "/0x" + "ab" * 20
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its waited-for children (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / TICKS


def listen(sub: PubSub, stop: threading.Event, arrived: list[float]) -> None:
    """Appends each message's latency (its payload starts with the time it was sent)."""
    for data in sub.subscribe(TOPIC, stop):
        arrived.append(time.time() - float(data.split(b" ", 1)[0]))


def pair(root: Path, pubsub: bool) -> tuple[IpfsDaemon, IpfsDaemon]:
    daemons = (
        IpfsDaemon(root / "a", host="127.0.0.2", swarm=True, pubsub=pubsub),
        IpfsDaemon(root / "b", host="127.0.0.3", swarm=True, pubsub=pubsub),
    )
    start_daemons(daemons)
    a, b = daemons
    peer = IpfsStore(b.api, root / "pins-b").peer()
    connected, _ = IpfsStore(a.api, root / "pins-a").connect(
        [f"{b.swarm_address}/p2p/{peer['id']}"]
    )
    if not connected:
        raise SystemExit("bench_pubsub: the two daemons did not connect")
    return a, b


def main() -> int:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle CPU measured")
    parser.add_argument("--messages", type=int, default=200, help="messages published")
    parser.add_argument("--every", type=float, default=0.05, help="seconds between messages")
    args = parser.parse_args()
    if args.idle <= 0 or args.messages < 1 or args.every < 0:
        parser.error("--idle must be > 0, --messages >= 1, --every >= 0")
    idle = Table(
        "pubsub", "daemon", "CPU s idle", "CPU %", formats={"CPU s idle": ".2f"}, right=["CPU %"]
    )
    delivery = Table("messages", "arrived", "p50 ms", "p95 ms", "max ms", "publisher CPU ms/msg")
    for on in (False, True):
        with tempfile.TemporaryDirectory(prefix="sapo-bench-pubsub-") as tmp:
            a, b = pair(Path(tmp), on)
            stop = threading.Event()
            arrived: list[float] = []
            try:
                if on:
                    args_ = (PubSub(b.api), stop, arrived)
                    threading.Thread(target=listen, args=args_, daemon=True).start()
                time.sleep(5)  # settle: the subscription known, the first heartbeats passed
                pids = {"publisher": a._server.pid, "subscriber": b._server.pid}
                before = {k: cpu_s(p) for k, p in pids.items()}
                time.sleep(args.idle)
                for name, pid in pids.items():
                    used = cpu_s(pid) - before[name]
                    idle.row("on" if on else "off", name, used, f"{100 * used / args.idle:.1f}%")
                if not on:
                    continue
                pub = PubSub(a.api)
                pad = b"x" * 1000  # a signed vote and its receipt, hex in JSON
                started = cpu_s(pids["publisher"])
                for _ in range(args.messages):
                    for _attempt in range(50):
                        try:
                            pub.publish(TOPIC, f"{time.time():.6f} ".encode() + pad)
                            break
                        except PubSubRefused:
                            time.sleep(0.1)  # the subscription not known yet
                    time.sleep(args.every)
                spent = cpu_s(pids["publisher"]) - started
                time.sleep(3)  # the last ones in flight
                ms = sorted(1000 * x for x in arrived)
                delivery.row(
                    args.messages,
                    len(ms),
                    statistics.median(ms) if ms else None,
                    ms[int(0.95 * (len(ms) - 1))] if ms else None,
                    ms[-1] if ms else None,
                    1000 * spent / args.messages,
                )
            finally:
                stop.set()
                a.stop()
                b.stop()
    print(f"idle CPU of a connected daemon pair over {args.idle:.0f} s")
    idle.print()
    print(f"\nrelay-sized messages, one every {args.every} s (pubsub on)")
    delivery.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
