"""`sapo store put|get|status` as an operator uses them, on both backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from client.cli.main import app
from client.devnet import free_loopback_port
from tests.harness.batches import make_batch

pytestmark = pytest.mark.slow


@pytest.fixture(params=["local", "ipfs"])
def backend(request, tmp_path: Path) -> list[str]:
    if request.param == "local":
        return ["--store", "local", "--store-dir", str(tmp_path / "store")]
    daemon = request.getfixturevalue("daemon")
    return ["--store", "ipfs", "--ipfs-api", daemon.api, "--store-dir", str(tmp_path / "idx")]


def test_put_get_status(cli: CliRunner, backend: list[str], tmp_path: Path) -> None:
    batch_file = tmp_path / "batch.json"
    batch_file.write_bytes(make_batch(round_=9).encode())
    result = cli.invoke(app, ["store", "put", str(batch_file), *backend, "--json"])
    assert result.exit_code == 0, result.output
    put = json.loads(result.stdout)
    assert (
        put["cid"].startswith("bafkrei")
        and put["digest"] == "0x" + make_batch(round_=9).digest().hex()
    )

    out = tmp_path / "copy.json"
    result = cli.invoke(app, ["store", "get", put["cid"], "-o", str(out), *backend])
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == batch_file.read_bytes()
    assert "round 9" in result.output and "32 rollouts" in result.output
    by_digest = cli.invoke(app, ["store", "get", put["digest"], "-o", str(out), *backend])
    assert by_digest.exit_code == 0, by_digest.output

    result = cli.invoke(app, ["store", "status", *backend, "--json"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)
    assert status["reachable"] and status["pinned"] == 1 and status["pinned_bytes"] > 0


def test_bad_batches_and_cids_fail_clearly(cli: CliRunner, backend: list[str], tmp_path: Path):
    junk = tmp_path / "junk.json"
    junk.write_text('{"schema": "sapo.rollouts/4", "round": 1}')
    result = cli.invoke(app, ["store", "put", str(junk), *backend])
    assert result.exit_code == 1 and "chain_id: Field required" in result.output
    raw = cli.invoke(app, ["store", "put", str(junk), "--raw", *backend])
    assert raw.exit_code == 0, raw.output
    result = cli.invoke(app, ["store", "get", "not-a-cid", "-o", str(tmp_path / "o"), *backend])
    assert result.exit_code == 2 and "not a CID" in result.output
    assert not (tmp_path / "o").exists()


def test_tampered_local_block_exits_1_and_writes_nothing(cli: CliRunner, tmp_path: Path) -> None:
    store = ["--store", "local", "--store-dir", str(tmp_path / "s")]
    batch_file = tmp_path / "b.json"
    batch_file.write_bytes(make_batch().encode())
    cid = json.loads(cli.invoke(app, ["store", "put", str(batch_file), *store, "--json"]).stdout)[
        "cid"
    ]
    block = next((tmp_path / "s" / "blocks").rglob(cid))
    block.write_bytes(block.read_bytes().replace(b"sapo-seed-tiny", b"sapo-seed-huge"))
    out = tmp_path / "out.json"
    result = cli.invoke(app, ["store", "get", cid, "-o", str(out), *store])
    assert result.exit_code == 1 and "tampered block or lying store" in result.output
    assert not out.exists()


def test_unreachable_daemon(cli: CliRunner, tmp_path: Path) -> None:
    api = f"/ip4/127.0.0.1/tcp/{free_loopback_port()}/http"
    store = ["--store", "ipfs", "--ipfs-api", api, "--store-dir", str(tmp_path)]
    result = cli.invoke(app, ["store", "status", *store])
    assert result.exit_code == 1 and "UNREACHABLE" in result.output
    batch_file = tmp_path / "b.json"
    batch_file.write_bytes(make_batch().encode())
    result = cli.invoke(app, ["store", "put", str(batch_file), *store])
    assert result.exit_code == 1 and "IPFS daemon not reachable" in result.output
    bad = cli.invoke(app, ["store", "status", "--ipfs-api", "localhost:5001"])
    assert bad.exit_code == 2 and "multiaddr" in bad.output


def test_a_file_that_is_no_batch_is_refused_with_the_way_to_store_it(
    cli: CliRunner, backend: list[str], tmp_path: Path
) -> None:
    """`store put` of a binary file said only "not UTF-8: invalid start byte at byte 2"."""
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\x00\x01\xff\xfe" * 64)
    result = cli.invoke(app, ["store", "put", str(binary), *backend])
    assert result.exit_code == 1
    assert "is not a sapo.rollouts/5 batch" in result.output and "pass --raw" in result.output
    other = tmp_path / "package.json"
    other.write_text('{"name": "x"}')
    result = cli.invoke(app, ["store", "put", str(other), *backend])
    assert "no schema field" in result.output and "pass --raw" in result.output
    stored = cli.invoke(app, ["store", "put", str(binary), "--raw", "--json", *backend])
    cid = json.loads(stored.stdout)["cid"]
    fetched = cli.invoke(app, ["store", "get", cid, "-o", str(tmp_path / "o"), *backend])
    assert fetched.exit_code == 1 and "to fetch them as they are, pass --raw" in fetched.output
    assert not (tmp_path / "o").exists()
