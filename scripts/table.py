"""The markdown table every script prints: the columns named once, a row a call, numbers aligned
right, so a table pastes into a closing note or a docs page as it is.

    table = Table("stage", "kind", "seconds a round")
    table.row("train", "compute", 1.25)
    table.print()

A cell is printed with `str`, except floats (`float_format`, 2 decimals by default) and ints
(thousands separated); None prints as "–". A column is right-aligned when every cell in it is
a number, or when its name is given in `right`.
"""

from __future__ import annotations

from collections.abc import Iterable
from numbers import Number


class Table:
    def __init__(self, *columns: str, float_format: str = ",.2f", right: Iterable[str] = ()):
        if not columns:
            raise ValueError("a table needs at least one column")
        self.columns = list(columns)
        self.float_format = float_format
        self.right = set(right)
        unknown = self.right - set(self.columns)
        if unknown:
            raise ValueError(f"right-aligned columns {sorted(unknown)} are not columns")
        self.rows: list[list[object]] = []

    def row(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.columns)}")
        self.rows.append(list(cells))

    def cell(self, value: object) -> str:
        if value is None:
            return "–"
        if isinstance(value, bool):
            return str(value)
        if isinstance(value, int):
            return f"{value:,}"
        if isinstance(value, float):
            return format(value, self.float_format)
        return str(value).replace("|", "\\|")

    def render(self) -> str:
        def numeric(i: int) -> bool:
            values = [r[i] for r in self.rows if r[i] is not None]
            return bool(values) and all(
                isinstance(v, Number) and not isinstance(v, bool) for v in values
            )

        rules = [
            "---:" if name in self.right or numeric(i) else "---"
            for i, name in enumerate(self.columns)
        ]
        lines = ["| " + " | ".join(self.columns) + " |", "| " + " | ".join(rules) + " |"]
        lines += ["| " + " | ".join(self.cell(v) for v in r) + " |" for r in self.rows]
        return "\n".join(lines)

    def print(self, title: str | None = None) -> None:
        """Prints the table after a blank line (and its title, when given)."""
        print()
        if title:
            print(title)
            print()
        print(self.render())
