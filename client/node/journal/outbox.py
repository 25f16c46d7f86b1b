"""The outbox's messages: one frozen model per thing the publisher sends, each building its own
idempotency key.

A stage queues a message (`Journal.enqueue(Attest(...))`); the publisher's sender reads it back as
the same type and hands it to the one handler of its class (client.node.publishing.sender). The
key makes queueing idempotent across threads and restarts: one pin and one submission per round,
one vote per committee a node sits on, one draw per beacon. The journal stores a message as its
kind, round and the rest of its fields as JSON (`payload`); keys and payloads are the ones this
client has always written, so a journal written before these types reads back unchanged.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from client.node.journal.states import OutboxKind


class OutboxStatus(StrEnum):
    """Where an outbox entry stands."""

    PENDING = "pending"  # not sent yet (or sent, and its receipt not seen)
    DONE = "done"  # sent and mined, or found done on chain
    DROPPED = "dropped"  # can never go (a window closed, the chain refused it): why is kept


class Message(BaseModel):
    """An outbox message of one kind, for one chain round."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    KIND: ClassVar[OutboxKind]

    round: int

    @property
    def key(self) -> str:
        """The idempotency key: a second message with the same key is not queued."""
        raise NotImplementedError

    def payload(self) -> dict[str, Any]:
        """What the journal stores beside kind and round (fields at their default left out)."""
        return self.model_dump(exclude={"round"}, exclude_defaults=True)


class Pin(Message):
    """Pin our sealed batch of the round (queued with its submission, in one transaction)."""

    KIND = OutboxKind.PIN

    @property
    def key(self) -> str:
        return f"pin:{self.round}"


class Submit(Message):
    """Submit our batch's digest and claim, once it is pinned."""

    KIND = OutboxKind.SUBMIT
    digest: str
    rollouts: int
    score: int
    signal: int

    @property
    def key(self) -> str:
        return f"submit:{self.round}"


class Open(Message):
    """Pin the checkpoints our submission's beacon opened, once the beacon is known."""

    KIND = OutboxKind.OPEN

    @property
    def key(self) -> str:
        return f"open:{self.round}"


class Listed(Message):
    """Check that the round's submission root in the book lists our batch, which its aggregator
    receipted; prove the lie on chain if it does not (the root lane)."""

    KIND = OutboxKind.LISTED

    @property
    def key(self) -> str:
        return f"listed:{self.round}"


def vote_key(round_: int, node: str, appeal: bool) -> str:
    """The key of our vote on `node`'s batch: one on its first committee and one on its
    appeal's, whether the vote is an attestation or an unavailable report."""
    return f"{'appeal-vote' if appeal else 'attest'}:{round_}:{node}"


class Attest(Message):
    """Our attestation of a peer's batch as a drawn checker: what we recomputed, and the
    findings bits of what failed (a dispute when they differ from its claim)."""

    KIND = OutboxKind.ATTEST
    node: str
    score: int
    signal: int
    findings: int
    appeal: bool = False  # on the appeal's committee (its window: the appeal rounds)

    @property
    def key(self) -> str:
        return vote_key(self.round, self.node, self.appeal)


class Unavailable(Message):
    """Our vote that a peer's batch could be fetched from nobody."""

    KIND = OutboxKind.UNAVAILABLE
    node: str
    appeal: bool = False

    @property
    def key(self) -> str:
        return vote_key(self.round, self.node, self.appeal)


class Audit(Message):
    """Check the round's verdict root in the book (our batch is in its submission root): our own
    credit and a random sample of the others, the order of all; prove the lie it holds on chain
    (the root lane)."""

    KIND = OutboxKind.AUDIT

    @property
    def key(self) -> str:
        return f"audit:{self.round}"


class Challenge(Message):
    """Claim our data challenge of leaf `index` of the round's submission list (or verdict list)
    in the book once its answer window (through round `answer_by`) closed unanswered: the root is
    void, and our challenge bond comes back with half the aggregator's bond (the root lane)."""

    KIND = OutboxKind.CHALLENGE
    verdict_tree: bool
    index: int
    aggregator: str  # the root's poster: one that answered is not challenged by the node again
    answer_by: int

    @property
    def key(self) -> str:
        tree = "verdicts" if self.verdict_tree else "submissions"
        return f"challenge:{self.round}:{tree}:{self.index}"


class RootVote(Message):
    """Our signed agreement with a peer's batch of the root lane (its claim, as we recomputed
    it), sent to the aggregator that posted the round's submission root."""

    KIND = OutboxKind.ROOT_VOTE
    node: str
    digest: str
    score: int
    signal: int

    @property
    def key(self) -> str:
        return self.key_of(self.round, self.node)

    @staticmethod
    def key_of(round_: int, node: str) -> str:
        return f"root-vote:{round_}:{node}"


