"""The aggregator's HTTP endpoint (docs/scaling.md, "Two lanes"): where producers send their
signed submissions and drawn checkers their signed agreeing votes, the way EigenLayer's
operators send signatures to an aggregator. The server (`AggregatorServer`) and what a node
sends with (`AggregatorClient`).

    POST /v1/messages   a JSON array of at most MAX_BATCH signed messages (client.chain.messages,
                        each as `Signed.to_bytes` writes it); answers 200 with one result per
                        message, in order: {"results": [{"accepted": true},
                        {"accepted": false, "reason": "…"}, …]}; a held message's result
                        carries the aggregator's receipt of it, {"accepted": true,
                        "receipt": "0x…"} (a `Receipt` signature: client.chain.messages)
    GET  /v1/status     {"chainId": …, "book": "0x…", "rounds": [the rounds collected now]}

Both sides are hostile to each other's input. The server reads no body without a
Content-Length, none over MAX_BODY_BYTES, and gives each request MAX_REQUEST_S; a message is
verified (`Signed.from_bytes`: size, fields, canonical signature, signer, this deployment's
domain) before anything is held, then judged by the round's Collector; a refusal names why, and
no sender can stop the server or make it hold a message its collector would not take. A held
submission is answered with a receipt signed by the aggregator's key: should the submission root
it posts leave that submission out, the producer proves it on chain (RoundBook.proveLeftOut) and
takes half its bond; a receipt is given only for a submission taken while the round's
submissions were open, under the lock the root is built under, so every receipted submission is
in the root. A held vote is receipted the same way: should the verdict root leave uncredited a
batch a quorum of receipted votes agreed on, anyone holding them proves it
(RoundJudge.proveUncredited); a vote is taken only until the round's votes close, under the lock
the verdict root is built under. The
client takes an aggregator's address from on-chain metadata (a stranger's input): only an
http(s) origin, and only this module's two fixed paths are ever requested on it, so a hostile
address cannot point a node's POST at another API of the host (an IPFS daemon's
/api/v0/shutdown, say); an answer is read up to MAX_ANSWER_BYTES and must fit its shape.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import requests
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from client import __version__
from client.chain.messages import (
    MAX_MESSAGE_BYTES,
    BadMessage,
    Domain,
    ReceiptSigner,
    Signed,
    receipt_signer,
)
from client.config.models.values import is_loopback, parse_listen_addr
from client.node.aggregation.collector import Collector, Refused

log = logging.getLogger("sapo.aggregator")

MAX_BATCH = 64  # messages in one POST: a node's submission, or its votes of a round (K ~ 10)
MAX_BODY_BYTES = MAX_BATCH * (MAX_MESSAGE_BYTES + 8) + 2  # the array's brackets and commas
MAX_REQUEST_S = 10.0  # a request's socket time-out: a client that trickles its body is dropped
MAX_ANSWER_BYTES = MAX_BATCH * 1024 + 1024  # a results array: reasons are short
MAX_URL_CHARS = 200
MESSAGES_PATH, STATUS_PATH = "/v1/messages", "/v1/status"


class EndpointError(Exception):
    """The endpoint cannot start, or an aggregator's address or answer is not usable; the text
    says what and what to do."""


# --------------------------------------------------------------------------------------- server


@dataclass(frozen=True)
class Answer:
    """What an aggregator answered one message: held (`refused` None), with its `receipt` when
    it is a submission, or the reason it was refused."""

    refused: str | None = None
    receipt: str | None = None


class Desk:
    """The rounds an aggregator collects now, shared by the server's threads: messages are
    verified outside the lock (signature recovery is the costly part), judged under it.
    `receipts`: the aggregator's key, which signs a receipt of each held message (none: no
    receipts, as a desk that will not post). `record`: called, under the lock, with the messages
    of one request that come to be held, before any answer (the aggregator's journal: what it
    receipted survives a restart); when it raises, they are let go and their senders told to
    send them again."""

    def __init__(
        self,
        domain: Domain,
        receipts: ReceiptSigner | None = None,
        record: Callable[[list[Signed]], None] | None = None,
    ):
        if receipts is not None and receipts.domain != domain:
            raise ValueError("a receipt signer of another deployment")
        self.domain = domain
        self.receipts = receipts
        self.record = record
        self._rounds: dict[int, Collector] = {}
        self._lock = threading.Lock()
        self.cpu_s = 0.0  # thread CPU spent serving requests (what the aggregator pays)

    def open(self, collector: Collector) -> None:
        if collector.domain != self.domain:
            raise ValueError("a collector of another deployment")
        with self._lock:
            self._rounds[collector.round] = collector

    def close(self, round_: int) -> Collector | None:
        """Stops collecting `round_`; returns its collector (what it held)."""
        with self._lock:
            return self._rounds.pop(round_, None)

    def rounds(self) -> list[int]:
        with self._lock:
            return sorted(self._rounds)

    def hold(self, round_: int):
        """The lock and the collector of `round_` (None when not collected), for the aggregator
        to build a root while no message changes it: `with desk.hold(r) as collector: …`."""
        return _Held(self, round_)

    def accept(self, data: bytes) -> Answer:
        """Judges one message: held (with its receipt) or refused."""
        return self.accept_many([data])[0]

    def accept_many(self, datas: list[bytes]) -> list[Answer]:
        """Judges the messages of one request, in order: each verified outside the lock, taken
        under it, and the new ones recorded in one write before any is answered (one commit a
        request, not one a message); receipts are signed outside the lock."""
        answers: list[Answer | None] = [None] * len(datas)
        parsed: list[tuple[int, Signed]] = []
        for i, data in enumerate(datas):
            try:
                parsed.append((i, Signed.from_bytes(data, self.domain)))
            except BadMessage as exc:
                answers[i] = Answer(refused=str(exc))
        held: list[tuple[int, Signed]] = []
        with self._lock:
            new: list[tuple[Collector, Signed]] = []
            for i, signed in parsed:
                round_ = signed.message.round
                collector = self._rounds.get(round_)
                if collector is None:
                    open_ = ", ".join(map(str, sorted(self._rounds))) or "none"
                    answers[i] = Answer(
                        refused=f"round {round_} is not collected here (collecting: {open_})"
                    )
                    continue
                try:
                    kept = collector.take(signed)
                except Refused as exc:
                    answers[i] = Answer(refused=str(exc))
                    continue
                except Exception as exc:  # a check's chain read failed: nothing of it was taken
                    log.warning("aggregator: a message could not be judged: %s", exc)
                    answers[i] = Answer(
                        refused=f"the aggregator could not judge it now ({type(exc).__name__}); "
                        "send it again"
                    )
                    continue
                if kept is signed:
                    new.append((collector, signed))
                held.append((i, kept))
            if new and self.record is not None:  # on disk before any of them is answered
                try:
                    self.record([signed for _, signed in new])
                except Exception as exc:
                    log.error("aggregator: %d messages could not be recorded: %s", len(new), exc)
                    lost = {id(signed) for _, signed in new}
                    for collector, signed in new:
                        collector.drop(signed)
                    again = Answer(refused="the aggregator could not record it; send it again")
                    for i, kept in held:
                        if id(kept) in lost:
                            answers[i] = again
                    held = [(i, kept) for i, kept in held if id(kept) not in lost]
        for i, kept in held:
            # signed outside the lock: it is held, and stays in the root once the root is built
            if self.receipts is not None:
                answers[i] = Answer(receipt=self.receipts.sign(kept))
            else:
                answers[i] = Answer()
        return [a if a is not None else Answer(refused="not judged") for a in answers]


class _Held:
    def __init__(self, desk: Desk, round_: int):
        self.desk, self.round = desk, round_

    def __enter__(self) -> Collector | None:
        self.desk._lock.acquire()
        return self.desk._rounds.get(self.round)

    def __exit__(self, *exc) -> None:
        self.desk._lock.release()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a node sends its submission, then its votes
    timeout = MAX_REQUEST_S
    server: _Server

    def log_message(self, format: str, *args) -> None:
        log.debug("aggregator endpoint: %s %s", self.address_string(), format % args)

    def _answer(self, status: HTTPStatus, body: dict, close: bool = False) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: HTTPStatus, reason: str, close: bool = False) -> None:
        self._answer(status, {"error": reason}, close)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What the base class answers a request it cannot parse or route (an unsupported
        method, a malformed request line, headers too long): in JSON, as every answer here."""
        status = HTTPStatus(code)
        reason = message or status.phrase
        self._error(
            status,
            f"{reason}; this endpoint serves POST {MESSAGES_PATH}, GET {STATUS_PATH}",
            close=True,
        )

    def do_GET(self) -> None:
        if self.path != STATUS_PATH:
            return self._error(HTTPStatus.NOT_FOUND, f"no {self.path[:80]} here: GET {STATUS_PATH}")
        desk = self.server.desk
        body = {
            "chainId": desk.domain.chain_id,
            "book": desk.domain.contract,
            "rounds": desk.rounds(),
            "client": f"sapo-swarm/{__version__}",
        }
        self._answer(HTTPStatus.OK, body)

    def do_POST(self) -> None:
        started = time.thread_time()
        try:
            self._post()
        finally:
            with self.server.cpu_lock:
                self.server.desk.cpu_s += time.thread_time() - started

    def _post(self) -> None:
        if self.path != MESSAGES_PATH:
            return self._error(
                HTTPStatus.NOT_FOUND, f"no {self.path[:80]} here: POST {MESSAGES_PATH}", close=True
            )
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            return self._error(
                HTTPStatus.LENGTH_REQUIRED, "a POST needs its Content-Length", close=True
            )
        if int(length) > MAX_BODY_BYTES:
            # not read: the connection is closed instead
            return self._error(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"at most {MAX_BODY_BYTES} bytes a POST ({MAX_BATCH} messages), got {length}",
                close=True,
            )
        body = self.rfile.read(int(length))
        try:
            messages = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return self._error(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {exc}")
        except RecursionError:  # "[[[[…" 66 KB deep: the decoder's own depth limit
            return self._error(HTTPStatus.BAD_REQUEST, "the body's JSON is nested too deep")
        if not isinstance(messages, list) or not messages or len(messages) > MAX_BATCH:
            return self._error(
                HTTPStatus.BAD_REQUEST,
                f"the body is a JSON array of 1 to {MAX_BATCH} signed messages",
            )
        results: list[dict] = []
        datas = [json.dumps(m, separators=(",", ":")).encode() for m in messages]
        for answer in self.server.desk.accept_many(datas):
            if answer.refused is not None:
                results.append({"accepted": False, "reason": answer.refused})
            elif answer.receipt is not None:
                results.append({"accepted": True, "receipt": answer.receipt})
            else:
                results.append({"accepted": True})
        self._answer(HTTPStatus.OK, {"results": results})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    desk: Desk
    cpu_lock: threading.Lock


class AggregatorServer:
    """The endpoint on its own daemon threads, on loopback unless `public`."""

    def __init__(self, addr: str, desk: Desk, *, public: bool = False):
        try:  # port 0: a free port, chosen by the system (`url` says which)
            any_port = addr.strip().endswith(":0")
            host, port = parse_listen_addr(addr.strip()[:-1] + "1" if any_port else addr)
            port = 0 if any_port else port
        except ValueError as exc:
            raise EndpointError(f"aggregator address: {exc}") from None
        if not public and not is_loopback(host):
            raise EndpointError(
                f"aggregator address {addr!r} is not a loopback address: serve it to other "
                "machines only on purpose (public=True), behind what limits its clients"
            )
        try:
            self.httpd = _Server((host, port), _Handler)
        except OSError as exc:
            raise EndpointError(
                f"aggregator address {addr}: cannot listen there ({exc.strerror or exc}); "
                "choose another port"
            ) from None
        self.httpd.desk = desk
        self.httpd.cpu_lock = threading.Lock()
        bound_host, bound_port = self.httpd.server_address[:2]
        self.url = (
            f"http://{'[' + bound_host + ']' if ':' in bound_host else bound_host}:{bound_port}"
        )
        self.thread = threading.Thread(
            target=self.httpd.serve_forever,
            kwargs={"poll_interval": 0.05},  # how soon close() returns
            name="aggregator-endpoint",
            daemon=True,
        )
        self.thread.start()
        log.info("aggregator: collecting at %s%s", self.url, MESSAGES_PATH)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> AggregatorServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --------------------------------------------------------------------------------------- client


def aggregator_origin(value: object) -> str:
    """The http(s) origin an aggregator lists (its metadata's `aggregator`), checked: a scheme,
    a host, an optional port, nothing else (no user, path, query or fragment)."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_URL_CHARS:
        raise EndpointError(
            f"an aggregator's address is an http(s) origin of at most {MAX_URL_CHARS} characters"
        )
    try:
        parts = urlsplit(value)
        port = parts.port  # raises on a port out of range
    except ValueError as exc:
        raise EndpointError(f"aggregator address {value[:80]!r}: {exc}") from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise EndpointError(
            f"aggregator address {value[:80]!r} is not an http(s) origin (scheme://host:port, "
            "nothing after it)"
        )
    default = 443 if parts.scheme == "https" else 80
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port or default}"


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    accepted: bool
    reason: str | None = Field(None, max_length=1024)
    receipt: str | None = Field(None, max_length=132)


class _Results(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    results: list[_Result]


class _Status(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    chainId: int
    book: str
    rounds: list[int] = Field(max_length=1024)


class AggregatorClient:
    """What a node sends its signed messages with, to one aggregator's origin. `aggregator`: the
    address whose metadata listed the origin; a receipt counts only if that address
    signed it (it is the one that must post the root to be bound by it)."""

    def __init__(
        self, origin: str, domain: Domain, *, aggregator: str | None = None, timeout_s: float = 10.0
    ):
        self.origin = aggregator_origin(origin)
        self.domain = domain
        self.aggregator = aggregator
        self.timeout_s = timeout_s
        self._session = requests.Session()
        self._session.trust_env = False  # no proxy from the environment sees the messages
        self.requests = 0
        self.sent_bytes = 0

    def close(self) -> None:
        self._session.close()

    def _read(self, response: requests.Response) -> bytes:
        chunks, total = [], 0
        for chunk in response.iter_content(8192):
            total += len(chunk)
            if total > MAX_ANSWER_BYTES:
                raise EndpointError(
                    f"aggregator {self.origin} answered more than {MAX_ANSWER_BYTES} bytes"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        self.requests += 1
        self.sent_bytes += len(body or b"")
        try:
            with self._session.request(
                method,
                self.origin + path,
                data=body,
                headers={"Content-Type": "application/json"} if body is not None else None,
                timeout=self.timeout_s,
                stream=True,
                allow_redirects=False,
            ) as response:
                return response.status_code, self._read(response)
        except requests.RequestException as exc:
            raise EndpointError(
                f"aggregator {self.origin} not reachable: {type(exc).__name__}; the messages "
                "were not taken (send them again, or use the v4 lane)"
            ) from None

    def status(self) -> list[int]:
        """The rounds the aggregator collects now; raises EndpointError when it serves another
        deployment than this node's."""
        code, data = self._request("GET", STATUS_PATH)
        if code != 200:
            raise EndpointError(f"aggregator {self.origin} answered HTTP {code} to {STATUS_PATH}")
        try:
            status = _Status.model_validate_json(data)
        except ValidationError:
            raise EndpointError(f"aggregator {self.origin}'s status is not its shape") from None
        if (
            status.chainId != self.domain.chain_id
            or status.book.lower() != self.domain.contract.lower()
        ):
            raise EndpointError(
                f"aggregator {self.origin} collects for chain {status.chainId}, book "
                f"{status.book[:42]}; this node's is chain {self.domain.chain_id}, book "
                f"{self.domain.contract}"
            )
        return status.rounds

    def send(self, messages: list[Signed]) -> list[Answer]:
        """Sends up to MAX_BATCH messages; returns for each what the aggregator answered: held,
        with its receipt when it gave one that its address signed (a receipt
        that is not is dropped and logged: it binds nobody), or the reason it was refused.
        Raises EndpointError when the aggregator cannot be reached or answers out of its
        shape."""
        if not 0 < len(messages) <= MAX_BATCH:
            raise ValueError(f"1 to {MAX_BATCH} messages a POST, not {len(messages)}")
        body = b"[" + b",".join(m.to_bytes() for m in messages) + b"]"
        code, data = self._request("POST", MESSAGES_PATH, body)
        if code != 200:
            try:
                reason = str(json.loads(data).get("error"))[:300]
            except (ValueError, AttributeError):
                reason = "no reason given"
            raise EndpointError(
                f"aggregator {self.origin} refused the POST (HTTP {code}): {reason}"
            )
        try:
            results = _Results.model_validate_json(data).results
        except ValidationError:
            raise EndpointError(f"aggregator {self.origin}'s answer is not its shape") from None
        if len(results) != len(messages):
            raise EndpointError(
                f"aggregator {self.origin} answered {len(results)} results for "
                f"{len(messages)} messages"
            )
        return [self._answer(m, r) for m, r in zip(messages, results, strict=True)]

    def _answer(self, message: Signed, result: _Result) -> Answer:
        if not result.accepted:
            return Answer(refused=result.reason or "refused, no reason given")
        if result.receipt is None:
            return Answer()
        try:
            signer = receipt_signer(self.domain, message, result.receipt)
        except BadMessage as exc:
            log.warning("aggregator %s: a malformed receipt (%s), dropped", self.origin, exc)
            return Answer()
        if self.aggregator is not None and signer.lower() != self.aggregator.lower():
            log.warning(
                "aggregator %s: a receipt signed by %s, not by %s: dropped",
                self.origin,
                signer,
                self.aggregator,
            )
            return Answer()
        return Answer(receipt=result.receipt)


__all__ = [
    "MAX_BATCH",
    "MAX_BODY_BYTES",
    "AggregatorClient",
    "AggregatorServer",
    "Answer",
    "Desk",
    "EndpointError",
    "aggregator_origin",
]
