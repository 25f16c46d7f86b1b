"""Receipted votes carried from a batch's checkers to its producer (`[root_lane].relay_votes`).

A drawn checker's agreeing vote goes to the round's aggregator, which receipts it. Should the
verdict root then leave the batch uncredited although a quorum of its seated checkers agreed (the
aggregator dropped their votes), the batch's producer proves it on chain with those votes and
receipts (RoundJudge.proveUncredited: the root is void, half the bond the prover's). Only the
checkers hold them, so each publishes its receipted vote on the producer's topic, over libp2p
pubsub through its IPFS daemon (kubo's RPC, client.store.pubsub), and each producer keeps what
arrives on its own topic:

- the checker's side is an outbox message (`Relay`, queued once the vote is receipted), sent
  again every pass while nobody listens on the topic (the producer's daemon not connected yet),
  until the round's lies can no longer be proven;
- the producer's side (`VoteInbox`) keeps a vote only where everything a proof needs holds: its
  signer's signature; a vote on our batch of a round we submitted in, as our own submission says
  it (digest, signal, score within the ledger's tolerance); the receipt of that round's
  aggregator; a seat on our committee by the book's draw. So what it keeps is at most one vote per
  seated checker and round, whoever floods the topic. What fails is counted and logged at debug,
  never raised: nothing a peer publishes stops the stage.

Messages are JSON: {"vote": "0x" + the signed vote (client.chain.messages.Signed's bytes),
"receipt": "0x" + the aggregator's signature}. A producer whose daemon was down while its
checkers published misses their votes (pubsub keeps nothing); their relays stop once one went
out.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, deque

from client.chain.book import BookRound
from client.chain.errors import ChainError
from client.chain.messages import BadMessage, Signed, Submission, Vote, receipt_signer
from client.node.journal.outbox import Relay, RootVote
from client.node.publishing.rootlane import RootLane
from client.node.services import Stage
from client.store.errors import StoreError, StoreUnavailable
from client.store.pubsub import PubSub, PubSubRefused
from client.units import SCORE_SCALE

log = logging.getLogger(__name__)

MAX_RELAY_BYTES = 4096  # a signed vote (~400 B JSON) hex-encoded, and a 65-byte receipt
RETRY_S = 5.0  # after the daemon refused or broke a subscription
UNPOSTED_S = 2.0  # how often a round not posted yet is read again for a vote on it
KEEP_ROUNDS = 16  # rounds of posted roots and kept voters remembered behind the newest
PENDING = 256  # messages kept to validate again after the chain did not answer
BPS = 10_000


def topic(chain_id: int, book: str, producer: str) -> str:
    """The pubsub topic of receipted votes on `producer`'s batches in one deployment's book."""
    return f"sapo/votes/1/{chain_id}/{book.lower()}/{producer.lower()}"


def relay_message(signed: bytes, receipt: str) -> bytes:
    return json.dumps({"vote": "0x" + signed.hex(), "receipt": receipt}).encode()


class VoteRelay(Stage):
    """Both sides: `send` (the outbox handler of `Relay`) and `VoteInbox` (the producer's)."""

    def __init__(self, root: RootLane, pubsub: PubSub):
        super().__init__(root.services)
        self.root, self.pubsub = root, pubsub
        self.book = root.book.address

    def topic_of(self, producer: str) -> str:
        return topic(self.services.chain_id, self.book, producer)

    def send(self, entry) -> None:
        """Publishes our receipted vote on the producer's topic; again next pass while nobody
        listens there (or the daemon has pubsub off, which the entry's error says how to fix),
        until the round's challenge window closes."""
        message = entry.message
        assert isinstance(message, Relay)
        if self.current_round() > self.root.windows.challenge_end(message.round):
            self.journal.dropped(entry.key, "the round's lies can no longer be proven")
            return
        kept = self.journal.receipt(RootVote.key_of(message.round, message.node))
        if kept is None:
            self.journal.dropped(entry.key, "no receipt of our vote is kept")
            return
        try:
            data = relay_message(kept.message, kept.receipt)
            self.pubsub.publish(self.topic_of(message.node), data)
        except PubSubRefused as exc:  # the daemon answered: not a store that is down
            self.journal.attempted(entry.key, str(exc))
            return
        self.journal.done(entry.key)


class VoteInbox(Stage):
    """Our topic's receipted votes, checked and kept (the producer's side of the relay)."""

    def __init__(self, root: RootLane, pubsub: PubSub):
        super().__init__(root.services)
        self.root, self.pubsub = root, pubsub
        self.me = self.services.address.lower()
        self.topic = topic(self.services.chain_id, root.book.address, self.me)
        self.refused: Counter[str] = Counter()  # why messages were not kept (metrics, tests)
        self.kept = 0
        self._rounds: dict[int, BookRound] = {}  # posted rounds of ours, read once each
        self._unposted: dict[int, float] = {}  # when a round was last read not posted yet
        self._seated: dict[int, set[str]] = {}  # per round, the voters whose votes are kept
        self._pending: deque[bytes] = deque(maxlen=PENDING)
        self._said = ""  # the last subscription failure said (said once, not every retry)

    def run(self, stop: threading.Event) -> None:
        """Subscribes to our topic and takes what arrives, until `stop`; a daemon that is down,
        or refuses (pubsub off), is asked again every RETRY_S seconds (said once)."""
        while not stop.is_set():
            try:
                for data in self.pubsub.subscribe(self.topic, stop):
                    if self._said:
                        log.info("pubsub: subscribed to %s again", self.topic)
                        self._said = ""
                    self.take(data)
                    self._retry_pending()
            except StoreError as exc:
                if str(exc) != self._said:
                    self._said = str(exc)
                    level = logging.WARNING if isinstance(exc, PubSubRefused) else logging.INFO
                    log.log(level, "the vote relay's subscription: %s; again soon", exc)
            stop.wait(RETRY_S)

    def _retry_pending(self) -> None:
        for _ in range(len(self._pending)):
            self.take(self._pending.popleft())

    def take(self, data: bytes) -> str | None:
        """Checks one message of our topic and keeps its vote; returns why it was not kept
        (None: kept, or kept already)."""
        try:
            why = self._check(data)
        except ChainError as exc:  # the chain did not answer: looked at again later
            self._pending.append(data)
            why = f"the chain did not answer ({exc})"
        if why is not None:
            self.refused[why.split(":")[0]] += 1
            log.debug("a relayed vote not kept: %s", why)
        return why

    def _check(self, data: bytes) -> str | None:
        if len(data) > MAX_RELAY_BYTES:
            return f"too large: {len(data)} bytes"
        try:
            obj = json.loads(data)
            if not isinstance(obj, dict) or set(obj) != {"vote", "receipt"}:
                return "not a relayed vote: its fields must be vote and receipt"
            vote_hex, receipt = obj["vote"], obj["receipt"]
            if not isinstance(vote_hex, str) or not isinstance(receipt, str):
                return "not a relayed vote: vote and receipt are 0x-hex strings"
            signed = Signed.from_bytes(bytes.fromhex(vote_hex.removeprefix("0x")), self.root.domain)
        except (ValueError, BadMessage) as exc:
            return f"not a signed vote: {exc}"
        v = signed.message
        if not isinstance(v, Vote) or v.unavailable:
            return "not an agreeing vote"
        if v.producer.lower() != self.me:
            return "a vote on another producer's batch"
        ours = self.root.kept(v.round)  # our receipted submission of the round
        if ours is None:
            return f"round {v.round}: no batch of ours the root lane took"
        if self.current_round() > self.root.windows.challenge_end(v.round):
            return f"round {v.round}: its lies can no longer be proven"
        claim = Signed.from_bytes(ours.message, self.root.domain).message
        assert isinstance(claim, Submission)
        most = claim.rollouts * SCORE_SCALE
        if v.digest != claim.digest or v.signal != claim.signal:
            return "a vote on another batch (digest or signal)"
        if abs(v.score - claim.score) * BPS > most * self.params.agree_tolerance_bps:
            return "a vote outside the tolerance"
        voter = signed.signer.lower()
        if voter in self._seated.get(v.round, ()):
            return None  # this checker's vote is kept already
        posted = self._posted(v.round)
        if posted is None:
            return f"round {v.round}: no submission root and beacon yet"
        try:
            signer = receipt_signer(self.root.domain, signed, receipt)
        except BadMessage as exc:
            return f"a malformed receipt: {exc}"
        if signer.lower() != posted.aggregator.lower():
            return "a receipt not of the round's aggregator"
        # the only reads a stranger's message costs (two, not kept): a flood of fresh keys
        # receipted by the aggregator itself keeps nothing and grows nothing
        if not self.root.auditor.seated(posted, self.me, voter, remember=False):
            return "a voter without a seat on our committee"
        self._seated.setdefault(v.round, set()).add(voter)
        if self.journal.keep_relayed_vote(v.round, voter, signed.to_bytes(), receipt):
            self.kept += 1
        return None

    def _posted(self, round_: int) -> BookRound | None:
        """Round `round_` as the book holds it once its root is posted and its beacon drawn
        (read once then; before, at most once every UNPOSTED_S seconds)."""
        posted = self._rounds.get(round_)
        if posted is not None:
            return posted
        asked = self._unposted.get(round_)
        if asked is not None and time.monotonic() - asked < UNPOSTED_S:
            return None
        posted = self.root.book.round_of(round_)
        if not posted.posted or not posted.beacon:
            self._unposted[round_] = time.monotonic()
            return None
        self._unposted.pop(round_, None)
        for kept in (self._rounds, self._seated):  # the rounds whose votes can still come
            for old in [q for q in kept if q < round_ - KEEP_ROUNDS]:
                del kept[old]
        self._rounds[round_] = posted
        return posted


def wait_subscribed(inbox: VoteInbox, timeout_s: float = 10.0) -> None:
    """Blocks until the daemon lists our topic among its subscriptions (tests, and a node's
    start where it matters that none of the first votes is missed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if inbox.topic in inbox.pubsub.topics():
                return
        except StoreUnavailable:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"not subscribed to {inbox.topic} within {timeout_s:.0f} s")


__all__ = ["MAX_RELAY_BYTES", "VoteInbox", "VoteRelay", "relay_message", "topic", "wait_subscribed"]
