"""Where a node's base model comes from, and how a node shares its own.

`[policy].base` names a base bundle (client.store.base) as a revision hash names a Hugging Face
model. A node finds it, in this order:
1. in `[policy].cache_dir/bases/<bundle id>/`, where an earlier fetch left it, checked;
2. as `[policy].model` (a seed policy, a local directory or a cached Hugging Face snapshot) when
   that model's bundle is the one named;
3. over IPFS: from the nodes of the ledger whose metadata names the bundle (each node that shares
   its base writes `"base": "<bundle id>"` there), dialled at their metadata's swarm addresses,
   every block checked against its hash, the loaded model checked against the family id, and
   then cached and pinned, so this node serves the base in turn.

A node that trains an adapter over an IPFS store shares its base (`[policy].share_base`): it pins
every block of its bundle, kept while it runs that base, and names the bundle in its metadata.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from client.chain import Ledger, connect
from client.config import NodeConfig
from client.store import IpfsStore, StoreError, open_store
from client.store.base import (
    WEIGHTS_FILE,
    BaseError,
    fetch_base,
    fetch_bundle,
    pin_base,
)
from client.store.cid import digest_to_cid
from client.store.peers import peer_addresses

log = logging.getLogger("sapo.node")
Say = Callable[[str], None]
# blocks of a base asked for at once, a store client each (a block over bitswap is a round trip):
# a 0.5B base between two js-ipfs daemons took 479 s one at a time, 78 s at 8, 50 s at 32
# (scripts/bench_base.py); each holds one 1 MiB block at most
IN_FLIGHT = 32


def cached_base(cfg: NodeConfig, bundle_id: str) -> Path:
    """Where a fetched base of `bundle_id` is kept (a model directory once it is there)."""
    return Path(cfg.policy.cache_dir) / "bases" / bundle_id.removeprefix("0x")


def resolve_base(cfg: NodeConfig, local: Callable[[], Path | str | None], say: Say | None = None):
    """Returns the directory (or Hugging Face name) of the base `[policy].base` names: cached,
    `local()` (the configured model, or None when it is not at hand) when it is that bundle, else
    fetched (see the module doc). Raises BaseError saying what was tried and what to do."""
    from client.policy import PolicyError, load_policy
    from client.policy.base import bundle_of

    wanted = str(cfg.policy.base)
    say = say or log.info
    cached = cached_base(cfg, wanted)
    if (cached / WEIGHTS_FILE).is_file():
        return cached
    mismatch = ""
    model = local()
    if model is not None:
        try:
            found = bundle_of(load_policy(model, device="cpu", dtype="float32")).id()
        except (PolicyError, BaseError) as exc:
            found, mismatch = None, f"[policy].model {cfg.policy.model!r} is not it ({exc})"
        if found == wanted:
            return model
        if found is not None:
            mismatch = f"[policy].model {cfg.policy.model!r} is bundle {found[:12]}…"
    say(
        f"fetching base {wanted[:12]}… over IPFS"
        + (f" ({mismatch}, not {wanted[:12]}…)" if mismatch else " (not at hand)")
    )
    with _locked(cached):
        if (cached / WEIGHTS_FILE).is_file():  # another process fetched it meanwhile
            return cached
        _fetch(cfg, wanted, cached, say, mismatch)
    return cached


def _fetch(cfg: NodeConfig, wanted: str, cached: Path, say: Say, mismatch: str) -> None:
    from client.policy.base import load_fetched

    store = open_store(cfg.store)
    helpers = [open_store(cfg.store) for _ in range(IN_FLIGHT - 1)]
    holders, dialled = _dial_holders(cfg, store, wanted)
    staging = cached.with_name(cached.name + ".fetched")
    shutil.rmtree(staging, ignore_errors=True)
    last = {"tenth": -1}

    def progress(done: int, of: int) -> None:
        tenth = 10 * done // of
        if tenth != last["tenth"]:
            last["tenth"] = tenth
            say(f"fetching base {wanted[:12]}…: {done >> 20} of {of >> 20} MiB")

    try:
        bundle = fetch_bundle(store, wanted)
        fetch_base(store, bundle, staging, progress=progress, helpers=helpers)
        load_fetched(staging, bundle)  # the model it loads is the family the bundle names
        os.replace(staging, cached)
    except StoreError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        who = (
            f"{len(holders)} registered node(s) name it in their metadata, {dialled} answered"
            if holders is not None
            else "no ledger to find the nodes that pin it ([chain].ledger_address is unset)"
        )
        hint = (
            "set [policy].model to a local copy of that base, or start again once a node "
            "of its family is up"
        )
        if isinstance(exc, BaseError):
            raise BaseError(f"base {wanted[:12]}… was refused: {exc}") from None
        why = f"{mismatch}; " if mismatch else ""
        raise BaseError(
            f"base {wanted[:12]}…: {why}it could not be fetched ({exc}); {who}: {hint}"
        ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    with contextlib.suppress(StoreError):  # we serve it in turn (a node shares it at start too)
        pin_base(store, wanted, bundle)
    say(f"base {wanted[:12]}… fetched and checked: {cached}")


def holders(cfg: NodeConfig, wanted: str):
    """The ledger's registered nodes (NodeInfo) whose metadata names base bundle `wanted`; None
    when there is no ledger to ask or it does not answer (logged)."""
    if cfg.chain.ledger_address is None:
        return None
    try:
        ledger = Ledger(
            connect(cfg.chain.rpc_url, cfg.chain.request_timeout_s), cfg.chain.ledger_address
        )
        infos = ledger.node_infos(ledger.nodes())
    except Exception as exc:  # the chain is another part: the fetch may still find the blocks
        log.warning("could not list the ledger's nodes to find base %s: %s", wanted[:12], exc)
        return None
    return [i for i in infos if i.registered and _named_base(i.metadata) == wanted]


def _dial_holders(cfg: NodeConfig, store, wanted: str) -> tuple[list[str] | None, int]:
    """Connects our IPFS node to the registered nodes whose metadata names bundle `wanted`.
    Returns (their addresses, or None without a ledger; how many answered)."""
    found_holders = holders(cfg, wanted)
    if found_holders is None:
        return None, 0
    dialled = 0
    if isinstance(store, IpfsStore):
        for info in found_holders:
            found = peer_addresses(info.metadata, allow_private=cfg.store.allow_private_peers)
            if (
                found.dialable
                and store.connect(list(found.dialable), cfg.store.connect_timeout_s)[0]
            ):
                dialled += 1
    return [i.address for i in found_holders], dialled


def _named_base(metadata: str) -> str | None:
    try:
        data = json.loads(metadata)
    except (json.JSONDecodeError, TypeError):
        return None
    base = data.get("base") if isinstance(data, dict) else None
    return base if isinstance(base, str) else None


def share_base(cfg: NodeConfig, store, policy, say: Say | None = None) -> str | None:
    """Pins `policy`'s base in `store` when this node shares it (`[policy].share_base`, an
    adapter, an IPFS store), and returns its bundle id (for the node's metadata); else None. A
    bundle already stored is not stored again (only hashed)."""
    from client.policy.base import bundle_of, publish

    if not (cfg.policy.share_base and policy.adapter is not None and isinstance(store, IpfsStore)):
        return None
    say = say or log.info
    try:
        bundle = bundle_of(policy)
        ident = bundle.id()
        if not store.has(digest_to_cid(ident)):  # its blocks are pinned with it, for good
            say(f"pinning base {ident[:12]}… for the family's next node")
            publish(store, policy)
        return ident
    except (BaseError, StoreError) as exc:  # sharing is a service: the node runs without it
        log.warning("not sharing the base: %s", exc)
        return None


@contextlib.contextmanager
def _locked(cached: Path):
    """One fetch of a base at a time across the processes sharing a cache (a devnet's nodes)."""
    cached.parent.mkdir(parents=True, exist_ok=True)
    with open(cached.with_name(f".{cached.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
