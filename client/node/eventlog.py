"""What a node tells its operator: a human-readable line on the terminal (logging) and the same
event as one JSON object per line in `<data_dir>/events.jsonl` (for tools, the TUI and tests).

Event kinds and the phases of the node's compute stage are enums shared by the node, the journal,
the read model and the TUI (a kind is written as its string value). Fields are plain values the
node chose to report: rounds, digests, CIDs, tx hashes, rewards, reasons. Nothing secret is ever
passed in (the node never holds a key outside its account)."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

log = logging.getLogger("sapo.node")


class Phase(StrEnum):
    """What the node's compute stage is doing (the TUI's phase badge)."""

    STARTING = "starting"
    GENERATING = "generating"
    TRAINING = "training"
    CHECKPOINTING = "checkpointing"
    IDLE = "idle"  # waiting for the next chain round ([sapo].max_local_rounds reached)
    PAUSED = "paused"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Span(StrEnum):
    """The spans of time the journal records (client.node.view.journal turns them into shares)."""

    GENERATE = "generate"  # compute: tasks -> completions -> verifier rewards
    TRAIN = "train"  # compute: the GRPO step (and choosing its items)
    CHECKPOINT = "checkpoint"  # compute: saving the policy
    SNAPSHOT = "snapshot"  # compute: hashing and keeping the weights a local round samples from
    BLOCKED = "blocked"  # compute waiting on chain or IPFS I/O (the design has none)
    PIN = "pin"  # I/O, beside compute: the publisher
    SUBMIT = "submit"
    ATTEST = "attest"
    DISCOVER = "discover"  # I/O, beside compute: peer intake
    FETCH = "fetch"
    VERIFY = "verify"
    PROVE = "prove"  # I/O side: fetching opened checkpoints and re-drawing completions


COMPUTE = (Span.GENERATE, Span.TRAIN, Span.CHECKPOINT, Span.SNAPSHOT)
BUSY = (Span.GENERATE, Span.TRAIN)  # what the node is for: learning


@contextlib.contextmanager
def timed(journal, stage: Span) -> Iterator[None]:
    """Records the wall time of the block as a span of `stage` in the journal."""
    started = time.time()
    try:
        yield
    finally:
        journal.span(str(stage), started, time.time())


class Event(StrEnum):
    """Every kind of event a node writes."""

    NODE_STARTED = "node.started"
    NODE_PHASE = "node.phase"
    NODE_CHECKPOINT = "node.checkpoint"
    NODE_PENDING = "node.pending"
    NODE_ERROR = "node.error"
    NODE_STOPPED = "node.stopped"
    LOCAL_ROUND = "local.round"  # a local round generated and trained
    ROUND_SEALED = "round.sealed"  # a chain round's batch is closed (its local rounds)
    ROUND_SKIPPED = "round.skipped"  # a chain round in which no local round started
    ROUND_PINNED = "round.pinned"
    ROUND_SUBMITTED = "round.submitted"
    ROUND_SETTLED = "round.settled"  # we settled a final submission (ours, or one we disputed)
    ROUND_APPEALED = "round.appealed"  # we appealed our batch's verdict (or chose not to)
    VOTES_SETTLED = "votes.settled"  # we had the votes that lost against a verdict judged
    SUBMIT_DROPPED = "submit.dropped"
    ROOT_LANE_UNSENT = "rootlane.unsent"  # the root lane did not take or will not credit our batch
    ROOT_LANE_PROVEN = "rootlane.proven"  # we proved a lie of the root lane's aggregator on chain
    # we bonded a data challenge of a root lane list ([root_lane].challenge_lists)
    ROOT_LANE_CHALLENGED = "rootlane.challenged"
    # a data challenge of ours was answered on chain: our bond paid the answerer
    ROOT_LANE_ANSWERED = "rootlane.answered"
    PEER_VERIFIED = "peer.verified"
    PEER_BAD = "peer.bad"
    PEER_UNAVAILABLE = "peer.unavailable"
    PEER_ATTESTED = "peer.attested"
    PEER_REPORTED_UNAVAILABLE = "peer.reported_unavailable"  # our unavailable vote, on chain
    ATTEST_DROPPED = "attest.dropped"
    BEACON_DRAWN = "beacon.drawn"
    WEIGHTS_OPENED = "round.opened"  # the checkpoints our submission's beacon opened, pinned
    CHAIN_STATUS = "chain.status"
    STORE_STATUS = "store.status"
    STORE_UNPINNED = "store.unpinned"
    STORE_SPOOL = "store.spool"  # a peer's checkpoint could not be written to our disk
    METADATA_SET = "node.metadata"  # our peer id / swarm addresses written on chain
    ADVERSARY_MOVE = "adversary.move"  # a devnet adversary's action (client.devnet.adversary)


class EventLog:
    """Appends events to a JSONL file and logs them for people."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.listeners: list = []  # callables(event dict), e.g. the TUI's read model

    def emit(self, kind: Event, message: str, level: int = logging.INFO, **fields: Any) -> None:
        event = {"time": round(time.time(), 3), "kind": str(kind), "message": message, **fields}
        line = json.dumps(event, default=str, sort_keys=True)
        with self._lock, self.path.open("a") as f:
            f.write(line + "\n")
        log.log(level, message)
        for listener in list(self.listeners):
            listener(event)


def read_events(path: Path, last: int | None = None) -> list[dict[str, Any]]:
    """Returns the events of a JSONL event log (the `last` ones when given); skips a torn line."""
    if not Path(path).is_file():
        return []
    lines = Path(path).read_text().splitlines()
    events = []
    for line in lines[-last:] if last else lines:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # the last line of a killed writer
    return events
