"""Strangers' strings made safe to show: what a peer writes (its on-chain metadata, the model name
its batches declare, reasons that quote its bytes) reaches an operator's terminal only as text.
Control characters (C0, C1: an escape sequence can move the cursor, retitle the window or hide
what follows) and Unicode's format characters (bidirectional overrides that reorder what is
shown) are written as visible escapes, and the result is cut at `limit` characters. A Rich
console also needs `rich.markup.escape` on it: `[/]` in a name is markup, and stopped
`sapo audit node` with MarkupError."""

from __future__ import annotations

import unicodedata

LIMIT = 1_024


def printable(text: str, limit: int = LIMIT) -> str:
    """`text` with every control or format character as a visible escape (`\\x1b`, `\\u202e`),
    cut at `limit` characters (an ellipsis marks the cut)."""
    out = []
    for ch in text[: limit + 1]:
        if unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\n\t":
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    shown = "".join(out)
    return shown if len(text) <= limit else shown[:limit] + "…"
