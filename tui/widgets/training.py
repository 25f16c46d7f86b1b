"""Training: the last local round's GRPO numbers and the I/J mix it used, with a short
history (a local round is written round.k: local round k of chain round `round`)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from client.node.view.snapshot import Snapshot, Training


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}% (last 10 rounds)"


def _tps(t: Training) -> str:
    return "-" if t.tokens_per_s is None else f"{t.tokens_per_s:,.0f}"


class TrainingPanel(Vertical):
    """Current numbers on top, the last rounds below."""

    HISTORY_COLUMNS = (
        "round.k",
        "step",
        "loss",
        "clip",
        "grad norm",
        "reward local",
        "reward ext.",
        "I used",
        "J used",
        "J short",
        "tokens/s",
    )

    def compose(self) -> ComposeResult:
        card = Static(id="training-card", classes="card")
        card.border_title = "last local round"
        yield card
        table = DataTable(id="training-history", zebra_stripes=True, cursor_type="none")
        table.border_title = "history"
        yield table
        self._shown: tuple = ()

    def on_mount(self) -> None:
        self.query_one("#training-history", DataTable).add_columns(*self.HISTORY_COLUMNS)

    def show(self, snap: Snapshot) -> None:
        if snap.history == self._shown:
            return
        self._shown = snap.history
        t = snap.training
        card = Table.grid(padding=(0, 2))
        card.add_column(style="dim")
        card.add_column()
        card.add_column(style="dim")
        card.add_column()
        if t is None:
            card.add_row("", Text("no local round yet", style="dim"), "", "")
        else:
            card.add_row("local round", f"{t.round}.{t.k}", "optimizer step", str(t.step))
            card.add_row("loss", _f(t.loss, 4), "clip fraction", _f(t.clip_fraction))
            card.add_row(
                "reward (local)", _f(t.reward_local), "reward (external)", _f(t.reward_external)
            )
            card.add_row(
                "I/J used",
                f"{t.local_items} local + {t.external_items} external",
                "external shortfall",
                f"{t.external_shortfall} (eligible {t.external_eligible})",
            )
            card.add_row("tokens", str(t.tokens), "tokens/s", _tps(t))
            card.add_row("grad norm", _f(t.grad_norm), "", "")
        card.add_row(
            "busy share",
            _share(snap.busy_share),
            "blocked on I/O",
            _share(snap.blocked_share),
        )
        card.add_row(
            "local rounds / round",
            "-" if snap.local_rounds_per_round is None else f"{snap.local_rounds_per_round:.1f}",
            "",
            "",
        )
        self.query_one("#training-card", Static).update(card)
        table = self.query_one("#training-history", DataTable)
        table.clear()
        for h in reversed(snap.history):
            table.add_row(
                f"{h.round}.{h.k}",
                str(h.step),
                _f(h.loss, 4),
                _f(h.clip_fraction),
                _f(h.grad_norm),
                _f(h.reward_local),
                _f(h.reward_external),
                str(h.local_items),
                str(h.external_items),
                str(h.external_shortfall),
                _tps(h),
            )
