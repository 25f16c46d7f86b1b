"""Test helper: a freshly deployed SwarmLedger on a real anvil, with funded accounts and a clock.

Accounts are made fresh per test (Account.create) and funded with anvil_setBalance; their keys
never leave memory. Time moves with evm_setNextBlockTimestamp, always to the middle of a round
so that wall-clock drift during a test cannot cross a round boundary.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount

from client.chain import Ledger, connect, deploy_ledger
from client.chain.deploy import created_address
from client.config.models import LedgerSection
from client.devnet import Anvil, rpc_call

ETH = 10**18
CATALOG = hashlib.sha256(b"tests catalog").digest()
# the model families the tests' ledgers check (content ids stand-ins: the ledger only compares them)
FAMILY = "0x" + hashlib.sha256(b"tests family: a qwen2-style base").hexdigest()
OTHER_FAMILY = "0x" + hashlib.sha256(b"tests family: a llama-style base").hexdigest()
PARAMS = {
    "round_length_s": 1_000,
    "min_stake": ETH,
    "unbonding_period_s": 8_000,  # (submit_rounds + 2 * challenge_rounds + appeal_rounds + 1) *
    # round_length_s
    "challenge_rounds": 2,
    "submit_rounds": 1,
    "reward_per_round": ETH,
    "slash_bps": 1_000,
    "agree_tolerance_bps": 50,
    # one agreeing checker credits and every node is drawn (checkers >= nodes): the old tests'
    # world; the quorum and the draw have their own tests with other values
    "quorum": 1,
    "checkers": 255,
    "appeal_rounds": 2,
    "appeal_checkers": 255,
    "families": [FAMILY, OTHER_FAMILY],
}


def digest(label: str | int) -> bytes:
    return hashlib.sha256(str(label).encode()).digest()


class Swarm:
    """A ledger on anvil, deployed with `overrides` of PARAMS. It names as its round book the
    contract `book_from`'s next transaction creates, by default the deployer's next one after
    the ledger (tests.harness.roundbook.open_book deploys it so)."""

    def __init__(self, anvil: Anvil, *, book_from: str | None = None, **overrides: Any):
        self.url = anvil.url
        self.w3 = connect(self.url)
        self.params = LedgerSection(**(PARAMS | overrides))
        self.deployer = self.account()
        if book_from is None:
            book = created_address(self.deployer.address, 1)
        else:
            book = created_address(book_from, self.w3.eth.get_transaction_count(book_from))
        # a seeded fault's build of the ledger (scripts/mutate_roundbook.py), when one is named
        mutant = os.environ.get("SAPO_SWARMLEDGER_ARTIFACT")
        self.ledger, self.deploy_tx = deploy_ledger(
            self.w3,
            self.deployer,
            self.params,
            CATALOG,
            book=book,
            artifact=json.loads(Path(mutant).read_text()) if mutant else None,
        )
        self.genesis = self.ledger.params().genesis
        self.goto(0)

    def account(self, eth: int = 1_000) -> LocalAccount:
        account = Account.create()
        rpc_call(self.url, "anvil_setBalance", [account.address, hex(eth * ETH)])
        return account

    def bind(self, account: LocalAccount) -> Ledger:
        return Ledger(self.w3, self.ledger.address, account=account)

    def node(self, stake: int = 2 * ETH, *, register: bool = True, family: str = FAMILY) -> Ledger:
        ledger = self.bind(self.account())
        if register:
            ledger.register('{"model":"test"}', stake, family)
        return ledger

    def now(self) -> int:
        return self.w3.eth.get_block("latest")["timestamp"]

    def goto(self, round_: int, fraction: float = 0.5) -> None:
        target = self.genesis + round_ * self.params.round_length_s
        target += int(fraction * self.params.round_length_s)
        if target <= self.now():
            raise AssertionError(f"cannot go back in time to round {round_}")
        self.set_time(target)

    def set_time(self, timestamp: int) -> None:
        rpc_call(self.url, "evm_setNextBlockTimestamp", [hex(timestamp)])
        rpc_call(self.url, "evm_mine")

    def mine(self, blocks: int = 1) -> None:
        """Mines blocks without moving the clock much (a submission's beacon is the hash of the
        block after its own: checkers vote from the block after that)."""
        # mining hundreds of blocks took over rpc_call's 2 s once, on a loaded machine
        rpc_call(self.url, "anvil_mine", [hex(blocks), "0x1"], timeout_s=60.0)

    def await_beacon(self, round_: int, node: str | None = None) -> None:
        """Mines until the beacons of the round's submissions (or of `node`'s) can be read: a
        beacon's block, the one after its submission's, must be behind the latest block, as calls
        and gas estimates see the chain."""
        from client.chain.events import EventReader

        nodes = (
            [node]
            if node
            else [
                e.args["node"] for e in EventReader(self.ledger).read(["Submitted"], round=round_)
            ]
        )
        for _ in range(3):
            if all(self.ledger.beacon(round_, n).ready for n in nodes):
                return
            self.mine()
        raise AssertionError(f"round {round_}: a beacon is not ready: {nodes}")

    def advance(self, rounds: int = 1) -> None:
        self.goto(self.ledger.current_round() + rounds)


def deploy_artifact(swarm: Swarm, name: str, *args: Any) -> str:
    """Deploys a compiled contract (contracts/artifacts) and returns its address. The round
    book's artifact may be replaced by the one SAPO_ROUNDBOOK_ARTIFACT names (a seeded fault of
    scripts/mutate_roundbook.py, with the same ABI)."""
    import json
    import os

    from eth_abi import encode

    from client.chain.artifacts import load_artifact
    from client.chain.errors import ErrorDecoder
    from client.chain.tx import TxSender

    mutant = os.environ.get("SAPO_ROUNDBOOK_ARTIFACT") if name == "RoundBook" else None
    artifact = json.loads(Path(mutant).read_text()) if mutant else load_artifact(name)
    ctor = next((i for i in artifact["abi"] if i["type"] == "constructor"), {"inputs": []})
    data = artifact["bytecode"] + encode([i["type"] for i in ctor["inputs"]], list(args)).hex()
    sender = TxSender(swarm.w3, swarm.deployer, ErrorDecoder(artifact["abi"]))
    return sender.send({"data": data, "value": 0}, f"deploy {name}").contract_address


def check_invariants(swarm: Swarm) -> None:
    """The ledger's money invariants, read from the chain."""
    totals = swarm.ledger.totals()
    balance = swarm.w3.eth.get_balance(swarm.ledger.address)
    held = totals["active"] + totals["unbonding"] + totals["reward_pool"]
    assert balance == held, f"balance {balance} != stake + pool {held} ({totals})"
    into = totals["funded"] + totals["slashed"]
    assert into == totals["reward_pool"] + totals["paid_out"] + totals["settler_paid"], totals
