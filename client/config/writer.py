"""Writing a NodeConfig back to TOML (what `sapo devnet up` generates for its nodes).

Values come from `model_dump(mode="json")`: unset optionals are left out, paths are written as
given (absolute in generated files), and integers beyond TOML's 64-bit range (wei amounts) are
written as strings in wei, which the loader reads back."""

from __future__ import annotations

import json
from typing import Any

from client.config.loader import NodeConfig

_TOML_INT_MAX = 2**63 - 1


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) <= _TOML_INT_MAX else json.dumps(f"{value} wei")
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table; keys quoted (node_overrides' are numbers)
        inner = ", ".join(f"{json.dumps(str(k))} = {_value(v)}" for k, v in value.items())
        return "{" + inner + "}"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def dump_toml(config: NodeConfig, header: str = "") -> str:
    """Returns the config as TOML text, one table per section."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for section, values in config.model_dump(mode="json").items():
        lines += ["", f"[{section}]"]
        lines += [f"{key} = {_value(v)}" for key, v in values.items() if v is not None]
    return "\n".join(lines) + "\n"
