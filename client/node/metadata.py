"""What a node registers on chain as its metadata: its model, client version and store, and for an
IPFS store its daemon's peer id and swarm addresses (as many as fit the ledger's limit), so that
peers can dial it. The builder writes it at registration, the publisher again whenever the
daemon's addresses change."""

from __future__ import annotations

import contextlib
import json

from client import __version__
from client.config import NodeConfig
from client.store import IpfsStore, StoreError

# [policy].model names that mean "the locally built seed policy": the default size, and the
# test size that builds in seconds; Qwen2-style, and Llama-style with a tokenizer of its own
SEED_MODELS = ("seed", "seed-test", "seed-llama", "seed-llama-test")

MAX_METADATA_BYTES = 1024  # SwarmLedger.MAX_METADATA_BYTES


def node_metadata(
    cfg: NodeConfig, store=None, peer: dict | None = None, base: str | None = None
) -> str:
    """Returns the compact JSON a node registers with: model, client version, the bundle id of
    the base it shares (`base`: client.node.bases; the family's next node fetches it), and for an
    IPFS store the daemon's peer id and (as many as fit) its addresses, so peers can connect
    (`peer`: what the daemon's IpfsStore.peer() already said; else it is asked here)."""
    data: dict = {"model": cfg.policy.model, "client": f"sapo-swarm/{__version__}"}
    if cfg.policy.model in SEED_MODELS:
        data["seed"] = cfg.policy.seed
    if base is not None:
        data["base"] = base
    data["store"] = cfg.store.backend
    if peer is not None:  # a copy: trimmed below to fit
        data["ipfs"] = {**peer, "addresses": list(peer.get("addresses") or [])}
    elif isinstance(store, IpfsStore):
        # registering does not need the store; without it the metadata just has no peer id
        with contextlib.suppress(StoreError):
            data["ipfs"] = store.peer()
    text = json.dumps(data, separators=(",", ":"))
    while len(text.encode()) > MAX_METADATA_BYTES and data.get("ipfs", {}).get("addresses"):
        data["ipfs"]["addresses"].pop()
        text = json.dumps(data, separators=(",", ":"))
    return text
