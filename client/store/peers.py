"""Where a peer's IPFS node can be dialled, read from its on-chain metadata, trusting nothing.

A node registers (and keeps current with `setMetadata`) compact JSON naming its IPFS peer id and
swarm addresses: `{"ipfs": {"id": "12D3KooW…", "addresses": ["/ip4/…/tcp/4001", …]}}`. Anyone can
write anything there, so every address is checked before it is dialled: the shape
(`/ip4|ip6|dns4|dns6/HOST/tcp/PORT`, optionally ending in this peer's `/p2p/ID`), the count
(MAX_ADDRESSES), the length, and whether it is private (loopback, RFC 1918, link-local, ...),
which a testnet node refuses unless `[store].allow_private_peers` says otherwise (a devnet on
one machine needs it; on the internet a private address is either wrong or points a node at its
own network). A DNS name is resolved here (within RESOLVE_TIMEOUT_S) and every address it
resolves to is checked the same way; what is dialled is the address checked, never the name
again, so a name whose answer changes between the check and the dial (DNS rebinding) cannot
point a node inward. What is refused is returned with its reason, for the journal, never raised.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

MAX_ADDRESSES = 8
MAX_ADDRESS_CHARS = 200
# A name that takes longer to resolve is refused for now (sources are read again next round):
# the system resolver's own time-out is seconds per server and attempt. It is also the budget
# of all the names of one peer's metadata together: up to MAX_ADDRESSES names of 2 s each held
# a fetch for 16 s per peer and round; names past the budget are refused.
RESOLVE_TIMEOUT_S = 2.0
_FAMILIES = {"dns4": socket.AF_INET, "dns6": socket.AF_INET6, "dns": socket.AF_UNSPEC}
# base58btc CIDv0-style (Qm…) and identity-multihash Ed25519 (12D3KooW…) peer ids, and base32
# CIDv1 peer ids (b…) as kubo may print them
PEER_ID = re.compile(r"^(?:[1-9A-HJ-NP-Za-km-z]{46,60}|b[a-z2-7]{50,70})$")
_ADDRESS = re.compile(
    r"^/(?P<proto>ip4|ip6|dns4|dns6|dns)/(?P<host>[^/]{1,253})/tcp/(?P<port>\d{1,5})"
    r"(?:/(?:p2p|ipfs)/(?P<peer>[^/]+))?$"
)
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


@dataclass(frozen=True)
class PeerAddresses:
    """A peer's dialable addresses (each ending in /p2p/ID) and what was refused, with why."""

    peer_id: str | None
    dialable: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = field(default=())

    @property
    def reason(self) -> str:
        """One line for the journal when nothing is dialable."""
        if self.peer_id is None:
            return self.refused[0][1] if self.refused else "no IPFS peer in its metadata"
        if not self.refused:
            return "no swarm address in its metadata"
        return "; ".join(f"{a[:80]}: {why}" for a, why in self.refused[:3])


def peer_addresses(metadata: str, *, allow_private: bool) -> PeerAddresses:
    """Returns the dialable swarm addresses a node's metadata names (see the module doc)."""
    try:
        data = json.loads(metadata)
    except (json.JSONDecodeError, TypeError, RecursionError):
        return PeerAddresses(None, refused=(("metadata", "metadata is not JSON"),))
    ipfs = data.get("ipfs") if isinstance(data, dict) else None
    if not isinstance(ipfs, dict):
        return PeerAddresses(None, refused=(("metadata", "no IPFS peer in its metadata"),))
    return ipfs_addresses(ipfs, allow_private=allow_private)


