"""One widget per panel; each renders a `client.node.view.snapshot.Snapshot` and nothing else."""
