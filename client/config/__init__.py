"""Typed configuration: TOML files plus `SAPO_` environment overrides, validated by pydantic."""

from client.config.loader import (
    ConfigError,
    NodeConfig,
    load_config,
    masked_rpc_url,
    public_view,
    with_sections,
)

__all__ = [
    "ConfigError",
    "NodeConfig",
    "load_config",
    "masked_rpc_url",
    "public_view",
    "with_sections",
]
