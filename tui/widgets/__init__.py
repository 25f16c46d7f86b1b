"""One widget per panel; each renders a `client.node.view.Snapshot` and nothing else."""
