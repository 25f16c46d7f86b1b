"""`Ledger`: the SwarmLedger's views and its transactions. Writes need a LocalAccount (from an
encrypted keystore); each is signed, sent and awaited by TxSender."""

from __future__ import annotations

from client.chain.ledger.connection import _address, bytes32
from client.chain.ledger.views import LedgerViews
from client.chain.models import (
    TxResult,
)


class Ledger(LedgerViews):
    """One deployed SwarmLedger on one chain, read-only unless an account is given."""

    def register(self, metadata: str, stake: int, family: str) -> TxResult:
        """Registers this account in model family `family` (a base's content id, one of
        params().families) with `stake` wei; the family is fixed for the address's life."""
        return self._send("register", metadata, bytes32(family), value=stake)

    def add_stake(self, amount: int) -> TxResult:
        return self._send("addStake", value=amount)

    def request_unstake(self, amount: int) -> TxResult:
        return self._send("requestUnstake", amount)

    def withdraw(self) -> TxResult:
        return self._send("withdraw")

    def set_metadata(self, metadata: str) -> TxResult:
        return self._send("setMetadata", metadata)

    def submit(
        self, round_: int, digest: bytes | str, rollouts: int, score: int, signal: int
    ) -> TxResult:
        return self._send("submit", round_, bytes32(digest), rollouts, score, signal)

    def attest(
        self, round_: int, node: str, score: int, signal: int, findings: int = 0
    ) -> TxResult:
        return self._send("attest", round_, _address(node), score, signal, findings)

    def report_unavailable(self, round_: int, node: str) -> TxResult:
        return self._send("reportUnavailable", round_, _address(node))

    def draw_beacon(self, round_: int, node: str) -> TxResult:
        """Stores the beacon of `node`'s submission of `round_`, so that it cannot lapse."""
        return self._send("drawBeacon", round_, _address(node))

    def settle(self, round_: int, node: str) -> TxResult:
        return self._send("settle", round_, _address(node))

    def appeal(self, round_: int) -> TxResult:
        """Appeals the verdict on our own submission of `round_` to a larger committee."""
        return self._send("appeal", round_)

    def appeal_vote(self, round_: int, node: str) -> TxResult:
        """Appeals the first verdict on `node`'s submission of `round_` as a voter it judges lost
        (we disputed a credited batch, or agreed with a disputed one)."""
        return self._send("appealVote", round_, _address(node))

    def settle_votes(self, round_: int, node: str, voters: list[str]) -> TxResult:
        """Judges the listed voters' votes on `node`'s submission by its final verdict."""
        return self._send("settleVotes", round_, _address(node), [_address(v) for v in voters])

    def fund(self, amount: int) -> TxResult:
        return self._send("fund", value=amount)

    def claim(self, rounds: list[int]) -> TxResult:
        return self._send("claim", list(rounds))
