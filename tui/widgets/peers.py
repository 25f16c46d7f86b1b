"""Peers: every registered node, its stake and record, and how our checks of it went."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from tui.format import format_ether, format_score, short
from tui.state import PeerRow

# (column key, header, sort key)
COLUMNS = (
    ("node", "node", lambda p: p.address.lower()),
    ("model", "model", lambda p: p.model),
    ("stake", "stake", lambda p: p.stake),
    ("last", "last round", lambda p: -1 if p.last_round is None else p.last_round),
    ("subs", "submitted", lambda p: p.submissions),
    ("credited", "credited", lambda p: p.credited),
    ("used", "items used", lambda p: p.used),
    ("checks", "our checks", lambda p: (p.agreed, -p.disputed - p.bad)),
)
SORTS = {key: fn for key, _, fn in COLUMNS}


def _checks(p: PeerRow) -> Text:
    if p.me:
        return Text("(this node)", style="dim")
    text = Text(f"{p.agreed} ok")
    for count, label, style in (
        (p.disputed, "disputed", "bold yellow"),
        (p.bad, "bad", "bold red"),
        (p.unavailable, "unavail.", "yellow"),
    ):
        if count:
            text.append(f" · {count} {label}", style=style)
    return text


def _cells(p: PeerRow) -> tuple:
    return (
        Text(short(p.address), style="bold" if p.me else ""),
        p.model,
        Text(format_ether(p.stake), justify="right"),
        Text("-" if p.last_round is None else str(p.last_round), justify="right"),
        Text(str(p.submissions), justify="right"),
        Text(format_score(p.credited), justify="right"),
        Text(str(p.used), justify="right"),
        _checks(p),
    )


class PeersTable(DataTable):
    """Sortable (click a header, or `s` to cycle); redrawn only when a row changed."""

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.sort_column = "credited"
        self.sort_reverse = True
        self._rows: tuple[PeerRow, ...] = ()

    def on_mount(self) -> None:
        for key, header, _ in COLUMNS:
            self.add_column(header, key=key)

    def show(self, peers: tuple[PeerRow, ...]) -> None:
        if peers == self._rows:
            return
        self._rows = peers
        self._redraw()

    def _redraw(self) -> None:
        cursor = self.cursor_row
        ordered = sorted(self._rows, key=SORTS[self.sort_column], reverse=self.sort_reverse)
        self.clear()
        for p in ordered:
            self.add_row(*_cells(p), key=p.address)
        if ordered:
            self.move_cursor(row=min(cursor, len(ordered) - 1))
        arrow = "▼" if self.sort_reverse else "▲"
        self.border_title = f"{len(ordered)} nodes · sorted by {self.sort_column} {arrow}"

    def sort_by(self, column: str) -> None:
        """Sorts by `column`; the same column again flips the order."""
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, column not in ("node", "model")
        self._redraw()

    def cycle_sort(self) -> None:
        keys = [key for key, _, _ in COLUMNS]
        self.sort_column = keys[(keys.index(self.sort_column) + 1) % len(keys)]
        self.sort_reverse = self.sort_column not in ("node", "model")
        self._redraw()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.sort_by(str(event.column_key.value))
