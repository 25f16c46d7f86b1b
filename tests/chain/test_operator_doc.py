"""docs/operator.md's "Joining a public testnet", run as written: every command of the section's
bash blocks, in order, one bash process a line with the variables the earlier lines set, and its
TOML block written into the config where the page says to, against a local anvil standing in for
the testnet. What cannot run here is replaced in a named, explained way (STAND_INS below); the
rest runs as a reader would run it, with this checkout's `sapo` on PATH.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from web3 import Web3

from client.devnet import Anvil
from tests.harness.policies import copied_seed_test
from tests.harness.processes import REPO

pytestmark = pytest.mark.slow

OPERATOR_DOC = REPO / "docs" / "operator.md"
SECTION = "## Joining a public testnet"
ETH = 10**18

# What the test replaces, and why. Values first (step 0's variables, overridden once its block
# has run as written), then whole lines, then what the test does in a step's place.
STAND_INS = {
    "RPC": "the local anvil's URL: no public swarm runs yet",
    "CHAIN_ID": "anvil's chain id, 31337",
    "LEDGER": "empty until step 4 deploys one: the stand-in chain has no ledger yet",
    "LEDGER_BLOCK": "empty, as LEDGER",
    "MODEL": "the test-size seed policy: nothing is downloaded here, and a 0.5B base would "
    "take minutes to load and hash",
    "CONFIG": "a file in the test's own folder, not in the clone",
    "ipfs": "kubo is not installed here: the config's [store] is the local blockstore instead",
    "faucet": "after step 2, the wallet is funded from anvil's first dev account",
    "sapo tui / sapo node run": "they run until stopped (training a policy): doctor's checks, "
    "which cover what the node checks at start, stand in for them",
    "doctor": "it exits 1 on a failed check: before registering only `stake` may fail, after "
    "it only `family` (a stand-in swarm of one node cannot fill a quorum)",
}
SKIPPED = re.compile(r"^(ipfs\b|sapo tui\b|sapo node run\b)")
# the test's own config keys after the page's: the local blockstore in kubo's place
STORE_OVERRIDES = '[store]\nbackend = "local"\nstore_dir = "blocks"\n'


def section() -> str:
    text = OPERATOR_DOC.read_text()
    start = text.index(SECTION)
    end = re.search(r"^##+ ", text[start + len(SECTION) :], re.M)
    assert end, "docs/operator.md: the testnet section has no end"
    return text[start : start + len(SECTION) + end.start()]


def steps() -> list[tuple[str, str]]:
    """The section's code blocks in order, as ("bash", one command) and ("toml", the block)."""
    found = []
    for lang, body in re.findall(r"^```(\w+)\n(.*?)^```", section(), re.S | re.M):
        if lang == "toml":
            found.append(("toml", body))
            continue
        assert lang == "bash", f"docs/operator.md: a {lang} block in the testnet section"
        for line in body.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                found.append(("bash", line.strip()))
    return found


def set_keys(config: Path, toml: str, env: dict[str, str]) -> None:
    """Sets each `key = value` of `toml` (its $VARs from env) in its [section] of `config`, as a
    reader edits the file: a commented-out key is uncommented, a key whose value is empty is
    left out (the page: "leave out a key whose value is still empty")."""
    lines = config.read_text().splitlines()
    current = None
    for raw in toml.splitlines():
        if header := re.fullmatch(r"\[([\w.]+)\]", raw.strip()):
            current = header.group(1)
            continue
        if not raw.strip():
            continue
        key, value = (part.strip() for part in raw.split("=", 1))
        value = re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), ""), value)
        if value in ("", '""'):
            continue
        start = lines.index(f"[{current}]") if f"[{current}]" in lines else None
        if start is None:
            lines += ["", f"[{current}]"]
            start = len(lines) - 1
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines)
        )
        pattern = re.compile(rf"^#?\s*{re.escape(key)}\s*=")
        at = next((i for i in range(start + 1, end) if pattern.match(lines[i])), None)
        if at is None:
            lines.insert(start + 1, f"{key} = {value}")
        else:
            lines[at] = f"{key} = {value}"
    config.write_text("\n".join(lines) + "\n")


