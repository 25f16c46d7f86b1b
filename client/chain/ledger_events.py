"""The ledger's events as typed records, decoded once where they leave the chain.

Each event of the contract's ABI is one frozen model here, named as in Solidity, its fields the
ABI's arguments in snake case (`beaconBlock` is `beacon_block`), addresses lower-cased and bytes32
values as 0x-prefixed hex. A caller matches on the class (`case Attested(agrees=True)`) instead of
reading strings out of a dict, and a contract whose events change fails
tests/chain/test_chain_client.py's comparison with the ABI, not a node in the field.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict

from client.chain.models import Claim


def _address(value: str) -> str:
    value = value.lower()
    if not re.fullmatch(r"0x[0-9a-f]{40}", value):
        raise ValueError(f"not an address: {value!r}")
    return value


def _bytes32(value: str) -> str:
    value = value.lower()
    if not re.fullmatch(r"0x[0-9a-f]{64}", value):
        raise ValueError(f"not 32 bytes of hex: {value!r}")
    return value


Address = Annotated[str, AfterValidator(_address)]
Bytes32 = Annotated[str, AfterValidator(_bytes32)]


class ChainEvent(BaseModel):
    """Where an event was emitted; subclasses add its arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    NAME: ClassVar[str]

    block_number: int
    tx_hash: str
    log_index: int


class Registered(ChainEvent):
    NAME = "Registered"
    node: Address
    stake: int
    metadata: str
    family: Bytes32


class StakeAdded(ChainEvent):
    NAME = "StakeAdded"
    node: Address
    amount: int
    active_stake: int


class UnstakeRequested(ChainEvent):
    NAME = "UnstakeRequested"
    node: Address
    amount: int
    unbonding: int
    unbonding_end: int


class Withdrawn(ChainEvent):
    NAME = "Withdrawn"
    node: Address
    amount: int


class MetadataSet(ChainEvent):
    NAME = "MetadataSet"
    node: Address
    metadata: str


class Submitted(ChainEvent):
    NAME = "Submitted"
    round: int
    node: Address
    digest: Bytes32
    rollouts: int
    score: int
    signal: int

    def claim(self) -> Claim:
        """What the submission claims, without where it was emitted."""
        return Claim(**self.model_dump(include=set(Claim.model_fields)))


class BeaconDrawn(ChainEvent):
    NAME = "BeaconDrawn"
    round: int
    node: Address
    beacon: int
    beacon_block: int


class Attested(ChainEvent):
    NAME = "Attested"
    round: int
    node: Address
    attester: Address
    score: int
    signal: int
    agrees: bool
    findings: int


class Unavailable(ChainEvent):
    NAME = "Unavailable"
    round: int
    node: Address
    attester: Address


class Escalated(ChainEvent):
    """A batch of the round book's root lane that `checker`, drawn on its committee there, took
    to this ledger (emitted with the record's Submitted event)."""

    NAME = "Escalated"
    round: int
    node: Address
    checker: Address


class Appealed(ChainEvent):
    """`beacon_block`: the block whose hash draws the appeal's committee (its block + 1)."""

    NAME = "Appealed"
    round: int
    node: Address
    beacon_block: int
    appellant: Address


class CreditChanged(ChainEvent):
    NAME = "CreditChanged"
    round: int
    node: Address
    credited: bool
    round_total_credited: int


class Settled(ChainEvent):
    NAME = "Settled"
    round: int
    node: Address
    disputed: bool
    slashed: int


class VoteSettled(ChainEvent):
    NAME = "VoteSettled"
    round: int
    node: Address
    voter: Address
    lost: bool
    slashed: int


class SettlerPaid(ChainEvent):
    NAME = "SettlerPaid"
    settler: Address
    round: int
    node: Address
    amount: int


class Slashed(ChainEvent):
    NAME = "Slashed"
    node: Address
    round: int
    amount: int


class Funded(ChainEvent):
    NAME = "Funded"
    sender: Address  # the ABI's `from`
    amount: int


class Claimed(ChainEvent):
    NAME = "Claimed"
    node: Address
    amount: int
    rounds: list[int]


EVENTS: dict[str, type[ChainEvent]] = {
    cls.NAME: cls
    for cls in (
        Registered,
        StakeAdded,
        UnstakeRequested,
        Withdrawn,
        MetadataSet,
        Submitted,
        BeaconDrawn,
        Attested,
        Unavailable,
        Escalated,
        Appealed,
        CreditChanged,
        Settled,
        VoteSettled,
        SettlerPaid,
        Slashed,
        Funded,
        Claimed,
    )
}

_RENAMED = {"from": "sender"}


def field_name(abi_name: str) -> str:
    """The model's name of an ABI argument: snake case (`beaconBlock` -> `beacon_block`)."""
    return _RENAMED.get(abi_name) or re.sub(r"(?<!^)([A-Z])", r"_\1", abi_name).lower()


def typed(
    name: str, args: dict[str, Any], *, block_number: int, tx_hash: str, log_index: int
) -> ChainEvent:
    """The typed record of a decoded log (`args` as web3 decodes them, bytes as 0x hex); a
    ValueError (pydantic's) when the log does not fit the event's model."""
    cls = EVENTS[name]
    fields = {field_name(k): v for k, v in args.items()}
    return cls(block_number=block_number, tx_hash=tx_hash, log_index=log_index, **fields)
