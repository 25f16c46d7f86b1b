"""How `sapo audit` shows a submission: as JSON for scripts, and as a table row beside its votes
and credit."""

from __future__ import annotations

from rich.table import Table

from client.chain import SubmissionInfo
from client.config.models import format_score as score
from client.store.cid import digest_to_cid


def submission_json(sub: SubmissionInfo) -> dict:
    return {
        "round": sub.round,
        "node": sub.node,
        "digest": sub.digest,
        "cid": digest_to_cid(sub.digest) if sub.exists else None,
        "rollouts": sub.rollouts,
        "score": sub.score,
        "signal": sub.signal,
        "credited": sub.credited,
        "agrees": sub.agrees,
        "disputes": sub.disputes,
        "unavailable": sub.unavailable,
        "agree_seats": sub.agree_seats,
        "dispute_seats": sub.dispute_seats,
        "unavailable_seats": sub.unavailable_seats,
        "snapshot_block": sub.snapshot_block,
        "appeal_block": sub.appeal_block,
        "appeal": sub.appeal.model_dump(exclude={"round", "node"}) if sub.appeal else None,
        "settled": sub.settled,
        "paid": sub.paid,
    }


def submissions_table(title: str, subs: list[SubmissionInfo], first: str = "node") -> Table:
    table = Table(title=title)
    for column in (
        first,
        "cid",
        "rollouts",
        "score",
        "signal",
        "credited",
        "votes a/d/u",
        "seats a/d/u",
        "settled",
    ):
        # addresses and CIDs fold onto more lines in a narrow terminal, never lose characters
        table.add_column(
            column,
            justify="left" if column in (first, "cid") else "right",
            overflow="fold" if column in (first, "cid") else "ellipsis",
        )
    for s in subs:
        table.add_row(
            s.node if first == "node" else str(s.round),
            digest_to_cid(s.digest),
            str(s.rollouts),
            score(s.score),
            score(s.signal),
            score(s.credited),
            f"{s.agrees}/{s.disputes}/{s.unavailable}",
            f"{s.agree_seats}/{s.dispute_seats}/{s.unavailable_seats}",
            "yes" if s.settled else "no",
        )
    return table
