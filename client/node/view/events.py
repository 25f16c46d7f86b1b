"""The node's event log as the read model reads it: the lines appended since the last look, and
the activity line each kind of event makes for an operator."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from client.credit import describe_findings
from client.node.eventlog import Event
from client.node.view.snapshot import Activity, short
from client.units import SCORE_SCALE


class EventTail:
    """Reads the lines appended to a JSONL file since the last call (a torn last line waits)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        events = []
        for line in complete.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("kind"), str):
                events.append(event)
        return events


def _short_hash(value: Any) -> str:
    text = str(value or "")
    return f"{text[:12]}…{text[-4:]}" if len(text) > 20 else text


def activity_of(event: dict[str, Any]) -> Activity | None:
    """Returns the activity line a node event makes (None for the ones a log need not show)."""
    kind, t, r = event["kind"], float(event.get("time") or time.time()), event.get("round")
    message = str(event.get("message", ""))
    if kind == Event.ROUND_SUBMITTED:
        tx = _short_hash(event.get("tx_hash")) or "already on chain"
        local = event.get("local_rounds")
        return Activity(
            t,
            "submission",
            f"round {r}: submitted {event.get('cid') or event.get('digest')}"
            + (f" ({local} local rounds)" if local else "")
            + f" · tx {tx} · confirmed",
            r,
        )
    if kind == Event.ROUND_PINNED:
        return Activity(t, "submission", f"round {r}: pinned {event.get('cid')} · pending", r)
    if kind == Event.PEER_ATTESTED:
        found = describe_findings(int(event.get("findings") or 0))
        return Activity(
            t,
            "attestation",
            f"round {r}: we attested {short(str(event.get('node')))}'s batch "
            f"{int(event.get('score') or 0) / SCORE_SCALE:.4f}, signal "
            f"{int(event.get('signal') or 0) / SCORE_SCALE:.2f}"
            + (f" (disputed: {found})" if found else "")
            + f" · tx {_short_hash(event.get('tx_hash'))}",
            r,
        )
    if kind == Event.PEER_REPORTED_UNAVAILABLE:
        return Activity(
            t,
            "attestation",
            f"round {r}: we reported {short(str(event.get('node')))}'s batch unavailable · tx "
            f"{_short_hash(event.get('tx_hash'))}",
            r,
            "warning",
        )
    if kind in (Event.SUBMIT_DROPPED, Event.ATTEST_DROPPED):
        return Activity(t, "missed", message, r, "error")
    if kind == Event.ROUND_SKIPPED:
        return Activity(t, "skipped", message, r, "warning")
    if kind in (Event.PEER_BAD, Event.PEER_UNAVAILABLE, Event.NODE_PENDING):
        return Activity(t, kind.split(".")[1], message, r, "warning")
    if kind in (Event.CHAIN_STATUS, Event.STORE_STATUS):
        return Activity(t, kind.split(".")[0], message, r, "info" if event.get("ok") else "error")
    if kind in (Event.NODE_STARTED, Event.NODE_STOPPED, Event.NODE_ERROR):
        return Activity(t, "node", message, r, "error" if kind == Event.NODE_ERROR else "info")
    return None
