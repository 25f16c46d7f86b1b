"""A producer's side of the root lane (docs/scaling.md): our batch's submission signed and sent to
the aggregator `[root_lane].aggregator` names, instead of a transaction on the ledger.

- **Sending.** The submission is an EIP-712 `Submission` under the round book's domain, signed
  with the node's key, sent to the endpoint the aggregator lists in its on-chain metadata (a
  stranger's input: read as an http(s) origin only, client.node.aggregation.endpoint). What the
  aggregator receipts (its signature, checked to be the named aggregator's) is kept in the
  journal before anything else is done with it: it is our proof should its root leave the batch
  out. No receipt by the last round of the batch's submission window (the aggregator is down,
  refused it, or signed with another key): the batch goes on the ledger (force inclusion), which
  costs gas and never credit.
- **Opening.** The checkpoints our batch must open are drawn by the round's beacon in the book
  (the hash of the block after the submission root's), which the aggregator draws; if nobody has
  a few blocks after the root, we draw it.
- **Checking the root.** Once the submission root is posted, we fetch its list, check it as any
  auditor does, and if it leaves our receipted submission out (or holds any lie the list alone
  proves), we prove it on chain: the aggregator loses its bond, half of it to us.
"""

from __future__ import annotations

import json
import logging

from client.chain.book import BookRound, RoundBook, Windows
from client.chain.events import EventReader
from client.chain.messages import Domain, Signed, Submission
from client.chain.models import TxResult
from client.node.aggregation.auditor import Auditor, Finding
from client.node.aggregation.endpoint import AggregatorClient, EndpointError, aggregator_origin
from client.node.aggregation.lists import ListUnavailable, fetch_list
from client.node.journal.outbox import Submit
from client.node.journal.records import Kept
from client.node.services import Services, Stage
from client.store import BlockStore, IpfsStore
from client.store.cid import digest_to_cid
from client.store.peers import peer_addresses

log = logging.getLogger("sapo.node.rootlane")

DRAW_AFTER_BLOCKS = 2  # blocks past the beacon's before we draw it ourselves (the poster's job)


class Unlisted(Exception):
    """The aggregator cannot be reached through what the chain says of it."""


