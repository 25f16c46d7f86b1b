"""One widget per panel; each renders a `client.node.snapshot.Snapshot` and nothing else."""
