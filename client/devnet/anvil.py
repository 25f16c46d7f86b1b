"""A local EVM chain: anvil (from the pinned npm package @foundry-rs/anvil) on loopback.

The npm package's `bin/anvil` is a Node.js wrapper that spawns the native binary; killing the
wrapper would leave the binary running, so we start the native binary of the platform package
directly. Lookup order: $SAPO_ANVIL, the project's node_modules, then `anvil` on PATH (foundryup).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import urllib.request
from pathlib import Path

from client.devnet.process import (
    LOOPBACK,
    ManagedServer,
    ServerProcess,
    ServerStartError,
    free_loopback_port,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Anvil's default mnemonic: its accounts are public knowledge, fit for a devnet and nothing else.
DEV_MNEMONIC = "test test test test test test test test test test test junk"
HISTORY_STATES = 1_024  # past block states anvil keeps (in memory, none on disk)


class FoundryToolNotFound(FileNotFoundError):
    """No binary of a foundry tool (anvil, forge, cast) could be found."""


class AnvilNotFound(FoundryToolNotFound):
    """No anvil binary could be found."""


def _platform_package(tool: str) -> str:
    system = {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}.get(platform.system(), "")
    arch = {"x86_64": "amd64", "AMD64": "amd64", "arm64": "arm64", "aarch64": "arm64"}.get(
        platform.machine(), ""
    )
    return f"{tool}-{system}-{arch}"


def find_foundry_tool(tool: str, root: Path = PROJECT_ROOT) -> Path:
    """Returns the path of foundry's native `tool` (anvil, forge or cast): $SAPO_<TOOL> if set,
    else the npm platform package that scripts/setup installs, else one on PATH; raises
    FoundryToolNotFound (AnvilNotFound for anvil) saying how to get one."""
    error = AnvilNotFound if tool == "anvil" else FoundryToolNotFound
    variable = f"SAPO_{tool.upper()}"
    override = os.environ.get(variable)
    if override:
        path = Path(override)
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise error(f"{variable}={override} is not an executable file")
    for base in dict.fromkeys((root, Path.cwd())):
        native = base / "node_modules" / "@foundry-rs" / _platform_package(tool) / "bin" / tool
        if native.is_file():
            return native
    on_path = shutil.which(tool)
    if on_path:
        return Path(on_path)
    raise error(
        f"{tool} not found: run scripts/setup (installs @foundry-rs/{tool} from package.json), "
        f"install foundry, or set {variable} to the binary"
    )


def find_anvil(root: Path = PROJECT_ROOT) -> Path:
    """Returns the path of the native anvil binary; raises AnvilNotFound saying how to get one."""
    return find_foundry_tool("anvil", root)


def rpc_call(url: str, method: str, params: list[object] | None = None, timeout_s: float = 2.0):
    """Returns the `result` of one JSON-RPC call; raises OSError or RuntimeError on failure."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"expected an http(s) RPC URL, got {url!r}")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []})
    request = urllib.request.Request(  # noqa: S310 - scheme checked above
        url, data=body.encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - http(s) only
        answer = json.loads(response.read(1 << 20))
    if "error" in answer:
        raise RuntimeError(f"{method} failed: {answer['error']}")
    return answer["result"]


class Anvil(ManagedServer):
    """An anvil chain on 127.0.0.1 (or `host`: a devnet's bridge address with --netns); use as a
    context manager or call start()/stop()."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        chain_id: int = 31_337,
        accounts: int = 10,
        balance_eth: int = 10_000,
        binary: Path | None = None,
        ready_timeout_s: float = 30.0,
        block_time_s: int | None = None,
        host: str = LOOPBACK,
    ):
        self.data_dir = Path(data_dir)
        self.host = host
        self.chain_id = chain_id
        self._requested_port = port
        self._accounts = accounts
        self._balance_eth = balance_eth
        self._binary = binary
        self._ready_timeout_s = ready_timeout_s
        # None: a block per transaction (tests set the clock); a number: a block every so many
        # seconds, so block.timestamp follows the wall clock as on a live chain (the devnet)
        self._block_time_s = block_time_s
        self.port: int | None = None
        self._server: ServerProcess | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("anvil is not started")
        return f"http://{self.host}:{self.port}"

    def start(self) -> Anvil:
        """Starts anvil and returns once it answers eth_chainId with the expected chain id."""
        binary = self._binary or find_anvil()
        # A free port can be taken between our probe and anvil's bind: retry a few times.
        attempts = 1 if self._requested_port else 3
        for attempt in range(attempts):
            port = self._requested_port or free_loopback_port(self.host)
            server = ServerProcess(
                "anvil",
                [
                    str(binary),
                    "--host",
                    self.host,
                    "--port",
                    str(port),
                    "--chain-id",
                    str(self.chain_id),
                    "--accounts",
                    str(self._accounts),
                    "--balance",
                    str(self._balance_eth),
                    "--mnemonic",
                    DEV_MNEMONIC,
                    *(["--block-time", str(self._block_time_s)] if self._block_time_s else []),
                    # Past states stay in memory, the last HISTORY_STATES blocks' only. By
                    # default anvil writes older states to ~/.foundry/anvil/tmp, and a chain
                    # killed or ended without anvil's cleanup leaves them there: a day of
                    # tests left 76 GB and filled the disk. The client reads past state only
                    # to replay a reverted transaction at its (recent) block.
                    "--prune-history",
                    str(HISTORY_STATES),
                ],
                log_path=self.data_dir / "anvil.log",
                ready=lambda port=port: self._answers(port),
                ready_timeout_s=self._ready_timeout_s,
            )
            try:
                server.start()
            except ServerStartError as exc:
                if attempt + 1 < attempts and "in use" in str(exc).lower():
                    continue
                if "in use" in str(exc).lower():
                    raise ServerStartError(
                        f"anvil could not listen on {self.host}:{port}: the port is in use; "
                        "choose another port or stop what holds it"
                    ) from exc
                raise
            self._server, self.port = server, port
            return self
        raise AssertionError("unreachable")

    def _answers(self, port: int) -> bool:
        chain_id = int(rpc_call(f"http://{self.host}:{port}", "eth_chainId", timeout_s=1.0), 16)
        if chain_id != self.chain_id:
            raise ServerStartError(
                f"the RPC on {self.host}:{port} reports chain id {chain_id}, "
                f"expected {self.chain_id}: another chain holds this port"
            )
        return True

    def warp(self, seconds: int) -> None:
        """Moves the chain's clock forward by `seconds` (evm_increaseTime) and mines a block at
        the new time: tests jump rounds instead of sleeping through them (pair it with a node's
        client.node.clock.WarpClock moved by the same amount)."""
        rpc_call(self.url, "evm_increaseTime", [int(seconds)])
        rpc_call(self.url, "evm_mine")
