"""The node's read model: what an operator sees of a node, as plain frozen values.

- watcher: the `Watcher` that reads the parts below into a `Snapshot`
- snapshot: the values (account, peers, rounds, payouts, training, activity)
- journal: totals and the recent window, read from the journal at a cost that does not grow
- ledger: what the ledger says about every node and about us, from new events
- events: the event log's new lines, and the activity line each makes
- metrics: the Prometheus exporter over the same snapshot
"""

from client.node.view.watcher import Watcher

__all__ = ["Watcher"]
