"""The swarm's signed messages (EIP-712): what a node signs off chain instead of sending one
transaction per submission and per seat vote.

A `Submission` is a producer's claim for one round (the fields `SwarmLedger.submit` takes); a `Vote`
is one checker's verdict on one peer batch (what `attest` or `reportUnavailable` says), bound to
the batch's digest so that it cannot be moved to another batch of the same producer and round.
Both are EIP-712 typed data under the domain of one deployment (name, version, chain id and the
contract that judges them): a signature made for a testnet ledger proves nothing on another.

The struct hashes are computed here from their ABI encoding (EIP-712's `hashStruct`), as the
contract computes them (contracts/lib/Messages.sol); tests check them against eth-account's own
`encode_typed_data`. A signature is accepted only in its canonical form (s in the lower half of
the curve order, v 27 or 28, as OpenZeppelin's ECDSA accepts it): the other of the two valid
signatures of a message would otherwise pass for a second message.
"""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from typing import Annotated, ClassVar

from eth_abi import encode
from eth_keys import keys
from eth_keys.exceptions import BadSignature as _EthKeysBadSignature
from eth_utils import keccak
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from client.chain.hashing import checksum_address, keccak256

DOMAIN_NAME = "sapo-swarm"
DOMAIN_VERSION = "1"
# secp256k1's group order; a canonical signature has s <= N / 2 (EIP-2)
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
MAX_MESSAGE_BYTES = 1024  # a signed message as JSON is ~400 bytes: anything larger is refused
DOMAIN_TYPE = "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"


class BadMessage(ValueError):
    """A signed message that cannot be accepted: malformed, out of range, or its signature is not
    its signer's. The text names what was wrong."""


@lru_cache(maxsize=1 << 16)
def _checksummed(value: str) -> str:
    """An address in its checksum form: a keccak each time, and the same few thousand addresses
    (the swarm's nodes) come back in every message an aggregator reads, so they are remembered."""
    return checksum_address(value)


def _address(value: object) -> str:
    if isinstance(value, bytes) and len(value) == 20:
        value = "0x" + value.hex()
    if not isinstance(value, str) or len(value) != 42 or not value.startswith("0x"):
        raise ValueError("an address is 0x and 40 hex digits")
    try:
        return _checksummed(value)
    except ValueError as exc:
        raise ValueError(f"not an address: {value!r}") from exc


def _word(sol_type: str, value: object) -> bytes:
    """One static field's 32-byte ABI word (every field of these structs is static)."""
    if sol_type == "bytes32":
        return bytes.fromhex(value[2:])  # type: ignore[index]
    if sol_type == "address":
        return bytes(12) + bytes.fromhex(value[2:])  # type: ignore[index]
    return int(value).to_bytes(32, "big")  # uintN and bool, range-checked by the model


def _bytes32(value: object) -> str:
    if isinstance(value, bytes) and len(value) == 32:
        return "0x" + value.hex()
    if not isinstance(value, str) or len(value) != 66 or not value.startswith("0x"):
        raise ValueError("a digest is 0x and 64 hex digits")
    try:
        bytes.fromhex(value[2:])
    except ValueError as exc:
        raise ValueError(f"not hex: {value!r}") from exc
    return value.lower()


Address = Annotated[str, BeforeValidator(_address)]
Bytes32 = Annotated[str, BeforeValidator(_bytes32)]
Uint16 = Annotated[int, Field(ge=0, lt=2**16, strict=True)]
Uint32 = Annotated[int, Field(ge=0, lt=2**32, strict=True)]
Uint64 = Annotated[int, Field(ge=0, lt=2**64, strict=True)]


