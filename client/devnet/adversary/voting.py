"""The adversaries' votes: colluders vouching for partners, griefers disputing what they are
drawn for, the bait set's last-block disputes, and the stake mover's borrowed seats."""

from __future__ import annotations

import logging
import math

from client.chain import ChainError
from client.chain.ledger_events import Appealed, Submitted
from client.credit import GENERATION
from client.node.eventlog import Event
from client.units import SCORE_SCALE

log = logging.getLogger("sapo.adversary")


class Voting:
    """The voting strategies of `Adversary` (client.devnet.adversary.node)."""

    def _watch(self, first: int) -> None:
        """Adds the others' new `Submitted` events to `seen` and forgets rounds before `first`."""
        mine = self.address.lower()
        for event in self.reader.poll(self.cursor, ["Submitted", "Appealed"]):  # new ones only
            match event.typed():
                case Appealed(round=round_, node=node) if node != mine:
                    self.appealed.add((round_, node))
                case Submitted(round=round_, node=node) if node != mine:
                    self.seen.setdefault(round_, []).append((round_, node))
        self.seen = {r: keys for r, keys in self.seen.items() if r >= first}

    def vouch(self, current: int) -> None:
        """Attests "agree" with each partner's claims in every open round where we are drawn."""
        last = current - self.params.submit_rounds - self.params.challenge_rounds
        for round_ in range(max(0, last), current + 1):
            for partner in self.partners:
                if (round_, partner) in self.vouched:
                    continue
                sub = self.ledger.submission(round_, partner)
                if not sub.exists or not self.ledger.beacon(round_, partner).ready:
                    continue
                self.vouched.add((round_, partner))
                if not self.ledger.is_checker(round_, partner, self.address):
                    self.events.emit(
                        Event.ADVERSARY_MOVE,
                        f"{self.strategy}: not drawn to check {partner}'s claim of round {round_}",
                        round=round_,
                        move="not-drawn",
                    )
                    continue
                tx = self.ledger.attest(round_, partner, sub.score, sub.signal, 0)
                self.events.emit(
                    Event.ADVERSARY_MOVE,
                    f"{self.strategy}: attested {partner}'s free claim of round {round_} as "
                    "agreeing",
                    round=round_,
                    move="vouch",
                    gas=tx.gas_used,
                )

    def bait(self, current: int) -> None:
        """In the last round of the first committee's window on a partner's (honest) batch,
        disputes it when the bait set's seats on that committee, with the disputes cast already,
        outnumber the seats that agreed: the batch is then disputed, and every honest checker
        that agreed with it would lose slashBps at settleVotes (the producer does not appeal).
        Only a voter's appeal (`appealVote`) by an honest agreer overturns it. Also disputes the
        partner's appeal when drawn on its committee."""
        rounds = range(
            max(0, current - self.params.submit_rounds - self.params.challenge_rounds - 2),
            current + 1,
        )
        for round_ in rounds:
            last = self.params.close(round_) == current
            for partner in self.partners:
                sub = self.ledger.submission(round_, partner)
                if (round_, partner, sub.appealed) in self.baited:
                    continue
                if not sub.exists or not self.ledger.beacon(round_, partner).ready:
                    continue
                if sub.appealed:  # on the appeal's committee, once its beacon is known
                    appeal = self.ledger.appeal_of(round_, partner)
                    if appeal is None or not appeal.ready:
                        continue
                    self.baited.add((round_, partner, sub.appealed))
                    if self.ledger.seats_of(round_, partner, self.address, True):
                        self._dispute(round_, partner, sub, "its appeal")
                    continue
                if not last:
                    continue
                mine = self.ledger.seats_of(round_, partner, self.address)
                allies = sum(  # the set's other seats not cast yet (cast ones are disputes)
                    self.ledger.seats_of(round_, partner, a)
                    for a in self.partners
                    if a != partner and self.ledger.vote_of(a, round_, partner)[0] == 0
                )
                self.baited.add((round_, partner, sub.appealed))
                if not mine or sub.agrees == 0:
                    continue
                if mine + allies + sub.dispute_seats > sub.agree_seats:
                    self._dispute(round_, partner, sub, "bait")
                else:
                    self.events.emit(
                        Event.ADVERSARY_MOVE,
                        f"{self.strategy}: {partner}'s batch of round {round_}: "
                        f"{sub.agree_seats} agreeing seats, ours {mine + allies}: not baited",
                        round=round_,
                        move="no-bait",
                    )

    def _dispute(self, round_: int, node: str, sub, why: str) -> None:
        signal = sub.signal + 1 if sub.signal < sub.rollouts * SCORE_SCALE // 2 else 0
        try:
            tx = self.ledger.attest(round_, node, 0, signal, GENERATION)
        except ChainError as exc:  # e.g. the window closed meanwhile
            log.info("%s: could not dispute %s's round %s: %s", self.strategy, node, round_, exc)
            return
        self.events.emit(
            Event.ADVERSARY_MOVE,
            f"{self.strategy}: disputed {node}'s honest batch of round {round_} ({why})",
            round=round_,
            move="dispute",
            node=node,
            gas=tx.gas_used,
        )

    def grief(self, current: int) -> None:
        """Disputes every peer submission still open to attestation that the beacon draws us
        to check: attests score 0, a signal one unit off the claim and the generation finding,
        fetching nothing; and once more on an appealed one's committee, when drawn there."""
        self._watch(
            max(
                0,
                current
                - self.params.submit_rounds
                - self.params.challenge_rounds
                - self.params.appeal_rounds,
            )
        )
        for round_, node in [key for keys in self.seen.values() for key in keys]:
            if node in self.partners:
                continue  # a sybil disputes the honest batches, not its own set's
            appeal = (round_, node) in self.appealed
            if (round_, node, appeal) in self.griefed:
                continue
            if appeal:
                found = self.ledger.appeal_of(round_, node)
                if found is None or not found.ready:
                    continue
            elif not self.ledger.beacon(round_, node).ready:
                continue
            self.griefed.add((round_, node, appeal))
            if not self.ledger.seats_of(round_, node, self.address, appeal):
                continue
            claim = self.ledger.submission(round_, node)
            # a signal off the claim by one unit: a dispute whatever was claimed (zeros would
            # agree with a batch that claims nothing)
            signal = claim.signal + 1 if claim.signal < claim.rollouts * SCORE_SCALE // 2 else 0
            try:
                tx = self.ledger.attest(round_, node, 0, signal, GENERATION)
            except ChainError as exc:  # e.g. the window closed meanwhile
                log.info("griefer: could not dispute %s's round %s: %s", node, round_, exc)
                continue
            self.events.emit(
                Event.ADVERSARY_MOVE,
                f"{self.strategy}: disputed {node}'s batch of round {round_} without fetching "
                "it" + (" (its appeal)" if appeal else ""),
                round=round_,
                move="dispute",
                node=node,
                gas=tx.gas_used,
            )

    def move_stake(self, current: int) -> None:
        """Moves stake around the draws of the batches it sees: once a batch is on chain (its
        committee's snapshot taken), adds enough stake to hold `[devnet].whale_share` of all
        active stake with it; the poll after, reads the seats the ledger gives it on each such
        batch (its stake as of the batch's block) beside the seats the stake it holds now would
        give (a draw from live stake would follow it), journals both, and
        requests the added stake unstaked. Its disputes (grief) go by the ledger's seats."""
        self._watch(max(0, current - self.params.final_after(0)))  # as grief() keeps them
        me = self.address
        fresh = []
        for round_, node in [key for keys in self.seen.values() for key in keys]:
            if (round_, node) in self.moved or not self.params.attest_open(round_, current):
                continue
            beacon = self.ledger.beacon(round_, node)
            if beacon.ready:
                fresh.append((round_, node, beacon))
        if fresh and not self.lent:
            share = self.cfg.devnet.whale_share  # m = share * (active + m)
            self.lent = math.ceil(share * self.ledger.totals()["active"] / (1 - share))
            tx = self.ledger.add_stake(self.lent)
            self.events.emit(
                Event.ADVERSARY_MOVE,
                f"{self.strategy}: added {self.lent / 1e18:g} ETH of stake after "
                f"{len(fresh)} batch(es) went on chain",
                round=current,
                move="stake-added",
                gas=tx.gas_used,
            )
            return
        if not self.lent:
            return
        stake, total = self.ledger.node_info(me).active_stake, self.ledger.totals()["active"]
        for round_, node, beacon in fresh:
            self.moved.add((round_, node))
            held = self.ledger.seats_of(round_, node, me)
            live = beacon.seats(me, stake, total, self.params.checkers)
            self.events.emit(
                Event.ADVERSARY_MOVE,
                f"{self.strategy}: {held} seat(s) on {node}'s batch of round {round_}; the stake "
                f"it holds now would give {live}",
                round=round_,
                move="seats",
                node=node,
                held=held,
                live=live,
            )
        tx = self.ledger.request_unstake(self.lent)
        self.events.emit(
            Event.ADVERSARY_MOVE,
            f"{self.strategy}: requested {self.lent / 1e18:g} ETH unstaked",
            round=current,
            move="stake-removed",
            gas=tx.gas_used,
        )
        self.lent = 0
