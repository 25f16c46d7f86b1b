"""A local IPFS daemon: js-ipfs from the pinned npm package `ipfs`, on a loopback address.

kubo cannot be installed from the registries reachable here; js-ipfs 0.66 serves the same RPC API
(/api/v0), so the store's code path is the one a kubo node gets. The daemon gets a fresh repo under
the data dir, empty Bootstrap, no MDNS, no preload, no DHT, no pubsub unless asked (`pubsub=True`:
kubo's `Pubsub.Enabled`, for the root lane's vote relay), and free ports on its host
(127.0.0.1 unless given another 127.0.0.N, so that a devnet's daemons are distinct hosts to libp2p)
for its API, gateway and gRPC. With `swarm=True` it listens for peers on a TCP port of that host and
fetches what it lacks over bitswap from the peers it is connected to; without, it runs `--offline`
(one daemon shared by the processes of a test). Node 20 needs a preloaded Promise.withResolvers
polyfill.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from client.devnet.anvil import PROJECT_ROOT
from client.devnet.netns import SUBNET_PREFIX
from client.devnet.process import (
    LOOPBACK,
    ManagedServer,
    ServerProcess,
    ServerStartError,
    free_loopback_port,
)

POLYFILL = Path(__file__).with_name("js") / "promise-with-resolvers.cjs"
INIT_REPOS = Path(__file__).with_name("js") / "init-repos.mjs"


class IpfsNotFound(FileNotFoundError):
    """Node.js or the js-ipfs package is missing."""


def find_jsipfs(root: Path = PROJECT_ROOT) -> tuple[str, Path]:
    """Returns (node binary, js-ipfs cli.js); raises IpfsNotFound saying how to get them."""
    node = shutil.which("node")
    if node is None:
        raise IpfsNotFound("node not found: install Node.js 20+ to run the local IPFS daemon")
    for base in dict.fromkeys((root, Path.cwd())):
        cli = base / "node_modules" / "ipfs" / "src" / "cli.js"
        if cli.is_file():
            return node, cli
    raise IpfsNotFound("js-ipfs not found: run scripts/setup (installs `ipfs` from package.json)")


def _same_or_free_port(host: str, previous: str | None) -> int:
    """The port of `previous` (a /ip4/HOST/tcp/PORT multiaddr) when it is on host and free now,
    else a free port of host."""
    parts = (previous or "").split("/")
    if len(parts) >= 5 and parts[1:4:2] == ["ip4", "tcp"] and parts[2] == host:
        with contextlib.suppress(ValueError, OSError), socket.socket() as sock:
            port = int(parts[4])
            if port > 0:  # a fresh repo's test profile says 0: "any"
                # as the daemon binds: a killed daemon's connections in TIME_WAIT do not count
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, port))
                return port
    return free_loopback_port(host)


API_READY_TIMEOUT_S = 5.0  # how long one readiness request waits for the API's answer


def _api_answers(host: str, port: int, peer_id: str) -> bool:
    """Whether the daemon of `peer_id` answers on host:port (another daemon that took the port
    while ours started answers with its own id)."""
    request = urllib.request.Request(f"http://{host}:{port}/api/v0/id", method="POST")
    # a daemon busy loading its repo (or on a loaded machine) can take seconds to answer; a
    # shorter time-out than that never saw it ready (a restarted daemon, CI under load)
    with urllib.request.urlopen(request, timeout=API_READY_TIMEOUT_S) as response:  # noqa: S310
        return response.status == 200 and json.loads(response.read()).get("ID") == peer_id


def _lost_a_port(exc: ServerStartError) -> bool:
    """Whether a daemon failed because a port picked for it was taken before it bound it."""
    return "EADDRINUSE" in str(exc)


def init_repos(repos: Sequence[Path]) -> None:
    """Initialises the js-ipfs repos among `repos` that have none (`jsipfs init --profile test`
    each), all in one Node process (client/devnet/js/init-repos.mjs): loading js-ipfs is most of
    an init's ~4.5 CPU-seconds, and a devnet's daemons paid it once each."""
    todo = [Path(r) for r in repos if not (Path(r) / "config").is_file()]
    if not todo:
        return
    node, cli = find_jsipfs()
    core = cli.parents[2] / "ipfs-core" / "src" / "index.js"
    for repo in todo:
        repo.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [node, "--require", str(POLYFILL), str(INIT_REPOS), str(core), *map(str, todo)],
        env=os.environ | {"IPFS_MONITORING": ""},
        capture_output=True,
        text=True,
        timeout=60 + 30 * len(todo),
    )
    if result.returncode != 0:
        raise ServerStartError(f"jsipfs init failed: {result.stderr[-2000:]}")


def start_daemons(daemons: Sequence[IpfsDaemon]) -> None:
    """Starts every daemon at once: the repos initialised together (one Node process), the
    daemons spawned from the calling thread and waited for together, so N daemons take about as
    long as the slowest. One that lost a port to a race starts again alone on fresh ports, as
    `IpfsDaemon.start` does. On a failure every daemon is stopped."""
    if not daemons:
        return
    init_repos([d.repo for d in daemons])
    try:
        for daemon in daemons:
            daemon.spawn()
        for daemon in daemons:
            try:
                daemon.wait_ready()
            except ServerStartError as exc:
                if daemon.wrap or not _lost_a_port(exc):
                    raise
                daemon.start()
    except BaseException:
        for daemon in daemons:
            daemon.stop()
        raise


class IpfsDaemon(ManagedServer):
    """js-ipfs on a loopback host with its repo under data_dir/ipfs; a context manager."""

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = LOOPBACK,
        swarm: bool = False,
        ready_timeout_s: float = 60.0,
        wrap: list[str] | None = None,
        pubsub: bool = False,
    ):
        # `wrap` runs the daemon in a node's network namespace (client.devnet.netns), on that
        # namespace's own address and kubo's usual ports; otherwise it is a loopback host
        if not (host.startswith("127.") or (wrap and host.startswith(SUBNET_PREFIX + "."))):
            raise ValueError(f"an IPFS daemon of the devnet listens on loopback only, not {host}")
        self.wrap = list(wrap or [])
        self.data_dir = Path(data_dir)
        self.repo = self.data_dir / "ipfs"
        self.host = host
        self.swarm = swarm
        self.pubsub = pubsub
        self._ready_timeout_s = ready_timeout_s
        self._api_said = ""  # why the last readiness check of its API failed, if it did
        self.api_port: int | None = None
        self.swarm_port: int | None = None
        self._server: ServerProcess | None = None

    @property
    def api(self) -> str:
        """The RPC API multiaddr, as [store].ipfs_api spells it."""
        if self.api_port is None:
            raise RuntimeError("the IPFS daemon is not started")
        return f"/ip4/{self.host}/tcp/{self.api_port}/http"

    @property
    def swarm_address(self) -> str | None:
        """The multiaddr peers dial (without /p2p/...), or None for an offline daemon."""
        return None if self.swarm_port is None else f"/ip4/{self.host}/tcp/{self.swarm_port}"

    def _env(self) -> dict[str, str]:
        return os.environ | {"IPFS_PATH": str(self.repo), "IPFS_MONITORING": ""}

    def _init_repo(self, fresh_ports: bool = False) -> None:
        """Initialises the repo once, then writes its addresses: the ports of the last start
        where they are still free (unless `fresh_ports`), else free ones."""
        init_repos([self.repo])
        config_path = self.repo / "config"
        config = json.loads(config_path.read_text())
        host = self.host
        if self.wrap:  # its own namespace: every port is its own
            self.api_port, gateway, rpc = 5001, 8080, 5003
            self.swarm_port = 4001 if self.swarm else None
        else:
            # A restarted daemon keeps its API and swarm ports where they are still free, so
            # that its node's config and its peers' view of it (on-chain metadata) stay right.
            before = {} if fresh_ports else config.get("Addresses") or {}
            self.api_port = _same_or_free_port(host, before.get("API"))
            swarm_before = (before.get("Swarm") or [None])[0]
            self.swarm_port = _same_or_free_port(host, swarm_before) if self.swarm else None
            gateway, rpc = free_loopback_port(host), free_loopback_port(host)
        config["Addresses"] = {
            "API": f"/ip4/{host}/tcp/{self.api_port}",
            "Gateway": f"/ip4/{host}/tcp/{gateway}",
            "RPC": f"/ip4/{host}/tcp/{rpc}",
            "Swarm": [self.swarm_address] if self.swarm else [],
            "Announce": [],
            "NoAnnounce": [],
            "Delegates": [],
        }
        config["Bootstrap"] = []
        config.setdefault("Discovery", {})["MDNS"] = {"Enabled": False, "Interval": 10}
        config["Discovery"]["webRTCStar"] = {"Enabled": False}
        # Nodes dial their peers at the addresses on chain and fetch over bitswap from them: no
        # DHT lookups (kad-DHT's upkeep was 5% of an idle daemon's CPU) and no pubsub (gossipsub's
        # heartbeat) unless the node relays votes, which kubo also leaves off by default; both
        # keys are kubo's own.
        config["Routing"] = {"Type": "none"}
        config["Pubsub"] = {**config.get("Pubsub", {}), "Enabled": self.pubsub}
        config_path.write_text(json.dumps(config, indent=2))
        # a daemon killed hard leaves its repo lock behind
        lock = self.repo / "repo.lock"  # js-ipfs locks with a directory (proper-lockfile)
        if lock.is_dir():
            shutil.rmtree(lock, ignore_errors=True)
        lock.unlink(missing_ok=True)

    def spawn(self, *, fresh_ports: bool = False) -> IpfsDaemon:
        """Initialises the repo once, writes its addresses and starts the daemon without
        waiting for it (see `wait_ready`). Call it from the thread that is to outlive the
        daemon: PR_SET_PDEATHSIG follows the spawning thread (client.devnet.process)."""
        node, cli = find_jsipfs()
        self._init_repo(fresh_ports=fresh_ports)
        self._api_said = ""
        self._server = self._spawn(node, cli).spawn()
        return self

    def wait_ready(self) -> IpfsDaemon:
        """Returns once the spawned daemon says all its servers listen and its API answers with
        the repo's peer id; raises ServerStartError (saying what its API did) otherwise."""
        if self._server is None:
            raise ServerStartError("the IPFS daemon was not spawned")
        try:
            self._server.wait_ready()
        except ServerStartError as exc:
            if self._api_said:  # it said it was ready: what its API did instead
                raise ServerStartError(f"{exc}\n{self._api_said}") from exc
            raise
        return self

    def start(self) -> IpfsDaemon:
        """Starts the daemon (initialising its repo once) and returns once it is ready."""
        # A port free when we picked it can be taken before the daemon (seconds to start) binds
        # it, e.g. by another devnet's daemon on the same host: then all four are picked again.
        # A namespace's daemon has fixed ports of its own.
        attempts = 1 if self.wrap else 3
        for attempt in range(attempts):
            try:
                return self.spawn(fresh_ports=attempt > 0).wait_ready()
            except ServerStartError as exc:
                if attempt + 1 < attempts and _lost_a_port(exc):
                    continue
                raise
        raise AssertionError("unreachable")

    def _spawn(self, node: str, cli: Path) -> ServerProcess:
        """The daemon's process on the addresses its repo's config has, not started yet."""
        host, port = self.host, self.api_port
        peer_id = json.loads((self.repo / "config").read_text())["Identity"]["PeerID"]
        log_path = self.data_dir / "ipfs.log"
        start = log_path.stat().st_size if log_path.is_file() else 0  # the log is appended to

        def ready() -> bool:
            # the API answers before the gateway and gRPC servers listen, and one of those may
            # still fail on a taken port: ready once the daemon says all of them are
            with log_path.open("rb") as log:
                log.seek(start)
                said = b"Daemon is ready" in log.read()
            if not said:
                return False
            try:
                answered = _api_answers(host, port, peer_id)
            except (OSError, ValueError) as exc:
                self._api_said = f"its API at {host}:{port} did not answer /api/v0/id: {exc}"
                return False
            if not answered:
                self._api_said = f"its API at {host}:{port} answers with another peer id"
            return answered

        mode = [] if self.swarm else ["--offline"]
        return ServerProcess(
            "ipfs",
            [
                *self.wrap,
                node,
                "--require",
                str(POLYFILL),
                str(cli),
                "daemon",
                "--enable-preload=false",
                *mode,
            ],
            log_path=log_path,
            ready=ready,
            ready_timeout_s=self._ready_timeout_s,
            env=self._env(),
        )
