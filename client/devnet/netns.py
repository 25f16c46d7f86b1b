"""Separate hosts for a devnet's nodes: one Linux network namespace per node, joined by veth links
to a bridge (`sapo devnet up --netns`), so that a partition is a link really taken down.

Layout for a devnet tagged T on subnet 10.88.S.0/24 (S the first third octet no interface of
this machine uses): a bridge `sapoT` holding 10.88.S.1 (anvil listens there), and per node i a
namespace `sapo-T-i` whose `eth0` (10.88.S.(i+2)) is the far end of the veth `svT-i` on the
bridge, with a default route through the bridge. Node i and its IPFS daemon run inside their
namespace (`ip netns exec`), the daemon on kubo's usual ports of its own address. The subnet is
reachable only from this machine's namespaces: nothing listens on a public interface.

It needs root and iproute2's `ip netns`; without them `check()` raises NetnsUnavailable saying
so (the devnet is never started in a mode it cannot really make). Every step that fails undoes
the ones before it; `destroy()` is idempotent, and `sapo devnet down` runs it for a supervisor
that was killed before it could.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass

SUBNET_PREFIX = "10.88"


class NetnsUnavailable(RuntimeError):
    """This machine (or this user) cannot make network namespaces."""


class NetnsError(RuntimeError):
    """An `ip` command failed (what it was and what it said)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise NetnsError(f"`ip {' '.join(args)}` failed: {result.stderr.strip()[:300]}")
    return result


def check() -> None:
    """Raises NetnsUnavailable unless this process can make namespaces and veth links."""
    if os.name != "posix" or not hasattr(os, "geteuid") or os.geteuid() != 0:
        raise NetnsUnavailable(
            "--netns needs root (it creates network namespaces and veth links); run as root, "
            "or leave --netns out: each node is then its own host on 127.0.0.N"
        )
    if shutil.which("ip") is None:
        raise NetnsUnavailable("--netns needs iproute2's `ip` (apt install iproute2)")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    if listed.returncode != 0:
        raise NetnsUnavailable(f"`ip netns` does not work here: {listed.stderr.strip()[:200]}")


def _free_subnet() -> int:
    """The first third octet S in 1..250 with no 10.88.S.x address on this machine."""
    used = set(
        re.findall(rf"inet {re.escape(SUBNET_PREFIX)}\.(\d+)\.", _ip("-o", "-4", "addr").stdout)
    )
    for octet in range(1, 251):
        if str(octet) not in used:
            return octet
    raise NetnsError(
        f"every {SUBNET_PREFIX}.S.0/24 subnet is in use (leftover devnets? devnet down)"
    )


@dataclass(frozen=True)
class NetnsLayout:
    """Names and addresses of a devnet's namespaces (saved in devnet.json to be undone)."""

    tag: str
    subnet: int
    nodes: int

    @classmethod
    def plan(cls, data_dir: str, nodes: int) -> NetnsLayout:
        if not 1 <= nodes <= 200:
            raise ValueError(f"--netns takes 1 to 200 nodes, not {nodes}")
        tag = hashlib.sha256(f"{data_dir}:{os.getpid()}".encode()).hexdigest()[:4]
        return cls(tag=tag, subnet=_free_subnet(), nodes=nodes)

    @property
    def bridge(self) -> str:
        return f"sapo{self.tag}"

    @property
    def gateway(self) -> str:
        """The bridge's address, in the root namespace: anvil listens here."""
        return f"{SUBNET_PREFIX}.{self.subnet}.1"

    def namespace(self, i: int) -> str:
        return f"sapo-{self.tag}-{i}"

    def veth(self, i: int) -> str:
        return f"sv{self.tag}-{i}"  # the bridge's end; at most 15 characters

    def host(self, i: int) -> str:
        return f"{SUBNET_PREFIX}.{self.subnet}.{i + 2}"

    def wrap(self, i: int) -> list[str]:
        """The prefix that runs a command in node i's namespace."""
        return ["ip", "netns", "exec", self.namespace(i)]

    def as_dict(self) -> dict:
        return asdict(self)

    def create(self) -> NetnsLayout:
        """Makes the bridge, the namespaces and their links; undoes what it made on failure."""
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i in range(self.nodes):
                ns = self.namespace(i)
                _ip("netns", "add", ns)
                _ip(
                    "link", "add", self.veth(i), "type", "veth", "peer", "name", "eth0", "netns", ns
                )
                _ip("link", "set", self.veth(i), "master", self.bridge)
                _ip("link", "set", self.veth(i), "up")
                _ip("-n", ns, "addr", "add", f"{self.host(i)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "route", "add", "default", "via", self.gateway)
        except BaseException:
            self.destroy()
            raise
        return self

    def destroy(self) -> None:
        """Removes the namespaces (their veth ends go with them) and the bridge; idempotent."""
        for i in range(self.nodes):
            _ip("netns", "del", self.namespace(i), check=False)
            _ip("link", "del", self.veth(i), check=False)
        _ip("link", "del", self.bridge, check=False)

    def cut(self, i: int) -> None:
        """Partitions node i from everything (its link to the bridge goes down)."""
        _ip("link", "set", self.veth(i), "down")

    def heal(self, i: int) -> None:
        _ip("link", "set", self.veth(i), "up")
