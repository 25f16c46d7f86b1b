"""The status line: chain and store badges, the round with its progress, the node's phase."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import ProgressBar, Static

from client.node.view.snapshot import Health, Snapshot
from tui.format import age


def badge(name: str, health: Health, now: float) -> Text:
    """' chain ● up ' in green, ' chain ● DOWN 12 s ' in red, grey before the first try."""
    if health.ok is None:
        return Text(f" {name} ○ … ", style="bold white on grey37")
    if health.ok:
        return Text(f" {name} ● up ", style="bold black on green")
    since = f" {age(health.age(now))}" if health.as_of is not None else ""
    return Text(f" {name} ● DOWN{since} ", style="bold white on red")


class StatusBar(Horizontal):
    """Badges, round and phase, always visible above the tabs."""

    def compose(self) -> ComposeResult:
        yield Static(id="chain-badge", classes="badge")
        yield Static(id="store-badge", classes="badge")
        yield Static(id="round-label")
        yield ProgressBar(total=1.0, show_eta=False, show_percentage=False, id="round-progress")
        yield Static(id="phase-label")

    def show(self, snap: Snapshot, store_name: str) -> None:
        self.query_one("#chain-badge", Static).update(badge("chain", snap.chain, snap.taken_at))
        self.query_one("#store-badge", Static).update(badge(store_name, snap.store, snap.taken_at))
        round_ = snap.round
        label = "round ?" if round_ is None else f"round {round_}"
        if round_ is not None and snap.round_length:
            left = snap.round_length * (1 - snap.round_progress)
            label += f"  next in {left:.0f} s"
        self.query_one("#round-label", Static).update(label)
        self.query_one("#round-progress", ProgressBar).update(progress=snap.round_progress)
        phase = "paused" if snap.paused else snap.phase
        style = {"failed": "bold red", "paused": "bold yellow", "stopped": "bold red"}.get(
            phase, "bold cyan"
        )
        self.query_one("#phase-label", Static).update(
            Text.assemble(("phase ", "dim"), (phase, style), ("  " + snap.mode, "dim"))
        )
