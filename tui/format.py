"""How numbers read on the screens: short addresses, ages, ether and score units."""

from __future__ import annotations

from client.config.models import format_ether
from client.node.view.snapshot import short
from client.units import format_score

__all__ = ["age", "format_ether", "format_score", "short"]


def age(seconds: float | None) -> str:
    """Returns '12 s', '4 min', '2 h' (or 'never' for None)."""
    if seconds is None:
        return "never"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
