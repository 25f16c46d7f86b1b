"""The ledger's ABI is a decision, not a side effect: the compiled SwarmLedger's events, errors,
functions and constructor, written as signatures with their names, must equal the committed
expectation in contracts/abi/SwarmLedger.abi.json. A refactor of the contract's sources leaves
it as it is; a change to what nodes, auditors and deployed clients call, decode or catch fails
here until the expectation is edited in the same change. (The artifact itself is held to the
sources by tests/chain/test_chain_client.py's build-contracts --check.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT = ROOT / "contracts" / "artifacts" / "SwarmLedger.json"
EXPECTED = ROOT / "contracts" / "abi" / "SwarmLedger.abi.json"


def _param(p: dict[str, Any]) -> str:
    """One parameter: its type (a tuple's components spelled out), indexed, its name."""
    kind = p["type"]
    if kind.startswith("tuple"):
        kind = "(" + ", ".join(_param(c) for c in p["components"]) + ")" + kind[len("tuple") :]
    words = [kind, "indexed" if p.get("indexed") else "", p.get("name", "")]
    return " ".join(w for w in words if w)


def signature(entry: dict[str, Any]) -> str:
    """An ABI entry as one line: what it is, its name and parameters, and for a function its
    mutability and outputs (internalType, the Solidity-side name of a type, is left out: it
    names the source file a struct is declared in, which the ABI's users never see)."""
    kind = entry["type"]
    inputs = ", ".join(_param(p) for p in entry.get("inputs", []))
    if kind in ("event", "error"):
        anonymous = " anonymous" if entry.get("anonymous") else ""
        return f"{kind} {entry['name']}({inputs}){anonymous}"
    if kind == "constructor":
        return f"constructor({inputs}) {entry['stateMutability']}"
    if kind in ("receive", "fallback"):
        return f"{kind}() {entry['stateMutability']}"
    outputs = ", ".join(_param(p) for p in entry.get("outputs", []))
    return f"function {entry['name']}({inputs}) {entry['stateMutability']} returns ({outputs})"


def test_the_ledger_abi_is_the_committed_one() -> None:
    compiled = {signature(e) for e in json.loads(ARTIFACT.read_text())["abi"]}
    expected = set(json.loads(EXPECTED.read_text()))
    added, removed = sorted(compiled - expected), sorted(expected - compiled)
    assert not added and not removed, (
        f"SwarmLedger's ABI differs from {EXPECTED.relative_to(ROOT)}: a change to what clients "
        "call, decode or catch; if it is meant, edit the expectation in the same change.\n"
        + "".join(f"  + {s}\n" for s in added)
        + "".join(f"  - {s}\n" for s in removed)
    )


def test_a_changed_signature_is_caught() -> None:
    abi = json.loads(ARTIFACT.read_text())["abi"]
    event = next(e for e in abi if e["type"] == "event" and e["name"] == "Submitted")
    error = next(e for e in abi if e["type"] == "error" and e["name"] == "RoundNotOpen")
    function = next(e for e in abi if e["type"] == "function" and e["name"] == "nodeInfo")
    expected = set(json.loads(EXPECTED.read_text()))
    assert {signature(event), signature(error), signature(function)} <= expected
    # an index dropped from an event, a renamed error argument, a struct field retyped: each is
    # another line
    unindexed = {**event, "inputs": [{**p, "indexed": False} for p in event["inputs"]]}
    renamed = {**error, "inputs": [{**error["inputs"][0], "name": "r"}, *error["inputs"][1:]]}
    [view] = function["outputs"]
    fields = [{**view["components"][0], "type": "uint8"}, *view["components"][1:]]
    retyped = {**function, "outputs": [{**view, "components": fields}]}
    for changed in (unindexed, renamed, retyped):
        assert signature(changed) not in expected, signature(changed)
