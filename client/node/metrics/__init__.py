"""Prometheus metrics of a running node, served at http://[node].metrics_addr/metrics.

- collector: every metric, read from the node's read model (client.node.view) at each scrape
- server: the HTTP server, and the check that it can listen before the node starts
"""

from client.node.metrics.collector import NodeCollector
from client.node.metrics.server import MetricsError, MetricsServer, check_listen, serve_metrics

__all__ = ["MetricsError", "MetricsServer", "NodeCollector", "check_listen", "serve_metrics"]