def run_line(line: str, env: dict[str, str], state: Path) -> tuple[int, str, dict[str, str]]:
    """Runs one command line in bash (errexit, pipefail; every variable it sets exported) and
    returns its exit status, its output and the environment it leaves."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f"set -a\n{line}\nenv -0 > {state}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    after = env
    if done.returncode == 0:
        after = dict(item.split("=", 1) for item in state.read_text().split("\0") if "=" in item)
    return done.returncode, done.stdout + done.stderr, after


def doctor_failures(env: dict[str, str], state: Path) -> set[str]:
    code, output, _ = run_line(f"sapo doctor --config {env['CONFIG']} --json", env, state)
    assert code in (0, 1), output
    return {
        c["name"] for c in json.loads(output[output.index("{") :])["checks"] if c["ok"] is False
    }


@pytest.fixture
def testnet(tmp_path: Path) -> Iterator[Anvil]:
    """An anvil standing in for the testnet: a block a second, so that the latest block's time
    follows the wall clock as a live chain's does (doctor's clock check reads it)."""
    with Anvil(tmp_path / "chain", block_time_s=1) as chain:
        yield chain


def test_the_testnet_path_runs_as_written(testnet: Anvil, tmp_path: Path, seed_test: Path) -> None:
    anvil = testnet
    commands = [text for kind, text in steps() if kind == "bash"]
    for needed in ("sapo wallet new", "sapo chain deploy", "sapo node register", "sapo doctor"):
        assert any(needed in c for c in commands), f"the page lost `{needed}`"
    assert not any("--out" in c for c in commands), "sapo wallet new takes --keystore"

    home = tmp_path / "home"
    home.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sapo = bin_dir / "sapo"  # this checkout's client, whatever `sapo` the venv installed
    sapo.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m client.cli "$@"\n')
    sapo.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAPO_")}
    env |= {
        "HOME": str(home),
        "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}",
        "PYTHONPATH": str(REPO),
        "COLUMNS": "200",
    }
    model = copied_seed_test(seed_test, tmp_path / "seed-test")
    values = {
        "RPC": anvil.url,
        "CHAIN_ID": "31337",
        "LEDGER": "",
        "LEDGER_BLOCK": "",
        "MODEL": str(model),
        "CONFIG": str(tmp_path / "my-node.toml"),
    }
    assert set(values) <= set(STAND_INS)
    state = tmp_path / "env"
    toml_block = None
    ran: list[str] = []
    registered = funded = False
    for kind, text in steps():
        if kind == "toml":
            toml_block = text
        elif SKIPPED.match(text):
            continue
        elif text.startswith("sapo doctor"):
            code, output, _ = run_line(text, env, state)
            assert code in (0, 1), f"{text}\n{output}"
            allowed = {"family"} if registered else {"stake"}
            failed = doctor_failures(env, state)
            assert failed <= allowed, f"{text}: failed {failed}\n{output}"
            ran.append(text)
        else:
            code, output, env = run_line(text, env, state)
            assert code == 0, f"{text}\n{output}"
            ran.append(text)
            if text.startswith("CONFIG="):  # step 0's block ran as written: the stand-ins now
                env |= values
            registered |= text.startswith("sapo node register")
        config = Path(env.get("CONFIG", "/nonexistent"))
        if toml_block is not None and config.is_file():
            set_keys(config, toml_block, env)
            set_keys(config, STORE_OVERRIDES, env)
        if "ADDRESS" in env and not funded:  # the faucet
            w3 = Web3(Web3.HTTPProvider(anvil.url))
            tx = w3.eth.send_transaction(
                {"from": w3.eth.accounts[0], "to": env["ADDRESS"], "value": 10 * ETH}
            )
            w3.eth.wait_for_transaction_receipt(tx)
            funded = True

    # it went the whole way: a ledger deployed, our node registered in it with our family
    assert any("sapo chain deploy" in c for c in ran) and any("node register" in c for c in ran)
    assert Web3.is_address(env["LEDGER"]) and env["FAMILY"].startswith("0x")
    code, output, _ = run_line(
        f"sapo audit node {env['ADDRESS']} --config {env['CONFIG']} --json", env, state
    )
    assert code == 0, output
    info = json.loads(output)["info"]
    assert info["registered"] and info["active_stake"] > 0
    assert info["family"] == env["FAMILY"]
