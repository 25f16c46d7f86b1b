"""The supervisor of a local swarm (`sapo devnet up`): starts its parts in order, says where it
stands in `DIR/devnet.json` at every stage, watches them, and stops them in order.

    starting anvil -> starting IPFS -> building the seed policy -> deploying the ledger and
    registering the nodes -> starting the nodes -> running

`devnet.json` has `"status": "starting"` and the stage (with the seed build's progress file
while the policy is built) until the swarm runs, then `"status": "running"` and everything a
client needs (RPC, ledger, pids, configs). `sapo devnet up --detach`, `devnet status`, `devnet
ps` and the TUI read it; it is replaced whole at each change, so a reader never sees half.

Every part is a child that dies with the supervisor (PR_SET_PDEATHSIG, see
client.devnet.process), and the supervisor registers in this user's devnet registry
(client.devnet.registry), so nothing of a devnet outlives it and `devnet ps` finds it anywhere.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from client.config import NodeConfig
from client.devnet import Anvil, IpfsDaemon, registry
from client.devnet.process import ManagedServer, ServerProcess, start_together
from client.devnet.state import STATE, SUPERVISOR_PID, write_state
from client.node.assemble import base_policy_path, seed_spec
from client.node.devnet import node_process, provision


class Supervisor:
    """Starts, watches and stops one local swarm in `data_dir`."""

    def __init__(
        self,
        cfg: NodeConfig,
        data_dir: Path,
        *,
        nodes: int,
        port: int | None = None,
        detached: bool = False,
        seed_progress: Callable | None = None,
    ):
        self.cfg = cfg
        self.data_dir = Path(data_dir).absolute()
        self.nodes = nodes
        self.detached = detached
        self.seed_progress = seed_progress
        self.anvil = Anvil(
            self.data_dir,
            port=port,
            chain_id=cfg.devnet.chain_id,
            accounts=cfg.devnet.accounts,
            balance_eth=cfg.devnet.balance_eth,
            block_time_s=1,  # block.timestamp follows the wall clock: rounds advance on chain
        )
        # the local swarm's IPFS daemon, unless its nodes share a local blockstore instead
        self.ipfs = IpfsDaemon(self.data_dir) if cfg.store.backend == "ipfs" else None
        self.parts: list[ManagedServer] = [p for p in (self.anvil, self.ipfs) if p is not None]
        self.node_procs: list[ServerProcess] = []
        self.state: dict = {}
        self._registered: Path | None = None
        self._began = time.time()

    # ---------------------------------------------------------------------------- starting

    def _stage(self, stage: str, **extra) -> None:
        self.state = {
            "status": "starting",
            "stage": stage,
            "supervisor_pid": os.getpid(),
            "data_dir": str(self.data_dir),
            "detached": self.detached,
            "started_at": self._began,
            "nodes_wanted": self.nodes,
            **extra,
        }
        write_state(self.data_dir, self.state)

    def start(self) -> dict:
        """Starts everything; returns the running state. Raises what a part raised (the caller
        then calls stop(), which stops what did start)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / SUPERVISOR_PID).write_text(f"{os.getpid()}\n")
        self._registered = registry.register(self.data_dir, detached=self.detached)
        self._stage("starting anvil")
        self.anvil.start()
        if self.ipfs is not None:
            self._stage("starting the IPFS daemon")
            self.ipfs.start()
        if self.nodes and (spec := seed_spec(self.cfg)) is not None:
            from client.policy import seed_policy_dir

            directory = seed_policy_dir(Path(self.cfg.policy.cache_dir), spec)
            self._stage("building the seed policy", policy_dir=str(directory))
            base_policy_path(self.cfg, self.seed_progress)
        self._stage(f"deploying the ledger and registering {self.nodes} node(s)")
        swarm = provision(
            self.cfg,
            self.data_dir,
            rpc_url=self.anvil.url,
            chain_id=self.anvil.chain_id,
            ipfs_api=self.ipfs.api if self.ipfs else None,
            nodes=self.nodes,
        )
        self._stage(f"starting {self.nodes} node(s)")
        self.node_procs = [
            node_process(f"node-{i}", path) for i, path in enumerate(swarm.node_configs)
        ]
        start_together(self.node_procs)
        self.state = {
            "status": "running",
            "rpc_url": self.anvil.url,
            "chain_id": self.anvil.chain_id,
            "anvil_pid": self.anvil.pid,
            "ipfs_api": self.ipfs.api if self.ipfs else None,
            "ipfs_pid": self.ipfs.pid if self.ipfs else None,
            "data_dir": str(self.data_dir),
            "config": str(swarm.config_path),
            "ledger": swarm.ledger,
            "supervisor_pid": os.getpid(),
            "detached": self.detached,
            "started_at": self._began,
            "nodes": [
                {
                    "index": i,
                    "address": address,
                    "pid": proc.pid,
                    "config": str(path),
                    "data_dir": str(path.parent),
                }
                for i, (address, path, proc) in enumerate(
                    zip(swarm.addresses, swarm.node_configs, self.node_procs, strict=True)
                )
            ],
        }
        write_state(self.data_dir, self.state)
        return self.state

    # ---------------------------------------------------------------------- running, stopping

    def watch(self, on_node_exit: Callable[[ServerProcess], None]) -> ManagedServer:
        """Returns once anvil or the IPFS daemon has exited (that one); a node that exits is
        reported once and the swarm goes on without it."""
        reported: set[str] = set()
        while all(p.running for p in self.parts):
            for proc in self.node_procs:
                if not proc.running and proc.name not in reported:
                    reported.add(proc.name)
                    on_node_exit(proc)
            time.sleep(0.2)
        return next(p for p in self.parts if not p.running)

    def stop(self) -> None:
        """Stops nodes first (they checkpoint and flush their outbox), then IPFS, then anvil."""
        for proc in self.node_procs:
            proc.stop(timeout_s=60)
        for part in reversed(self.parts):
            part.stop()
        (self.data_dir / STATE).unlink(missing_ok=True)
        (self.data_dir / SUPERVISOR_PID).unlink(missing_ok=True)
        if self._registered is not None:
            registry.unregister(self._registered)
