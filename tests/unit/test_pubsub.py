"""client.store.pubsub's reading of kubo's pubsub RPC: topics and data in multibase base64url, a
subscription's chunked stream of JSON lines, and everything in it that is not a message skipped
and counted, never raised. The real exchange (two js-ipfs daemons with pubsub on) is in
tests/chain/test_root_lane_node.py; the lines a real daemon cannot be made to send (a line past
the limit, broken JSON, data in another base) come here from a stand-in server on loopback that
writes raw HTTP, named as such."""

from __future__ import annotations

import base64
import json
import socket
import threading

import pytest

from client.store.errors import StoreUnavailable
from client.store.pubsub import (
    MAX_LINE_BYTES,
    PubSub,
    PubSubRefused,
    api_origin,
    multibase_bytes,
    topic_arg,
)


def test_topics_and_data_travel_in_multibase_base64url() -> None:
    topic = "sapo/votes/1/31337/0xab/0xcd"
    arg = topic_arg(topic)
    assert arg.startswith("u") and "=" not in arg and "/" not in arg
    assert multibase_bytes(arg).decode() == topic
    for bad in ("aGVsbG8", "maGVsbG8=", "u!!", 7):
        with pytest.raises(ValueError):
            multibase_bytes(bad)  # type: ignore[arg-type]


def test_the_api_multiaddr_names_its_origin() -> None:
    assert api_origin("/ip4/127.0.0.1/tcp/5001/http") == "http://127.0.0.1:5001"
    assert api_origin("/ip4/127.0.0.1/tcp/5001") == "http://127.0.0.1:5001"
    assert api_origin("/ip6/::1/tcp/5001/https") == "https://[::1]:5001"
    with pytest.raises(ValueError):
        api_origin("localhost:5001")


class StandIn:
    """A stand-in daemon (a fake, for what a real one cannot be made to send): answers one
    request on a loopback port with `status` and the chunked `body` lines, then closes."""

    def __init__(self, lines: list[bytes], status: int = 200, hold: threading.Event | None = None):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.lines, self.status, self.hold = lines, status, hold
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def api(self) -> str:
        return f"/ip4/127.0.0.1/tcp/{self.port}/http"

    def _serve(self) -> None:
        try:
            self._answer()
        except OSError:
            pass  # the reader went away first (it was told to stop)
        finally:
            self.server.close()

    def _answer(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            conn.recv(65536)
            reason = "OK" if self.status == 200 else "Internal Server Error"
            conn.sendall(
                f"HTTP/1.1 {self.status} {reason}\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n".encode()
            )
            for line in self.lines:
                data = line + b"\n"
                # split across chunks, as a daemon may
                for part in (data[: len(data) // 2], data[len(data) // 2 :]):
                    if part:
                        conn.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            if self.hold is not None:
                self.hold.wait(10)
            conn.sendall(b"0\r\n\r\n")


def message(data: bytes) -> bytes:
    encoded = "u" + base64.urlsafe_b64encode(data).decode().rstrip("=")
    return json.dumps({"from": "12D3KooW", "data": encoded, "topicIDs": ["udA"]}).encode()


def test_a_subscription_yields_the_messages_and_skips_what_is_not_one() -> None:
    lines = [
        b"{}",  # the stream's first line: no message
        message(b"first"),
        b"not json",
        json.dumps({"data": "not multibase"}).encode(),
        message(b"x" * MAX_LINE_BYTES),  # a line past the limit, dropped whole
        message(b"second"),
    ]
    daemon = StandIn(lines)
    pubsub = PubSub(daemon.api, timeout_s=5)
    got = []
    with pytest.raises(StoreUnavailable, match="ended"):
        for data in pubsub.subscribe("t", threading.Event()):
            got.append(data)
    assert got == [b"first", b"second"]
    assert pubsub.skipped == 3


def test_a_daemon_with_pubsub_off_is_refused_with_how_to_turn_it_on() -> None:
    daemon = StandIn([json.dumps({"Message": "pubsub not enabled", "Code": 0}).encode()], 500)
    with pytest.raises(PubSubRefused, match=r"Pubsub\.Enabled true"):
        list(PubSub(daemon.api, timeout_s=5).subscribe("t", threading.Event()))


def test_a_silent_subscription_ends_when_asked_to() -> None:
    hold, stop = threading.Event(), threading.Event()
    daemon = StandIn([b"{}"], hold=hold)
    pubsub = PubSub(daemon.api, timeout_s=5)
    seen: list[bytes] = []
    reader = threading.Thread(target=lambda: seen.extend(pubsub.subscribe("t", stop)))
    reader.start()
    stop.set()  # nothing arrives: the reader looks at `stop` at its socket's time-out
    reader.join(30)
    hold.set()
    assert not reader.is_alive() and seen == []


def test_a_daemon_nobody_runs_is_unavailable() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    pubsub = PubSub(f"/ip4/127.0.0.1/tcp/{port}/http", timeout_s=2)
    with pytest.raises(StoreUnavailable, match="not reachable"):
        list(pubsub.subscribe("t", threading.Event()))
    with pytest.raises(StoreUnavailable, match="not reachable"):
        pubsub.publish("t", b"x")
