"""The chain adapter: SwarmLedger bindings, transactions, events, deployment."""

from client.chain.deploy import deploy_book, deploy_ledger
from client.chain.errors import ChainError, LedgerRevert, NoSigner, RpcUnavailable, WrongChain
from client.chain.ledger import Ledger, connect
from client.chain.models import (
    SCORE_SCALE,
    LedgerParams,
    NodeInfo,
    RoundInfo,
    SubmissionInfo,
    TxResult,
)

__all__ = [
    "SCORE_SCALE",
    "ChainError",
    "Ledger",
    "LedgerParams",
    "LedgerRevert",
    "NoSigner",
    "NodeInfo",
    "RoundInfo",
    "RpcUnavailable",
    "SubmissionInfo",
    "TxResult",
    "WrongChain",
    "connect",
    "deploy_book",
    "deploy_ledger",
]
