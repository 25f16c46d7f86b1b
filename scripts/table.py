"""The markdown table every script prints: the columns named once, a row a call, numbers aligned
right, so a table pastes into a closing note or a docs page as it is.

    table = Table("stage", "kind", "seconds a round", formats={"seconds a round": ".3f"})
    table.row("train", "compute", 1.25)
    table.print()

A cell is printed with `str`, except floats (the column's entry in `formats`, else
`float_format`, 2 decimals by default) and ints (the column's entry in `formats`, else thousands
separated); None prints as "–". A string is printed as it is (a cell the caller formatted: a
ratio "3/8", an interval "0.12 ± 0.03"), its pipes escaped. A column is right-aligned when every
cell in it is a number, or when its name is given in `right`; a column named in `left` is
left-aligned whatever it holds.

A long measurement can print each row as it is measured instead: `print(table.header())` first,
then `print(table.line(...))` a row (not kept). The rows are not known when the header is
printed, so its alignment is `right` and `left` alone: name the numeric columns in `right`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from numbers import Integral, Number, Real


class Table:
    def __init__(
        self,
        *columns: str,
        float_format: str = ",.2f",
        right: Iterable[str] = (),
        left: Iterable[str] = (),
        formats: Mapping[str, str] | None = None,
    ):
        """`formats`: a column's format spec for its numbers, ints and floats alike (".3f",
        "+.4f", ".2e", ".0%", "d" for an int without separators)."""
        if not columns:
            raise ValueError("a table needs at least one column")
        self.columns = list(columns)
        self.float_format = float_format
        self.right = set(right)
        self.left = set(left)
        self.formats = dict(formats or {})
        for what, names in (
            ("right-aligned", self.right),
            ("left-aligned", self.left),
            ("formatted", self.formats),
        ):
            unknown = set(names) - set(self.columns)
            if unknown:
                raise ValueError(f"{what} columns {sorted(unknown)} are not columns")
        if self.right & self.left:
            raise ValueError(f"columns {sorted(self.right & self.left)} are both right and left")
        self.rows: list[list[object]] = []

    def row(self, *cells: object) -> None:
        self._check(cells)
        self.rows.append(list(cells))

    def _check(self, cells: tuple[object, ...]) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(
                f"a row of {len(cells)} cells in a table of {len(self.columns)} columns "
                f"({', '.join(self.columns)})"
            )

    def cell(self, value: object, column: str | None = None) -> str:
        """`value` as `column` prints it."""
        spec = self.formats.get(column) if column is not None else None
        if value is None:
            return "–"
        if isinstance(value, bool):
            return str(value)
        if isinstance(value, Integral):
            return format(int(value), "," if spec is None else spec)
        if isinstance(value, Real):
            return format(float(value), self.float_format if spec is None else spec)
        return str(value).replace("|", "\\|")

    def header(self) -> str:
        """The column names and the alignment rule (from `right`, `left` and the rows kept)."""

        def numeric(i: int) -> bool:
            values = [r[i] for r in self.rows if r[i] is not None]
            return bool(values) and all(
                isinstance(v, Number) and not isinstance(v, bool) for v in values
            )

        rules = [
            "---:" if name not in self.left and (name in self.right or numeric(i)) else "---"
            for i, name in enumerate(self.columns)
        ]
        return "| " + " | ".join(self.columns) + " |\n| " + " | ".join(rules) + " |"

    def line(self, *cells: object) -> str:
        """One row's line, as the table prints it (the row is not kept)."""
        self._check(cells)
        return "| " + " | ".join(map(self.cell, cells, self.columns)) + " |"

    def render(self) -> str:
        return "\n".join([self.header(), *(self.line(*r) for r in self.rows)])

    def print(self, title: str | None = None) -> None:
        """Prints the table after a blank line (and its title, when given)."""
        print()
        if title:
            print(title)
            print()
        print(self.render())
