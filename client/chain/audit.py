"""Audit reports built from contract queries and events alone: anyone with an RPC can run them.

Per-node counters are not kept in contract storage (it would tax every submit); they are derived
here from `Submitted`, `CreditChanged`, `Attested`, `Unavailable` and `Claimed` events, and current
tallies are read with `submissionOf`. Who was drawn to check a batch is recomputed from the round's
beacon and the stakes (`Beacon.seats`, the ledger's own rule), and why a batch earns nothing is
said in words (`SubmissionInfo.why_not_credited`).
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, ConfigDict

from client.chain.events import EventReader, LedgerEvent
from client.chain.ledger import Ledger
from client.chain.models import Beacon, LedgerParams, NodeInfo, SubmissionInfo


class Report(BaseModel):
    model_config = ConfigDict(frozen=True)


class AttestationRow(Report):
    """A checker's vote: an attestation (agreeing or disputing, with what it recomputed and the
    findings bits of its client) or an unavailable report (it fetched the batch from nobody)."""

    round: int
    node: str
    attester: str
    vote: str  # "agree", "dispute" or "unavailable"
    score: int
    signal: int
    findings: int
    block_number: int
    tx_hash: str
    committee: str = "first"  # or "appeal": a vote cast after its producer's appeal

    @property
    def agrees(self) -> bool:
        return self.vote == "agree"


class PayoutRow(Report):
    amount: int
    rounds: list[int]
    block_number: int
    tx_hash: str


class NodeReport(Report):
    info: NodeInfo
    submissions: list[SubmissionInfo]
    attestations_received: list[AttestationRow]
    attestations_given: list[AttestationRow]
    payouts: list[PayoutRow]
    total_score: int
    total_signal: int  # claimed: what the node's batches would earn with their quorums
    total_credited: int  # signal credited now


class RoundReport(Report):
    round: int
    final: bool
    total_credited: int
    submissions: list[SubmissionInfo]


class SubmissionReport(Report):
    submission: SubmissionInfo
    attestations: list[AttestationRow]  # every vote, unavailable reports included
    final: bool
    quorum: int
    checkers: list[str]  # who its beacon drew to check it (empty before the beacon is known)
    seats: dict[str, int] = {}  # each drawn checker's seats (its vote counts that many times)
    seats_total: int = 0  # the committee's seats (K)
    appeal_seats: dict[str, int] = {}  # the appeal's committee, once appealed and its beacon known
    appeal_seats_total: int = 0  # its seat trials per node
    beacon_ready: bool
    why_not_credited: str | None  # None when it earns


class LeaderRow(Report):
    node: str
    submissions: int
    claimed: int  # learning signal claimed
    credited: int  # learning signal credited
    uncredited: int  # submissions that earn nothing now (short of quorum, disputed, unavailable)
    paid: int = 0  # wei its claims took from the pool, over all rounds: its on-chain running total


def _vote(event: LedgerEvent, appeal_block: int = 0) -> AttestationRow:
    """A vote from its event; `appeal_block`, the block of its submission's appeal (0: none):
    a vote in a later block was cast on the appeal's committee (the first committee's window had
    closed when the appeal went in, and the appeal's beacon is the next block's hash)."""
    a = event.args
    unavailable = event.name == "Unavailable"
    return AttestationRow(
        committee="appeal" if appeal_block and event.block_number > appeal_block else "first",
        round=a["round"],
        node=a["node"],
        attester=a["attester"],
        vote="unavailable" if unavailable else ("agree" if a["agrees"] else "dispute"),
        score=0 if unavailable else a["score"],
        signal=0 if unavailable else a["signal"],
        findings=0 if unavailable else a["findings"],
        block_number=event.block_number,
        tx_hash=event.tx_hash,
    )


class Auditor:
    """Builds audit reports for one ledger."""

    def __init__(self, ledger: Ledger, reader: EventReader):
        self.ledger = ledger
        self.reader = reader

    def node(self, address: str) -> NodeReport:
        """Returns a node's stake, every submission with its outcome, attestations and payouts."""
        info = self.ledger.node_info(address)
        address = info.address
        submitted = list(self.reader.read(["Submitted"], node=address))
        submissions = self.ledger.submissions([(e.args["round"], address) for e in submitted])
        votes = ["Attested", "Unavailable"]
        appealed = {(s.round, s.node): s.appeal_block for s in submissions}
        received = [
            _vote(e, appealed.get((e.args["round"], e.args["node"]), 0))
            for e in self.reader.read(votes, node=address)
        ]
        cast = list(self.reader.read(votes, attester=address))
        keys = sorted({(e.args["round"], e.args["node"]) for e in cast})
        voted_on = {(s.round, s.node): s.appeal_block for s in self.ledger.submissions(keys)}
        given = [_vote(e, voted_on.get((e.args["round"], e.args["node"]), 0)) for e in cast]
        payouts = [
            PayoutRow(
                amount=e.args["amount"],
                rounds=list(e.args["rounds"]),
                block_number=e.block_number,
                tx_hash=e.tx_hash,
            )
            for e in self.reader.read(["Claimed"], node=address)
        ]
        return NodeReport(
            info=info,
            submissions=submissions,
            attestations_received=received,
            attestations_given=given,
            payouts=payouts,
            total_score=sum(s.score for s in submissions),
            total_signal=sum(s.signal for s in submissions),
            total_credited=sum(s.credited for s in submissions),
        )

    def blocks_of(self, first: int, last: int) -> tuple[int, int]:
        """Returns the blocks (from, to, inclusive; to < from when none is mined yet) in which the
        ledger emitted the events of rounds first..last that credit depends on: the span
        `LedgerParams.events_span` names, found from block timestamps (Ledger.block_at: a few
        header reads a bound on a chain of steady blocks). A report on some rounds reads those
        blocks, however old the ledger is, not every block since its deploy."""
        start, end = self.ledger.params().events_span(first, last)
        head = self.ledger.head()
        low = self.ledger.block_at(start, self.reader.start_block, head)
        return low, self.ledger.block_at(end, low, head) - 1

    def day_of_rounds(self, last: int | None = None) -> tuple[int, int]:
        """Returns the rounds of the last day up to `last` (the current round by default): what
        `sapo audit leaderboard` and `sapo devnet status` rank when not told a range."""
        params = self.ledger.params()
        if last is None:
            last = self.ledger.current_round()
        per_day = -(-86_400 // params.round_length)
        return max(0, last - per_day + 1), last

    def round(self, round_: int) -> RoundReport:
        """Returns every submission of a round with its tallies, and the round's credit."""
        info = self.ledger.round_info(round_)
        low, high = self.blocks_of(round_, round_)
        nodes = [
            e.args["node"]
            for e in self.reader.read(["Submitted"], from_block=low, to_block=high, round=round_)
        ]
        return RoundReport(
            round=round_,
            final=info.final,
            total_credited=info.total_credited,
            submissions=self.ledger.submissions([(round_, node) for node in nodes]),
        )

    def submission(self, round_: int, node: str) -> SubmissionReport:
        """Returns one submission, every vote on it, who was drawn to check it and, when it
        earns nothing, why."""
        sub = self.ledger.submission(round_, node)
        low, high = self.blocks_of(round_, round_)
        votes = self.reader.read(
            ["Attested", "Unavailable"], from_block=low, to_block=high, round=round_, node=sub.node
        )
        rows = [_vote(e, sub.appeal_block) for e in votes]
        params = self.ledger.params()
        beacon = self.ledger.beacon(round_, sub.node)
        seats = self._drawn(beacon, sub, params)
        appeal_seats: dict[str, int] = {}
        if sub.appeal is not None and sub.appeal.ready:
            appeal_seats = self._drawn(sub.appeal, sub, params, params.appeal_checkers)
        return SubmissionReport(
            submission=sub,
            attestations=sorted(rows, key=lambda r: (r.block_number, r.attester)),
            final=self.ledger.round_info(round_).final,
            quorum=params.quorum,
            checkers=list(seats),
            seats=seats,
            seats_total=params.checkers,
            appeal_seats=appeal_seats,
            appeal_seats_total=params.appeal_checkers if sub.appealed else 0,
            beacon_ready=beacon.ready,
            why_not_credited=sub.why_not_credited(params.quorum) if sub.exists else None,
        )

    def checkers(self, round_: int, node: str) -> dict[str, int]:
        """Who the submission's beacon draws to check `node`'s batch, with their seats,
        recomputed from the beacon and the stakes as of the submission's block (the ledger's
        rule: nodes of the producer's model family, at stake / the family's stake; one batched
        read of every node)."""
        sub = self.ledger.submission(round_, node)
        return self._drawn(self.ledger.beacon(round_, node), sub, self.ledger.params())

    def _drawn(
        self, beacon: Beacon, sub: SubmissionInfo, params: LedgerParams, trials: int | None = None
    ) -> dict[str, int]:
        if not sub.exists or not beacon.ready:
            return {}
        nodes = self.ledger.nodes()
        then = self.ledger.stakes_at(nodes, sub.snapshot_block)
        family = self.ledger.node_info(sub.node).family
        if family is None:
            return {}
        total = self.ledger.family_stake_at(family, sub.snapshot_block)
        drawn: dict[str, int] = {}
        for info, stake in zip(self.ledger.node_infos(nodes), then, strict=True):
            eligible = (
                info.address.lower() != sub.node.lower()
                and info.registered
                and info.family == family
                and min(info.active_stake, stake) >= params.min_stake
            )
            k = params.checkers if trials is None else trials
            seats = beacon.seats(info.address, stake, total, k) if eligible else 0
            if seats:
                drawn[info.address] = seats
        return drawn

    def leaderboard(self, first: int, last: int) -> list[LeaderRow]:
        """Returns the nodes that submitted in rounds first..last, ranked by the learning signal
        credited to them there, from the events of those rounds' blocks alone (`blocks_of`: the
        cost follows the range, not the ledger's age), with what each was paid over all rounds
        (its on-chain running total, one batched read). A submission earns nothing when
        submitted (no evidence, no credit); each CreditChanged event toggles it."""
        if last < first:
            return []
        claims: dict[tuple[int, str], int] = {}
        credited: dict[tuple[int, str], bool] = {}
        low, high = self.blocks_of(first, last)
        for event in self.reader.read(
            ["Submitted", "CreditChanged"], from_block=low, to_block=high
        ):
            key = (event.args["round"], event.args["node"])
            if not first <= key[0] <= last:
                continue
            if event.name == "Submitted":
                claims[key], credited[key] = event.args["signal"], False
            else:
                credited[key] = event.args["credited"]
        rows: dict[str, dict[str, int]] = defaultdict(
            lambda: {"submissions": 0, "claimed": 0, "credited": 0, "uncredited": 0}
        )
        for key, claim in claims.items():
            node = key[1]
            row = rows[node]
            row["submissions"] += 1
            row["claimed"] += claim
            if credited[key]:
                row["credited"] += claim
            else:
                row["uncredited"] += 1
        infos = self.ledger.node_infos(list(rows))
        paid = {info.address.lower(): info.total_paid for info in infos}
        ranked = sorted(rows.items(), key=lambda item: (-item[1]["credited"], item[0]))
        return [LeaderRow(node=node, paid=paid[node.lower()], **row) for node, row in ranked]
