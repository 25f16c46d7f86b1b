"""Bases over IPFS (issue 41): a node joins a model family without the base on its disk.

A node that trains an adapter pins its base as a `sapo.base/1` bundle and names the bundle in its
on-chain metadata; a newcomer whose `[policy].base` names that bundle finds the nodes that pin it
through the ledger, dials them, fetches every block checked against its hash, checks the loaded
model against the family id, caches it and pins it in turn. On real js-ipfs daemons, each on its
own loopback host, and a real anvil ledger; the faults are real (a daemon stopped, a block that is
not there, a bundle whose parts disagree)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from client.cli.main import app
from client.config import load_config, with_sections
from client.devnet import IpfsDaemon
from client.node.assemble import NodeConfigError, base_policy_path
from client.node.bases import cached_base, share_base
from client.node.doctor import Preflight
from client.node.metadata import node_metadata
from client.policy import adapt, load_policy
from client.policy.adapter import AdapterSpec, base_id
from client.policy.base import base_pieces, base_tensors, bundle_of, load_fetched, source_files
from client.policy.policy import tokenizer_fingerprint
from client.store import IpfsStore, LocalStore, StoreError
from client.store.base import (
    BaseError,
    decode_bundle,
    describe,
    fetch_base,
    fetch_bundle,
    publish_base,
    safetensors_header,
)
from client.store.cid import digest_to_cid
from client.store.errors import SpoolError
from tests.harness.ledger_swarm import ETH, Swarm
from tests.harness.policies import copied_seed_test
from tests.harness.processes import REPO

LORA = AdapterSpec(rank=4, alpha=8)


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory, seed_test: Path) -> Path:
    return copied_seed_test(seed_test, tmp_path_factory.mktemp("base") / "seed-test")


def node_config(tmp: Path, *, model: str, base: str, api: str, rpc: str | None, ledger: str | None):
    return with_sections(
        load_config(REPO / "configs" / "devnet.toml"),
        policy={"model": model, "base": base, "cache_dir": tmp / "cache", "adapter": "lora"},
        store={
            "backend": "ipfs",
            "ipfs_api": api,
            "store_dir": tmp / "blocks",
            "allow_private_peers": True,
            "timeout_s": 5.0,
        },
        chain={"rpc_url": rpc, "ledger_address": ledger, "chain_id": 31_337},
    )


def test_a_newcomer_fetches_a_base_from_its_family_checks_it_and_serves_it_in_turn(
    tmp_path: Path, base_dir: Path, chain
) -> None:
    producer = adapt(load_policy(base_dir, device="cpu", dtype="float32"), LORA)
    family = producer.base
    a = IpfsDaemon(tmp_path / "a", host="127.0.0.2", swarm=True).start()
    b = IpfsDaemon(tmp_path / "b", host="127.0.0.3", swarm=True).start()
    c = IpfsDaemon(tmp_path / "c", host="127.0.0.4", swarm=True).start()
    try:
        swarm = Swarm(chain, families=[family])
        # node A runs the family's base with an adapter: it shares the base as a node does at start
        a_cfg = node_config(
            tmp_path / "node-a", model=str(base_dir), base=None, api=a.api, rpc=None, ledger=None
        )
        a_store = IpfsStore(a.api, index_dir=tmp_path / "node-a" / "blocks", timeout_s=5)
        bundle_id = share_base(a_cfg, a_store, producer)
        assert bundle_id == bundle_of(producer).id()
        metadata = node_metadata(a_cfg, a_store, base=bundle_id)
        assert json.loads(metadata)["base"] == bundle_id
        swarm.bind(swarm.account()).register(metadata, 2 * ETH, family)

        # node B has no copy of it: [policy].model names nothing on this machine
        b_cfg = node_config(
            tmp_path / "node-b",
            model=str(tmp_path / "not-here"),
            base=bundle_id,
            api=b.api,
            rpc=swarm.url,
            ledger=swarm.ledger.address,
        )
        # the preflight says the base will be fetched, and from how many nodes; it fetches nothing
        check = Preflight(b_cfg).model()
        assert check.ok and check.warning and "from the 1 registered node(s)" in check.detail
        said: list[str] = []
        path = base_policy_path(b_cfg, say=said.append)
        check = Preflight(b_cfg).model()
        assert check.ok and not check.warning and f"base {bundle_id[:12]}" in check.detail
        assert path == cached_base(b_cfg, bundle_id)
        assert any("fetching base" in line and "not at hand" in line for line in said), said
        fetched = load_policy(path, device="cpu", dtype="float32")
        assert base_id(fetched.model) == family  # the same family: its checkers prove its batches
        assert tokenizer_fingerprint(fetched.tokenizer) == tokenizer_fingerprint(producer.tokenizer)
        assert bundle_of(fetched).id() == bundle_id  # byte for byte the bundle named
        b_store = IpfsStore(b.api, index_dir=tmp_path / "node-b" / "blocks", timeout_s=5)
        bundle = fetch_bundle(b_store, bundle_id, network=False)
        # B pinned every block it fetched: it serves the base in turn
        pinned = set(json.loads((tmp_path / "node-b" / "blocks" / "ipfs-pins.json").read_text()))
        assert digest_to_cid(bundle_id) in pinned and len(pinned) >= 2 + len(bundle.files)

        # A leaves. B starts again from its cache, without the network; and C, the family's
        # next node, fetches the base from B, which names it in its metadata
        a.stop()
        assert base_policy_path(b_cfg) == path
        swarm.bind(swarm.account()).register(
            node_metadata(b_cfg, b_store, base=bundle_id), 2 * ETH, family
        )
        c_cfg = node_config(
            tmp_path / "node-c",
            model=str(tmp_path / "not-here"),
            base=bundle_id,
            api=c.api,
            rpc=swarm.url,
            ledger=swarm.ledger.address,
        )
        assert base_id(load_policy(base_policy_path(c_cfg), device="cpu").model) == family

        # D names the bundle, but every node that had it is gone: one line says what was
        # tried and what to do, and nothing is left in its cache
        b.stop()
        c.stop()
        d = IpfsDaemon(tmp_path / "d", host="127.0.0.5", swarm=True).start()
        try:
            d_cfg = node_config(
                tmp_path / "node-d",
                model=str(tmp_path / "not-here"),
                base=bundle_id,
                api=d.api,
                rpc=swarm.url,
                ledger=swarm.ledger.address,
            )
            with pytest.raises(NodeConfigError) as refused:
                base_policy_path(d_cfg)
            message = str(refused.value)
            assert "could not be fetched" in message and "2 registered node(s) name it" in message
            assert "0 answered" in message and "[policy].model" in message
            assert not list((tmp_path / "node-d" / "cache" / "bases").glob("[0-9a-f]*"))
        finally:
            d.stop()
    finally:
        for daemon in (a, b, c):
            daemon.stop()


def test_a_configured_model_that_is_the_bundle_is_used_as_it_is(tmp_path: Path, base_dir: Path):
    bundle_id = bundle_of(load_policy(base_dir, device="cpu")).id()
    cfg = node_config(
        tmp_path,
        model=str(base_dir),
        base=bundle_id,
        api="/ip4/127.0.0.1/tcp/9/http",
        rpc=None,
        ledger=None,
    )
    # no store, no chain: nothing is fetched when the model at hand is the base named
    assert Path(base_policy_path(cfg)) == base_dir
    # another base named, nobody to fetch it from: refused, saying which bundle the model is
    other = "0x" + "ab" * 32
    cfg = with_sections(cfg, policy={"base": other}, store={"backend": "local"})
    with pytest.raises(NodeConfigError) as refused:
        base_policy_path(cfg)
    assert f"is bundle {bundle_id[:12]}" in str(refused.value)
    check = Preflight(cfg).model()
    assert check.ok is False and f"is base bundle {bundle_id[:12]}" in check.detail
    assert "[policy].model" in check.fix
    # what an operator copies into [policy].base
    printed = CliRunner().invoke(app, ["policy", "id", str(base_dir), "--bundle"])
    assert printed.exit_code == 0 and printed.stdout.strip() == bundle_id


def test_a_bundle_whose_parts_disagree_is_refused_and_leaves_nothing(
    tmp_path: Path, base_dir: Path
) -> None:
    policy = load_policy(base_dir, device="cpu", dtype="float32")
    files, tensors = source_files(policy.source), base_tensors(policy.model)
    store = LocalStore(tmp_path / "store")
    honest = publish_base(store, files, tensors, base_pieces(policy.model))
    dest = tmp_path / "fetched"

    # another config is another bundle: [policy].base pins the config as well as the weights
    config = json.loads(files["config.json"])
    config["rope_theta"] = config.get("rope_theta", 10_000) * 2
    changed = describe(
        files | {"config.json": json.dumps(config).encode()}, tensors, base_pieces(policy.model)
    )
    assert changed.weights == honest.weights and changed.id() != honest.id()

    # a bundle naming the family's id over another model's weights: the manifest is not the id
    other = load_policy(base_dir, device="cpu", dtype="float32")
    with __import__("torch").no_grad():
        next(iter(other.model.parameters())).add_(1.0)
    forged = publish_base(store, files, tensors, base_pieces(other.model))
    lying = forged.model_copy(update={"weights": honest.weights})
    with pytest.raises(BaseError, match="manifest is not base"):
        fetch_base(store, lying, dest, network=False)
    assert not dest.exists() and not dest.with_name("fetched.part").exists()

    # tensors whose shapes were swapped (the same bytes, the same count): the model does not
    # load them as the bundle says, or loads another id
    i = next(i for i, (_, s) in enumerate(tensors) if len(s) == 2 and s[0] != s[1])
    swapped = list(tensors)
    swapped[i] = (swapped[i][0], tuple(reversed(swapped[i][1])))
    reshaped = publish_base(store, files, swapped, base_pieces(policy.model))
    fetch_base(store, reshaped, dest, network=False)
    with pytest.raises(BaseError):
        load_fetched(dest, reshaped)
    shutil.rmtree(dest)

    # blocks fetched three at a time are written in order; a block the store does not have
    # fails the fetch with the store's error and leaves nothing behind (a synthetic base of 7
    # blocks: the seed-test's fits in one)
    rng = __import__("random").Random(7)
    data = rng.randbytes(4 * (1024 * 1024 + 700 * 1000))
    shapes = [("a.weight", (1024, 1024)), ("b.weight", (700, 1000))]
    big = publish_base(store, {"config.json": b"{}"}, shapes, [data[:1000], data[1000:]])
    clients = [LocalStore(tmp_path / "store") for _ in range(3)]
    fetch_base(clients[0], big, dest, network=False, helpers=clients[1:])
    written = (dest / "model.safetensors").read_bytes()
    assert written.endswith(data) and written[: -len(data)] == safetensors_header(big.tensors)
    shutil.rmtree(dest)
    raw = b"".join(store.get(digest_to_cid(d)) for d in big.manifest.chunks)
    chunks = json.loads(raw)["chunks"]
    assert len(chunks) == 7
    partial = tmp_path / "partial"
    shutil.copytree(tmp_path / "store", partial)
    next(partial.rglob(digest_to_cid(chunks[4]))).unlink()
    clients = [LocalStore(partial) for _ in range(3)]
    with pytest.raises(StoreError, match="not in the local store"):
        fetch_base(clients[0], big, dest, network=False, helpers=clients[1:])
    assert not dest.exists() and not dest.with_name("fetched.part").exists()

    # a disk without room for the base: refused before a block is fetched, saying how much
    # (a real filesystem of 64 KiB: tmpfs, mounted as root)
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)], check=True)
    try:
        with pytest.raises(SpoolError, match="GB free: free space there"):
            fetch_base(store, honest, small / "base", network=False)
        assert list(small.iterdir()) == []
    finally:
        subprocess.run(["umount", str(small)], check=True)

    # what a bundle may not say: a file outside config and tokenizer (code), a path
    document = json.loads(honest.encode())
    for name in ("modeling_evil.py", "../config.json"):
        document["files"][name] = document["files"]["config.json"]
        text = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
        with pytest.raises(BaseError, match="files a base does not carry"):
            decode_bundle(text)
        del document["files"][name]
    with pytest.raises(BaseError, match="not a parameter name"):  # a model it cannot carry
        describe(files, [("bad-name", (2,))], [b"\0" * 8])
    with pytest.raises(BaseError, match="canonical"):
        decode_bundle(json.dumps(document, indent=1).encode())
