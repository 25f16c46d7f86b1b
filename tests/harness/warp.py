"""In-process nodes on a warped chain: a chain, an IPFS daemon and a provisioned devnet whose
nodes a test runs on threads and moves through rounds by warping anvil's clock and theirs
together, instead of sleeping through them."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from client.config import with_sections
from client.devnet import Anvil
from tests.harness.policies import cached_seed_test
from tests.harness.processes import REPO


def start_node(node) -> tuple[threading.Thread, threading.Event]:
    """Runs an in-process node (client.node.assemble.open_node) on a thread of its own."""
    stop = threading.Event()
    thread = threading.Thread(target=node.run, args=(stop,))
    thread.start()
    return thread, stop


def finish_node(thread: threading.Thread, stop: threading.Event) -> None:
    """Stops a node start_node runs; fails the test if it does not stop within a minute."""
    stop.set()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the node did not stop"


def warp_world_config(root: Path, round_s: int, w: int, c: int, **sections: dict):
    """configs/devnet.toml for in-process nodes under a Warp: `round_s`-second rounds with
    windows of `w` and `c` rounds, a quorum of 1 (two honest nodes: each batch has one honest
    checker), the seed-test policy cached under `root`, two local rounds of 2 questions x 4
    completions a chain round (a node then idles until a warp starts the next), and short
    time-outs. `sections` change more keys of a section."""
    from client.config import load_config

    changes: dict[str, dict] = {
        "ledger": {
            "round_length_s": round_s,
            "submit_rounds": w,
            "challenge_rounds": c,
            "unbonding_period_s": (w + 2 * c + 2 + 1) * round_s,
            "quorum": 1,
        },
        "policy": {"model": "seed-test", "cache_dir": root / "policies", "max_new_tokens": 12},
        "sapo": {"local_items": 2, "external_items": 2, "completions": 4, "max_local_rounds": 2},
        "chain": {"request_timeout_s": 2.0, "receipt_timeout_s": 15.0},
        "store": {"timeout_s": 2.0},
        "train": {"rounds_per_update": 1},
    }
    for name, values in sections.items():
        changes[name] = {**changes.get(name, {}), **values}
    return with_sections(load_config(REPO / "configs" / "devnet.toml"), **changes)


@contextlib.contextmanager
def warp_world(
    root: Path,
    seed_test: Path,
    round_s: int,
    w: int,
    c: int,
    *,
    nodes: int = 2,
    adversaries: list | None = None,
    **sections: dict,
) -> Iterator[dict]:
    """A chain (anvil, 1 s blocks) and one IPFS daemon under `root`, the seed-test policy cached
    there and built into its base policy, and a devnet of `nodes` honest nodes (and `adversaries`,
    roles) provisioned on warp_world_config(...): for in-process nodes that a Warp moves through
    rounds. Yields anvil, daemon, swarm, base and warp; stops the daemon and the chain after."""
    from client.config import with_sections
    from client.devnet import Anvil, IpfsDaemon
    from client.devnet.provision import provision
    from client.node.assemble import base_policy_path

    cached_seed_test(seed_test, root / "policies")
    base = warp_world_config(root, round_s, w, c, **sections)
    # the most seat trials the ledger takes, so that every node holds a seat on every batch
    # (more surely than `devnet up`'s seats_for_every_node), peers that a test registers later
    # included: (1 - 1/18)^255 < 1e-6
    base = with_sections(base, ledger={"checkers": 255, "appeal_checkers": 255})
    anvil = Anvil(root, block_time_s=1, accounts=base.devnet.accounts).start()  # all funded
    try:
        daemon = IpfsDaemon(root / "ipfs").start()
        try:
            base_policy_path(base)
            swarm = provision(
                base,
                root / "swarm",
                rpc_url=anvil.url,
                chain_id=31_337,
                ipfs_api=daemon.api,
                nodes=nodes,
                adversaries=adversaries or [],
            )
            warp = Warp(anvil)
            yield {"anvil": anvil, "daemon": daemon, "swarm": swarm, "base": base, "warp": warp}
        finally:
            daemon.stop()
    finally:
        anvil.stop()


class Warp:
    """Moves a test's chain and its in-process nodes' clock forward together, so that a test
    jumps rounds instead of sleeping through them (anvil's evm_increaseTime + WarpClock)."""

    def __init__(self, anvil: Anvil):
        from client.node.clock import WarpClock

        self.anvil = anvil
        self.clock = WarpClock()

    def to(self, params, round_: int, fraction: float = 0.2) -> None:
        """Moves to `fraction` into `round_` (never backwards)."""
        import math

        target = params.round_start(round_) + fraction * params.round_length
        seconds = math.ceil(target - self.clock.now())
        if seconds > 0:
            self.anvil.warp(seconds)
            self.clock.warp(seconds)
