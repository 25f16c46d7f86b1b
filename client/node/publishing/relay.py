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
  the producer's on-chain metadata names, read again each round; a thread of its own dials the
  daemon meanwhile, at most every DIAL_S): kubo's publish succeeds with nobody listening, so a
  publish alone proves nothing. A producer whose metadata names no daemon is published to at
  once;
- publishes twice: once receipted, and again in the round's verdict round (`Relay.again`, queued
  once the first went), when the producer audits the verdict root: a producer that restarted,
  or whose daemon dropped the first under load, gets it then;
- tries again with a growing pause (up to MAX_PAUSE_S), saying once why it cannot (pubsub off
  on the daemon), until the round's lies can no longer be proven.

The producer's side (`VoteInbox`): one thread reads the subscription into a bounded queue,
another checks and keeps, so that a slow check never stalls the read. A vote is kept only where
everything a proof needs holds, the cheapest checks first: an agreeing vote on our own receipted
batch of a round still open to proofs (digest, signal, score within the ledger's tolerance); its
voter's signature (one key recovery); the receipt of that round's aggregator, of this vote by
this voter (another); a seat on our committee by the book's draw (the voter's registration and
stake, two chain reads). Chain reads for voters we do not know as nodes of our family are capped
per round (UNKNOWN_VOTERS distinct voters), and a node of another family is refused without
one, so a flood of votes from fresh keys receipted by the aggregator itself costs a bounded
number of reads and keeps nothing; at most one vote per seated checker and round is kept. A
signed vote on a round whose root or beacon is not posted yet, or whose check met a chain that
did not answer, waits (PENDING, one per round, voter and receipt: a copy with a false receipt
does not displace the true one; looked at again every RETRY_S). What is refused is counted
under a fixed reason and logged at debug; nothing a peer publishes stops the stage.

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
from client.chain.errors import ChainError, LedgerRevert
from client.chain.messages import BadMessage, Signed, Submission, Vote, receipt_signer
from client.node.journal.outbox import Relay, RootVote
from client.node.publishing.rootlane import RootLane
from client.node.services import Stage
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
DIAL_S = 30.0  # how often a relay dials a producer's daemon that is not on its topic
DIAL_TIMEOUT_S = 10.0  # one address's dial (a thread of its own: a slow handshake waits)
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
CHAIN_REFUSED = "the chain refused a read of its check"


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
        # producers' daemons as their metadata names them: the round it was read in, the
        # metadata, and its addresses (resolved again only when the metadata changes)
        self._peers: dict[str, tuple[int, str, PeerAddresses]] = {}
        self._dialled: dict[str, float] = {}  # when a producer's daemon was last dialled
        self._next: dict[str, float] = {}  # when an entry is tried again (monotonic)
        self._said: str | None = None  # the last refusal said (once, not every pass)

    def topic_of(self, producer: str) -> str:
        return topic(self.services.chain_id, self.book, producer)

    def send(self, entry) -> None:
        message = entry.message
        assert isinstance(message, Relay)
        if self.current_round() > self.root.windows.challenge_end(message.round):
            self._next.pop(entry.key, None)
            self.journal.dropped(entry.key, "the round's lies can no longer be proven")
            return
        kept = self.journal.receipt(RootVote.key_of(message.round, message.node))
        if kept is None:
            self._next.pop(entry.key, None)
            self.journal.dropped(entry.key, "no receipt of our vote is kept")
            return
        if time.monotonic() < self._next.get(entry.key, 0.0):
            return  # not yet: its pause since the last try
        why = self._publish(message.node, relay_message(kept.message, kept.receipt))
        if why is not None:
            if len(self._next) > 4096:  # (entries dropped elsewhere leave theirs behind)
                self._next.clear()
            pause = min(MAX_PAUSE_S, 2.0 ** min(entry.attempts, 5))
            self._next[entry.key] = time.monotonic() + pause
            self.journal.attempted(entry.key, why)
            return
        self._next.pop(entry.key, None)
        if not message.again:  # once more in the verdict round, when the producer audits
            self.journal.enqueue(Relay(round=message.round, node=message.node, again=True))
        self.journal.done(entry.key)

    def _publish(self, producer: str, data: bytes) -> str | None:
        """Publishes once the producer's daemon is on the topic (where its metadata names a
        daemon; else at once); returns why not (None: sent). StoreError (our daemon down)
        propagates: the publisher marks the store down."""
        name = self.topic_of(producer)
        peer = self._peer(producer)
        try:
            if peer is not None and peer.peer_id not in self.pubsub.topic_peers(name):
                self._dial(peer)
                return f"the producer's daemon ({peer.peer_id}) is not on its topic yet"
            self.pubsub.publish(name, data)
        except PubSubRefused as exc:  # the daemon answered: not a store that is down
            if str(exc) != self._said:
                self._said = str(exc)
                log.warning("relaying our receipted votes: %s", exc)
            return str(exc)
        return None

    def _dial(self, peer: PeerAddresses) -> None:
        """Dials the producer's daemon on a thread of its own (never in the publisher's pass:
        an address that does not answer holds a dial for seconds), at most every DIAL_S."""
        assert peer.peer_id is not None
        if not peer.dialable:
            return
        if time.monotonic() - self._dialled.get(peer.peer_id, -DIAL_S) < DIAL_S:
            return
        if len(self._dialled) > 4096:
            self._dialled.clear()
        self._dialled[peer.peer_id] = time.monotonic()
        threading.Thread(
            target=self.pubsub.dial,
            args=(list(peer.dialable), DIAL_TIMEOUT_S),
            name="sapo-relay-dial",
            daemon=True,
        ).start()

    def _peer(self, producer: str) -> PeerAddresses | None:
        """The producer's daemon as its on-chain metadata names it (read again each round: it
        may have moved; None: it names none)."""
        key, current = producer.lower(), self.current_round()
        known = self._peers.get(key)
        if known is None or known[0] != current:
            if len(self._peers) > 4096:
                self._peers.clear()
            metadata = self.ledger.node_info(producer).metadata
            if known is not None and known[1] == metadata:
                known = (current, metadata, known[2])  # the same: no name resolved again
            else:
                private = self.root.allow_private_peers
                known = (current, metadata, peer_addresses(metadata, allow_private=private))
            self._peers[key] = known
        found = known[2]
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
        self._unknown: dict[int, set[str]] = {}  # per round, voters we did not know, read
        self._unseated: dict[int, set[str]] = {}  # per round, voters found without a seat
        # (round, voter, receipt) of the votes in _pending: with the receipt, so that a copy
        # with a false one (the aggregator sees each vote first) does not displace the true one
        self._waiting: set[tuple[int, str, str]] = set()
        self._chain_down = False  # the chain did not answer a check of this retry pass
        self._family: str | None = None
        self._families: dict[str, str] = {}  # our intake's peers' families (lowercase)
        self._families_at = 0.0
        self._pending: deque[tuple[bytes, tuple[int, str, str]]] = deque()
        self._last_key: tuple[int, str, str] | None = None  # the vote under check, once signed
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
                if not reader.is_alive():  # a bug of ours killed it: said, and read again
                    log.error("the vote relay's reader stopped; started again")
                    reader = threading.Thread(
                        target=self._read, args=(stop,), name="sapo-relay-read", daemon=True
                    )
                    reader.start()
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
                    if len(data) > MAX_RELAY_BYTES:
                        self.refused[TOO_LARGE] += 1
                        continue
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
        """Checks the waiting votes again, until the chain does not answer one (the rest wait
        for the next pass)."""
        self._chain_down = False
        for _ in range(len(self._pending)):
            if stop.is_set() or self._chain_down:
                return
            data, key = self._pending.popleft()
            self._waiting.discard(key)
            self._take_safely(data)

    # ------------------------------------------------------------------------------- checks

    def take(self, data: bytes) -> str | None:
        """Checks one message of our topic and keeps its vote; returns why it was not kept
        (None: kept, kept already, or waiting: its round's root not posted yet, or the chain
        did not answer)."""
        try:
            why = self._check(data)
        except LedgerRevert:  # the chain answered, and refused a read: nothing to wait for
            why = CHAIN_REFUSED
        except ChainError as exc:
            log.debug("a relayed vote waits: the chain did not answer (%s)", exc)
            self._chain_down = True
            why = self._wait(data, self._last_key)
        if why is not None:
            self.refused[why] += 1
            log.debug("a relayed vote not kept: %s", why)
        return why

    def _wait(self, data: bytes, key: tuple[int, str, str] | None) -> str | None:
        """Keeps a vote whose voter signed it to check again later: one per (round, voter,
        receipt)."""
        if key is None:
            return PENDING_FULL
        if key in self._waiting:
            return None
        if len(self._pending) >= PENDING:
            return PENDING_FULL
        self._waiting.add(key)
        self._pending.append((data, key))
        return None

    def _check(self, data: bytes) -> str | None:
        self._last_key = None
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
        except (ValueError, BadMessage, RecursionError):
            return NOT_A_VOTE
        v = signed.message
        if not isinstance(v, Vote) or v.unavailable:
            return NOT_AGREEING
        if v.producer.lower() != self.me:
            return NOT_OURS
        # what our own submission claimed (our journal's: no chain read, no key recovered)
        ours = self.root.kept(v.round)
        if ours is None:
            return NO_BATCH
        if self.current_round() > self.root.windows.challenge_end(v.round):
            return CLOSED
        claim = Signed.parse(ours.message).message
        assert isinstance(claim, Submission)
        if v.digest != claim.digest or v.signal != claim.signal:
            return OTHER_BATCH
        most = claim.rollouts * SCORE_SCALE
        if abs(v.score - claim.score) * BPS > most * self.params.agree_tolerance_bps:
            return TOLERANCE
        voter = signed.signer.lower()
        if voter in self._seated.get(v.round, ()):
            return None  # this checker's vote is kept already
        if voter in self._unseated.get(v.round, ()):
            return UNSEATED
        try:  # the voter's signature (a key recovery): only a signed vote may wait
            signed.verify(self.root.domain)
        except BadMessage:
            return BAD_SIGNATURE
        self._last_key = (v.round, voter, receipt)
        posted = self._posted(v.round)
        if posted is None:  # its root or beacon not posted yet (or not read again so soon)
            return self._wait(data, self._last_key)
        try:  # the aggregator's receipt of this vote by this voter (another key recovery)
            signer = receipt_signer(self.root.domain, signed, receipt)
        except BadMessage:
            return BAD_RECEIPT
        if signer.lower() != posted.aggregator.lower():
            return NOT_RECEIPTED
        # the voter's seat, by the book's draw: two chain reads, for at most UNKNOWN_VOTERS
        # voters a round that our intake does not know (a flood of fresh keys the aggregator
        # receipted); a node of another family holds no seat on our batches
        family = self._family_of(voter)
        if family is not None and family != self._own_family():
            return UNSEATED
        unknown = self._unknown.setdefault(v.round, set())
        if family is None and voter not in unknown and len(unknown) >= UNKNOWN_VOTERS:
            return TOO_MANY
        seated = self.root.auditor.seated(posted, self.me, voter, remember=family is not None)
        if family is None:
            unknown.add(voter)
        if not seated:
            self._unseated.setdefault(v.round, set()).add(voter)
            return UNSEATED
        self._seated.setdefault(v.round, set()).add(voter)
        if self.journal.keep_relayed_vote(v.round, voter, signed.to_bytes(), receipt):
            self.kept += 1
        return None

    def _family_of(self, voter: str) -> str | None:
        """`voter`'s model family where our intake knows it (its peers' families, read again
        at most every 30 s); None: unknown."""
        if time.monotonic() - self._families_at > 30.0:
            self._families_at = time.monotonic()
            self._families = {n.lower(): f for n, f in self.journal.peers.families().items()}
        return self._families.get(voter)

    def _own_family(self) -> str | None:
        if self._family is None:
            self._family = self.ledger.node_info(self.me).family
        return self._family

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
        for kept in (self._rounds, self._seated, self._unknown, self._unseated, self._unposted):
            for old in [q for q in kept if q < round_ - KEEP_ROUNDS]:
                del kept[old]
        self._rounds[round_] = posted
        return posted


# voters we do not know as nodes of our family whose seats one round's votes may cost chain
# reads for: K seats a round are held by at most K checkers, whom our intake almost always knows
# (they submit batches of our family); a few more for newcomers
UNKNOWN_VOTERS = 32


__all__ = [
    "MAX_RELAY_BYTES",
    "UNKNOWN_VOTERS",
    "VoteInbox",
    "VoteRelay",
    "relay_message",
    "topic",
]
