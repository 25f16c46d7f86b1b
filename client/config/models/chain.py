"""[chain] and [ledger]: the EVM chain and the SwarmLedger this node talks to, and the ledger's
deployment parameters (its round length, stake, windows and committees), checked against the
contract's own rules."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from client.config.models.section import Section
from client.config.models.values import Address, Bps, RpcUrl, Wei


class ChainSection(Section):
    """The EVM chain and the deployed SwarmLedger this node talks to."""

    rpc_url: RpcUrl | None = Field(None, description="None: the devnet starts its own anvil")
    chain_id: int | None = Field(None, gt=0, description="checked against eth_chainId")
    ledger_address: Address | None = None
    keystore: Path | None = Field(None, description="encrypted JSON keystore (never a raw key)")
    password_file: Path | None = None
    request_timeout_s: float = Field(10.0, gt=0, le=300)
    receipt_timeout_s: float = Field(120.0, gt=0, le=3600)
    max_fee_gwei: float = Field(50.0, gt=0, description="cap on the EIP-1559 max fee")
    priority_fee_gwei: float = Field(1.0, ge=0)
    log_chunk_blocks: int = Field(2_000, gt=0, le=100_000, description="eth_getLogs range")
    ledger_deploy_block: int = Field(0, ge=0, description="event scans start here")
    round_book_address: Address | None = Field(
        None,
        description="the root lane's RoundBook beside the ledger (docs/scaling.md); what `sapo "
        "aggregate run` posts to",
    )
    round_book_deploy_block: int = Field(0, ge=0, description="the book's event scans start here")

    @model_validator(mode="after")
    def _fees(self) -> ChainSection:
        if self.priority_fee_gwei > self.max_fee_gwei:
            raise ValueError(
                f"priority_fee_gwei ({self.priority_fee_gwei}) exceeds max_fee_gwei "
                f"({self.max_fee_gwei}); raise the cap or lower the tip"
            )
        return self


def least_unbonding_s(
    round_length_s: int, submit_rounds: int, challenge_rounds: int, appeal_rounds: int
) -> int:
    """The contract's rule: stake that backed a submission or a vote (made as early as its
    round) stays until the submission, challenge and appeal windows and a settlement period as
    long as the challenge window (in which votes are judged) have passed."""
    return (submit_rounds + 2 * challenge_rounds + appeal_rounds + 1) * round_length_s


class LedgerSection(Section):
    """SwarmLedger deployment parameters (fixed for the contract's life once deployed)."""

    round_length_s: int = Field(60, gt=0, le=86_400)
    min_stake: Wei = Field(default_factory=lambda: 10**18)
    unbonding_period_s: int = Field(3_600, ge=0, description="seconds before unstaked ether frees")
    challenge_rounds: int = Field(
        3, gt=0, le=10_000, description="rounds, after the submission window, to attest a batch"
    )
    submit_rounds: int = Field(
        2,
        gt=0,
        le=10_000,
        description="rounds after a round in which its batch is still accepted (W: slow "
        "hardware submits late rather than never)",
    )
    reward_per_round: Wei = Field(default_factory=lambda: 10**18)
    slash_bps: Bps = 1_000
    agree_tolerance_bps: Bps = 50
    quorum: int = Field(
        3,
        ge=1,
        le=255,
        description="Q: distinct drawn checkers who must agree before a batch earns anything",
    )
    checkers: int = Field(
        10,
        ge=1,
        le=255,
        description="K: seats per batch's committee on average (each node draws K trials, "
        "each won with its share of stake as of the submission; a vote counts once per seat); "
        "at least quorum",
    )
    appeal_rounds: int = Field(
        2,
        ge=2,
        le=10_000,
        description="rounds after the challenge window in which a producer appeals a batch "
        "that was not credited (all but the last) and the appeal's committee votes; a round is "
        "final after them",
    )
    appeal_checkers: int = Field(
        40,
        ge=1,
        le=255,
        description="seat trials per node on an appeal's committee (drawn afresh, from the same "
        "stake snapshot): larger than checkers, so a verdict a minority won by a small draw's "
        "luck does not survive it; at least quorum",
    )

    families: list[str] = Field(
        default_factory=list,
        description="the model families the ledger checks: content ids of base weights ('0x' + "
        "64 hex digits, `sapo policy id` prints a model's); empty: a devnet fills in its nodes' "
        "families, `sapo chain deploy` asks for them",
    )

    @field_validator("families")
    @classmethod
    def _family_ids(cls, value: list[str]) -> list[str]:
        out: list[str] = []
        for item in value:
            ident = item.strip().lower()
            if not re.fullmatch(r"0x[0-9a-f]{64}", ident) or ident == "0x" + "0" * 64:
                raise ValueError(
                    f"family {item!r} is not a base's content id ('0x' + 64 hex digits, not all "
                    "zero): `sapo policy id MODEL` prints one"
                )
            if ident in out:
                raise ValueError(f"family {ident[:14]}… is listed twice")
            out.append(ident)
        if len(out) > 255:
            raise ValueError(f"{len(out)} families: a ledger checks at most 255")
        return out

    def least_unbonding_s(self) -> int:
        """Returns the shortest unbonding period the contract accepts for these windows."""
        return least_unbonding_s(
            self.round_length_s, self.submit_rounds, self.challenge_rounds, self.appeal_rounds
        )

    @model_validator(mode="after")
    def _slashable_until_settled(self) -> LedgerSection:
        # The contract enforces it too: stake must outlast the submission and challenge windows
        # and a settlement period, or unstaking would dodge a slash.
        least = self.least_unbonding_s()
        if self.unbonding_period_s < least:
            raise ValueError(
                f"unbonding_period_s ({self.unbonding_period_s}) must be at least "
                "(submit_rounds + 2 * challenge_rounds + appeal_rounds + 1) * round_length_s "
                f"= {least}"
            )
        if self.min_stake < 10**9 or self.min_stake >= 2**96:
            raise ValueError("min_stake must be between 1 gwei and 2^96 wei")
        if self.checkers < self.quorum:
            raise ValueError(
                f"checkers ({self.checkers}) must be at least quorum ({self.quorum}): a batch "
                "could never reach its quorum"
            )
        if self.appeal_checkers < self.quorum:
            raise ValueError(
                f"appeal_checkers ({self.appeal_checkers}) must be at least quorum "
                f"({self.quorum}): an appeal could never reach its quorum"
            )
        return self
