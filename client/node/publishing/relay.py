"""Receipted votes carried from a batch's checkers to its producer (`[root_lane].relay_votes`).

A drawn checker's agreeing vote goes to the round's aggregator, which receipts it. Should the
verdict root then leave the batch uncredited although a quorum of its seated checkers agreed (the
aggregator dropped their votes), the batch's producer proves it on chain with those votes and
receipts (RoundJudge.proveUncredited: the root is void, half the bond the prover's). Only the
checkers hold them, so each publishes its receipted vote on the producer's topic, over libp2p
pubsub through its IPFS daemon (kubo's RPC, client.store.pubsub), and each producer keeps what
arrives on its own topic.

The checker's side (`VoteRelay.send`, the outbox handler of `Relay`):
- publishes only once the producer's daemon is on the topic (`pubsub/peers` lists the peer id
  the producer's on-chain metadata names; the daemon dials its addresses meanwhile): kubo's
  publish succeeds with nobody listening, so a publish alone proves nothing;
- publishes twice: once receipted, and again in the round's verdict round (`Relay.again`), when
  the producer audits the verdict root: a producer that restarted, or whose daemon dropped the
  first under load, gets it then;
- tries again with a growing pause (up to MAX_PAUSE_S), saying once why it cannot (pubsub off
  on the daemon), until the round's lies can no longer be proven.

The producer's side (`VoteInbox`): one thread reads the subscription into a bounded queue,
another checks and keeps, so that a slow check never stalls the read. A vote is kept only where
everything a proof needs holds, the cheapest checks first: an agreeing vote on our own receipted
batch of a round still open to proofs (digest, signal, score within the ledger's tolerance); the
receipt of that round's aggregator (one key recovery); its voter's signature (another); a seat
on our committee by the book's draw (the voter's registration and stake, two chain reads). Chain
reads for voters we do not know as nodes of our family are capped per round (UNKNOWN_VOTERS), so
a flood of votes from fresh keys receipted by the aggregator itself costs a bounded number of
reads and keeps nothing; at most one vote per seated checker and round is kept. A vote on a
round whose root or beacon is not posted yet, or whose check met a chain that did not answer,
waits (PENDING, looked at again every RETRY_S). What is refused is counted under a fixed reason
and logged at debug; nothing a peer publishes stops the stage.

Pubsub keeps nothing: votes published while the producer's node or daemon is down are missed
(the second publish covers a restart before the verdict round).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections import Counter, deque

from client.chain.book import BookRound
from client.chain.errors import ChainError
from client.chain.messages import BadMessage, Signed, Submission, Vote, receipt_signer
from client.node.journal.outbox import Relay, RootVote
from client.node.publishing.rootlane import RootLane
from client.node.services import Stage
from client.store import IpfsStore
from client.store.errors import StoreError
from client.store.peers import PeerAddresses, peer_addresses
from client.store.pubsub import PubSub, PubSubRefused
from client.units import SCORE_SCALE

log = logging.getLogger(__name__)

MAX_RELAY_BYTES = 4096  # a signed vote (~400 B JSON) hex-encoded, and a 65-byte receipt
RETRY_S = 2.0  # how often waiting votes are looked at again, and a broken subscription re-made
UNPOSTED_S = 2.0  # how often a round not posted yet is read again
KEEP_ROUNDS = 16  # rounds of posted roots and kept voters remembered behind the newest
PENDING = 256  # votes waiting for their round's root or for the chain
QUEUE = 1024  # messages read and not checked yet (a flood's excess is dropped)
MAX_PAUSE_S = 30.0  # the longest pause between a relay's tries
BPS = 10_000

# why a message was not kept: a fixed set (the inbox's `refused` counts them)
TOO_LARGE = "too large"
NOT_A_VOTE = "not a relayed vote"
NOT_AGREEING = "not an agreeing vote"
NOT_OURS = "a vote on another producer's batch"
NO_BATCH = "no batch of ours the root lane took in its round"
CLOSED = "its round's lies can no longer be proven"
OTHER_BATCH = "a vote on another batch (digest or signal)"
TOLERANCE = "a vote outside the tolerance"
BAD_RECEIPT = "a malformed receipt"
NOT_RECEIPTED = "a receipt not of the round's aggregator"
BAD_SIGNATURE = "a vote its voter did not sign"
UNSEATED = "a voter without a seat on our committee"
TOO_MANY = "too many voters we do not know in its round"
QUEUE_FULL = "dropped unread: the inbox's queue was full"
PENDING_FULL = "dropped: too many votes waiting"


def topic(chain_id: int, book: str, producer: str) -> str:
    """The pubsub topic of receipted votes on `producer`'s batches in one deployment's book."""
    return f"sapo/votes/1/{chain_id}/{book.lower()}/{producer.lower()}"


def relay_message(signed: bytes, receipt: str) -> bytes:
    return json.dumps({"vote": "0x" + signed.hex(), "receipt": receipt}).encode()


class VoteRelay(Stage):
    """The checker's side: `send`, the outbox handler of `Relay`."""

    def __init__(self, root: RootLane, pubsub: PubSub):
        super().__init__(root.services)
        self.root, self.pubsub = root, pubsub
        self.book = root.book.address
        self._peers: dict[str, PeerAddresses] = {}  # producers' daemons, from their metadata
        self._next: dict[str, float] = {}  # when an entry is tried again (monotonic)
        self._said: str | None = None  # the last refusal said (once, not every pass)

    def topic_of(self, producer: str) -> str:
        return topic(self.services.chain_id, self.book, producer)

    def send(self, entry) -> None:
        message = entry.message
        assert isinstance(message, Relay)
        if self.current_round() > self.root.windows.challenge_end(message.round):
            self.journal.dropped(entry.key, "the round's lies can no longer be proven")
            return
        kept = self.journal.receipt(RootVote.key_of(message.round, message.node))
        if kept is None:
            self.journal.dropped(entry.key, "no receipt of our vote is kept")
            return
        if time.monotonic() < self._next.get(entry.key, 0.0):
            return  # not yet: its pause since the last try
        why = self._publish(message.node, relay_message(kept.message, kept.receipt))
        if why is not None:
            pause = min(MAX_PAUSE_S, 2.0 ** min(entry.attempts, 5))
            self._next[entry.key] = time.monotonic() + pause
            self.journal.attempted(entry.key, why)
            return
        self._next.pop(entry.key, None)
        if not message.again:  # once more in the verdict round, when the producer audits
            self.journal.enqueue(Relay(round=message.round, node=message.node, again=True))
        self.journal.done(entry.key)

    def _publish(self, producer: str, data: bytes) -> str | None:
        """Publishes once the producer's daemon is on the topic; returns why not (None: sent).
        StoreError (the daemon down) propagates: the publisher marks the store down."""
        name = self.topic_of(producer)
        peer = self._peer(producer)
        try:
            if peer is not None and peer.peer_id not in self.pubsub.topic_peers(name):
                store = self.root.store
                if isinstance(store, IpfsStore) and peer.dialable:
                    store.connect(list(peer.dialable))
                return f"the producer's daemon ({peer.peer_id}) is not on its topic yet"
            self.pubsub.publish(name, data)
        except PubSubRefused as exc:  # the daemon answered: not a store that is down
            if str(exc) != self._said:
                self._said = str(exc)
                log.warning("relaying our receipted votes: %s", exc)
            return str(exc)
        return None

    def _peer(self, producer: str) -> PeerAddresses | None:
        """The producer's daemon as its on-chain metadata names it (read once; None: none)."""
        key = producer.lower()
        if key not in self._peers:
            if len(self._peers) > 4096:
                self._peers.clear()
            metadata = self.ledger.node_info(producer).metadata
            private = self.root.allow_private_peers
            self._peers[key] = peer_addresses(metadata, allow_private=private)
        found = self._peers[key]
        return found if found.peer_id is not None else None


