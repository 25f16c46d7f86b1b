"""The kinds of value a config key holds, each parsed and checked where it is read: amounts of
ether (what `cast` users write: an integer number of wei, or a string with a unit, "1 ether",
"0.5 ether", "20 gwei"), basis points, EVM addresses, RPC URLs, IPFS API multiaddrs and the
HOST:PORT a server listens on."""

from __future__ import annotations

import ipaddress
from decimal import Decimal, InvalidOperation
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
)

_UNITS = {"wei": 0, "gwei": 9, "ether": 18, "eth": 18}


def parse_wei(value: object) -> int:
    """Returns wei from an int, a digit string, or "<number> <unit>" (wei, gwei, ether)."""
    if isinstance(value, bool):
        raise ValueError("expected an amount such as 1000000000000000000 or '1 ether'")
    if isinstance(value, int):
        amount = value
    elif isinstance(value, str):
        text = value.strip().lower().replace("_", "")
        unit = next((u for u in sorted(_UNITS, key=len, reverse=True) if text.endswith(u)), "wei")
        number = text[: len(text) - len(unit)].strip() if text.endswith(unit) else text
        try:
            scaled = Decimal(number) * (Decimal(10) ** _UNITS[unit])
        except InvalidOperation:
            raise ValueError(
                f"expected an amount such as 1000000000000000000 or '1 ether', got {value!r}"
            ) from None
        if scaled != scaled.to_integral_value():
            raise ValueError(f"{value!r} is not a whole number of wei")
        amount = int(scaled)
    else:
        raise ValueError("expected an amount such as 1000000000000000000 or '1 ether'")
    if amount < 0:
        raise ValueError("an amount cannot be negative")
    return amount


def format_ether(wei: int) -> str:
    """Returns wei as a short ether figure for people ('2.5 ETH')."""
    text = f"{Decimal(wei) / Decimal(10**18):.6f}".rstrip("0").rstrip(".")
    return f"{text} ETH"


Wei = Annotated[int, BeforeValidator(parse_wei)]
Bps = Annotated[int, Field(ge=0, le=10_000, description="basis points, 10000 = 100%")]


def _check_rpc_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
        raise ValueError(
            f"expected an http(s):// or ws(s):// RPC URL such as http://127.0.0.1:8545, got {url!r}"
        )
    return url


def _check_address(value: str) -> str:
    text = value.strip()
    if len(text) != 42 or not text.startswith("0x"):
        raise ValueError(f"expected a 0x-prefixed 20-byte hex address, got {value!r}")
    try:
        int(text[2:], 16)
    except ValueError:
        raise ValueError(f"expected a 0x-prefixed 20-byte hex address, got {value!r}") from None
    # Mixed case means the writer meant an EIP-55 checksum; a wrong one is a typo, not a style.
    from eth_utils import is_checksum_address, to_checksum_address

    if (
        text[2:] != text[2:].lower()
        and text[2:] != text[2:].upper()
        and not is_checksum_address(text)
    ):
        raise ValueError(f"{value!r} fails its EIP-55 checksum (a typo?)")
    return to_checksum_address(text)


def _check_multiaddr(value: str) -> str:
    # The IPFS HTTP RPC address, as kubo prints it: /ip4/127.0.0.1/tcp/5001[/http]
    parts = value.strip("/").split("/")
    ok = (
        len(parts) in (4, 5)
        and parts[0] in ("ip4", "ip6", "dns", "dns4", "dns6")
        and parts[2] == "tcp"
        and parts[3].isdigit()
        and 0 < int(parts[3]) < 65536
        and (len(parts) == 4 or parts[4] in ("http", "https"))
    )
    if not ok:
        raise ValueError(
            f"expected an IPFS API multiaddr such as /ip4/127.0.0.1/tcp/5001/http, got {value!r}"
        )
    return value


def parse_listen_addr(value: str) -> tuple[str, int]:
    """Returns (host, port) of `HOST:PORT` or `[IPv6]:PORT` where a server is to listen: HOST an
    IP address or `localhost`, PORT 1-65535. A ValueError says what is wrong."""
    text = value.strip()
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or (":" in host and not text.startswith("[")):
        raise ValueError(
            f"{value!r} is not HOST:PORT (e.g. 127.0.0.1:9464, or [::1]:9464 for IPv6)"
        )
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(
                f"{value!r}: {host!r} is not an IP address (name one, e.g. 127.0.0.1, or localhost)"
            ) from None
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"{value!r}: port {port} is not in 1-65535")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether a listen host (an IP address, or localhost) is this machine's loopback only."""
    return host == "localhost" or ipaddress.ip_address(host).is_loopback


RpcUrl = Annotated[str, AfterValidator(_check_rpc_url)]
Address = Annotated[str, AfterValidator(_check_address)]
Multiaddr = Annotated[str, AfterValidator(_check_multiaddr)]
