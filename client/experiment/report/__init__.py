"""The experiment's results: `summary.json`, `table.md` and `curves.png` from the cells' records.

The metric is the paper's cumulative reward: for one configuration and seed, the sum over the
scored rounds and the nodes of the mean verifier reward of each node's local rollouts. Across
seeds we report the mean, the sample standard deviation and the range, so that a difference
between configurations can be told from noise.

- `numbers`: one cell's numbers from its record
- `stats`: 95% intervals of a mean and of a difference of means
- `summary`: the cells aggregated per configuration, and the three files written
- `table`, `curves`: the summary as Markdown tables and as a figure
"""

from client.experiment.report.curves import plot_curves
from client.experiment.report.numbers import (
    HELD_OUT_KEYS,
    LEARNING_KEYS,
    TOLERANCE,
    held_out_numbers,
)
from client.experiment.report.stats import ci95, diff_ci95
from client.experiment.report.summary import load_records, summarize
from client.experiment.report.table import markdown_table, split_label

__all__ = [
    "HELD_OUT_KEYS",
    "LEARNING_KEYS",
    "TOLERANCE",
    "ci95",
    "diff_ci95",
    "held_out_numbers",
    "load_records",
    "markdown_table",
    "plot_curves",
    "split_label",
    "summarize",
]
