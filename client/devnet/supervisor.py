"""The supervisor of a local swarm (`sapo devnet up`): starts its parts in order, says where it
stands in `DIR/devnet.json` at every stage, watches them, and stops them in order.

    starting anvil -> starting IPFS -> building the seed policy -> deploying the ledger and
    registering the nodes -> starting the nodes -> running

`devnet.json` has `"status": "starting"` and the stage (with the seed build's progress file
while the policy is built) until the swarm runs, then `"status": "running"` and everything a
client needs (RPC, ledger, pids, configs). `sapo devnet up --detach`, `devnet status`, `devnet
ps` and the TUI read it; it is replaced whole at each change, so a reader never sees half.

Each start is a new chain (anvil keeps its state in memory), so a start first moves what a stopped
run left in the data dir to `DIR/previous/` (set_aside_previous_run): a node never resumes a
journal of a chain that is gone.

Every part is a child that dies with the supervisor (PR_SET_PDEATHSIG, see
client.devnet.process), and the supervisor registers in this user's devnet registry
(client.devnet.registry), so nothing of a devnet outlives it and `devnet ps` finds it anywhere.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from client.config import NodeConfig
from client.config.roles import HONEST, partners
from client.devnet import Anvil, IpfsDaemon, registry, start_daemons
from client.devnet.light import LIGHT_DIR
from client.devnet.netns import NetnsError, NetnsLayout
from client.devnet.netns import check as netns_check
from client.devnet.process import (
    LOOPBACK,
    ManagedServer,
    ServerProcess,
    start_together,
    stop_together,
)
from client.devnet.provision import (
    AGGREGATOR_DIR,
    adversary_process,
    aggregator_process,
    light_process,
    node_process,
    provision,
    relays_votes,
)
from client.devnet.state import (
    BOOK_CREDITS,
    STATE,
    SUPERVISOR_PID,
    AggregatorEntry,
    DaemonEntry,
    DevnetState,
    DevnetStatus,
    LightEntry,
    NodeEntry,
    write_state,
)
from client.node.assemble import base_policy_path, seed_spec

# What a devnet's start writes in its data dir, beside the supervisor's own files (its state,
# pid and log): the nodes' data dirs (journal, snapshots, IPFS repo), the configs, the password
# of the keystores, the local blockstore, anvil's log; the aggregator's and the light nodes' dirs.
RUN_FILES = (
    "node-*",
    "aggregator",
    "light",
    "devnet.toml",
    "keystore-password",
    "blocks",
    "anvil.log",
    BOOK_CREDITS,
)
PREVIOUS = "previous"  # where the last stopped run's files are kept
NO_NETNS_ROOT_LANE = (
    "--netns with the root lane is not built: its aggregator would listen on this host's "
    "loopback, which the namespaces do not reach; run one without the other"
)


def set_aside_previous_run(data_dir: Path) -> Path | None:
    """Moves what a stopped devnet left in `data_dir` (RUN_FILES) to `data_dir/previous`,
    replacing the run kept there before, and returns that folder; None when there was nothing.

    A devnet's chain lives in anvil's memory and ends when the devnet stops, so every start is
    a new chain whose round 0 is now; its nodes must start with new data dirs (a node refuses
    the journal of another deployment: client.node.deployment). Only the files a devnet writes
    are moved, so a --data-dir given by mistake loses nothing else."""
    left = sorted({p for pattern in RUN_FILES for p in data_dir.glob(pattern)})
    if not left:
        return None
    previous = data_dir / PREVIOUS
    if previous.exists():
        shutil.rmtree(previous)
    previous.mkdir()
    for path in left:
        os.replace(path, previous / path.name)
    return previous


def node_host(index: int) -> str:
    """The loopback address of node `index`'s IPFS daemon (127.0.0.1 is anvil's)."""
    if not 0 <= index < 250:
        raise ValueError(f"a devnet has at most 250 nodes, not node {index}")
    return f"127.0.0.{index + 2}"


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
        netns: bool = False,
    ):
        self.cfg = cfg
        self.data_dir = Path(data_dir).absolute()
        self.nodes = nodes  # honest ones; adversaries ([devnet].adversaries) come after them
        self.roles = [HONEST] * nodes + cfg.devnet.adversary_roles()
        total = len(self.roles)
        self.detached = detached
        self.seed_progress = seed_progress
        # --netns: each node and its IPFS daemon in a network namespace of its own, anvil on the
        # namespaces' bridge (client.devnet.netns; check() refuses where it cannot be made)
        self.netns: NetnsLayout | None = None
        if netns and cfg.devnet.root_lane:
            raise NetnsError(NO_NETNS_ROOT_LANE)
        if netns:
            netns_check()
            self.netns = NetnsLayout.plan(str(self.data_dir), max(1, total))
        self.anvil = Anvil(
            self.data_dir,
            host=self.netns.gateway if self.netns else LOOPBACK,
            port=port,
            chain_id=cfg.devnet.chain_id,
            accounts=cfg.devnet.accounts,
            balance_eth=cfg.devnet.balance_eth,
            block_time_s=1,  # block.timestamp follows the wall clock: rounds advance on chain
        )
        # One IPFS daemon per node (unless the nodes share a local blockstore instead), each on
        # its own loopback address, so that they are distinct hosts to libp2p: node i's on
        # 127.0.0.(i+2), listening for its peers, dialled at the addresses of its metadata; the
        # root lane's aggregator has the one after the nodes'.
        homes = [f"node-{i}" for i in range(max(1, total))]
        relay = relays_votes(cfg)
        if cfg.devnet.root_lane:
            homes.append(AGGREGATOR_DIR)
        if cfg.devnet.light:
            homes.append(LIGHT_DIR)  # the light nodes' daemon, one for all of them
        self.daemons = (
            [
                IpfsDaemon(
                    self.data_dir / home,
                    host=self.netns.host(i) if self.netns else node_host(i),
                    swarm=True,
                    wrap=self.netns.wrap(i) if self.netns else None,
                    pubsub=relay and i < total,  # the nodes' daemons, not the aggregator's
                )
                for i, home in enumerate(homes)
            ]
            if cfg.store.backend == "ipfs"
            else []
        )
        self.parts: list[ManagedServer] = [self.anvil, *self.daemons]
        self.node_procs: list[ServerProcess] = []
        self.aggregator: ServerProcess | None = None  # [devnet].root_lane
        self.light: ServerProcess | None = None  # [devnet].light
        self.state: DevnetState | None = None
        self._registered: Path | None = None
        self.previous: Path | None = None  # where the last run's files were moved, if any
        self._began = time.time()

    # ---------------------------------------------------------------------------- starting

    def _stage(self, stage: str, policy_dir: Path | None = None) -> None:
        self.state = DevnetState(
            status=DevnetStatus.STARTING,
            stage=stage,
            supervisor_pid=os.getpid(),
            data_dir=self.data_dir,
            detached=self.detached,
            started_at=self._began,
            nodes_wanted=len(self.roles),
            netns=self.netns.as_dict() if self.netns else None,
            policy_dir=policy_dir,
            previous=self.previous,
        )
        write_state(self.data_dir, self.state)

    def start(self) -> DevnetState:
        """Starts everything; returns the running state. Raises what a part raised (the caller
        then calls stop(), which stops what did start)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.previous = set_aside_previous_run(self.data_dir)
        (self.data_dir / SUPERVISOR_PID).write_text(f"{os.getpid()}\n")
        self._registered = registry.register(self.data_dir, detached=self.detached)
        if self.netns is not None:
            self._stage("making network namespaces")
            self.netns.create()
        self._stage("starting anvil")
        self.anvil.start()
        if self.daemons:
            self._stage(f"starting {len(self.daemons)} IPFS daemon(s)")
            start_daemons(self.daemons)
        if self.nodes and (spec := seed_spec(self.cfg)) is not None:
            # lazily: client.policy imports torch, which `up --detach` (this module's first
            # importer) and a devnet of a downloaded model do without
            from client.policy import seed_policy_dir

            directory = seed_policy_dir(Path(self.cfg.policy.cache_dir), spec)
            self._stage("building the seed policy", policy_dir=directory)
            base_policy_path(self.cfg, self.seed_progress)
        adversaries = len(self.roles) - self.nodes
        also = f" and {adversaries} adversary node(s)" if adversaries else ""
        self._stage(f"deploying the ledger and registering {self.nodes} node(s){also}")
        swarm = provision(
            self.cfg,
            self.data_dir,
            rpc_url=self.anvil.url,
            chain_id=self.anvil.chain_id,
            ipfs_api=[d.api for d in self.daemons] or None,
            nodes=self.nodes,
            adversaries=self.roles[self.nodes :],
            metrics_hosts=[self.netns.host(i) for i in range(len(self.roles))]
            if self.netns
            else None,
        )
        if swarm.aggregator is not None:
            # started with the nodes: a node first sends to it once its first batch is sealed,
            # and sends again on its next pass if the endpoint is not listed yet
            self.aggregator = aggregator_process(swarm.aggregator, self.cfg.devnet.aggregator_lies)
            also += " and the root lane's aggregator"
        if swarm.light is not None:
            self.light = light_process(swarm.light)
            also += f" and {swarm.light.count} light nodes"
        self._stage(f"starting {self.nodes} node(s){also}")
        pairs = partners(swarm.roles, swarm.addresses)
        self.node_procs = []
        for i, (path, role) in enumerate(zip(swarm.node_configs, swarm.roles, strict=True)):
            wrap = self.netns.wrap(i) if self.netns else None
            self.node_procs.append(
                node_process(f"node-{i}", path, wrap=wrap)
                if role == HONEST
                else adversary_process(f"node-{i}", path, role, pairs.get(i), wrap=wrap)
            )
        start_together(self._processes())
        self.state = DevnetState(
            status=DevnetStatus.RUNNING,
            rpc_url=self.anvil.url,
            chain_id=self.anvil.chain_id,
            anvil_pid=self.anvil.pid,
            # every node's daemon (node 0's is the one the swarm's devnet.toml names)
            ipfs=[DaemonEntry(api=d.api, pid=d.pid, swarm=d.swarm_address) for d in self.daemons],
            netns=self.netns.as_dict() if self.netns else None,
            data_dir=self.data_dir,
            config=swarm.config_path,
            ledger=swarm.ledger,
            aggregator=AggregatorEntry(
                address=swarm.aggregator.address,
                pid=self.aggregator.pid,
                url=swarm.aggregator.url,
                book=swarm.aggregator.book,
                config=swarm.aggregator.config_path,
            )
            if swarm.aggregator is not None and self.aggregator is not None
            else None,
            light=LightEntry(
                count=swarm.light.count,
                families=swarm.light.families,
                pid=self.light.pid,
                config=swarm.light.config_path,
                roster=swarm.light.roster,
            )
            if swarm.light is not None and self.light is not None
            else None,
            supervisor_pid=os.getpid(),
            detached=self.detached,
            started_at=self._began,
            previous=self.previous,
            nodes=[
                NodeEntry(
                    index=i,
                    role=role,
                    address=address,
                    pid=proc.pid,
                    config=path,
                    data_dir=path.parent,
                    metrics=metrics,
                )
                for i, (address, path, proc, role, metrics) in enumerate(
                    zip(
                        swarm.addresses,
                        swarm.node_configs,
                        self.node_procs,
                        swarm.roles,
                        swarm.metrics,
                        strict=True,
                    )
                )
            ],
        )
        write_state(self.data_dir, self.state)
        return self.state

    # ---------------------------------------------------------------------- running, stopping

    def watch(self, on_node_exit: Callable[[ServerProcess], None]) -> ManagedServer:
        """Returns once anvil has exited (it); a node or a node's IPFS daemon that exits is
        reported once and the swarm goes on without it (a node whose daemon is gone rides out
        a store outage, as on an operator's machine; bring it back with the same repo and it
        listens where it did)."""
        reported: set[int] = set()
        while self.anvil.running:
            parts = [d._server for d in self.daemons if d._server is not None]
            for proc in [*parts, *self._processes()]:
                if not proc.running and id(proc) not in reported:
                    reported.add(id(proc))
                    on_node_exit(proc)
            time.sleep(0.2)
        return self.anvil

    def _processes(self) -> list[ServerProcess]:
        """The nodes, and the aggregator and the light nodes if they run."""
        extra = [p for p in (self.aggregator, self.light) if p is not None]
        return [*self.node_procs, *extra]

    def stop(self) -> None:
        """Stops nodes first (they checkpoint and flush their outbox), then IPFS, then anvil."""
        stop_together(self._processes(), timeout_s=60)  # at once: each checkpoints and flushes
        for part in reversed(self.parts):
            part.stop()
        if self.netns is not None:
            self.netns.destroy()
        (self.data_dir / STATE).unlink(missing_ok=True)
        (self.data_dir / SUPERVISOR_PID).unlink(missing_ok=True)
        if self._registered is not None:
            registry.unregister(self._registered)
