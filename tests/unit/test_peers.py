"""What a peer's on-chain metadata may name as its IPFS node's addresses: anyone can write
anything there, so each address is checked before it is dialled (client.store.peers)."""

from __future__ import annotations

import ipaddress
import json
import re
import socket

import pytest

from client.store.peers import MAX_ADDRESSES, peer_addresses

PEER = "12D3KooWMc5B3DpRBc8mPmZrC3cMXpjDYCV1mQynS2GnE3jgSv2h"


def meta(*addresses: object, peer: object = PEER) -> str:
    return json.dumps({"model": "m", "ipfs": {"id": peer, "addresses": list(addresses)}})


def test_public_addresses_are_dialled_with_the_peer_id_appended() -> None:
    found = peer_addresses(
        meta("/ip4/8.8.4.4/tcp/4001", f"/ip6/2001:4860:4860::8844/tcp/4001/p2p/{PEER}"),
        allow_private=False,
    )
    assert found.dialable == (
        f"/ip4/8.8.4.4/tcp/4001/p2p/{PEER}",
        f"/ip6/2001:4860:4860::8844/tcp/4001/p2p/{PEER}",
    )
    assert found.refused == ()


def test_a_name_is_resolved_checked_and_dialled_as_the_address_it_resolved_to() -> None:
    """This machine's own name resolves (through the system's resolver: /etc/hosts) to a private
    address: a public swarm refuses it as it refuses the address; a devnet dials the address it
    checked, never the name again (whose next answer may differ: DNS rebinding)."""
    name = socket.gethostname()
    try:
        resolved = ipaddress.ip_address(socket.gethostbyname(name))
    except OSError:
        pytest.skip(f"this machine's name {name!r} does not resolve")
    if resolved.is_global:
        pytest.skip(f"this machine's name resolves to a public address ({resolved})")
    public = peer_addresses(meta(f"/dns4/{name}/tcp/4001"), allow_private=False)
    assert public.dialable == ()
    assert public.refused[0][1] == (
        f"{name} resolves to {resolved}, and {resolved} is private "
        "([store].allow_private_peers is off)"
    )
    devnet = peer_addresses(meta(f"/dns4/{name}/tcp/4001"), allow_private=True)
    assert devnet.dialable == (f"/ip4/{resolved}/tcp/4001/p2p/{PEER}",)


def test_a_name_that_does_not_resolve_is_refused_saying_so() -> None:
    found = peer_addresses(meta("/dns4/node.invalid/tcp/4001"), allow_private=True)
    assert found.dialable == ()
    # (a resolver that cannot reach its servers may answer only at RESOLVE_TIMEOUT_S)
    assert re.search(
        r"node\.invalid (does not resolve|did not resolve within)", found.refused[0][1]
    )


def test_a_peers_names_share_one_resolution_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 57: eight names of 2 s each held a fetch 16 s per peer and round. A resolver that
    # answers slowly cannot be made to on this machine (no DNS server to slow down), so this is
    # a fake of one: getaddrinfo that takes 0.8 s a name, then answers a public address
    import time

    def slow(host, *args, **kwargs):
        time.sleep(0.8)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 0))]

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    names = [f"/dns4/n{i}.example.org/tcp/4001" for i in range(MAX_ADDRESSES)]
    found = peer_addresses(meta(*names), allow_private=False)
    assert found.dialable == (f"/ip4/93.184.215.14/tcp/4001/p2p/{PEER}",)  # resolved in time
    spent = [why for _, why in found.refused if "s for resolving names is spent" in why]
    # the budget (RESOLVE_TIMEOUT_S, 2 s) holds two answers and part of a third: the rest are
    # refused without asking the resolver
    assert len(spent) >= MAX_ADDRESSES - 3, found.refused


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("/ip4/127.0.0.2/tcp/4001", "private"),
        ("/ip4/10.1.2.3/tcp/4001", "private"),
        ("/ip4/192.168.1.9/tcp/4001", "private"),
        ("/ip4/169.254.1.1/tcp/4001", "private"),
        ("/ip6/::1/tcp/4001", "private"),
        ("/dns4/localhost/tcp/4001", "private"),
        ("/ip4/0.0.0.0/tcp/4001", "cannot be dialled"),
        ("/ip4/8.8.4.4/udp/4001/quic-v1", "transports this client dials"),
        ("/ip4/8.8.4.4/tcp/70000", "out of range"),
        ("/ip4/999.1.1.1/tcp/4001", "not an ip4 address"),
        ("/ip4/::1/tcp/4001", "not an ip4 address"),
        ("/dns4/bad_host!/tcp/4001", "not a host name"),
        ("/ip4/8.8.4.4/tcp/4001/p2p/12D3KooWSomebodyElse1111111111111111111111111111", "another"),
        ("/ip4/8.8.4.4/tcp/4001" + "/x" * 100, "longer than"),
        (42, "not a string"),
    ],
)
def test_a_bad_or_private_address_is_refused_with_its_reason(address: object, why: str) -> None:
    found = peer_addresses(meta(address, "/ip4/8.8.4.4/tcp/4001"), allow_private=False)
    assert found.dialable == (f"/ip4/8.8.4.4/tcp/4001/p2p/{PEER}",)  # the good one still counts
    assert len(found.refused) == 1 and why in found.refused[0][1], found.refused


def test_private_addresses_are_dialled_where_the_operator_allows_them() -> None:
    found = peer_addresses(meta("/ip4/127.0.0.2/tcp/4001"), allow_private=True)
    assert found.dialable == (f"/ip4/127.0.0.2/tcp/4001/p2p/{PEER}",)


def test_at_most_a_few_addresses_are_taken_and_duplicates_once() -> None:
    many = [f"/ip4/8.8.{i}.4/tcp/4001" for i in range(50)]
    found = peer_addresses(meta(*many, many[0]), allow_private=False)
    assert len(found.dialable) == MAX_ADDRESSES
    assert found.refused[-1][1] == f"over {MAX_ADDRESSES} addresses"
    again = peer_addresses(meta(many[0], f"{many[0]}/p2p/{PEER}"), allow_private=False)
    assert again.dialable == (f"{many[0]}/p2p/{PEER}",)


@pytest.mark.parametrize(
    ("metadata", "why"),
    [
        ("not json", "not JSON"),
        ('{"model": "m"}', "no IPFS peer"),
        ('{"ipfs": "x"}', "no IPFS peer"),
        (meta("/ip4/8.8.4.4/tcp/4001", peer="Qm-not-an-id"), "not a peer id"),
        (meta("/ip4/8.8.4.4/tcp/4001", peer=7), "not a peer id"),
        (json.dumps({"ipfs": {"id": PEER, "addresses": "/ip4/8.8.4.4/tcp/1"}}), "not a list"),
    ],
)
def test_metadata_without_a_usable_peer_names_why(metadata: str, why: str) -> None:
    found = peer_addresses(metadata, allow_private=True)
    assert found.dialable == () and why in found.reason