def ipfs_addresses(ipfs: dict, *, allow_private: bool) -> PeerAddresses:
    """The same for the metadata's `ipfs` object ({"id", "addresses"}: what IpfsStore.peer()
    says of our own daemon)."""
    peer = ipfs.get("id")
    if not isinstance(peer, str) or not PEER_ID.match(peer):
        return PeerAddresses(None, refused=(("ipfs.id", f"not a peer id: {str(peer)[:60]!r}"),))
    listed = ipfs.get("addresses")
    if not isinstance(listed, list):
        return PeerAddresses(peer, refused=(("ipfs.addresses", "not a list"),))
    dialable: list[str] = []
    refused: list[tuple[str, str]] = []
    deadline = time.monotonic() + RESOLVE_TIMEOUT_S  # for all of this peer's names together
    for i, address in enumerate(listed):
        if i >= MAX_ADDRESSES:
            refused.append((f"{len(listed) - i} more", f"over {MAX_ADDRESSES} addresses"))
            break
        targets, why = _targets(address, peer, allow_private, deadline)
        if why:
            refused.append((str(address)[:MAX_ADDRESS_CHARS], why))
            continue
        for target in targets:
            if target not in dialable and len(dialable) < MAX_ADDRESSES:
                dialable.append(target)
    return PeerAddresses(peer, tuple(dialable), tuple(refused))


def _targets(
    address: object, peer: str, allow_private: bool, deadline: float
) -> tuple[list[str], str | None]:
    """The addresses to dial for `address` (`/ip4|ip6/IP/tcp/PORT/p2p/ID`: a name's resolved
    and checked), or why it cannot be dialled."""
    if not isinstance(address, str):
        return [], "not a string"
    if len(address) > MAX_ADDRESS_CHARS:
        return [], f"longer than {MAX_ADDRESS_CHARS} characters"
    match = _ADDRESS.match(address)
    if match is None:
        return (
            [],
            "not /ip4|ip6|dns4|dns6/HOST/tcp/PORT[/p2p/ID] (the transports this client dials)",
        )
    port = int(match["port"])
    if not 0 < port < 65536:
        return [], f"port {port} out of range"
    if match["peer"] is not None and match["peer"] != peer:
        return [], "names another peer id than the metadata's"
    proto, host = match["proto"], match["host"]
    if proto in ("ip4", "ip6"):
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return [], f"{host!r} is not an {proto} address"
        if ip.version != (4 if proto == "ip4" else 6):
            return [], f"{host!r} is not an {proto} address"
        why = _ip_refusal(ip, allow_private)
        return ([], why) if why else ([f"/{proto}/{ip}/tcp/{port}/p2p/{peer}"], None)
    if not _HOSTNAME.match(host):
        return [], f"{host[:60]!r} is not a host name"
    if not allow_private and (host == "localhost" or host.endswith(".local")):
        return [], f"{host} is private ([store].allow_private_peers is off)"
    left = deadline - time.monotonic()
    if left <= 0:
        return [], f"{host}: the peer's {RESOLVE_TIMEOUT_S:g} s for resolving names is spent"
    ips, why = _resolve(host, _FAMILIES[proto], left)
    if why:
        return [], why
    for ip in ips:
        if refusal := _ip_refusal(ip, allow_private):
            return [], f"{host} resolves to {ip}, and {refusal}"
    return [f"/ip{ip.version}/{ip}/tcp/{port}/p2p/{peer}" for ip in ips], None


def _ip_refusal(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address, allow_private: bool
) -> str | None:
    """Why `ip` cannot be dialled, or None when it can."""
    if ip.is_unspecified or ip.is_multicast:
        return f"{ip} cannot be dialled"
    if not allow_private and not ip.is_global:
        return f"{ip} is private ([store].allow_private_peers is off)"
    return None


def _resolve(host: str, family: int, timeout: float) -> tuple[list, str | None]:
    """The addresses `host` resolves to within `timeout` seconds (in the resolver's order, once
    each), or why none."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sapo-resolve")
    try:
        answers = pool.submit(socket.getaddrinfo, host, None, family, socket.SOCK_STREAM).result(
            timeout=timeout
        )
    except FutureTimeout:
        return [], f"{host} did not resolve within {timeout:.1f} s"
    except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError
        return [], f"{host} does not resolve ({exc})"
    finally:
        pool.shutdown(wait=False)  # a resolver that hangs is left to finish on its own
    ips = []
    for *_, sockaddr in answers:
        ip = ipaddress.ip_address(sockaddr[0].split("%", 1)[0])  # an IPv6 answer may name a scope
        if ip not in ips:
            ips.append(ip)
    if not ips:
        return [], f"{host} resolves to no address"
    return ips, None
