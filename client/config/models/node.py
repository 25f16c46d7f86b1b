"""[node]: where the node keeps its journal, checkpoints and logs, and where it serves metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from client.config.models.section import Section
from client.config.models.values import is_loopback, parse_listen_addr


class NodeSection(Section):
    """Where the node keeps its journal, checkpoints and logs."""

    data_dir: Path = Path(".sapo/node")
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    metrics_addr: str | None = Field(
        None,
        description="serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9464); "
        "off when unset",
    )
    metrics_public: bool = Field(
        False,
        description="let metrics_addr be an address other than loopback (127.0.0.0/8, ::1): "
        "anyone who reaches it reads the node's stake, rounds and peers",
    )

    @model_validator(mode="after")
    def _metrics(self) -> NodeSection:
        if self.metrics_addr is None:
            return self
        host, port = parse_listen_addr(self.metrics_addr)  # a ValueError names what is wrong
        if not self.metrics_public and not is_loopback(host):
            raise ValueError(
                f"metrics_addr {self.metrics_addr!r} is not a loopback address: anyone who reaches "
                f"it reads this node's metrics. Serve on 127.0.0.1:{port} and scrape through a "
                "tunnel or a local Prometheus, or set [node].metrics_public = true"
            )
        return self
