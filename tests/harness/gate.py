"""A TCP gate in front of a real server, to inject network faults by really cutting the line.

`TcpGate(port)` listens on a loopback port of its own and forwards every connection to
127.0.0.1:port. `close()` refuses new connections and cuts open ones (what a client sees when
an RPC endpoint or an IPFS API goes away); `open()` serves again on the same port. The server
behind it keeps running, so its state (the chain, the blocks) survives the outage, as a remote
server's would.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from client.devnet.process import LOOPBACK, free_loopback_port


class TcpGate:
    def __init__(self, target_port: int):
        self.target_port = target_port
        self.port = free_loopback_port()
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.open()

    def open(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK, self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self._conns.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection((LOOPBACK, self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