class VoteInbox(Stage):
    """Our topic's receipted votes, checked and kept (the producer's side of the relay)."""

    def __init__(self, root: RootLane, pubsub: PubSub):
        super().__init__(root.services)
        self.root, self.pubsub = root, pubsub
        self.me = self.services.address.lower()
        self.topic = topic(self.services.chain_id, root.book.address, self.me)
        self.refused: Counter[str] = Counter()  # why messages were not kept (a fixed set)
        self.kept = 0
        self._rounds: dict[int, BookRound] = {}  # posted rounds of ours, read once each
        self._unposted: dict[int, float] = {}  # when a round was last read not posted yet
        self._seated: dict[int, set[str]] = {}  # per round, the voters whose votes are kept
        self._unknown: dict[int, int] = {}  # per round, voters read from the chain unknown
        self._family: str | None = None
        self._families: dict[str, str] = {}  # our intake's peers' families (lowercase)
        self._families_at = 0.0
        self._pending: deque[bytes] = deque()
        self._queue: queue.Queue[bytes] = queue.Queue(maxsize=QUEUE)
        self._said = ""  # the last subscription failure said (said once, not every retry)

    # ------------------------------------------------------------------------------ threads

    def run(self, stop: threading.Event) -> None:
        """Reads our topic (a thread of its own) and checks what arrives, until `stop`."""
        reader = threading.Thread(
            target=self._read, args=(stop,), name="sapo-relay-read", daemon=True
        )
        reader.start()
        try:
            last_retry = time.monotonic()
            while not stop.is_set():
                try:
                    data = self._queue.get(timeout=RETRY_S)
                except queue.Empty:
                    data = None
                if data is not None:
                    self._take_safely(data)
                if time.monotonic() - last_retry >= RETRY_S:
                    last_retry = time.monotonic()
                    self._retry_pending(stop)
        finally:
            if stop.is_set():  # (after a bug of ours, the node stops and sets it)
                reader.join(timeout=RETRY_S + 5)

    def _read(self, stop: threading.Event) -> None:
        """Subscribes to our topic and queues what arrives; a daemon that is down, or refuses
        (pubsub off), is asked again every RETRY_S seconds (said once)."""
        while not stop.is_set():
            try:
                for data in self.pubsub.subscribe(self.topic, stop):
                    if self._said:
                        log.info("pubsub: subscribed to %s again", self.topic)
                        self._said = ""
                    try:
                        self._queue.put_nowait(data)
                    except queue.Full:
                        self.refused[QUEUE_FULL] += 1
            except StoreError as exc:
                if str(exc) != self._said:
                    self._said = str(exc)
                    level = logging.WARNING if isinstance(exc, PubSubRefused) else logging.INFO
                    log.log(level, "the vote relay's subscription: %s; again soon", exc)
            stop.wait(RETRY_S)

    def _take_safely(self, data: bytes) -> None:
        try:
            self.take(data)
        except Exception:  # a bug of ours a stranger's bytes found: said, never fatal
            self.refused[NOT_A_VOTE] += 1
            log.exception("a relayed vote could not be checked; dropped")

    def _retry_pending(self, stop: threading.Event) -> None:
        for _ in range(len(self._pending)):
            if stop.is_set():
                return
            self._take_safely(self._pending.popleft())

    # ------------------------------------------------------------------------------- checks

    def take(self, data: bytes) -> str | None:
        """Checks one message of our topic and keeps its vote; returns why it was not kept
        (None: kept, kept already, or waiting: its round's root not posted yet, or the chain
        did not answer)."""
        try:
            why = self._check(data)
        except ChainError as exc:
            log.debug("a relayed vote waits: the chain did not answer (%s)", exc)
            why = self._wait(data)
        if why is not None:
            self.refused[why] += 1
            log.debug("a relayed vote not kept: %s", why)
        return why

    def _wait(self, data: bytes) -> str | None:
        if len(self._pending) >= PENDING:
            return PENDING_FULL
        self._pending.append(data)
        return None

    def _check(self, data: bytes) -> str | None:
        if len(data) > MAX_RELAY_BYTES:
            return TOO_LARGE
        try:
            obj = json.loads(data)
            if not isinstance(obj, dict) or set(obj) != {"vote", "receipt"}:
                return NOT_A_VOTE
            vote_hex, receipt = obj["vote"], obj["receipt"]
            if not isinstance(vote_hex, str) or not isinstance(receipt, str):
                return NOT_A_VOTE
            signed = Signed.parse(bytes.fromhex(vote_hex.removeprefix("0x")))
        except (ValueError, BadMessage):
            return NOT_A_VOTE
        v = signed.message
        if not isinstance(v, Vote) or v.unavailable:
            return NOT_AGREEING
        if v.producer.lower() != self.me:
            return NOT_OURS
        # what our own submission claimed (no chain read, no key recovered)
        ours = self.root.kept(v.round)
        if ours is None:
            return NO_BATCH
        if self.current_round() > self.root.windows.challenge_end(v.round):
            return CLOSED
        claim = Signed.from_bytes(ours.message, self.root.domain).message
        assert isinstance(claim, Submission)
        if v.digest != claim.digest or v.signal != claim.signal:
            return OTHER_BATCH
        most = claim.rollouts * SCORE_SCALE
        if abs(v.score - claim.score) * BPS > most * self.params.agree_tolerance_bps:
            return TOLERANCE
        voter = signed.signer.lower()
        if voter in self._seated.get(v.round, ()):
            return None  # this checker's vote is kept already
        posted = self._posted(v.round)
        if posted is None:  # its root or beacon not posted yet (or not read again so soon)
            return self._wait(data)
        try:  # the aggregator's receipt, then the voter's signature: a key recovery each
            signer = receipt_signer(self.root.domain, signed, receipt)
        except BadMessage:
            return BAD_RECEIPT
        if signer.lower() != posted.aggregator.lower():
            return NOT_RECEIPTED
        try:
            signed.verify(self.root.domain)
        except BadMessage:
            return BAD_SIGNATURE
        # the voter's seat, by the book's draw: chain reads, capped per round for voters we do
        # not know as nodes of our family (a flood of fresh keys the aggregator receipted)
        known = self._known_in_family(voter)
        if not known:
            if self._unknown.get(v.round, 0) >= UNKNOWN_VOTERS:
                return TOO_MANY
            self._unknown[v.round] = self._unknown.get(v.round, 0) + 1
        if not self.root.auditor.seated(posted, self.me, voter, remember=known):
            return UNSEATED
        self._seated.setdefault(v.round, set()).add(voter)
        if self.journal.keep_relayed_vote(v.round, voter, signed.to_bytes(), receipt):
            self.kept += 1
        return None

    def _known_in_family(self, voter: str) -> bool:
        """Whether `voter` is a node our intake knows in our model family (its peers' families,
        read again at most every 30 s)."""
        if time.monotonic() - self._families_at > 30.0:
            self._families_at = time.monotonic()
            self._families = {n.lower(): f for n, f in self.journal.peers.families().items()}
        if self._family is None:
            self._family = self.ledger.node_info(self.me).family
        return self._families.get(voter) == self._family

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
        for kept in (self._rounds, self._seated, self._unknown, self._unposted):
            for old in [q for q in kept if q < round_ - KEEP_ROUNDS]:
                del kept[old]
        self._rounds[round_] = posted
        return posted


# voters we do not know as nodes of our family whose seats one round's votes may cost chain
# reads for: K seats a round are held by at most K checkers, whom our intake almost always knows
# (they submit batches of our family); a few more for newcomers
UNKNOWN_VOTERS = 32


def wait_subscribed(inbox: VoteInbox, timeout_s: float = 10.0) -> None:
    """Blocks until the daemon lists our topic among its subscriptions (tests: no vote published
    before the subscription is made can reach it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if inbox.topic in inbox.pubsub.topics():
                return
        except StoreError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"not subscribed to {inbox.topic} within {timeout_s:.0f} s")


__all__ = [
    "MAX_RELAY_BYTES",
    "UNKNOWN_VOTERS",
    "VoteInbox",
    "VoteRelay",
    "relay_message",
    "topic",
    "wait_subscribed",
]
