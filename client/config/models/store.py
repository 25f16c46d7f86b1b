"""[store]: where rollout batches live, and the bounds on fetching peers' batches and
checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
)

from client.config.models.section import Section
from client.config.models.values import Multiaddr


class StoreSection(Section):
    """Where rollout batches live: a real IPFS node (kubo or js-ipfs) or a local blockstore."""

    backend: Literal["ipfs", "local"] = "ipfs"
    ipfs_api: Multiaddr = "/ip4/127.0.0.1/tcp/5001/http"
    store_dir: Path = Path(".sapo/blocks")
    timeout_s: float = Field(10.0, gt=0, le=600)
    max_batch_bytes: int = Field(1 << 20, ge=1024, le=1 << 20, description="at most 1 MiB")
    retain_rounds: int = Field(
        100,
        gt=0,
        description="unpin batches (ours and the peers' we fetched) older than this many rounds, "
        "and forget the journal's rows of peers' batches once no window can judge them either "
        "(their per-peer counts are kept)",
    )
    allow_private_peers: bool = Field(
        False,
        description="dial peers' loopback and private (RFC 1918, link-local) swarm addresses: "
        "a devnet on one machine or a swarm in one LAN needs it; on the internet such an "
        "address in a peer's metadata is wrong or points at your own network",
    )
    connect_timeout_s: float = Field(
        5.0, gt=0, le=60, description="time to dial one of a peer's swarm addresses"
    )
    min_rate_kib_s: float = Field(
        256.0,
        gt=0,
        le=1 << 20,
        description="the least rate a peer's checkpoint must arrive at: a fetch ends by timeout_s "
        "plus the checkpoint's size at this rate, so a source that trickles its chunks cannot "
        "hold a fetch worker for longer",
    )
    fetches_per_producer: int = Field(
        2,
        ge=1,
        le=16,
        description="fetches of one producer's batches (and the checkpoints they open) in flight "
        "at once: a producer whose batches are slow to give, in every round still open, holds "
        "at most this many of the node's fetch workers and this many checkpoint spools",
    )
    spool_mib: int = Field(
        4096,
        ge=1,
        le=1 << 30,
        description="disk, in MiB, for peers' opened checkpoints while a drawn check fetches "
        "and re-draws them (the data dir's spool/, emptied when the node starts): proofs that "
        "would need more wait for room; one proof may always run",
    )
