"""Audit reports built from contract queries and events alone: anyone with an RPC can run them.

Per-node counters are not kept in contract storage (it would tax every submit); they are derived
here from `Submitted`, `CreditChanged`, `Attested` and `Claimed` events, and current tallies are
read with `submissionOf`.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, ConfigDict

from client.chain.events import EventReader, LedgerEvent
from client.chain.ledger import Ledger
from client.chain.models import NodeInfo, SubmissionInfo


class Report(BaseModel):
    model_config = ConfigDict(frozen=True)


class AttestationRow(Report):
    round: int
    node: str
    attester: str
    score: int
    agrees: bool
    block_number: int
    tx_hash: str


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
    total_claimed: int
    total_credited: int


class RoundReport(Report):
    round: int
    final: bool
    total_credited: int
    submissions: list[SubmissionInfo]


class SubmissionReport(Report):
    submission: SubmissionInfo
    attestations: list[AttestationRow]
    final: bool


class LeaderRow(Report):
    node: str
    submissions: int
    claimed: int
    credited: int
    disputed: int


def _attestation(event: LedgerEvent) -> AttestationRow:
    a = event.args
    return AttestationRow(
        round=a["round"],
        node=a["node"],
        attester=a["attester"],
        score=a["score"],
        agrees=a["agrees"],
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
        received = [_attestation(e) for e in self.reader.read(["Attested"], node=address)]
        given = [_attestation(e) for e in self.reader.read(["Attested"], attester=address)]
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
            total_claimed=sum(s.claimed for s in submissions),
            total_credited=sum(s.credited for s in submissions),
        )

    def round(self, round_: int) -> RoundReport:
        """Returns every submission of a round with its tallies, and the round's credit."""
        info = self.ledger.round_info(round_)
        nodes = [e.args["node"] for e in self.reader.read(["Submitted"], round=round_)]
        return RoundReport(
            round=round_,
            final=info.final,
            total_credited=info.total_credited,
            submissions=self.ledger.submissions([(round_, node) for node in nodes]),
        )

    def submission(self, round_: int, node: str) -> SubmissionReport:
        """Returns one submission and every attestation of it."""
        sub = self.ledger.submission(round_, node)
        rows = [
            _attestation(e) for e in self.reader.read(["Attested"], round=round_, node=sub.node)
        ]
        return SubmissionReport(
            submission=sub, attestations=rows, final=self.ledger.round_info(round_).final
        )

    def leaderboard(self, first: int | None = None, last: int | None = None) -> list[LeaderRow]:
        """Returns nodes ranked by credited score over rounds first..last, from events alone.

        A submission is credited its claim when submitted; each CreditChanged event toggles it.
        """
        claims: dict[tuple[int, str], int] = {}
        credited: dict[tuple[int, str], bool] = {}
        for event in self.reader.read(["Submitted", "CreditChanged"]):
            key = (event.args["round"], event.args["node"])
            if (first is not None and key[0] < first) or (last is not None and key[0] > last):
                continue
            if event.name == "Submitted":
                claims[key], credited[key] = event.args["score"], True
            else:
                credited[key] = event.args["credited"]
        rows: dict[str, dict[str, int]] = defaultdict(
            lambda: {"submissions": 0, "claimed": 0, "credited": 0, "disputed": 0}
        )
        for key, claim in claims.items():
            node = key[1]
            row = rows[node]
            row["submissions"] += 1
            row["claimed"] += claim
            if credited[key]:
                row["credited"] += claim
            else:
                row["disputed"] += 1
        ranked = sorted(rows.items(), key=lambda item: (-item[1]["credited"], item[0]))
        return [LeaderRow(node=node, **row) for node, row in ranked]
