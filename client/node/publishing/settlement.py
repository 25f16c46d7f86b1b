"""Settlement: once a round is final, a submission is settled (ours: the ledger keeps our
unbonding stake until every one of them is; or a peer's we disputed, so that its slash lands,
since its producer never would), and the votes that lost against its verdict are judged
(`settleVotes`: disputes of a credited batch, agreements with a disputed one), so that voting
against the evidence costs the voter its stake, not only gas. Anyone may settle; the settler is
paid SETTLER_CUT_BPS of what its transaction slashes others.
"""

from __future__ import annotations

import logging

from eth_utils import to_checksum_address

from client.chain.errors import AlreadySettled
from client.chain.ledger_events import Attested, SettlerPaid
from client.chain.models import SubmissionInfo, TxResult, VoteSide
from client.node.eventlog import Event
from client.node.journal import OutboxEntry
from client.node.journal.outbox import Settle
from client.node.publishing.handler import Handler
from client.units import SCORE_SCALE


class Settlement(Handler):
    """Sends `Settle`."""

    def settle(self, entry: OutboxEntry) -> None:
        """Settles a final submission; settled already (a claim settles what it claims, and
        anyone may), it goes on to the votes. Sent once the round is final (the sender's
        `due`)."""
        message = entry.message
        assert isinstance(message, Settle)
        round_, node = message.round, message.node or self.address
        sub = self.ledger.submission(round_, node)
        self.health.chain(True)
        if not sub.exists:
            self.journal.done(entry.key)
            return
        tx_hash = None
        if not sub.settled:
            try:
                result = self.ledger.settle(round_, node)
            except AlreadySettled:  # settled by another's transaction first
                pass
            else:
                tx_hash, disputed = result.tx_hash, sub.disputed
                cut = self._settler_cut(result, round_, node)
                whose = "our submission" if node == self.address else f"{node[:10]}…'s submission"
                outcome = (
                    " (disputed: slashed)"
                    if disputed
                    else f", credited {sub.credited / SCORE_SCALE}"
                )
                paid = f"; our settler's cut {cut / 10**18:g} ETH" if cut else ""
                self.events.emit(
                    Event.ROUND_SETTLED,
                    f"round {round_}: {whose} settled{outcome}{paid}",
                    logging.WARNING if disputed else logging.INFO,
                    round=round_,
                    node=node,
                    disputed=disputed,
                    credited=sub.credited,
                    appealed=sub.appealed,
                    settler_cut=cut,
                    tx_hash=tx_hash,
                )
        self._judge_votes(sub)
        self.journal.done(entry.key, tx_hash)

    def _judge_votes(self, sub: SubmissionInfo) -> None:
        """Has the votes on a final submission that lost against its verdict judged: the
        disputes of a credited batch, the agreements with a disputed one, on the first
        committee, and on the appeal's when the appeal reached the verdict; each costs its voter
        slashBps of its stake. The voters are read from the batch's Attested events; those
        judged already are skipped. Nothing when the verdict is neither (unavailable votes never
        lose) or the judging window has passed."""
        if not self.params.votes_judged_open(sub.round, self.current_round()):
            return
        if sub.credited:
            losing = VoteSide.DISPUTED
        elif sub.disputed:
            losing = VoteSide.AGREED
        else:
            return
        events = self.reader.events(
            Attested, from_block=sub.snapshot_block, round=sub.round, node=sub.node
        )
        voters = sorted({to_checksum_address(e.attester) for e in events})
        if not voters:
            return
        appeal_decided = sub.appeal is not None and sub.appeal.decided
        votes = self.ledger.votes_of(voters, sub.round, sub.node)
        losers = [
            v
            for v, (first, second, judged) in zip(voters, votes, strict=True)
            if not judged and (first == losing or (appeal_decided and second == losing))
        ]
        if not losers:
            return
        result = self.ledger.settle_votes(sub.round, sub.node, losers)
        cut = self._settler_cut(result, sub.round, sub.node)
        side = "disputed it" if sub.credited else "agreed with it"
        whose = "our batch" if sub.node == self.address else f"{sub.node[:10]}…'s batch"
        paid = f"; our settler's cut {cut / 10**18:g} ETH" if cut else ""
        self.events.emit(
            Event.VOTES_SETTLED,
            f"round {sub.round}: {len(losers)} checker(s) who {side} against the verdict on "
            f"{whose} judged (slashed){paid}",
            round=sub.round,
            node=sub.node,
            voters=losers,
            settler_cut=cut,
            tx_hash=result.tx_hash,
        )

    def _settler_cut(self, result: TxResult, round_: int, node: str) -> int:
        """The wei our settle or settleVotes transaction paid us (its `SettlerPaid` event);
        0 when it slashed nobody else."""
        events = self.reader.events(
            SettlerPaid,
            from_block=result.block_number,
            to_block=result.block_number,
            settler=self.address,
            round=round_,
            node=node,
        )
        return sum(e.amount for e in events if e.tx_hash == result.tx_hash)
