"""scripts/table.py, the markdown table every script prints: what a reader of a pasted table sees
(numbers aligned right and formatted, a missing value as "–", a pipe that does not split a cell)
and what a script gets wrong loudly (a row of the wrong length, a column named that is not one)."""

from __future__ import annotations

import pytest

from scripts.table import Table


def test_numeric_columns_align_right_and_numbers_print_formatted() -> None:
    table = Table("stage", "rounds", "seconds")
    table.row("train", 12_345, 1.5)
    table.row("check", 7, None)
    assert table.render().splitlines() == [
        "| stage | rounds | seconds |",
        "| --- | ---: | ---: |",  # None leaves a column numeric
        "| train | 12,345 | 1.50 |",
        "| check | 7 | – |",
    ]


def test_a_column_of_strings_is_left_aligned_unless_named_right() -> None:
    table = Table("pair", "passed", "ratio", right=("ratio",))
    table.row("a -> b", True, "3/8")
    rules = table.render().splitlines()[1]
    assert rules == "| --- | --- | ---: |"  # a bool is not a number
    assert Table("n", left=("n",)).header().splitlines()[1] == "| --- |"


def test_per_column_formats_apply_to_ints_and_floats() -> None:
    table = Table("tokens", "share", "gap", formats={"tokens": "d", "share": ".0%", "gap": ".2e"})
    table.row(1_038, 0.25, 3)
    assert table.render().splitlines()[-1] == "| 1038 | 25% | 3.00e+00 |"


def test_a_pipe_in_a_cell_is_escaped() -> None:
    table = Table("reason")
    table.row("a || b")
    assert table.render().splitlines()[-1] == "| a \\|\\| b |"


def test_a_row_of_the_wrong_length_is_refused_naming_the_columns() -> None:
    table = Table("node", "busy share")
    with pytest.raises(ValueError, match=r"a row of 3 cells in a table of 2 columns \(node, busy"):
        table.row("node-0", 0.5, "extra")
    with pytest.raises(ValueError, match="a row of 1 cells"):
        table.line("node-0")
    assert table.rows == []


def test_options_naming_no_column_are_refused() -> None:
    with pytest.raises(ValueError, match=r"right-aligned columns \['secs'\] are not columns"):
        Table("seconds", right=("secs",))
    with pytest.raises(ValueError, match="formatted columns"):
        Table("seconds", formats={"secs": ".1f"})
    with pytest.raises(ValueError, match="both right and left"):
        Table("seconds", right=("seconds",), left=("seconds",))


def test_a_table_printed_a_row_at_a_time_reads_as_the_whole_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    whole = Table("round", "reward", right=("round", "reward"), formats={"reward": ".3f"})
    whole.row(1, 0.5)
    whole.row(2, 0.75)
    streamed = Table("round", "reward", right=("round", "reward"), formats={"reward": ".3f"})
    lines = [streamed.header(), streamed.line(1, 0.5), streamed.line(2, 0.75)]
    assert "\n".join(lines) == whole.render()
    whole.print("title")
    assert capsys.readouterr().out == "\ntitle\n\n" + whole.render() + "\n"
