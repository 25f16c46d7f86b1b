"""`sapo devnet up --netns`: every node and its IPFS daemon in a network namespace of its own,
joined by veth links to a bridge, so that a partition is a link really taken down.

Needs root and `ip netns` (this machine's CI has both); without them the mode refuses with a
message (shown by really dropping root), and the devnet test is skipped saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from client.chain import Ledger, connect
from client.chain.events import EventReader
from client.devnet import IpfsDaemon
from client.devnet.netns import NetnsLayout, NetnsUnavailable, check
from client.node.eventlog import read_events
from client.node.journal import Journal
from client.node.view.journal import NodeView
from client.store import IpfsStore, StoreTimeout
from client.store.peers import ipfs_addresses
from client.store.weights import CHUNK, get_weights, put_weights
from tests.harness.devnets import (
    MECHANICS_ENV,
    credited_nodes,
    credited_on_chain,
    start_readme_devnet,
    stop_devnet,
)
from tests.harness.policies import cached_seed_test
from tests.harness.processes import REPO, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROUND_S = 10
ENV = dict(MECHANICS_ENV)


def namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.strip()}


def test_without_root_the_mode_is_refused_saying_why() -> None:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to drop root for real")
    probe = "from client.devnet.netns import check; check()"
    result = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )
    assert result.returncode != 0
    assert "NetnsUnavailable" in result.stderr and "needs root" in result.stderr, result.stderr


def metrics_page(url: str, timeout_s: float = 15) -> str:
    # Prometheus' own scrape time-out is 10 s; a node's first scrape reads its read model (0.3 s
    # on an idle machine, over 5 s with two devnets on two cores)
    with urllib.request.urlopen(url, timeout=timeout_s) as answer:  # noqa: S310 - a devnet address
        return answer.read().decode()


def test_a_netns_swarm_fetches_across_hosts_and_rides_out_a_real_partition(
    tmp_path: Path, seed_test: Path
):
    try:
        check()
    except NetnsUnavailable as exc:
        pytest.skip(str(exc))
    ENV["SAPO_POLICY__CACHE_DIR"] = str(cached_seed_test(seed_test, tmp_path / "policies"))
    # as README writes it, no --config: the devnet makes its namespace addresses dialable
    proc, state = start_readme_devnet(
        tmp_path / "devnet", 3, ROUND_S, "--netns", "--metrics", env=ENV
    )
    layout = NetnsLayout(**state["netns"])
    names = {layout.namespace(i) for i in range(3)}
    try:
        assert names <= namespaces()
        assert state["rpc_url"].startswith(f"http://{layout.gateway}:")
        for i, (node, daemon) in enumerate(zip(state["nodes"], state["ipfs"], strict=True)):
            assert daemon["swarm"] == f"/ip4/{layout.host(i)}/tcp/4001"
            # the node and its daemon really run in node i's namespace
            ns_inode = os.stat(f"/run/netns/{layout.namespace(i)}").st_ino
            for pid in (node["pid"], daemon["pid"]):
                assert os.stat(f"/proc/{pid}/ns/net").st_ino == ns_inode, (i, pid)
        dirs = [Path(n["data_dir"]) for n in state["nodes"]]
        addr = [n["address"].lower() for n in state["nodes"]]

        def fetched_from_producers(i: int) -> set[str]:
            rows = Journal.read_only(dirs[i] / "journal.sqlite").peers.peer_verdicts()
            return {
                v["node"] for v in rows if v["verdict"] == "verified" and v["source"] == v["node"]
            }

        wait_until(
            lambda: all(fetched_from_producers(i) == set(addr) - {addr[i]} for i in range(3)),
            timeout_s=ROUND_S * 12 + 120,
            what="every node to fetch every peer's batch from the peer's own namespace",
        )
        every = {n["address"] for n in state["nodes"]}
        ledger = Ledger(connect(state["rpc_url"]), state["ledger"])
        wait_until(
            lambda: credited_on_chain(ledger) == {a.lower() for a in every},
            timeout_s=ROUND_S * 8 + 60,
            what="every node to be credited",
        )
        assert set(credited_nodes(tmp_path / "devnet", ENV)) == every, "devnet status disagrees"
        # each node serves its metrics on its namespace's address, which this host reaches
        for i, node in enumerate(state["nodes"]):
            assert node["metrics"] == f"http://{layout.host(i)}:9464/metrics"
            assert "sapo_chain_up 1.0" in metrics_page(node["metrics"]), i

        layout.cut(0)  # node 0's link to the bridge goes down: no chain, no peers
        with pytest.raises(OSError):  # nor a scraper on this host: Prometheus would record up 0
            metrics_page(state["nodes"][0]["metrics"], timeout_s=5)
        before = [len(NodeView(d).confirmed_rounds()) for d in dirs]
        wait_until(
            lambda: any(
                e["kind"] == "chain.status" and e.get("ok") is False
                for e in read_events(dirs[0] / "events.jsonl")
            ),
            timeout_s=ROUND_S * 4,
            what="node 0 to journal that the chain is unreachable",
        )
        wait_until(
            lambda: all(len(NodeView(dirs[i]).confirmed_rounds()) >= before[i] + 2 for i in (1, 2)),
            timeout_s=ROUND_S * 6,
            what="nodes 1 and 2 to go on without node 0",
        )
        layout.heal(0)
        cut_at = len(NodeView(dirs[0]).confirmed_rounds())
        wait_until(
            lambda: len(NodeView(dirs[0]).confirmed_rounds()) >= cut_at + 2,
            timeout_s=ROUND_S * 8 + 60,
            what="node 0 to submit again once its link is back",
        )
        # its checkers vote once they can fetch the checkpoints its beacons opened (the cut may
        # have fallen between its submission and their fetch of the openings)
        wait_until(
            lambda: list(EventReader(ledger).read(["Attested"], node=addr[0])),
            timeout_s=ROUND_S * 8 + 60,
            what="node 0's checkers to attest its batches once its link is back",
        )
        votes = list(EventReader(ledger).read(["Attested"], node=addr[0]))
        assert votes and all(v.args["agrees"] for v in votes)  # never attested bad for it
    finally:
        if proc.poll() is None:
            stop_devnet(proc)
    assert not names & namespaces()  # the supervisor removed what it made
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert layout.bridge not in links


def test_a_peers_name_is_dialled_as_the_address_it_resolved_to_and_checked() -> None:
    """A name in a peer's metadata is resolved by the system's resolver and each answer checked
    like an address: here inside a namespace whose resolver answers from a hosts file of its own
    (`ip netns exec` mounts /etc/netns/NAME/hosts over /etc/hosts), a name that resolves to a
    public address is dialled as that address, not as the name (whose next answer may differ),
    and a name that resolves to a private one is refused on a public swarm."""
    try:
        check()
    except NetnsUnavailable as exc:
        pytest.skip(str(exc))
    name = f"sapo-dns-{os.getpid()}"
    etc = Path("/etc/netns") / name
    peer = "12D3KooWMc5B3DpRBc8mPmZrC3cMXpjDYCV1mQynS2GnE3jgSv2h"
    metadata = json.dumps(
        {
            "ipfs": {
                "id": peer,
                "addresses": [
                    "/dns4/node.example.org/tcp/4001",
                    "/dns4/inward.example.org/tcp/4001",
                ],
            }
        }
    )
    probe = (
        "import json, sys; from client.store.peers import peer_addresses; "
        "found = peer_addresses(sys.argv[1], allow_private=False); "
        "print(json.dumps({'dialable': found.dialable, 'refused': found.refused}))"
    )
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        etc.mkdir(parents=True)
        (etc / "hosts").write_text("8.8.4.4 node.example.org\n10.1.2.3 inward.example.org\n")
        result = subprocess.run(
            ["ip", "netns", "exec", name, sys.executable, "-c", probe, metadata],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=os.environ | {"PYTHONPATH": str(REPO)},
            timeout=60,
        )
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
        shutil.rmtree(etc, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["dialable"] == [f"/ip4/8.8.4.4/tcp/4001/p2p/{peer}"]
    assert found["refused"] == [
        [
            "/dns4/inward.example.org/tcp/4001",
            "inward.example.org resolves to 10.1.2.3, and 10.1.2.3 is private "
            "([store].allow_private_peers is off)",
        ]
    ]


def test_a_producer_that_trickles_its_checkpoint_holds_a_fetch_no_longer_than_its_deadline(
    tmp_path: Path,
) -> None:
    """A checkpoint opened for a proof is fetched block by block, each within the store's
    time-out; a producer that sends each chunk just within it would hold a checker's fetch
    worker for hours. Here the producer's IPFS daemon sits in a namespace whose link really
    sends at 1 Mbit/s (tc's token bucket on it): each 1 MiB chunk arrives within the time-out,
    and the fetch ends at its deadline ([store].min_rate_kib_s) instead of at its last chunk."""
    try:
        check()
    except NetnsUnavailable as exc:
        pytest.skip(str(exc))
    layout = NetnsLayout.plan(str(tmp_path), 2).create()
    daemons: list[IpfsDaemon] = []
    try:
        for i, name in enumerate(("producer", "checker")):
            daemon = IpfsDaemon(
                tmp_path / name, host=layout.host(i), swarm=True, wrap=layout.wrap(i)
            )
            daemons.append(daemon.start())
        producer, checker = (
            IpfsStore(d.api, index_dir=tmp_path / f"index-{i}", timeout_s=30)
            for i, d in enumerate(daemons)
        )
        data = os.urandom(3 * CHUNK)  # three chunks: ~25 s at 1 Mbit/s, each ~8.4 s
        ident = put_weights(producer, data, 1)
        bucket = ["tbf", "rate", "1mbit", "burst", "32kbit", "latency", "2s"]
        subprocess.run(
            [*layout.wrap(0), "tc", "qdisc", "add", "dev", "eth0", "root", *bucket], check=True
        )
        dialable = ipfs_addresses(producer.peer(), allow_private=True).dialable
        assert checker.connect(list(dialable))[0] is not None
        spool = tmp_path / "spool"
        spool.mkdir()
        dest = spool / "opened.f32"
        with pytest.raises(StoreTimeout, match="min_rate_kib_s") as ended:
            # a deadline of 2 s + 3 MiB at 1 MiB/s: past it after the first chunk
            get_weights(
                checker,
                ident,
                dest,
                parameters=len(data) // 4,
                min_rate=float(CHUNK),
                allowance_s=2,
            )
        assert f"of {len(data)} bytes" in str(ended.value) and " 0 of" not in str(ended.value)
        assert list(spool.iterdir()) == []  # the chunks that came were on disk, and are gone
        # without a least rate the same trickle does arrive whole: the deadline ended the fetch
        get_weights(checker, ident, dest, parameters=len(data) // 4)
        assert dest.read_bytes() == data
    finally:
        for daemon in daemons:
            daemon.stop()
        layout.destroy()
