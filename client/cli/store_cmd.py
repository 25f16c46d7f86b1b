"""`sapo store`: put, get and check rollout batches on IPFS or a local blockstore."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer
from pydantic import ValidationError

from client.cli.config_cmd import load_or_exit
from client.cli.console import (
    ConfigOption,
    Exit,
    JsonOption,
    fail,
    fail_validation,
    out,
    print_json,
)
from client.cli.options import flattened
from client.config.models import StoreSection
from client.store import (
    BatchLimits,
    BlockStore,
    StoreError,
    cid_to_digest,
    decode_batch,
    digest_to_cid,
    open_store,
)
from client.store.batch import SCHEMA
from client.store.errors import MalformedBatch, SchemaMismatch, UnsupportedSchema

# what decode_batch raises for bytes that are not a batch (as opposed to a store failure)
NOT_A_BATCH = (MalformedBatch, SchemaMismatch, UnsupportedSchema)

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS

BackendOption = Annotated[
    Literal["ipfs", "local"] | None,
    typer.Option("--store", help="Backend (overrides \\[store].backend)."),
]
ApiOption = Annotated[
    str | None,
    typer.Option("--ipfs-api", help="IPFS RPC API multiaddr (overrides \\[store].ipfs_api)."),
]
DirOption = Annotated[
    Path | None,
    typer.Option(
        "--store-dir", help="Local blockstore / pin index dir (overrides \\[store].store_dir)."
    ),
]
RawOption = Annotated[
    bool, typer.Option("--raw", help="Any bytes, not only sapo.rollouts batches.")
]


@dataclass(frozen=True)
class StoreOpts:
    """The node config and what overrides its [store] section, for every store command."""

    config: Path | None = None
    backend: str | None = None
    api: str | None = None
    store_dir: Path | None = None

    def open(self) -> tuple[BlockStore, StoreSection]:
        """The store the config and the options name, and its section."""
        return _store(self.config, self.backend, self.api, self.store_dir)


FROM_CONFIG = StoreOpts()  # a command's default: `store_options` always passes its own
store_options = flattened(
    StoreOpts,
    {"config": ConfigOption, "backend": BackendOption, "api": ApiOption, "store_dir": DirOption},
)


def _store(config: Path | None, backend, api, store_dir) -> tuple[BlockStore, StoreSection]:
    cfg = load_or_exit(config)
    overrides = {"backend": backend, "ipfs_api": api, "store_dir": store_dir}
    try:
        section = StoreSection(
            **(cfg.store.model_dump() | {k: v for k, v in overrides.items() if v is not None})
        )
    except ValidationError as exc:
        fail_validation(exc, {"ipfs_api": "--ipfs-api", "store_dir": "--store-dir"})
    return open_store(section), section


@app.command("put")
@store_options
def put(
    file: Annotated[Path, typer.Argument(help="Batch file (canonical sapo.rollouts JSON).")],
    round_: Annotated[int, typer.Option("--round", min=0, help="Round it is kept for.")] = 0,
    raw: RawOption = False,
    store_opts: StoreOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Store and pin a batch; print its CID and sha256 digest."""
    store, section = store_opts.open()
    try:
        if file.stat().st_size > section.max_batch_bytes:
            fail(
                f"{file} is {file.stat().st_size} bytes, over [store].max_batch_bytes "
                f"({section.max_batch_bytes})",
                Exit.CHECK_FAILED,
            )
        data = file.read_bytes()
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror}")
    if not raw:
        try:
            batch = decode_batch(data, BatchLimits(max_bytes=section.max_batch_bytes))
        except NOT_A_BATCH as exc:
            fail(
                f"{file} is not a {SCHEMA} batch ({exc}); to store any bytes, pass --raw",
                Exit.CHECK_FAILED,
            )
        round_ = round_ or batch.round
    try:
        cid = store.put(data, round_)
    except StoreError as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    digest = "0x" + hashlib.sha256(data).hexdigest()
    if as_json:
        print_json({"cid": cid, "digest": digest, "bytes": len(data), "backend": store.name})
        return
    out.print(f"{cid}\ndigest {digest}  ({len(data)} bytes, {store.name})")


@app.command("get")
@store_options
def get(
    cid: Annotated[str, typer.Argument(help="CIDv1 (bafkrei…) or 0x sha256 digest.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the bytes.")],
    raw: RawOption = False,
    store_opts: StoreOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Fetch a batch, verify it against its hash (and schema), write it; exit 1 on any mismatch."""
    store, section = store_opts.open()
    try:
        if cid.startswith("0x"):
            cid = digest_to_cid(cid)
        cid_to_digest(cid)
    except ValueError as exc:
        fail(str(exc))
    try:
        data = store.get(cid)
        summary = {}
        if not raw:
            try:
                batch = decode_batch(data, BatchLimits(max_bytes=section.max_batch_bytes))
            except NOT_A_BATCH as exc:
                fail(
                    f"{cid} holds {len(data)} bytes that are not a {SCHEMA} batch ({exc}); "
                    "to fetch them as they are, pass --raw",
                    Exit.CHECK_FAILED,
                )
            summary = {
                "round": batch.round,
                "node": batch.node,
                "items": len(batch.items),
                "rollouts": batch.rollouts,
                "score": batch.score,
            }
    except StoreError as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    tmp = output.with_name(f".{output.name}.partial")
    try:
        tmp.write_bytes(data)
        tmp.replace(output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        fail(f"cannot write {output}: {exc.strerror}")
    if as_json:
        print_json({"cid": cid, "bytes": len(data), "output": str(output), **summary})
        return
    out.print(f"verified {cid} ({len(data)} bytes) -> {output}")
    if summary:
        out.print(
            f"  round {summary['round']}, node {summary['node']}: {summary['items']} "
            f"questions, {summary['rollouts']} rollouts, score {summary['score'] / 10_000:.4f}"
        )


@app.command("status")
@store_options
def status(
    store_opts: StoreOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Backend, whether it is reachable, pinned batches and their bytes; exit 1 if unreachable."""
    store, _ = store_opts.open()
    report = store.status()
    if as_json:
        print_json(report.model_dump())
    else:
        state = "reachable" if report.reachable else "UNREACHABLE"
        out.print(f"{report.backend} store at {report.address}: {state}")
        out.print(f"  {report.pinned} pinned batches, {report.pinned_bytes} bytes")
        if report.detail:
            out.print(f"  {report.detail}")
    if not report.reachable:
        raise typer.Exit(int(Exit.CHECK_FAILED))
