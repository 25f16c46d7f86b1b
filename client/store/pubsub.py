"""`PubSub`: libp2p pubsub through an IPFS daemon's HTTP RPC API, as kubo documents it
(/api/v0/pubsub/pub and /api/v0/pubsub/sub; js-ipfs 0.66 serves the same): a topic travels
multibase-encoded (`u` + unpadded base64url), a published message is the multipart file `data`,
and a subscription is a stream of one JSON object per line whose `data` is multibase too.

Kubo runs pubsub only where the daemon's config says `Pubsub.Enabled` (off by default:
`ipfs config --json Pubsub.Enabled true`, then restart it); a daemon without it refuses every
call, and `PubSubRefused` says how to turn it on. Nothing here trusts what arrives: a line that is
too long, is not JSON, or whose data is not multibase base64url is skipped (and counted); what the
data says is the caller's to validate.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import socket
import ssl
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import requests

from client.store.errors import StoreError, StoreUnavailable

# a subscription's line: kubo's JSON wrapper around the message, the data base64url (4/3 its size)
MAX_LINE_BYTES = 64 * 1024
_HEX = re.compile(rb"[0-9a-fA-F]{1,16}")
MAX_CHUNK_BYTES = 4 << 20  # a daemon's chunk holds a few lines: more is not a daemon's answer
ENABLE = "ipfs config --json Pubsub.Enabled true, then restart the daemon"


class PubSubRefused(StoreError):
    """The daemon answered, but refused the call (pubsub off, no peer on the topic, ...)."""

    def __init__(self, what: str, said: str):
        self.said = said
        hint = f" (turn pubsub on: {ENABLE})" if "not enabled" in said.lower() else ""
        super().__init__(f"IPFS pubsub/{what} refused: {said}{hint}")


def topic_arg(topic: str) -> str:
    """A topic as kubo's RPC takes it: multibase base64url (`u`), unpadded."""
    return "u" + base64.urlsafe_b64encode(topic.encode()).decode().rstrip("=")


def multibase_bytes(text: str) -> bytes:
    """Decodes kubo's multibase base64url (`u`) field; ValueError for anything else."""
    if not isinstance(text, str) or not text.startswith("u"):
        raise ValueError("not multibase base64url ('u')")
    body = text[1:]
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"bad base64url: {exc}") from None


def api_origin(multiaddr: str) -> str:
    """http://HOST:PORT of an IPFS API multiaddr such as /ip4/127.0.0.1/tcp/5001/http (the
    shape [store].ipfs_api validates)."""
    parts = multiaddr.strip("/").split("/")
    if len(parts) not in (4, 5) or parts[2] != "tcp" or not parts[3].isdigit():
        raise ValueError(f"not an IPFS API multiaddr: {multiaddr!r}")
    scheme = parts[4] if len(parts) == 5 else "http"
    host = f"[{parts[1]}]" if parts[0] == "ip6" else parts[1]
    return f"{scheme}://{host}:{parts[3]}"