class RootLane(Stage):
    """What the publisher's handlers of our batch ask of the root lane."""

    def __init__(
        self,
        services: Services,
        book: RoundBook,
        aggregator: str,
        store: BlockStore,
        *,
        allow_private_peers: bool = False,
    ):
        """`store`: where the lists are fetched (an IPFS store dials the posting aggregator's
        daemon first, at the addresses its metadata lists: `allow_private_peers` as
        [store]'s)."""
        super().__init__(services)
        if book.tx.account is None:
            raise ValueError("the root lane signs with the node's key: give the book its account")
        self.book, self.store = book, store
        self.aggregator = aggregator
        self.domain = Domain(chain_id=services.chain_id, contract=book.address)
        self.windows = Windows.of(self.params)
        self._key = book.tx.account.key
        self._client: AggregatorClient | None = None
        self.allow_private_peers = allow_private_peers
        self.book_events = EventReader(book)  # type: ignore[arg-type]
        self.auditor = Auditor(
            self.domain,
            services.ledger,
            quorum=self.params.quorum,
            checkers=self.params.checkers,
            tolerance_bps=self.params.agree_tolerance_bps,
            min_stake=self.params.min_stake,
        )

    # ------------------------------------------------------------------------------ sending

    def _endpoint(self) -> AggregatorClient:
        """The aggregator's endpoint, as its on-chain metadata lists it (read again after a
        failure: it may have moved)."""
        if self._client is not None:
            return self._client
        info = self.ledger.node_info(self.aggregator)
        if not info.registered:
            raise Unlisted(f"aggregator {self.aggregator} is not registered on the ledger")
        try:
            listed = json.loads(info.metadata).get("aggregator")
            origin = aggregator_origin(listed)
        except (ValueError, AttributeError, EndpointError) as exc:
            raise Unlisted(
                f"aggregator {self.aggregator}'s metadata lists no endpoint ({exc})"
            ) from None
        self._client = AggregatorClient(origin, self.domain, aggregator=self.aggregator)
        return self._client

    def sign(self, message: Submit) -> Signed:
        submission = Submission(
            round=message.round,
            digest=message.digest,
            rollouts=message.rollouts,
            score=message.score,
            signal=message.signal,
        )
        return Signed.sign(submission, self.domain, self._key)

    def send(self, message: Submit) -> Kept | str:
        """Sends our signed submission; returns what was kept of the aggregator's receipt, or
        why there is none (ChainError propagates: the metadata is read from the chain)."""
        signed = self.sign(message)
        try:
            [answer] = self._endpoint().send([signed])
        except (EndpointError, Unlisted) as exc:
            if self._client is not None:
                self._client.close()
                self._client = None
            return str(exc)
        if answer.refused is not None:
            return f"aggregator {self.aggregator} refused it: {answer.refused}"
        if answer.receipt is None:
            return f"aggregator {self.aggregator} held it but gave no receipt signed by its key"
        kept = Kept(
            Kept.submission_key(message.round),
            message.round,
            self.aggregator,
            signed.to_bytes(),
            answer.receipt,
        )
        self.journal.keep_receipt(kept)
        return kept

    def kept(self, round_: int) -> Kept | None:
        return self.journal.receipt(Kept.submission_key(round_))

    # ----------------------------------------------------------------------------- beacon

    def beacon(self, round_: int) -> int | str | None:
        """The beacon of `round_` in the book: an int once drawn (drawn here when the poster
        has not, DRAW_AFTER_BLOCKS after its block), None while it is to come, or why it never
        will (no root was posted in time, or it was voided)."""
        posted = self.book.round_of(round_)
        current = self.current_round()
        if posted.submissions_voided:
            return f"round {round_}'s submission root was voided"
        if not posted.posted:
            if current > self.windows.post_round(round_):
                return f"no submission root was posted for round {round_}"
            return None
        if posted.beacon:
            return posted.beacon
        if current > self.windows.vote_close(round_):
            return f"round {round_}'s beacon was never drawn"
        if self.book.head() > posted.posted_block + DRAW_AFTER_BLOCKS:
            self.book.draw_beacon(round_)
            return self.book.round_of(round_).beacon or None
        return None

    # ----------------------------------------------------------------------- the list check

    def posted(self, round_: int) -> BookRound | str | None:
        """The round's posted submission root, None while it may come, or why it never will."""
        posted = self.book.round_of(round_)
        if posted.posted:
            return posted
        if self.current_round() > self.windows.post_round(round_):
            return f"no submission root was posted for round {round_}: the receipt binds nobody"
        return None

    def check_listed(self, posted: BookRound, kept: Kept) -> Finding | str | None:
        """Fetches the posted submission list and checks it as any auditor does; returns the
        finding to prove (our receipted submission left out, or any lie the list proves), why
        it cannot be read yet (a string), or None: it lists our submission."""
        digest = self._list_digest(posted)
        if digest is None:
            return f"no SubmissionsPosted event of round {posted.round} at its block"
        cid = digest_to_cid(digest)
        self._dial(posted.aggregator)
        try:
            data = fetch_list(
                self.store,
                cid,
                "submissions",
                posted.round,
                posted.count,
                keep_round=self.windows.challenge_end(posted.round),
            )
        except ListUnavailable as exc:
            return str(exc)
        entries, finding = self.auditor.submissions(posted, data)
        if finding is None:
            signed = Signed.from_bytes(kept.message, self.domain)
            finding = self.auditor.left_out(posted, entries, signed, kept.receipt)
        return finding

    def _list_digest(self, posted: BookRound) -> bytes | None:
        """The digest of the submission list's index, as the root's post named it (its event, in
        the root's own block: one log query)."""
        block = posted.posted_block
        for event in self.book_events.read(
            ["SubmissionsPosted"], from_block=block, to_block=block, round=posted.round
        ):
            return bytes.fromhex(event.args["list"][2:])
        return None

    def _dial(self, aggregator: str) -> None:
        """Connects an IPFS store to the posting aggregator's daemon (its metadata's addresses),
        which serves the list first; what cannot be dialled is left to the store's peers."""
        if not isinstance(self.store, IpfsStore):
            return
        found = peer_addresses(
            self.ledger.node_info(aggregator).metadata, allow_private=self.allow_private_peers
        )
        if found.dialable:
            connected, failures = self.store.connect(list(found.dialable))
            if connected is None:
                log.info("could not dial aggregator %s's daemon: %s", aggregator, failures)

    def prove(self, finding: Finding) -> TxResult:
        """Sends the proof a finding names (never a data challenge: that costs a bond, and an
        operator asks for it with `sapo audit book ROUND --prove --challenge`)."""
        if finding.challenge:
            raise ValueError("a data challenge is not sent by the node itself")
        return self.book.call(finding.function, finding.args)


__all__ = ["DRAW_AFTER_BLOCKS", "RootLane", "Unlisted"]
