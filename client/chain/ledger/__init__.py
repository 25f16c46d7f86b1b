"""`Ledger`: the SwarmLedger contract as typed Python calls, used by every other layer.

Reads work without a key; writes need a LocalAccount (from an encrypted keystore). Every read
and write goes through TxSender.rpc, so transient RPC failures are retried and every revert
arrives as the contract's named error (client.chain.errors).

- `connection`: a Web3 for an RPC URL, and the check that the deployed code is ours
- `views`: the contract's reads (`LedgerViews`)
- `transactions`: `Ledger`, the reads and the transactions
"""

from client.chain.ledger.connection import CONTRACT, bytes32, connect, matches_runtime
from client.chain.ledger.transactions import Ledger
from client.chain.ledger.views import LedgerViews

__all__ = ["CONTRACT", "Ledger", "LedgerViews", "bytes32", "connect", "matches_runtime"]
