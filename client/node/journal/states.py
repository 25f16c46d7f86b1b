"""The named states a node keeps in its journal, beside the event kinds and phases of
client.node.eventlog: how far a chain round got, what each outbox entry does, and what a node
concluded about a peer's batch. Each is written to SQLite as its string value.
"""

from __future__ import annotations

from enum import StrEnum


class RoundPhase(StrEnum):
    """How far a chain round of ours got. It moves forward through COLLECTING -> SEALED ->
    PINNED -> CONFIRMED; MISSED and SKIPPED end it with a reason."""

    COLLECTING = "collecting"  # local rounds are being added to its batch
    SEALED = "sealed"  # the batch's bytes are fixed (a restart re-pins and re-submits them)
    PINNED = "pinned"  # on IPFS
    CONFIRMED = "confirmed"  # its submission is mined
    MISSED = "missed"  # its submission could not be made in the ledger's window
    SKIPPED = "skipped"  # no local round started in it (a slow node)

    @property
    def ended(self) -> bool:
        """Missed or skipped: nothing more happens to the round."""
        return self in (RoundPhase.MISSED, RoundPhase.SKIPPED)


# the forward order; an ended round has reached none of these beyond where it ended
FORWARD = (RoundPhase.COLLECTING, RoundPhase.SEALED, RoundPhase.PINNED, RoundPhase.CONFIRMED)


class OutboxKind(StrEnum):
    """What an outbox entry sends, as the journal's `kind` column stores it: one message type of
    client.node.journal.outbox each (`appeal` two: ours, and a verdict against our vote)."""

    PIN = "pin"  # pin our sealed batch
    SUBMIT = "submit"  # submit its digest and claim
    OPEN = "open"  # publish the checkpoints our batch's beacon opened
    ATTEST = "attest"  # our verdict on a peer's batch
    UNAVAILABLE = "unavailable"  # our vote that a peer's batch could be fetched nowhere
    DRAW = "draw"  # store a batch's beacon (ours, or one we check) before its block hash is gone
    # settle a final submission (ours: our stake stays till then; or one we disputed) and have
    # the votes that lost against its verdict judged
    SETTLE = "settle"
    APPEAL = "appeal"  # appeal our batch's verdict when it was not credited and our re-check agrees
    # check that the root lane's submission root lists our receipted batch; prove it otherwise
    LISTED = "listed"
    AUDIT = "audit"  # check the root lane's verdict root of a round our batch is in
    ROOT_VOTE = "root-vote"  # our signed agreement with a root lane batch, to its aggregator
    ESCALATE = "escalate"  # take a root lane batch we dispute (or found nowhere) to the ledger
    # claim our data challenge of a root lane list once its answer window closed unanswered
    CHALLENGE = "challenge"
    # carry our receipted agreeing vote on a root lane batch to its producer (pubsub)
    RELAY = "relay"


class Verdict(StrEnum):
    """What we concluded about a peer's batch we tried to fetch."""

    VERIFIED = "verified"  # fetched, and every check passed: its items may be trained on
    BAD = "bad"  # fetched, and something failed (what: its findings)
    UNAVAILABLE = "unavailable"  # found nowhere (yet)
