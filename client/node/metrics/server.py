"""The HTTP server of a node's /metrics, on loopback unless [node].metrics_public says otherwise
(client.config checks the address): checked before the node's long start, served on its own
daemon threads."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

from prometheus_client import start_http_server
from prometheus_client.registry import CollectorRegistry

from client.config import NodeConfig
from client.config.models import parse_listen_addr
from client.node.metrics.collector import NodeCollector
from client.node.view.watcher import Watcher

log = logging.getLogger("sapo.metrics")


class MetricsError(Exception):
    """The metrics server cannot start (its address is taken, or cannot be bound)."""


def check_listen(addr: str) -> None:
    """Raises MetricsError when a server could not listen at `addr` now (its port is taken): a
    node checks before its long start, not after."""
    host, port = parse_listen_addr(addr)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, _, _, _, sockaddr = infos[0]
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
            sock.bind(sockaddr)
    except OSError as exc:
        raise _cannot_listen(addr, exc) from None


def _cannot_listen(addr: str, exc: OSError) -> MetricsError:
    return MetricsError(
        f"[node].metrics_addr {addr}: cannot listen there ({exc.strerror or exc}); is another "
        "node or exporter using the port? Choose another one"
    )


class MetricsServer:
    """The HTTP server of /metrics, on its own daemon threads."""

    def __init__(self, addr: str, collector: NodeCollector):
        host, port = parse_listen_addr(addr)
        self.addr = addr
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        try:
            self.httpd, self.thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            raise _cannot_listen(addr, exc) from None
        log.info("metrics: serving http://%s/metrics", addr)

    @property
    def url(self) -> str:
        return f"http://{self.addr}/metrics"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve_metrics(
    cfg: NodeConfig, address: str, *, running: Callable[[], bool] = lambda: True
) -> MetricsServer | None:
    """Starts the metrics server of the node of `cfg` that runs in this process when
    [node].metrics_addr is set (None otherwise); raises MetricsError when it cannot listen.
    `running` says whether its round loop runs (a TUI's node may be stopped)."""
    if cfg.node.metrics_addr is None:
        return None
    watcher = Watcher(cfg, address, mode="live")
    return MetricsServer(cfg.node.metrics_addr, NodeCollector(watcher, cfg, running=running))
