"""Both block stores against one suite: the local directory and a real js-ipfs daemon.

Faults are real: a block file is tampered on disk (the local store's, or inside the daemon's
own repo), the daemon is stopped and restarted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import socket
import threading
import time
from pathlib import Path

import pytest

from client.devnet import IpfsDaemon, start_daemons
from client.store import (
    BatchDigestMismatch,
    BatchTooLarge,
    BlockNotFound,
    BlockStore,
    InvalidCid,
    IpfsStore,
    LocalStore,
    RecordMismatch,
    StoreTimeout,
    StoreUnavailable,
    digest_to_cid,
    fetch_batch,
    publish_batch,
)
from tests.harness.batches import LEDGER, NODE, make_batch

pytestmark = pytest.mark.slow


@pytest.fixture(params=["local", "ipfs"])
def store(request, tmp_path: Path) -> BlockStore:
    if request.param == "local":
        return LocalStore(tmp_path / "blocks", max_bytes=64 * 1024)
    daemon = request.getfixturevalue("daemon")
    return IpfsStore(daemon.api, index_dir=tmp_path, timeout_s=3, max_bytes=64 * 1024)


def test_round_trip_of_a_realistic_batch(store: BlockStore) -> None:
    batch = make_batch()
    cid, digest = publish_batch(store, batch)
    assert cid == digest_to_cid(digest) and cid.startswith("bafkrei")
    assert store.has(cid)
    fetched = fetch_batch(store, digest, chain_id=31_337, ledger=LEDGER, round_=3, node=NODE)
    assert fetched == batch
    assert store.pins.all() == {cid: 3}
    again, _ = publish_batch(store, batch)  # a retried put is harmless
    assert again == cid and store.status().pinned == 1


def test_fetch_refuses_a_batch_recorded_for_another_round(store: BlockStore) -> None:
    _, digest = publish_batch(store, make_batch(round_=3))
    with pytest.raises(RecordMismatch, match="round is 3 but the ledger record says 4"):
        fetch_batch(store, digest, chain_id=31_337, ledger=LEDGER, round_=4, node=NODE)


def test_missing_block(store: BlockStore) -> None:
    cid = digest_to_cid(hashlib.sha256(b"nobody has this").digest())
    assert not store.has(cid)
    with pytest.raises(BlockNotFound):
        store.get(cid)


def test_oversized_payloads_are_refused(store: BlockStore) -> None:
    with pytest.raises(BatchTooLarge, match="over the 65536-byte limit"):
        store.put(b"x" * (64 * 1024 + 1), round_=1)


def test_cids_of_other_codecs_or_hashes_are_refused(store: BlockStore) -> None:
    with pytest.raises(InvalidCid):
        store.get("QmRaaUwTNfwgFZpeUy8qrZwrp2dY4kCKmmB5xEqvH3vtD1")  # CIDv0, dag-pb


def test_retention_unpins_old_rounds(store: BlockStore) -> None:
    cids = {r: store.put(make_batch(round_=r).encode(), round_=r) for r in range(6)}
    dropped = store.gc(current_round=6, retain_rounds=3)  # keep rounds 3, 4, 5
    assert sorted(dropped) == sorted(cids[r] for r in range(3))
    assert set(store.pins.all()) == {cids[r] for r in range(3, 6)}
    if isinstance(store, LocalStore):
        assert not store.has(cids[0])


def test_tampered_local_block_is_caught(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    cid = store.put(make_batch().encode(), round_=3)
    path = store._path(cid)
    path.write_bytes(path.read_bytes().replace(b"basic_arithmetic", b"basic_arithmetiX"))
    with pytest.raises(BatchDigestMismatch, match=cid):
        store.get(cid)


def test_tampered_block_inside_the_daemons_repo_is_caught(
    daemon: IpfsDaemon, tmp_path: Path
) -> None:
    # A lying daemon, for real: rewrite the block in js-ipfs's own blockstore on disk.
    store = IpfsStore(daemon.api, index_dir=tmp_path, timeout_s=3)
    data = make_batch(round_=77).encode()
    cid = store.put(data, round_=77)
    files = [p for p in (daemon.repo / "blocks").rglob("*.data") if p.read_bytes() == data]
    assert files, "the block is stored in the daemon's repo"
    files[0].write_bytes(data.replace(b'"round":77', b'"round":78'))
    with pytest.raises(BatchDigestMismatch, match=cid):
        store.get(cid)


def test_the_daemons_peer_id_for_a_nodes_metadata(daemon: IpfsDaemon, tmp_path: Path) -> None:
    peer = IpfsStore(daemon.api, index_dir=tmp_path).peer()
    assert peer["id"].startswith(("12D3Koo", "Qm")) and isinstance(peer["addresses"], list)


def test_daemon_answers_the_cid_we_compute(daemon: IpfsDaemon, tmp_path: Path) -> None:
    import io

    import ipfshttpclient

    data = make_batch(round_=5).encode()
    client = ipfshttpclient.Client(daemon.api, timeout=5)
    answer = client.block.put(io.BytesIO(data), opts={"format": "raw", "mhtype": "sha2-256"})
    assert answer["Key"] == digest_to_cid(hashlib.sha256(data).digest())


def _write_blocks(root: str, worker: int) -> list[str]:
    store = LocalStore(Path(root))
    return [
        store.put(make_batch(round_=r, items=1).encode(), round_=r)
        for r in range(worker, worker + 10)
    ]


def test_concurrent_writers_share_a_local_store(tmp_path: Path) -> None:
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.starmap(_write_blocks, [(str(tmp_path), w) for w in range(4)])
    cids = {cid for batch in results for cid in batch}
    assert len(cids) == 13  # rounds 0..12, several written by two or more processes at once
    store = LocalStore(tmp_path)
    assert set(store.pins.all()) == cids
    for cid in cids:
        store.get(cid)  # every block whole and verified
    assert not list(tmp_path.rglob(".put-*")), "no temp file left behind"


def test_daemon_stopped_then_restarted(tmp_path: Path) -> None:
    daemon = IpfsDaemon(tmp_path / "d").start()
    store = IpfsStore(daemon.api, index_dir=tmp_path, timeout_s=3)
    cid = store.put(make_batch().encode(), round_=3)
    daemon.stop()
    with pytest.raises(StoreUnavailable, match="not reachable"):
        store.get(cid)
    assert store.status().reachable is False
    restarted = IpfsDaemon(tmp_path / "d").start()  # same repo, so the pinned block is still there
    try:
        store = IpfsStore(restarted.api, index_dir=tmp_path, timeout_s=3)
        assert store.get(cid) == make_batch().encode()
        assert store.status().reachable
    finally:
        restarted.stop()


def test_unwritable_local_store_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreUnavailable, match="local store"):
        LocalStore(blocker / "sub").put(b"data", round_=0)


def test_a_daemon_that_never_answers_times_out(tmp_path: Path) -> None:
    import socket

    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        store = IpfsStore(f"/ip4/127.0.0.1/tcp/{port}/http", index_dir=tmp_path, timeout_s=1)
        with pytest.raises(StoreTimeout, match="timed out after 1 s"):
            store.has(digest_to_cid(hashlib.sha256(b"x").digest()))


def test_ipfs_daemon_listens_on_loopback_only_and_dies_with_us(tmp_path: Path) -> None:
    from client.devnet import pid_alive
    from tests.harness.processes import listening_addresses

    with IpfsDaemon(tmp_path) as daemon:
        assert daemon.api.startswith("/ip4/127.0.0.1/tcp/")
        assert listening_addresses(daemon.api_port) == {"0100007F"}
        pid = daemon.pid
        config = (daemon.repo / "config").read_text()
        assert '"Bootstrap": []' in config and '"Swarm": []' in config
    assert not pid_alive(pid)


def test_putting_again_repairs_a_damaged_local_block(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    data = make_batch().encode()
    cid = store.put(data, round_=3)
    path = store._path(cid)
    path.write_bytes(data.replace(b"sapo-seed-tiny", b"sapo-seed-huge"))  # same size
    assert store.put(data, round_=3) == cid
    assert store.get(cid) == data


def test_two_daemons_on_their_own_hosts_fetch_each_others_blocks_over_bitswap(
    tmp_path: Path,
) -> None:
    """No shared blockstore: B dials A at the addresses A would publish in its metadata (as the
    node does), fetches A's block over bitswap, and can then serve it to a third daemon while A
    is gone (a fetched batch outlives its producer)."""
    import json

    from client.store.peers import ipfs_addresses, peer_addresses

    a, b, c = (
        IpfsDaemon(tmp_path / name, host=f"127.0.0.{i + 2}", swarm=True)
        for i, name in enumerate("abc")
    )
    start_daemons([a, b, c])  # as a devnet starts its daemons: at once
    try:
        stores = [
            IpfsStore(d.api, index_dir=tmp_path / f"index-{i}", timeout_s=5)
            for i, d in enumerate((a, b, c))
        ]
        data = make_batch().encode()
        cid = stores[0].put(data, round_=3)
        with pytest.raises(StoreTimeout):  # not connected: nobody gives it
            stores[1].fetch(cid)
        meta = json.dumps({"ipfs": stores[0].peer()})
        found = peer_addresses(meta, allow_private=True)
        assert found.dialable == (f"{a.swarm_address}/p2p/{found.peer_id}",)
        assert peer_addresses(meta, allow_private=False).dialable == ()  # loopback refused
        dialled, failures = stores[1].connect(list(found.dialable))
        assert dialled == found.dialable[0] and failures == []
        assert stores[1].fetch(cid) == data
        assert found.peer_id in stores[1].swarm_peers()
        stores[1].pin(cid, round_=3)

        a.stop()  # the producer leaves; B, which pinned it, still serves it
        b_addresses = ipfs_addresses(stores[1].peer(), allow_private=True)
        dead, failures = stores[2].connect([f"{a.swarm_address}/p2p/{found.peer_id}"], 2.0)
        assert dead is None and a.swarm_address in failures[0]
        assert stores[2].connect(list(b_addresses.dialable))[0] is not None
        assert stores[2].fetch(cid) == data
    finally:
        for daemon in (a, b, c):
            daemon.stop()


def test_a_restarted_daemon_listens_where_it_did(tmp_path: Path) -> None:
    """Its node's config (the API) and its peers' view of it (the swarm address on chain) stay
    right across a restart, even one after a hard kill."""
    first = IpfsDaemon(tmp_path, host="127.0.0.5", swarm=True).start()
    api, swarm = first.api, first.swarm_address
    assert swarm is not None and swarm.startswith("/ip4/127.0.0.5/tcp/")
    first._server._proc.kill()  # SIGKILL: its lock is left behind
    first.stop()
    again = IpfsDaemon(tmp_path, host="127.0.0.5", swarm=True).start()
    try:
        assert (again.api, again.swarm_address) == (api, swarm)
    finally:
        again.stop()


def test_a_port_taken_while_the_daemon_starts_is_picked_again(tmp_path: Path) -> None:
    """Another devnet's daemon on the same loopback host can bind a port in the seconds between
    our pick and our daemon's bind (two test workers' devnets did: EADDRINUSE, and the devnet
    failed to start). Here a listener takes the daemon's RPC port (where the race hit) as soon as
    it is written to the repo's config; the daemon starts on ports picked again."""
    host = "127.0.0.6"
    config = tmp_path / "ipfs" / "config"
    taken: list[socket.socket] = []

    def take_the_rpc_port() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, KeyError):
                rpc = json.loads(config.read_text())["Addresses"]["RPC"]
                if rpc.startswith(f"/ip4/{host}/"):
                    listener = socket.socket()
                    listener.bind((host, int(rpc.rsplit("/", 1)[1])))
                    listener.listen()
                    taken.append(listener)
                    return
            time.sleep(0.005)

    thief = threading.Thread(target=take_the_rpc_port)
    thief.start()
    try:
        daemon = IpfsDaemon(tmp_path, host=host).start()
        thief.join()
        try:
            assert taken, "the listener never took the daemon's port"
            port = taken[0].getsockname()[1]
            rpc = json.loads(config.read_text())["Addresses"]["RPC"]
            assert rpc != f"/ip4/{host}/tcp/{port}"
            assert "EADDRINUSE" in (tmp_path / "ipfs.log").read_text()
            assert IpfsStore(daemon.api, index_dir=tmp_path).put(b"still works", 0)
        finally:
            daemon.stop()
    finally:
        thief.join()
        for listener in taken:
            listener.close()
