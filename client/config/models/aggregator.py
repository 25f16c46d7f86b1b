"""[aggregator]: where `sapo aggregate run` serves the root lane's endpoint
(client/node/aggregation, docs/scaling.md), and the address it lists in its node's on-chain
metadata for producers and checkers to send their signed messages to."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, model_validator

from client.config.models.section import Section
from client.config.models.values import is_loopback, parse_listen_addr


class AggregatorSection(Section):
    """The aggregator's endpoint: where it listens and what it lists."""

    listen: str = Field(
        "127.0.0.1:7700",
        description="HOST:PORT the aggregator's HTTP endpoint listens on (POST /v1/messages, "
        "GET /v1/status)",
    )
    public: bool = Field(
        False,
        description="let listen be an address other than loopback (127.0.0.0/8, ::1): every "
        "producer and checker of the swarm must reach it, so a public aggregator sets it, behind "
        "what limits its clients",
    )
    url: str | None = Field(
        None,
        description="the http(s) origin listed in the node's on-chain metadata (its 'aggregator' "
        "key), where nodes send their messages; unset: http://LISTEN",
        max_length=200,
    )

    @model_validator(mode="after")
    def _where(self) -> AggregatorSection:
        host, port = parse_listen_addr(self.listen)  # a ValueError names what is wrong
        if not self.public and not is_loopback(host):
            raise ValueError(
                f"listen {self.listen!r} is not a loopback address: producers and checkers "
                f"anywhere would reach it. Serve on 127.0.0.1:{port}, or set "
                "[aggregator].public = true on purpose"
            )
        if self.url is not None:
            parts = urlsplit(self.url)
            if (
                parts.scheme not in ("http", "https")
                or not parts.hostname
                or parts.path
                not in (
                    "",
                    "/",
                )
            ):
                raise ValueError(
                    f"url {self.url!r} is not an http(s) origin (scheme://host:port, nothing "
                    "after it)"
                )
        return self

    def listed(self) -> str:
        """The origin the node's metadata lists."""
        return (self.url or f"http://{self.listen}").rstrip("/")
