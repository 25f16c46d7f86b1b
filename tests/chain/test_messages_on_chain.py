"""The signed swarm messages as the contract reads them (contracts/lib/Messages.sol, behind the
test-only MessagesHarness on anvil): the same struct hashes and domain as the client's, the
client's signatures recover to their signers, and every signature the client refuses (another
deployment's, a malleated twin, a bad v, a short one) recovers to nobody on chain either."""

from __future__ import annotations

import pytest
from eth_account import Account

from client.chain.artifacts import load_artifact
from client.chain.messages import SECP256K1_N, BadMessage, Domain, Signed, Submission, Vote
from tests.harness.ledger_swarm import Swarm, deploy_artifact
from tests.unit.test_messages import random_messages

ZERO = "0x" + "00" * 20


@pytest.fixture
def harness(swarm: Swarm):
    address = deploy_artifact(swarm, "MessagesHarness")
    contract = swarm.w3.eth.contract(address=address, abi=load_artifact("MessagesHarness")["abi"])
    return contract, Domain(chain_id=swarm.w3.eth.chain_id, contract=address)


def as_struct(message: Submission | Vote) -> tuple:
    return tuple(
        bytes.fromhex(getattr(message, name)[2:]) if kind == "bytes32" else getattr(message, name)
        for kind, name in message.fields_in_order()
    )


def signer_on_chain(contract, message: Submission | Vote, signature: bytes) -> str:
    call = contract.functions.submissionSigner if isinstance(message, Submission) else None
    call = call or contract.functions.voteSigner
    return call(as_struct(message), signature).call()


def test_the_contract_hashes_and_recovers_what_the_client_signs(harness) -> None:
    contract, domain = harness
    assert contract.functions.separator().call() == domain.separator()
    key = Account.create()
    for seed in range(12):
        for message in random_messages(seed):
            hashed = (
                contract.functions.submissionHash
                if isinstance(message, Submission)
                else contract.functions.voteHash
            )
            assert hashed(as_struct(message)).call() == message.struct_hash()
            signed = Signed.sign(message, domain, key.key)
            signature = bytes.fromhex(signed.signature[2:])
            assert signer_on_chain(contract, message, signature) == key.address == signed.signer


def test_every_signature_the_client_refuses_recovers_to_nobody_on_chain(harness, swarm) -> None:
    contract, domain = harness
    key = Account.create()
    message = random_messages(3)[1]
    good = bytes.fromhex(Signed.sign(message, domain, key.key).signature[2:])
    r, s, v = good[:32], int.from_bytes(good[32:64], "big"), good[64]
    twin = r + (SECP256K1_N - s).to_bytes(32, "big") + bytes([55 - v])  # the same key's other
    other = Domain(chain_id=domain.chain_id, contract="0x" + "11" * 20)
    elsewhere = bytes.fromhex(Signed.sign(message, other, key.key).signature[2:])
    refused = {
        "the malleated twin (s in the upper half)": twin,
        "v 0 instead of 27/28": good[:64] + bytes([v - 27]),
        "64 bytes": good[:64],
        "r = 0": bytes(32) + good[32:],
        "r = the curve order": SECP256K1_N.to_bytes(32, "big") + good[32:],
    }
    for what, signature in refused.items():
        with pytest.raises(BadMessage):
            Signed(
                kind="Vote", message=message, signer=key.address, signature="0x" + signature.hex()
            ).verify(domain)
        assert signer_on_chain(contract, message, signature) == ZERO, what
    # signed for another deployment: a valid signature of another message, someone else's
    found = signer_on_chain(contract, message, elsewhere)
    assert found not in (key.address, ZERO)
    # a field changed after signing: the signature is no longer the signer's
    moved = message.model_copy(update={"signal": message.signal ^ 1})
    assert signer_on_chain(contract, moved, good) != key.address