class PubSub:
    """Publishes to and subscribes to topics through one IPFS daemon's RPC API."""

    def __init__(self, api: str, timeout_s: float = 10.0):
        self.api = api
        self.origin = api_origin(api)
        self.timeout_s = timeout_s
        self.skipped = 0  # subscription lines that were not a message (counted, never raised)

    def _url(self, what: str) -> str:
        return f"{self.origin}/api/v0/pubsub/{what}"

    def _refusal(self, what: str, answer: requests.Response) -> PubSubRefused:
        try:
            said = str(answer.json().get("Message", ""))[:300]
        except ValueError:
            said = answer.text[:300]
        return PubSubRefused(what, said or f"HTTP {answer.status_code}")

    def publish(self, topic: str, data: bytes) -> None:
        """Publishes `data` on `topic`; raises StoreUnavailable (daemon not reachable) or
        PubSubRefused (it answered no: pubsub off, or nobody on the topic among its peers)."""
        try:  # a request of its own (no shared session): called from several threads
            answer = requests.post(
                self._url("pub"),
                params={"arg": topic_arg(topic)},
                files={"data": ("data", data, "application/octet-stream")},
                timeout=self.timeout_s,
            )
        except requests.RequestException as exc:
            raise StoreUnavailable(
                f"IPFS daemon not reachable at {self.api} for pubsub/pub: {exc}"
            ) from None
        if answer.status_code != 200:
            raise self._refusal("pub", answer)

    def _strings(self, what: str, **params: str) -> list[str]:
        try:
            answer = requests.post(self._url(what), params=params, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise StoreUnavailable(
                f"IPFS daemon not reachable at {self.api} for pubsub/{what}: {exc}"
            ) from None
        if answer.status_code != 200:
            raise self._refusal(what, answer)
        try:
            strings = answer.json().get("Strings") or []
        except (ValueError, AttributeError):
            raise StoreUnavailable(f"IPFS pubsub/{what} at {self.api}: not a JSON answer") from None
        return [str(s) for s in strings if isinstance(s, str)]

    def dial(self, addresses: list[str], timeout_s: float = 2.0) -> bool:
        """Connects the daemon to a peer (kubo's `swarm/connect`), at the first of `addresses`
        (multiaddrs ending in /p2p/ID) that answers: a topic reaches the peers a daemon is
        connected to. Thread-safe (a request of its own); never raises."""
        for address in addresses:
            try:
                answer = requests.post(
                    f"{self.origin}/api/v0/swarm/connect",
                    params={"arg": address},
                    timeout=timeout_s,
                )
            except requests.RequestException:
                continue
            if answer.status_code == 200:
                return True
        return False

    def topic_peers(self, topic: str) -> list[str]:
        """The peer ids this daemon knows to be subscribed to `topic` (kubo's `pubsub peers`;
        whether or not it is itself)."""
        return self._strings("peers", arg=topic_arg(topic))

    def topics(self) -> list[str]:
        """The topics this daemon is subscribed to (kubo's `pubsub ls`, names decoded)."""
        found = []
        for name in self._strings("ls"):
            try:
                found.append(multibase_bytes(name).decode())
            except (ValueError, UnicodeDecodeError):
                continue
        return found

    def subscribe(self, topic: str, stop: threading.Event) -> Iterator[bytes]:
        """Yields the data of each message published on `topic` by another peer, until `stop`
        is set (checked at each message and every second of silence) or the stream ends.
        Raises StoreUnavailable (daemon not reachable, the stream cut off) or PubSubRefused.

        Spoken over a socket of its own, chunked HTTP/1.1 decoded here: a subscription is silent
        for as long as nobody publishes, and a client library's read time-out closes its
        response for good, while the socket's is only a chance to look at `stop`."""
        url = urlsplit(self.origin)
        try:
            sock = socket.create_connection((url.hostname, url.port), timeout=self.timeout_s)
            if url.scheme == "https":
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=url.hostname)
            request = (
                f"POST /api/v0/pubsub/sub?arg={topic_arg(topic)} HTTP/1.1\r\n"
                f"Host: {url.netloc}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            sock.sendall(request.encode())
        except OSError as exc:
            raise StoreUnavailable(
                f"IPFS daemon not reachable at {self.api} for pubsub/sub: {exc}"
            ) from None
        sock.settimeout(1.0)
        # a half-open connection to a remote daemon is found out, not waited on forever
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        stream = _Stream(sock, stop, self.api)
        try:
            status, headers = stream.head()
            if stop.is_set():
                return
            chunked = "chunked" in headers.get("transfer-encoding", "").lower()
            if status != 200:
                body = b"".join(stream.body(chunked, limit=MAX_LINE_BYTES))
                try:
                    said = str(json.loads(body).get("Message", ""))[:300]
                except (ValueError, AttributeError):
                    said = body[:300].decode(errors="replace")
                raise PubSubRefused("sub", said or f"HTTP {status}")
            buffer, dropping = b"", False  # dropping: the rest of a line past the limit
            for chunk in stream.body(chunked):
                buffer += chunk
                while b"\n" in buffer:
                    line, _, buffer = buffer.partition(b"\n")
                    if dropping or len(line) > MAX_LINE_BYTES:
                        self.skipped += 0 if dropping else 1
                        data, dropping = None, False
                    else:
                        data = self._message(line)
                    if data is not None:
                        yield data
                if len(buffer) > MAX_LINE_BYTES:  # a line past the limit: dropped whole
                    self.skipped += 0 if dropping else 1
                    buffer, dropping = b"", True
            if not stop.is_set():
                raise StoreUnavailable(f"IPFS pubsub/sub stream from {self.api} ended")
        finally:
            sock.close()

    def _message(self, line: bytes) -> bytes | None:
        line = line.strip()
        if not line:
            return None
        try:
            obj = json.loads(line)
        except ValueError:
            self.skipped += 1
            return None
        if not isinstance(obj, dict) or not obj:  # `{}`: the stream's first line, no message
            return None
        if "Message" in obj and "data" not in obj:  # an error object mid-stream
            raise PubSubRefused("sub", str(obj.get("Message"))[:300])
        try:
            return multibase_bytes(obj.get("data"))
        except ValueError:
            self.skipped += 1
            return None


class _Stream:
    """An HTTP/1.1 response read off a socket whose time-out only lets `stop` be looked at."""

    def __init__(self, sock: socket.socket, stop: threading.Event, api: str):
        self.sock, self.stop, self.api = sock, stop, api
        self.buffer = b""

    def _more(self) -> bool:
        """Reads what the socket has into the buffer; False once `stop` is set."""
        while not self.stop.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError as exc:
                raise StoreUnavailable(
                    f"IPFS pubsub/sub stream from {self.api} broke: {exc}"
                ) from None
            if not data:
                raise StoreUnavailable(f"IPFS pubsub/sub stream from {self.api} ended")
            self.buffer += data
            return True
        return False

    def _until(self, mark: bytes, limit: int) -> bytes | None:
        while mark not in self.buffer:
            if len(self.buffer) > limit:
                raise StoreUnavailable(f"IPFS pubsub/sub from {self.api}: a header past {limit} B")
            if not self._more():
                return None
        head, _, self.buffer = self.buffer.partition(mark)
        return head

    def head(self) -> tuple[int, dict[str, str]]:
        head = self._until(b"\r\n\r\n", 16384)
        if head is None:
            return 0, {}
        status_line, *lines = head.decode("latin-1").split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise StoreUnavailable(f"IPFS pubsub/sub from {self.api}: not HTTP ({status_line!r})")
        headers = {}
        for line in lines:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        return int(parts[1]), headers

    def body(self, chunked: bool, limit: int | None = None) -> Iterator[bytes]:
        """The body's bytes as they come (de-chunked), until it ends or `stop`; `limit`: stop
        after that many bytes (an error's body)."""
        seen = 0
        while limit is None or seen < limit:
            if not chunked:
                if not self.buffer:
                    try:
                        if not self._more():
                            return
                    except StoreUnavailable:
                        return  # the body ends with the connection
                data, self.buffer = self.buffer, b""
            else:
                size_line = self._until(b"\r\n", 1024)
                if size_line is None:
                    return
                digits = size_line.split(b";")[0].strip()
                if not _HEX.fullmatch(digits):
                    raise StoreUnavailable(
                        f"IPFS pubsub/sub from {self.api}: a bad chunk size {size_line[:20]!r}"
                    )
                size = int(digits, 16)
                if size > MAX_CHUNK_BYTES:
                    raise StoreUnavailable(
                        f"IPFS pubsub/sub from {self.api}: a chunk of {size} bytes, over the "
                        f"{MAX_CHUNK_BYTES}-byte limit"
                    )
                if size == 0:
                    return  # (trailers, if any, are not read: the stream is over)
                while len(self.buffer) < size + 2:
                    if not self._more():
                        return
                if self.buffer[size : size + 2] != b"\r\n":
                    raise StoreUnavailable(f"IPFS pubsub/sub from {self.api}: a chunk not ended")
                data, self.buffer = self.buffer[:size], self.buffer[size + 2 :]
            seen += len(data)
            yield data


__all__ = ["ENABLE", "MAX_LINE_BYTES", "PubSub", "PubSubRefused", "api_origin", "topic_arg"]
