"""The aggregator's HTTP endpoint (client/node/aggregation/endpoint.py), served for real on
loopback and spoken to over real sockets: a node's signed messages are held or refused with a
reason; a hostile sender gets a clear HTTP error and the endpoint keeps serving; a node takes an
aggregator's address only as an http(s) origin and refuses a hostile aggregator's answers. The
hostile aggregator here is the adversary itself (a small HTTP server that lies), not a fake of
the real one."""

from __future__ import annotations

import contextlib
import http.client
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from client.chain.messages import Domain, ReceiptSigner, receipt_signer
from client.node.aggregation.collector import Collector
from client.node.aggregation.endpoint import (
    MAX_BATCH,
    MAX_BODY_BYTES,
    AggregatorClient,
    AggregatorServer,
    Answer,
    Desk,
    EndpointError,
    aggregator_origin,
)
from client.units import SCORE_SCALE
from tests.harness.signed import DOMAIN, KEYS, OTHER, ROUND, signed_submission, signed_vote


def submission(key, round_: int = ROUND, domain: Domain = DOMAIN, signal: int = SCORE_SCALE):
    return signed_submission(key, signal, domain, round_)


def vote(key, producer, domain: Domain = DOMAIN):
    return signed_vote(key, producer, domain=domain)


AGGREGATOR = KEYS[8]  # whose key signs the receipts


@pytest.fixture
def served():
    desk = Desk(DOMAIN, ReceiptSigner(DOMAIN, AGGREGATOR.key))
    desk.open(Collector(DOMAIN, ROUND, tolerance_bps=500, registered=lambda a: True))
    with AggregatorServer("127.0.0.1:0", desk) as server:
        yield desk, server


def raw(server: AggregatorServer, method: str, path: str, body: bytes = b"", headers=None):
    host, port = server.httpd.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.putrequest(method, path)
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        conn.endheaders()
        if body:
            # the server may answer and close before reading it all
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                conn.send(body)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def test_a_node_sends_its_messages_and_is_told_which_were_held_and_why_not(served) -> None:
    desk, server = served
    client = AggregatorClient(server.url, DOMAIN, aggregator=AGGREGATOR.address)
    assert client.status() == [ROUND]
    producer, voters = KEYS[0], KEYS[1:4]
    [held] = client.send([submission(producer)])
    # a held submission comes with the aggregator's receipt: what binds it to post it
    assert held.refused is None
    assert receipt_signer(DOMAIN, submission(producer), held.receipt) == AGGREGATOR.address
    # and so does a held vote: what binds it to count it
    votes = [vote(v, producer) for v in voters]
    answers = client.send(votes)
    assert all(a.refused is None for a in answers)
    signers = {receipt_signer(DOMAIN, v, a.receipt) for v, a in zip(votes, answers, strict=True)}
    assert signers == {AGGREGATOR.address}

    refused = client.send(
        [
            vote(KEYS[4], producer, domain=OTHER),  # signed for another deployment
            submission(producer, signal=2 * SCORE_SCALE),  # a second, different submission
            submission(KEYS[5], round_=ROUND + 1),  # a round not collected here
            vote(KEYS[4], producer),  # a good one among the bad: held
        ]
    )
    assert refused[3].refused is None and refused[3].receipt is not None
    assert "another deployment" in refused[0].refused
    assert "second, different submission" in refused[1].refused
    assert refused[1].receipt is None  # no receipt for what is not held
    assert f"round {ROUND + 1} is not collected here (collecting: {ROUND})" == refused[2].refused
    with desk.hold(ROUND) as collector:
        assert len(collector.submissions) == 1 and len(collector.votes) == 4
        assert len(collector.equivocations) == 1  # kept as evidence, the first stands
        root = collector.submission_root()
    assert root.signed[0].signer == producer.address
    assert client.send([submission(KEYS[5])]) == [
        Answer(refused="the round's submissions are closed (its root is posted)")
    ]
    assert desk.close(ROUND) is collector and client.status() == []
    assert client.requests == 6 and desk.cpu_s > 0


def test_a_hostile_sender_gets_a_clear_error_and_the_endpoint_keeps_serving(served) -> None:
    desk, server = served
    json_ = {"Content-Type": "application/json"}
    status, body = raw(server, "POST", "/v1/messages", headers=json_)  # no Content-Length
    assert status == 411 and "Content-Length" in body["error"]
    big = b"[" + b"0," * MAX_BODY_BYTES + b"0]"
    status, body = raw(
        server, "POST", "/v1/messages", big, {**json_, "Content-Length": str(len(big))}
    )
    assert status == 413 and f"at most {MAX_BODY_BYTES} bytes" in body["error"]
    for junk, said in [
        (b"\xff\xfe not json", "not JSON"),
        (b'{"kind": "Vote"}', "JSON array"),
        (b"[]", "JSON array"),
        (json.dumps([{}] * (MAX_BATCH + 1)).encode(), f"1 to {MAX_BATCH}"),
    ]:
        status, body = raw(
            server, "POST", "/v1/messages", junk, {**json_, "Content-Length": str(len(junk))}
        )
        assert status == 400 and said in body["error"], (junk[:20], body)
    # JSON nested past the decoder's depth limit (Python's default recursion limit, which a
    # node runs with; pytest's plugins raise it)
    deep = b"[" * 30_000 + b"]" * 30_000
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1_000)
    try:
        status, body = raw(
            server, "POST", "/v1/messages", deep, {**json_, "Content-Length": str(len(deep))}
        )
    finally:
        sys.setrecursionlimit(limit)
    assert status == 400 and "nested too deep" in body["error"]
    # messages that are not messages are refused one by one, with the reason
    junk = json.dumps([{"kind": "Vote"}, "x", {"kind": "Submission", "message": {}}]).encode()
    status, body = raw(
        server, "POST", "/v1/messages", junk, {**json_, "Content-Length": str(len(junk))}
    )
    assert status == 200 and [r["accepted"] for r in body["results"]] == [False] * 3
    assert all("malformed" in r["reason"] or "kind" in r["reason"] for r in body["results"])
    status, body = raw(server, "GET", "/api/v0/shutdown")
    assert status == 404 and "/v1/status" in body["error"]
    status, body = raw(server, "PUT", "/v1/messages")
    assert status == 501 and "'PUT'" in body["error"] and "POST /v1/messages" in body["error"]
    # and it still serves
    [answer] = AggregatorClient(server.url, DOMAIN).send([submission(KEYS[0])])
    assert answer.refused is None and answer.receipt is not None
    with desk.hold(ROUND) as collector:
        assert list(collector.submissions) == [KEYS[0].address.lower()]


