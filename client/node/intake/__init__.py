"""Peer intake, beside the compute stage: peers' submissions discovered on the ledger, their
batches fetched and re-verified completely, what passed journaled (the sampler's pool), and the
votes the publisher sends queued.

- stage: the intake's thread (what to fetch when, the votes queued)
- discovery: the ledger's events since the journal's cursor
- window: the submissions still open to a vote and our verdicts on them, read incrementally
- seats: whether this node is drawn to check a batch (drawn locally, confirmed by the ledger)
- recording: a finished check's verdict journaled, and what it implies (retry, pin)
- fetching: a batch's bytes, re-verification and proof of generation, on a fetch worker
- verdict: the verdict from what a fetch found (pure)
- voting: the vote a verdict makes (pure)
- retries: when a batch nobody gave us is tried again
"""

from client.node.intake.stage import Intake

__all__ = ["Intake"]