class Relay(Message):
    """Our agreeing vote on `node`'s batch, as the round's aggregator receipted it (kept under
    the RootVote's key), published to that producer's topic: should the verdict root leave the
    batch uncredited, its producer proves it with a quorum of such votes (the root lane's relay,
    client.node.publishing.relay). `again`: the second publish, due in the round's verdict
    round."""

    KIND = OutboxKind.RELAY
    node: str
    again: bool = False

    @property
    def key(self) -> str:
        return f"relay{'-again' if self.again else ''}:{self.round}:{self.node}"


class Escalate(Message):
    """A root lane batch we dispute or found nowhere, taken to the ledger with our vote
    (RoundBook.escalate): the entry's place `index` in the submission root, the signed submission
    there (`leaf`, as client.chain.messages.Signed's JSON) and its path (`proof`: hash, sum).
    On the ledger it is our first-committee vote: its key is an attestation's."""

    KIND = OutboxKind.ESCALATE
    node: str
    unavailable: bool
    score: int
    signal: int
    findings: int
    index: int
    leaf: str
    proof: tuple[tuple[str, int], ...]

    @property
    def key(self) -> str:
        return vote_key(self.round, self.node, False)


class Draw(Message):
    """Store a batch's beacon (ours, or one we are drawn to check) if nobody has, before the
    EVM forgets its block's hash. `block`: the beacon's block."""

    KIND = OutboxKind.DRAW
    node: str
    block: int
    appeal: bool = False  # the appeal committee's beacon

    @property
    def key(self) -> str:
        return f"draw:{self.round}:{self.node}" + (":appeal" if self.appeal else "")


class Settle(Message):
    """Settle a final submission, ours (`node` None) or a peer's we disputed, and have the
    votes that lost against its verdict judged."""

    KIND = OutboxKind.SETTLE
    node: str | None = None

    @property
    def key(self) -> str:
        return f"settle:{self.round}" + (f":{self.node}" if self.node else "")


class Appeal(Message):
    """Appeal our batch's verdict if it was not credited and our re-check agrees with us."""

    KIND = OutboxKind.APPEAL

    @property
    def key(self) -> str:
        return f"appeal:{self.round}"


class VoteAppeal(Message):
    """Appeal the first committee's verdict on a peer's batch if it judges our vote lost."""

    KIND = OutboxKind.APPEAL
    node: str

    @property
    def key(self) -> str:
        return f"appeal-of:{self.round}:{self.node}"


MESSAGES: tuple[type[Message], ...] = (
    Pin,
    Submit,
    Open,
    Listed,
    Audit,
    Challenge,
    RootVote,
    Relay,
    Escalate,
    Attest,
    Unavailable,
    Draw,
    Settle,
    Appeal,
    VoteAppeal,
)


def decode(kind: str, round_: int, payload: dict[str, Any]) -> Message:
    """The message a journal row holds. Two types share the kind `appeal` (ours and a vote's),
    told apart by their fields. A row no type reads raises ValueError."""
    kind = OutboxKind(kind)
    for cls in MESSAGES:
        if kind == cls.KIND:
            try:
                return cls.model_validate({"round": round_, **payload})
            except ValueError:
                continue
    raise ValueError(f"an outbox row of kind {kind!r} that no message reads: {payload!r}")


@dataclass(frozen=True)
class OutboxEntry:
    """A queued message and where it stands."""

    message: Message
    status: OutboxStatus
    tx_hash: str | None
    attempts: int
    error: str | None

    @property
    def key(self) -> str:
        return self.message.key

    @property
    def kind(self) -> OutboxKind:
        return self.message.KIND

    @property
    def round(self) -> int:
        return self.message.round


# the journal's reads of the outbox table (client.node.journal.journal)
SELECT_ENTRIES = "SELECT kind, round, payload, status, tx_hash, attempts, error FROM outbox"


def entry_of(row: tuple) -> OutboxEntry:
    message = decode(row[0], row[1], json.loads(row[2]))
    return OutboxEntry(message, OutboxStatus(row[3]), *row[4:])


def insert_message(db: sqlite3.Connection, message: Message, now: float) -> bool:
    cursor = db.execute(
        "INSERT OR IGNORE INTO outbox (key, kind, round, payload, created, updated) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            message.key,
            message.KIND,
            message.round,
            json.dumps(message.payload(), sort_keys=True),
            now,
            now,
        ),
    )
    return cursor.rowcount == 1
