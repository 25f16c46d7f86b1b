"""One widget per panel; each renders a `tui.state.Snapshot` and nothing else."""
