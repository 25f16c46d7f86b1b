"""`sapo devnet status`'s lines of what was proven on the round book (describe_proofs): each lie
of the aggregator with its round and prover by the devnet's names, and who was slashed for
signing twice (a producer that submitted twice, a checker that voted twice on a batch)."""

from __future__ import annotations

from client.devnet.status import describe_proofs

NODE, OTHER, AGG = "0x" + "aa" * 20, "0x" + "bb" * 20, "0x" + "cc" * 20
NAMES = {NODE: "node-0", OTHER: "node-1", AGG: "the aggregator"}


def test_an_honest_aggregator_has_no_lie_proven() -> None:
    empty = {"lies_proven": [], "equivocations_proven": []}
    assert describe_proofs(empty, NAMES) == ["no lie of its proven in the last day"]


def test_each_lie_and_each_double_signer_is_named() -> None:
    proofs = {
        "lies_proven": [
            {"round": 2, "what": "data withheld", "prover": NODE.upper().replace("0X", "0x")},
            {"round": 3, "what": "a receipted quorum left uncredited", "prover": OTHER},
        ],
        "equivocations_proven": [
            {"round": 4, "producer": NODE, "signer": NODE, "what": "submitted twice"},
            {"round": 5, "producer": NODE, "signer": "0x" + "dd" * 20, "what": "voted twice"},
        ],
    }
    lies, doubles = describe_proofs(proofs, NAMES)
    assert lies == (
        "its lies proven in the last day: round 2: data withheld (by node-0); round 3: a "
        "receipted quorum left uncredited (by node-1)"
    )
    assert doubles == (
        "slashed for signing twice in the last day: round 4: node-0 submitted twice; round 5: "
        f"0x{'dd' * 20} voted twice on node-0's batch"
    )
