"""Peers: every registered node, its stake and record, and how our checks of it went."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from client.node.view.snapshot import PeerRow
from client.text import printable
from tui.format import format_ether, format_score, short

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
KEYS = tuple(key for key, _, _ in COLUMNS)
ASCENDING_FIRST = ("node", "model")


class Cell(Text):
    """A cell's text that remembers the value it sorts by."""

    def __init__(self, text: str = "", value: Any = None, **kwargs):
        super().__init__(text, **kwargs)
        self.value = value


def _checks(p: PeerRow) -> str | Cell:
    if p.me:
        return Cell("(this node)", style="dim")
    text = Cell(f"{p.agreed} ok")
    for count, label, style in (
        (p.disputed, "disputed", "bold yellow"),
        (p.bad, "bad", "bold red"),
        (p.unavailable, "unavail.", "yellow"),
    ):
        if count:
            text.append(f" · {count} {label}", style=style)
    return text


def _cells(p: PeerRow) -> list[Cell]:
    shown = [
        Cell(short(p.address), style="bold" if p.me else ""),
        Cell(printable(p.model, 64)),  # what its batches declare: a stranger's string
        Cell(format_ether(p.stake), justify="right"),
        Cell("-" if p.last_round is None else str(p.last_round), justify="right"),
        Cell(str(p.submissions), justify="right"),
        Cell(format_score(p.credited), justify="right"),
        Cell(str(p.used), justify="right"),
        _checks(p),
    ]
    for cell, (_, _, sort_key) in zip(shown, COLUMNS, strict=True):
        cell.value = sort_key(p)
    return shown


class PeersTable(DataTable):
    """Sortable (click a header, or `s` to cycle), a page of PAGE rows at a time (`]` and `[`):
    the whole swarm is sorted in Python, and the table holds one page, so a swarm of 10,000
    nodes costs the terminal what 200 rows do. A refresh touches only the rows that changed."""

    PAGE = 200

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.sort_column = "credited"
        self.sort_reverse = True
        self.page = 0
        self._all: dict[str, PeerRow] = {}
        self._rows: dict[str, PeerRow] = {}  # the page shown
        self.since: int | None = None

    def on_mount(self) -> None:
        for key, header, _ in COLUMNS:
            self.add_column(header, key=key)
        self._title()

    @property
    def pages(self) -> int:
        return max(1, -(-len(self._all) // self.PAGE))

    def show(self, peers: tuple[PeerRow, ...], since: int | None = None) -> None:
        """Shows the swarm's rows; `since`, the round since which their submissions and
        credit are counted (None: since the ledger's deploy)."""
        new = {p.address: p for p in peers}
        if new == self._all and since == self.since:
            return
        self._all, self.since = new, since
        self._paint()

    def turn(self, pages: int) -> None:
        """Shows the page `pages` after (or before) this one, within the first and the last."""
        page = min(max(0, self.page + pages), self.pages - 1)
        if page != self.page:
            self.page = page
            self._paint()
            self.move_cursor(row=0)

    def _paint(self) -> None:
        """Shows the page's rows of the whole swarm, in the sort order."""
        self.page = min(self.page, self.pages - 1)
        sort_key = next(k for key, _, k in COLUMNS if key == self.sort_column)
        ordered = sorted(self._all.values(), key=sort_key, reverse=self.sort_reverse)
        start = self.page * self.PAGE
        new = {p.address: p for p in ordered[start : start + self.PAGE]}
        for gone in self._rows.keys() - new.keys():
            self.remove_row(gone)
        for address, p in new.items():
            before = self._rows.get(address)
            if before is None:
                self.add_row(*_cells(p), key=address)
            elif before != p:
                for key, cell in zip(KEYS, _cells(p), strict=True):
                    self.update_cell(address, key, cell)
        self._rows = new
        self.sort(self.sort_column, key=lambda cell: cell.value, reverse=self.sort_reverse)
        self._title()

    def _title(self) -> None:
        arrow = "▼" if self.sort_reverse else "▲"
        where = ""
        if self.pages > 1:
            first = self.page * self.PAGE + 1
            last = min(len(self._all), first + self.PAGE - 1)
            where = f" · rows {first:,}–{last:,} ([ ] pages)"
        counted = "" if self.since is None else f" · counted since round {self.since:,}"
        self.border_title = (
            f"{len(self._all):,} nodes{where} · sorted by {self.sort_column} {arrow}{counted}"
        )

    def sort_by(self, column: str) -> None:
        """Sorts by `column`; the same column again flips the order."""
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, column not in ASCENDING_FIRST
        self._paint()

    def cycle_sort(self) -> None:
        self.sort_column = KEYS[(KEYS.index(self.sort_column) + 1) % len(KEYS)]
        self.sort_reverse = self.sort_column not in ASCENDING_FIRST
        self._paint()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.sort_by(str(event.column_key.value))
