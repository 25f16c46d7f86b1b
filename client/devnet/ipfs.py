"""A local IPFS daemon: js-ipfs from the pinned npm package `ipfs`, offline, on loopback.

kubo cannot be installed from the registries reachable here; js-ipfs 0.66 serves the same RPC
API (/api/v0), so the store's code path is the one a kubo node gets. The daemon gets a fresh repo
under the data dir, empty Bootstrap, no MDNS, no swarm listeners, `--offline`, and free loopback
ports for its API, gateway and gRPC. Node 20 needs a preloaded Promise.withResolvers polyfill.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

from client.devnet.anvil import PROJECT_ROOT
from client.devnet.process import (
    LOOPBACK,
    ManagedServer,
    ServerProcess,
    ServerStartError,
    free_loopback_port,
)

POLYFILL = Path(__file__).with_name("js") / "promise-with-resolvers.cjs"


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


def _api_answers(port: int) -> bool:
    request = urllib.request.Request(f"http://{LOOPBACK}:{port}/api/v0/version", method="POST")
    with urllib.request.urlopen(request, timeout=1.0) as response:  # noqa: S310 - loopback http
        return response.status == 200


class IpfsDaemon(ManagedServer):
    """js-ipfs on 127.0.0.1 with its repo under data_dir/ipfs; a context manager."""

    def __init__(self, data_dir: Path, *, ready_timeout_s: float = 60.0):
        self.data_dir = Path(data_dir)
        self.repo = self.data_dir / "ipfs"
        self._ready_timeout_s = ready_timeout_s
        self.api_port: int | None = None
        self._server: ServerProcess | None = None

    @property
    def api(self) -> str:
        """The RPC API multiaddr, as [store].ipfs_api spells it."""
        if self.api_port is None:
            raise RuntimeError("the IPFS daemon is not started")
        return f"/ip4/{LOOPBACK}/tcp/{self.api_port}/http"

    def _env(self) -> dict[str, str]:
        return os.environ | {"IPFS_PATH": str(self.repo), "IPFS_MONITORING": ""}

    def _init_repo(self, node: str, cli: Path) -> None:
        if not (self.repo / "config").is_file():
            self.repo.parent.mkdir(parents=True, exist_ok=True)
            result = subprocess.run(
                [node, "--require", str(POLYFILL), str(cli), "init", "--profile", "test"],
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=120,
            )
            if result.returncode != 0:
                raise ServerStartError(f"jsipfs init failed: {result.stderr[-2000:]}")
        config_path = self.repo / "config"
        config = json.loads(config_path.read_text())
        self.api_port = free_loopback_port()
        config["Addresses"] = {
            "API": f"/ip4/{LOOPBACK}/tcp/{self.api_port}",
            "Gateway": f"/ip4/{LOOPBACK}/tcp/{free_loopback_port()}",
            "RPC": f"/ip4/{LOOPBACK}/tcp/{free_loopback_port()}",
            "Swarm": [],
            "Announce": [],
            "NoAnnounce": [],
            "Delegates": [],
        }
        config["Bootstrap"] = []
        config.setdefault("Discovery", {})["MDNS"] = {"Enabled": False, "Interval": 10}
        config["Discovery"]["webRTCStar"] = {"Enabled": False}
        config_path.write_text(json.dumps(config, indent=2))
        # a daemon killed hard leaves its repo lock behind
        (self.repo / "repo.lock").unlink(missing_ok=True)

    def start(self) -> IpfsDaemon:
        """Starts the daemon (initialising its repo once) and returns when its API answers."""
        node, cli = find_jsipfs()
        self._init_repo(node, cli)
        port = self.api_port
        server = ServerProcess(
            "ipfs",
            [node, "--require", str(POLYFILL), str(cli), "daemon", "--offline"],
            log_path=self.data_dir / "ipfs.log",
            ready=lambda: _api_answers(port),
            ready_timeout_s=self._ready_timeout_s,
            env=self._env(),
        )
        server.start()
        self._server = server
        return self
