"""An auditor who installs nothing of ours: docs/audit.md's `cast` commands (section "Auditing with
cast alone"), run as written with bash, foundry's cast, jq and coreutils, against a ledger on a real
anvil that has seen registrations, submissions, agreeing and disputing attestations, an appeal, a
settlement that slashes, a judged vote that lost, an unstake and claims; each answer is checked
field by field against `sapo audit ... --json`, or against the ledger's events where `sapo audit`
shows none (settlements, judged votes, slashes).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from eth_account import Account
from typer.testing import CliRunner

from client.cli.main import app
from client.devnet import Anvil, find_foundry_tool
from tests.harness.ledger_swarm import ETH, FAMILY, OTHER_FAMILY, Swarm, digest

pytestmark = pytest.mark.slow

AUDIT_DOC = Path(__file__).resolve().parents[2] / "docs" / "audit.md"
PASSWORD = "correct horse battery staple"
MARKER = "<!-- cast-audit:"


def readme_snippets() -> dict[str, str]:
    """The bash block after docs/audit.md's cast-audit marker, as {comment: command}."""
    text = AUDIT_DOC.read_text()
    start = text.index(MARKER)
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S)
    assert block, "docs/audit.md: no bash block after the cast-audit marker"
    snippets = {}
    for chunk in block.group(1).strip().split("\n\n"):
        lines = chunk.splitlines()
        assert lines[0].startswith("# "), f"docs/audit.md cast snippet without a comment: {chunk!r}"
        snippets[lines[0][2:]] = "\n".join(lines[1:])
    return snippets


@pytest.fixture(scope="module")
def tools() -> dict[str, str]:
    missing = [t for t in ("jq", "xxd", "base32", "bash") if shutil.which(t) is None]
    if missing:
        pytest.fail(f"the auditor's tools are missing on this machine: {', '.join(missing)}")
    return {"PATH": f"{find_foundry_tool('cast').parent}{os.pathsep}{os.environ['PATH']}"}


