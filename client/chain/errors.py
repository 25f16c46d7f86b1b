"""Every way a ledger call can fail, as a named exception with a plain message.

The contract's custom errors are decoded from revert data into `LedgerRevert` subclasses named
after them (`AlreadySubmitted(round=3, node=0x…)`), each with the fields of the error and a
sentence that says what to do. Transport problems are `RpcUnavailable`; they are retried, reverts
never are.
"""

from __future__ import annotations

from typing import Any, ClassVar

from eth_abi import decode as abi_decode
from eth_utils import function_signature_to_4byte_selector, to_checksum_address


class ChainError(Exception):
    """Base of every chain-side failure."""


class RpcUnavailable(ChainError):
    """The RPC endpoint did not answer usefully (connection refused, timeout, 5xx, rate limit)."""


class WrongChain(ChainError):
    """The endpoint serves another chain than the config names, or has no ledger at the address."""


class TransactionTimeout(ChainError):
    """A sent transaction was not mined in time; it may still be pending."""


class NoSigner(ChainError):
    """A transaction was asked of a read-only Ledger (no key)."""


class LedgerRevert(ChainError):
    """The contract refused the call. `name` and `args` are the decoded custom error."""

    hint: ClassVar[str] = ""

    def __init__(self, name: str, args: dict[str, Any], action: str = ""):
        self.name = name
        self.args_ = args
        shown = ", ".join(f"{k}={v}" for k, v in args.items())
        where = f"{action}: " if action else ""
        hint = f"; {self.hint}" if self.hint else ""
        super().__init__(f"{where}ledger refused with {name}({shown}){hint}")

    def __getattr__(self, item: str) -> Any:
        try:
            return self.__dict__["args_"][item]
        except KeyError:
            raise AttributeError(item) from None


# Hints by error name: what the user should do about it.
_HINTS = {
    "AlreadyRegistered": "this address is registered already; use `sapo stake add`",
    "NotRegistered": "register the node first (`sapo node register`)",
    "UnknownFamily": "this ledger does not check that model family (`sapo chain info` lists "
    "its families): run one of its bases",
    "StakeTooLow": "add stake (`sapo stake add`) to reach the ledger's minStake",
    "StakeTooHigh": "a stake above 2^96 wei does not fit the ledger",
    "MetadataTooLong": "shorten the metadata JSON",
    "ZeroAmount": "the amount must be above zero",
    "InsufficientActiveStake": "unstake at most your active stake",
    "NothingToWithdraw": "request an unstake first (`sapo stake unstake`)",
    "UnsettledSubmissions": "unbonding stake cannot leave while a submission it backed (made "
    "before the last unstake request) is unsettled: settle the final ones (`sapo rewards "
    "settle`; a running node settles its own)",
    "StillUnbonding": "wait until the unbonding period ends",
    "RoundNotOpen": "a round accepts submissions from its start until submitRounds rounds later",
    "AlreadySubmitted": "one submission per node and round",
    "ZeroDigest": "the digest is the sha256 of the batch and cannot be zero",
    "ZeroRollouts": "a batch holds at least one rollout",
    "ScoreOutOfRange": "a score is at most rollouts * SCORE_SCALE",
    "SignalOutOfRange": "a learning signal is at most rollouts * SCORE_SCALE / 2 (a group of L "
    "completions carries at most L / 2: half of them right)",
    "TooManyRollouts": "a batch holds at most 65,536 rollouts (1,024 questions of 64 completions)",
    "NotDrawn": "only the checkers a submission's beacon drew may vote on its batch "
    "(`sapo audit submission` lists them); this node was not drawn for it",
    "BeaconNotReady": "a submission's checkers are drawn from the hash of the block after it: "
    "wait a block",
    "BeaconLapsed": "nobody drew the submission's beacon (a vote or drawBeacon) while the EVM "
    "knew its block's hash (256 blocks): it can no longer be checked and earns nothing",
    "BeaconAlreadyDrawn": "the submission's beacon is stored already: nothing to do",
    "SelfAttestation": "a node cannot attest its own batch",
    "NoSubmission": "there is no submission of that node in that round",
    "ChallengeWindowClosed": "the submission's attestation window has closed",
    "AlreadyAttested": "one attestation per attester and submission",
    "TooManyAttestations": "the submission has the most attestations it can hold",
    "RoundNotFinal": "wait until the round's submission, challenge and appeal windows have closed",
    "NotAppealable": "a batch is appealed in the rounds after its challenge window but the last "
    "appeal round (`sapo chain info` gives the windows)",
    "AlreadyAppealed": "one appeal per submission: the appeal committee's verdict is final",
    "VoteNotLosing": "only a voter whose vote the first verdict judges lost may appeal it (a "
    "dispute of a credited batch, an agreement with a disputed one)",
    "AlreadyCredited": "the batch is credited: there is nothing to appeal",
    "SettlementWindowClosed": "votes are judged only in the challengeRounds rounds after the "
    "round is final",
    "AlreadySettled": "the submission was settled already",
    "AlreadyClaimed": "the round was claimed already",
    "NothingToClaim": "no credited, unpaid final round in the list",
    "PoolInsufficient": "the reward pool cannot cover the claim yet; claim fewer rounds or wait",
    "TransferFailed": "the receiving address refused the ether",
    "InvalidParameter": "fix the deployment parameter",
    "NotTheBook": "only the round book this ledger named at deployment escalates a batch into it "
    "(RoundBook.escalate, by a checker drawn on the batch's committee) or slashes an "
    "equivocation (RoundJudge.proveEquivocation)",
    "NotADispute": "an escalation carries its checker's dispute or unavailable vote: a checker "
    "that agrees with the batch signs its vote to the aggregator instead",
}


# One class per custom error of the contract, importable by name:
# `from client.chain.errors import AlreadySubmitted`.
REVERTS: dict[str, type[LedgerRevert]] = {
    name: type(name, (LedgerRevert,), {"hint": hint, "__module__": __name__})
    for name, hint in _HINTS.items()
}
globals().update(REVERTS)


class ErrorDecoder:
    """Decodes revert data into the LedgerRevert subclass of the contract's custom error."""

    def __init__(self, abi: list[dict[str, Any]]):
        self._by_selector: dict[bytes, tuple[str, list[str], list[str]]] = {}
        for item in abi:
            if item.get("type") != "error":
                continue
            types = [inp["type"] for inp in item["inputs"]]
            names = [inp["name"] for inp in item["inputs"]]
            selector = function_signature_to_4byte_selector(f"{item['name']}({','.join(types)})")
            self._by_selector[selector] = (item["name"], types, names)

    def decode(self, data: bytes | str | None, action: str = "") -> LedgerRevert:
        """Returns the named revert for `data` (0x-hex or bytes); unknown data: a generic one."""
        raw = bytes.fromhex(data.removeprefix("0x")) if isinstance(data, str) else (data or b"")
        known = self._by_selector.get(raw[:4])
        if known is None:
            return LedgerRevert("UnknownRevert", {"data": "0x" + raw.hex()}, action)
        name, types, names = known
        values = abi_decode(types, raw[4:])
        args = {n: _plain(t, v) for n, t, v in zip(names, types, values, strict=True)}
        return REVERTS.get(name, LedgerRevert)(name, args, action)


def _plain(abi_type: str, value: Any) -> Any:
    if abi_type == "address":
        return to_checksum_address(value)
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return value