def test_the_endpoint_listens_on_loopback_unless_made_public() -> None:
    with pytest.raises(EndpointError, match="not a loopback address"):
        AggregatorServer("0.0.0.0:0", Desk(DOMAIN))
    with pytest.raises(EndpointError, match="not HOST:PORT"):
        AggregatorServer("localhost", Desk(DOMAIN))
    with AggregatorServer("127.0.0.1:0", Desk(DOMAIN)) as server:
        port = server.httpd.server_address[1]
        with pytest.raises(EndpointError, match="cannot listen there"):
            AggregatorServer(f"127.0.0.1:{port}", Desk(DOMAIN))


@pytest.mark.parametrize(
    "address",
    [
        "http://127.0.0.1:5001/api/v0/shutdown",  # a path: a POST would reach another API
        "ftp://10.0.0.1:21",
        "http://user:secret@10.0.0.1:8000",
        "http://10.0.0.1:8000?x=1",
        "http://10.0.0.1:99999",
        "http://",
        "h" * 300,
        12345,
    ],
)
def test_a_node_takes_an_aggregators_address_only_as_an_http_origin(address) -> None:
    with pytest.raises(EndpointError, match="aggregator"):
        aggregator_origin(address)


def test_an_origin_is_written_one_way() -> None:
    assert aggregator_origin("http://10.0.0.1:8000/") == "http://10.0.0.1:8000"
    assert aggregator_origin("https://agg.example.org") == "https://agg.example.org:443"
    assert aggregator_origin("http://[::1]:9000") == "http://[::1]:9000"


class _Liar(BaseHTTPRequestHandler):
    """A hostile aggregator: answers every request with what `self.server.answer` says."""

    def log_message(self, *args) -> None:
        pass

    def _reply(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        status, headers, body = self.server.answer  # type: ignore[attr-defined]
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _reply


@pytest.fixture
def liar():
    server = HTTPServer(("127.0.0.1", 0), _Liar)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "answer, said",
    [
        ((200, {}, b'{"results": [{"accepted": true}]}'), "2 messages"),  # one result for two
        ((200, {}, b'{"results": "yes"}'), "not its shape"),
        ((200, {}, b"[" + b" " * 80_000 + b"]"), "more than"),
        ((500, {}, b'{"error": "busy"}'), "HTTP 500): busy"),
        ((302, {"Location": "http://127.0.0.1:5001/api/v0/shutdown"}, b""), "HTTP 302"),
    ],
)
def test_a_node_refuses_a_hostile_aggregators_answer(liar, answer, said) -> None:
    liar.answer = answer
    client = AggregatorClient(f"http://127.0.0.1:{liar.server_address[1]}", DOMAIN)
    with pytest.raises(EndpointError, match=said.replace("(", r"\(").replace(")", r"\)")):
        client.send([submission(KEYS[0]), submission(KEYS[1])])


def test_a_node_refuses_an_aggregator_of_another_deployment(liar) -> None:
    liar.answer = (
        200,
        {},
        json.dumps({"chainId": 1, "book": OTHER.contract, "rounds": []}).encode(),
    )
    client = AggregatorClient(f"http://127.0.0.1:{liar.server_address[1]}", DOMAIN)
    with pytest.raises(EndpointError, match="collects for chain 1"):
        client.status()
    liar.server_close()  # gone: the node is told it is unreachable, and what to do
    liar.shutdown()
    with pytest.raises(EndpointError, match=r"not reachable.*v4 lane"):
        AggregatorClient(f"http://127.0.0.1:{liar.server_address[1]}", DOMAIN, timeout_s=2).status()


def test_a_node_keeps_only_a_receipt_its_aggregator_signed(liar) -> None:
    """A receipt binds only the aggregator that posts the root: one signed by another key, or
    malformed, is worth nothing and is dropped (the node then has no receipt: docs/scaling.md)."""
    origin = f"http://127.0.0.1:{liar.server_address[1]}"
    sent = submission(KEYS[0])
    client = AggregatorClient(origin, DOMAIN, aggregator=AGGREGATOR.address)
    for receipt in (
        ReceiptSigner(DOMAIN, KEYS[7].key).sign(sent),  # another key's
        ReceiptSigner(OTHER, AGGREGATOR.key).sign(sent),  # another deployment's
        "0x" + "00" * 65,  # malformed
    ):
        body = {"results": [{"accepted": True, "receipt": receipt}]}
        liar.answer = (200, {}, json.dumps(body).encode())
        assert client.send([sent]) == [Answer()]
    good = ReceiptSigner(DOMAIN, AGGREGATOR.key).sign(sent)
    liar.answer = (200, {}, json.dumps({"results": [{"accepted": True, "receipt": good}]}).encode())
    assert client.send([sent]) == [Answer(receipt=good)]