def run_snippet(command: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def events(swarm: Swarm, name: str, **filters: object) -> list[dict]:
    """The ledger's `name` events matching the indexed `filters`, in chain order, as web3 reads
    them (the chain's own answer, for what `sapo audit` does not show)."""
    logs = getattr(swarm.ledger.contract.events, name)().get_logs(
        from_block=0, argument_filters=filters
    )
    return [dict(log["args"]) for log in logs]


def _plain(value: object) -> object:
    """cast --json writes a number past 2^53 as a string: as an int, the rest as it is."""
    return int(value) if isinstance(value, str) and value.isdigit() else value


def sapo_json(cli: CliRunner, *args: str) -> dict:
    result = cli.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_readme_cast_commands_agree_with_sapo_audit(
    cli: CliRunner,
    chain: Anvil,
    tmp_path: Path,
    tools: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAPO_KEYSTORE_PASSWORD", PASSWORD)
    swarm = Swarm(chain)
    swarm.bind(swarm.account()).fund(10 * ETH)
    nodes = [swarm.node(stake) for stake in (2 * ETH, 3 * ETH, 5 * ETH)]
    a, b, c = nodes
    far = swarm.node(ETH)  # a checker that cannot fetch c's batch
    liar = swarm.node(ETH)  # a checker that vouches for c's batch: its vote loses and is judged
    addr = [n.account_address for n in nodes]
    a.set_metadata(json.dumps({"model": "tiny", "ipfs": {"id": "12D3KooWtest", "addresses": []}}))
    # round 0: a and b agree with each other; c claims everything and both dispute it (b with
    # the findings bits "score differs" and "signal differs"), one more cannot fetch it
    a.submit(0, digest("a0"), 8, 30_000, 20_000)
    b.submit(0, digest("b0"), 8, 10_000, 10_000)
    c.submit(0, digest("c0"), 8, 80_000, 0)
    swarm.await_beacon(0)
    a.attest(0, addr[1], 10_000, 10_000)
    b.attest(0, addr[0], 30_100, 20_000)
    a.attest(0, addr[2], 0, 0)
    b.attest(0, addr[2], 5_000, 4_000, findings=6)
    far.report_unavailable(0, addr[2])
    liar.attest(0, addr[2], 80_000, 0)
    swarm.advance()
    a.submit(1, digest("a1"), 8, 20_000, 10_000)  # nobody attests it: it earns nothing
    c.request_unstake(ETH)
    swarm.goto(4)  # round 0's first committee closed (after round r + W + C): its appeal window
    c.appeal(0)  # nobody votes on the appeal: the first committee's dispute stands
    swarm.goto(7)  # rounds 0 and 1 final (after round r + W + C + A)
    c.settle(0, addr[2])
    a.settle_votes(0, addr[2], [addr[0], addr[1], liar.account_address])
    a.claim([0, 1])
    b.claim([0])

    keystore = tmp_path / "auditor.json"
    keystore.write_text(
        json.dumps(Account.encrypt(Account.create().key, PASSWORD, kdf="scrypt", iterations=2**10))
    )
    config = tmp_path / "auditor.toml"
    config.write_text(
        f'[chain]\nrpc_url = "{swarm.url}"\nchain_id = 31337\n'
        f'ledger_address = "{swarm.ledger.address}"\nkeystore = "{keystore.name}"\n'
    )
    snippets = readme_snippets()
    assert len(snippets) == 15, list(snippets)
    key = next(k for k in snippets if k.startswith("the model families"))
    listed = run_snippet(snippets[key], {**tools, "RPC": swarm.url, "LEDGER": swarm.ledger.address})
    assert tuple(listed.split()) == swarm.ledger.params().families == (FAMILY, OTHER_FAMILY)
    base = {**tools, "RPC": swarm.url, "LEDGER": swarm.ledger.address, "FROM": "0"}

    for round_ in (0, 1):
        env = {**base, "ROUND": str(round_)}
        report = sapo_json(cli, "audit", "round", str(round_), "--config", str(config))
        # docs/audit.md's form: no config, the endpoint and the ledger as flags
        flags = ["--rpc", swarm.url, "--ledger", swarm.ledger.address]
        assert sapo_json(cli, "audit", "round", str(round_), *flags) == report
        submitters = run_snippet(snippets["the nodes that submitted in the round"], env).split()
        assert submitters == [s["node"] for s in report["submissions"]]
        info = json.loads(run_snippet(snippets["the round: [credited total, final]"], env))
        assert info == [report["total_credited"], report["final"]]
        for node in submitters:
            env["NODE"] = node
            sub = sapo_json(cli, "audit", "submission", str(round_), node, "--config", str(config))
            key = next(k for k in snippets if k.startswith("one submission"))
            [view] = json.loads(run_snippet(snippets[key], env))
            fields = ["digest", "rollouts", "score", "signal", "agree_seats", "dispute_seats"]
            fields += ["unavailable_seats", "agrees", "disputes", "unavailable"]
            fields += ["credited", "settled", "paid", "snapshot_block", "appeal_block"]
            assert dict(zip(fields, view, strict=True)) == {f: sub[f] for f in fields}, (
                round_,
                node,
            )
            key = next(k for k in snippets if k.startswith("its appeal ("))
            [appeal] = json.loads(run_snippet(snippets[key], env))
            appeal_fields = ["appeal_block", "beacon", "block", "ready", "drawn", "agree_seats"]
            appeal_fields += ["dispute_seats", "unavailable_seats", "agrees", "disputes"]
            appeal_fields += ["unavailable"]
            if sub["appeal"] is None:
                assert [int(v) for v in appeal] == [0] * len(appeal_fields), (round_, node)
            else:
                expected = [sub["appeal"][f] for f in appeal_fields]
                assert [_plain(v) for v in appeal] == expected, (round_, node)
            key = next(k for k in snippets if k.startswith("its appeals filed"))
            filed = [line.split() for line in run_snippet(snippets[key], env).splitlines()]
            assert [[int(b), a.lower()] for b, a in filed] == [
                [e["beaconBlock"], e["appellant"].lower()]
                for e in events(swarm, "Appealed", round=round_, node=node)
            ]
            key = next(k for k in snippets if k.startswith("its settlement"))
            settled = [json.loads(line) for line in run_snippet(snippets[key], env).splitlines()]
            assert [[d, _plain(x)] for d, x in settled] == [
                [e["disputed"], e["slashed"]]
                for e in events(swarm, "Settled", round=round_, node=node)
            ]
            assert bool(settled) == sub["settled"]
            key = next(k for k in snippets if k.startswith("its votes judged"))
            judged = [line.split(" ", 1) for line in run_snippet(snippets[key], env).splitlines()]
            assert [[v.lower(), *json.loads(r)] for v, r in judged] == [
                [e["voter"].lower(), e["lost"], e["slashed"]]
                for e in events(swarm, "VoteSettled", round=round_, node=node)
            ]
            key = next(k for k in snippets if k.startswith("its attestations"))
            cast_rows = [line.split() for line in run_snippet(snippets[key], env).splitlines()]
            assert cast_rows == [
                [
                    a["attester"],
                    str(a["score"]),
                    str(a["signal"]),
                    str(a["vote"] == "agree").lower(),
                    str(a["findings"]),
                ]
                for a in sub["attestation_list"]
                if a["vote"] != "unavailable"
            ]
            key = next(k for k in snippets if k.startswith("its unavailable votes"))
            assert run_snippet(snippets[key], env).split() == [
                a["attester"] for a in sub["attestation_list"] if a["vote"] == "unavailable"
            ]
            key = next(k for k in snippets if k.startswith("the seats a node holds"))
            for checker in [*addr, far.account_address, liar.account_address]:
                seats = run_snippet(snippets[key], {**env, "CHECKER": checker}).strip()
                assert int(seats) == sub["seats"].get(checker, 0), (node, checker)
            key = next(k for k in snippets if k.startswith("the IPFS CID of a digest"))
            cid = run_snippet(snippets[key], env)
            assert cid.strip() == sub["cid"]

    for node in addr:
        env = {**base, "NODE": node}
        report = sapo_json(cli, "audit", "node", node, "--config", str(config))
        key = next(k for k in snippets if k.startswith("a node:"))
        [view] = json.loads(run_snippet(snippets[key], env))
        info = report["info"]
        (
            registered,
            active,
            unbonding,
            end,
            metadata,
            paid,
            stake_block,
            unsettled,
            backing,
            family,
        ) = view
        assert family == info["family"]  # the family it registered in, as the client reads it
        # cast prints a metadata string that is JSON as the object it encodes
        assert metadata == (
            json.loads(info["metadata"]) if info["metadata"].startswith("{") else info["metadata"]
        )
        assert [registered, active, unbonding, end, paid, stake_block, unsettled, backing] == [
            info["registered"],
            info["active_stake"],
            info["unbonding"],
            info["unbonding_end"],
            info["total_paid"],
            info["stake_block"],
            info["unsettled"],
            info["backing"],
        ]
        key = next(k for k in snippets if k.startswith("its slashes"))
        slashes = [json.loads(line) for line in run_snippet(snippets[key], env).splitlines()]
        assert [[r, _plain(x)] for r, x in slashes] == [
            [e["round"], e["amount"]] for e in events(swarm, "Slashed", node=node)
        ]
        lines = run_snippet(snippets["its payouts, one per line: amount rounds"], env).splitlines()
        assert [json.loads(line) for line in lines] == [
            [p["amount"], p["rounds"]] for p in report["payouts"]
        ]

    # the scenario reached what the commands must show: a dispute, an unavailable vote, a
    # submission nobody checked, an appeal, a settlement that slashed, a judged vote that lost
    # and slashed its voter, an unstake, payouts
    cheat = sapo_json(cli, "audit", "submission", "0", addr[2], "--config", str(config))
    assert (cheat["credited"], cheat["disputes"], cheat["unavailable"]) == (0, 2, 1)
    assert cheat["attestation_list"][1]["findings_text"] == "score differs, signal differs"
    unchecked = sapo_json(cli, "audit", "submission", "1", addr[0], "--config", str(config))
    assert unchecked["why_not_credited"] == "0 of 1 agreeing checkers"
    assert cheat["appeal_block"] > 0 and cheat["appeal"]["agrees"] == 0
    [filed] = events(swarm, "Appealed", round=0, node=addr[2])
    assert filed["appellant"].lower() == addr[2].lower()
    [settlement] = events(swarm, "Settled", round=0, node=addr[2])
    assert settlement["disputed"] and settlement["slashed"] > 0
    lost = [e for e in events(swarm, "VoteSettled", round=0, node=addr[2]) if e["lost"]]
    assert [e["voter"].lower() for e in lost] == [liar.account_address.lower()]
    assert (
        events(swarm, "Slashed", node=liar.account_address)[0]["amount"] == lost[0]["slashed"] > 0
    )
    c_info = sapo_json(cli, "audit", "node", addr[2], "--config", str(config))["info"]
    assert c_info["unbonding"] > 0 and c_info["active_stake"] + c_info["unbonding"] < 5 * ETH
    assert sapo_json(cli, "audit", "node", addr[0], "--config", str(config))["payouts"][0][
        "rounds"
    ] == [0, 1]
