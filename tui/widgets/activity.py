"""Activity: a live log of submissions, attestations given and received, disputes, slashes,
claims, the operator's actions and errors."""

from __future__ import annotations

import datetime as dt

from rich.text import Text
from textual.widgets import RichLog

from client.node.view.snapshot import Snapshot
from client.text import printable

STYLES = {"info": "", "warning": "yellow", "error": "bold red"}
KIND_STYLES = {
    "submission": "cyan",
    "attestation": "blue",
    "received": "green",
    "dispute": "yellow",
    "slash": "red",
    "claim": "magenta",
    "action": "bold magenta",
}


class ActivityLog(RichLog):
    """Appends the lines it has not shown yet (the watcher numbers every line it logs)."""

    def __init__(self, **kwargs):
        super().__init__(wrap=True, markup=False, highlight=False, max_lines=2_000, **kwargs)
        self.shown = 0

    def show(self, snap: Snapshot) -> None:
        new = snap.activity_total - self.shown
        if new <= 0:
            return
        for line in snap.activity[-min(new, len(snap.activity)) :]:
            when = dt.datetime.fromtimestamp(line.time).strftime("%H:%M:%S")
            self.write(
                Text.assemble(
                    (when + " ", "dim"),
                    (f"{line.kind:<11} ", KIND_STYLES.get(line.kind, "dim")),
                    (printable(line.text), STYLES.get(line.level, "")),  # may quote a peer
                )
            )
        self.shown = snap.activity_total