class _Typed(BaseModel):
    """One EIP-712 struct: its type string, its fields in the type's order, their ABI types."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    TYPE: ClassVar[str]

    @classmethod
    def fields_in_order(cls) -> list[tuple[str, str]]:
        """(solidity type, field name) as the type string lists them."""
        return _fields(cls.TYPE)

    @classmethod
    def type_hash(cls) -> bytes:
        return _type_hash(cls.TYPE)

    def struct_hash(self) -> bytes:
        """EIP-712's hashStruct: keccak(typeHash ++ abi.encode(fields)), every field a static
        32-byte word (tests check it against eth-account's encode_typed_data and the contract)."""
        words = [_word(t, getattr(self, n)) for t, n in self.fields_in_order()]
        return keccak256(b"".join([self.type_hash(), *words]))

    def typed_data(self, domain: Domain) -> dict:
        """The message as eth-account's `encode_typed_data(full_message=...)` takes it (and a
        wallet's eth_signTypedData_v4 shows it)."""
        fields = [{"name": n, "type": t} for t, n in self.fields_in_order()]
        return {
            "types": {
                "EIP712Domain": [
                    {"name": "name", "type": "string"},
                    {"name": "version", "type": "string"},
                    {"name": "chainId", "type": "uint256"},
                    {"name": "verifyingContract", "type": "address"},
                ],
                type(self).__name__: fields,
            },
            "primaryType": type(self).__name__,
            "domain": domain.as_typed_data(),
            "message": {n: getattr(self, n) for _, n in self.fields_in_order()},
        }


class Domain(BaseModel):
    """EIP-712's domain of one deployment: a message signed for it is valid nowhere else."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    chain_id: Annotated[int, Field(gt=0, lt=2**256, strict=True)]
    contract: Address
    name: str = DOMAIN_NAME
    version: str = DOMAIN_VERSION

    def separator(self) -> bytes:
        return _separator(self.name, self.version, self.chain_id, self.contract)

    def as_typed_data(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "chainId": self.chain_id,
            "verifyingContract": self.contract,
        }


class Submission(_Typed):
    """A producer's claim for its batch of one round (what `submit` records)."""

    TYPE: ClassVar[str] = (
        "Submission(uint64 round,bytes32 digest,uint32 rollouts,uint64 score,uint64 signal)"
    )
    round: Uint64
    digest: Bytes32
    rollouts: Annotated[int, Field(ge=1, lt=2**32, strict=True)]
    score: Uint64
    signal: Uint64


class Vote(_Typed):
    """A checker's verdict on one producer's batch of one round: its re-scored claim and findings,
    or `unavailable` (it found the batch nowhere; score, signal and findings are then 0)."""

    TYPE: ClassVar[str] = (
        "Vote(uint64 round,address producer,bytes32 digest,bool unavailable,uint64 score,"
        "uint64 signal,uint16 findings)"
    )
    round: Uint64
    producer: Address
    digest: Bytes32
    unavailable: Annotated[bool, Field(strict=True)]
    score: Uint64
    signal: Uint64
    findings: Uint16

    def model_post_init(self, _context: object) -> None:
        if self.unavailable and (self.score or self.signal or self.findings):
            raise ValueError("an unavailable vote carries no score, signal or findings")


MESSAGE_TYPES: dict[str, type[_Typed]] = {"Submission": Submission, "Vote": Vote}


class Receipt(_Typed):
    """An aggregator's receipt of a message it holds: `message` is that message's signing hash,
    `signer` who signed it. A receipt of a submission binds the aggregator that posts the round's
    submission root to post that submission in it: leaving it out is a lie the producer proves
    (RoundBook.proveLeftOut); a receipt of a vote binds it to count the vote
    (RoundJudge.proveUncredited). The signer is bound too: two checkers' agreeing votes on one
    batch are often the same message (the same score re-computed), and without it a checker that
    never sent its vote could pair its signature with another's receipt and fake a quorum the
    aggregator never held. Never sent to an aggregator (not in MESSAGE_TYPES)."""

    TYPE: ClassVar[str] = "Receipt(bytes32 message,address signer)"
    message: Bytes32
    signer: Address

    @classmethod
    def of(cls, domain: Domain, signed: Signed) -> Receipt:
        return cls(message="0x" + signing_hash(domain, signed.message).hex(), signer=signed.signer)


@cache
def _fields(type_string: str) -> list[tuple[str, str]]:
    inner = type_string[type_string.index("(") + 1 : -1]
    return [tuple(part.split(" ")) for part in inner.split(",")]  # type: ignore[misc]


@cache
def _type_hash(type_string: str) -> bytes:
    return keccak(text=type_string)


@lru_cache(maxsize=64)
def _separator(name: str, version: str, chain_id: int, contract: str) -> bytes:
    """A domain's separator (one per deployment: computed once, not once a message)."""
    return keccak(
        encode(
            ["bytes32", "bytes32", "bytes32", "uint256", "address"],
            [keccak(text=DOMAIN_TYPE), keccak(text=name), keccak(text=version), chain_id, contract],
        )
    )


def signing_hash(domain: Domain, message: _Typed) -> bytes:
    """keccak(0x1901 ++ domainSeparator ++ hashStruct(message)): what is signed."""
    return keccak256(b"\x19\x01" + domain.separator() + message.struct_hash())


class Signed(BaseModel):
    """A message with its signer's address and canonical 65-byte signature (r ++ s ++ v)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: str
    message: Submission | Vote
    signer: Address
    signature: str  # 0x + 130 hex digits

    @classmethod
    def sign(cls, message: _Typed, domain: Domain, key: bytes) -> Signed:
        """Signs with a raw private key (a keystore's decrypted key; never logged or stored)."""
        private = keys.PrivateKey(key)
        return cls(
            kind=type(message).__name__,
            message=message,
            signer=private.public_key.to_checksum_address(),
            signature=_signature(private, domain, message),
        )

    def recover(self, domain: Domain) -> str:
        """The address whose key made the signature (raises BadMessage on a malformed or
        non-canonical one)."""
        return recover(domain, self.message, self.signature)

    def verify(self, domain: Domain) -> Signed:
        """Returns self if the signature is its signer's under `domain`; raises BadMessage."""
        key = _recover_key(domain, self.message, self.signature)
        if key != bytes.fromhex(self.signer[2:]):  # bytes: no checksum keccak for a match
            found = _checksummed("0x" + key.hex())
            raise BadMessage(
                f"the {self.kind}'s signature is {found}'s, not its signer {self.signer}'s "
                "(signed for another deployment, or forged)"
            )
        return self

    def to_bytes(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def from_bytes(cls, data: bytes, domain: Domain) -> Signed:
        """Parses and verifies a message a peer sent: bounded size, every field in range, the
        kind named matching its fields, the signature canonical and its signer's."""
        return cls.parse(data).verify(domain)

    @classmethod
    def parse(cls, data: bytes) -> Signed:
        """`from_bytes` without the signature's check (a key recovery, the dearest step): for
        a reader that refuses what it can on the message's fields first, and verifies after."""
        if len(data) > MAX_MESSAGE_BYTES:
            raise BadMessage(
                f"a signed message is at most {MAX_MESSAGE_BYTES} bytes, got {len(data)}"
            )
        try:
            raw = json.loads(data)
            if not isinstance(raw, dict) or raw.get("kind") not in MESSAGE_TYPES:
                raise BadMessage(f"unknown message kind; expected one of {sorted(MESSAGE_TYPES)}")
            try:
                message = MESSAGE_TYPES[raw["kind"]].model_validate(raw.get("message"))
            except ValidationError as exc:
                reason = _first_error(exc, "message")
                raise BadMessage(f"malformed signed message: {reason}") from None
            signed = cls.model_validate(raw | {"message": message})
        except BadMessage:
            raise
        except (ValueError, ValidationError, TypeError) as exc:
            raise BadMessage(f"malformed signed message: {_first_error(exc)}") from None
        return signed


def _signature(private: keys.PrivateKey, domain: Domain, message: _Typed) -> str:
    """0x ++ r ++ s ++ v (v 27 or 28; eth-keys signs with s in the lower half)."""
    sig = private.sign_msg_hash(signing_hash(domain, message))
    raw = sig.r.to_bytes(32, "big") + sig.s.to_bytes(32, "big") + bytes([sig.v + 27])
    return "0x" + raw.hex()


class ReceiptSigner:
    """An aggregator's key, signing receipts of the submissions it holds (`Receipt`); the key is
    never shown (not in repr)."""

    def __init__(self, domain: Domain, key: bytes):
        self.domain = domain
        self._private = keys.PrivateKey(key)
        self.address = self._private.public_key.to_checksum_address()

    def __repr__(self) -> str:
        return f"ReceiptSigner({self.address})"

    def sign(self, signed: Signed) -> str:
        """The receipt of `signed`: a signature of Receipt(its signing hash, its signer)."""
        return _signature(self._private, self.domain, Receipt.of(self.domain, signed))


def receipt_signer(domain: Domain, signed: Signed, receipt: str) -> str:
    """Who signed `receipt` of `signed` (raises BadMessage on a malformed or non-canonical
    receipt)."""
    return recover(domain, Receipt.of(domain, signed), receipt)


def _first_error(exc: Exception, within: str = "") -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in (within, *err["loc"]) if p) or "message"
        return f"{where}: {err['msg']}"
    return str(exc)


def recover(domain: Domain, message: _Typed, signature: str) -> str:
    """The checksum address that signed `message` under `domain` with `signature`."""
    return _checksummed("0x" + _recover_key(domain, message, signature).hex())


_SIGNATURE = re.compile(r"0x[0-9a-fA-F]{130}")


def _recover_key(domain: Domain, message: _Typed, signature: str) -> bytes:
    """The 20 bytes of the address that signed (raises BadMessage)."""
    # fullmatch, not fromhex alone: fromhex skips whitespace, and "0x" and 130 spaces would
    # decode to no bytes at all
    if not isinstance(signature, str) or not _SIGNATURE.fullmatch(signature):
        raise BadMessage("a signature is 0x and 130 hex digits (r, s, v)")
    raw = bytes.fromhex(signature[2:])
    r, s, v = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:64], "big"), raw[64]
    if v not in (27, 28):
        raise BadMessage(f"a signature's v is 27 or 28, got {v}")
    if not 0 < r < SECP256K1_N or not 0 < s <= SECP256K1_N // 2:
        raise BadMessage(
            "non-canonical signature (s in the upper half of the curve order, or r/s 0)"
        )
    try:
        public = keys.Signature(vrs=(v - 27, r, s)).recover_public_key_from_msg_hash(
            signing_hash(domain, message)
        )
    except _EthKeysBadSignature as exc:
        raise BadMessage(f"the signature recovers no key: {exc}") from None
    return public.to_canonical_address()
