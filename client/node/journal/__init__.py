"""The node's journal: what it did and what it still owes, in one SQLite file.

- journal: the `Journal` API (chain rounds, local rounds, the outbox, metrics and time spans)
- outbox: the publisher's messages as types, each with its idempotency key
- peers: what the node knows of its peers (submissions, verdicts, items, what it trained on)
- states: the named states it keeps (round phases, outbox kinds, verdicts)
- db: the schema, its version and the transaction API
"""

from client.node.journal.journal import Journal
from client.node.journal.outbox import OutboxEntry
from client.node.journal.records import LocalRoundRecord, RoundRecord

__all__ = ["Journal", "LocalRoundRecord", "OutboxEntry", "RoundRecord"]
