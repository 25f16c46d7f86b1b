"""The chain commands as an operator and an auditor use them, against a real anvil."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from eth_account import Account
from typer.testing import CliRunner

from client.chain import Ledger
from client.chain.book import RoundBook
from client.cli.main import app
from client.devnet import Anvil, free_loopback_port, rpc_call
from client.store.cid import digest_to_cid
from tests.harness.ledger_swarm import ETH, FAMILY, OTHER_FAMILY, Swarm, digest
from tests.harness.processes import REPO

pytestmark = pytest.mark.slow
PASSWORD = "correct horse battery staple"


@pytest.fixture
def cli(cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SAPO_KEYSTORE_PASSWORD", PASSWORD)
    return cli


class Operator:
    """A node operator: a funded account, its encrypted keystore and a config file."""

    def __init__(self, swarm: Swarm, tmp: Path, name: str):
        self.account = swarm.account()
        self.keystore = tmp / f"{name}.json"
        # a cheap scrypt cost keeps the test fast; `sapo wallet new` uses the default cost
        self.keystore.write_text(
            json.dumps(Account.encrypt(self.account.key, PASSWORD, kdf="scrypt", iterations=2**10))
        )
        self.config = tmp / f"{name}.toml"
        self.config.write_text(
            f'[chain]\nrpc_url = "{swarm.url}"\nchain_id = 31337\n'
            f'ledger_address = "{swarm.ledger.address}"\nkeystore = "{self.keystore.name}"\n'
            "receipt_timeout_s = 20\n"
        )
        self.ledger = swarm.bind(self.account)


def run(cli: CliRunner, *args: str) -> tuple[int, str]:
    result = cli.invoke(app, list(args))
    return result.exit_code, result.output


def test_deploy_prints_the_address_and_the_config_lines(
    cli: CliRunner, chain: Anvil, tmp_path: Path
) -> None:
    swarm = Swarm(chain)
    op = Operator(swarm, tmp_path, "deployer")
    config = ["--config", str(op.config)]
    code, output = run(
        cli,
        "chain",
        "deploy",
        *config,
        "--catalog-digest",
        "0x" + "ab" * 32,
        "--round-length",
        "1000",
        "--unbonding-period",
        "10000",
        "--submit-rounds",
        "1",
        "--family",
        FAMILY,
        "--family",
        OTHER_FAMILY.upper().replace("0X", "0x"),
        "--json",
    )
    assert code == 0, output
    deployed = json.loads(output)
    assert deployed["params"]["families"] == [FAMILY, OTHER_FAMILY]
    assert deployed["params"]["round_length"] == 1000
    assert deployed["params"]["catalog_digest"] == "0x" + "ab" * 32
    code, output = run(cli, "chain", "info", *config, "--ledger", deployed["address"], "--json")
    assert code == 0, output
    assert json.loads(output)["params"]["unbonding_period"] == 10000
    assert json.loads(output)["params"]["submit_rounds"] == 1
    code, output = run(
        cli, "chain", "deploy", *config, "--catalog-digest", "0x" + "ab" * 32, "--family", FAMILY
    )
    assert code == 0 and "ledger_deploy_block = " in output
    # with its round book: the ledger names the address the next transaction creates, for good
    digest = ["--catalog-digest", "0x" + "ab" * 32, "--family", FAMILY]
    code, output = run(
        cli,
        "chain",
        "deploy",
        *config,
        *digest,
        *("--with-book", "--bond", "2 ether", "--post-pay-bps", "50", "--json"),
    )
    assert code == 0, output
    both = json.loads(output)
    assert both["book"]["post_pay_bps"] == 50
    ledger = Ledger(swarm.w3, both["address"])
    assert ledger.book() == both["book"]["address"] and both["book"]["bond"] == 2 * 10**18
    book = RoundBook(swarm.w3, both["book"]["address"])
    book.check(both["address"])  # the book reads its ledger
    assert book.bonds() == (2 * 10**18, 10**17)
    assert book.contract.functions.postPayBps().call() == 50
    assert Ledger(swarm.w3, deployed["address"]).book() is None  # deployed without one
    code, output = run(cli, "chain", "deploy", *config, *digest, "--with-book")
    assert code == 0 and "round_book_address = " in output, output
    assert "the aggregator's pay 100 bps of a round's reward" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--catalog-digest", "0x1234", "--family", FAMILY], "expected 0x and 64 hex digits"),
        (["--catalog-digest", "0x" + "ab" * 32], "no model family: pass --family"),
        (["--catalog-digest", "0x" + "ab" * 32, "--family", "qwen"], "is not a base's content id"),
        (
            ["--catalog-digest", "0x" + "ab" * 32, "--family", FAMILY, "--family", FAMILY],
            "is listed twice",
        ),
        (
            ["--catalog-digest", "0x" + "ab" * 32, "--unbonding-period", "10"],
            "unbonding_period_s (10) must be at least",
        ),
        (["--catalog-digest", "0x" + "ab" * 32, "--min-stake", "lots"], "min_stake"),
        (
            [
                *("--catalog-digest", "0x" + "ab" * 32, "--family", FAMILY, "--with-book"),
                *("--challenge-bond", "2 ether"),
            ],
            "challenge bond above",
        ),
        (
            [
                *("--catalog-digest", "0x" + "ab" * 32, "--family", FAMILY, "--with-book"),
                *("--post-pay-bps", "10001"),
            ],
            "--post-pay-bps",
        ),
        (
            ["--catalog-digest", "0x" + "ab" * 32, "--family", FAMILY, "--post-pay-bps", "50"],
            "--post-pay-bps set the round book's terms and go with --with-book",
        ),
        (
            [*("--catalog-digest", "0x" + "ab" * 32, "--family", FAMILY, "--bond", "2 ether")],
            "--bond set the round book's terms",
        ),
    ],
)
def test_deploy_refuses_bad_parameters(
    cli: CliRunner, chain: Anvil, tmp_path: Path, args: list[str], message: str
) -> None:
    swarm = Swarm(chain)
    op = Operator(swarm, tmp_path, "deployer")
    code, output = run(cli, "chain", "deploy", "--config", str(op.config), *args)
    assert code == 2
    assert message in output
    assert swarm.w3.eth.get_transaction_count(op.account.address) == 0  # nothing was sent


def test_stake_commands(cli: CliRunner, chain: Anvil, tmp_path: Path) -> None:
    swarm = Swarm(chain)
    op = Operator(swarm, tmp_path, "op")
    op.ledger.register("{}", ETH, FAMILY)
    config = ["--config", str(op.config), "--json"]
    code, output = run(cli, "stake", "add", "1.5 ether", *config)
    assert code == 0, output
    assert json.loads(output)["node"]["active_stake"] == 5 * ETH // 2
    code, output = run(cli, "stake", "unstake", "0.5 ether", *config)
    assert code == 0, output
    assert json.loads(output)["node"]["unbonding"] == ETH // 2
    code, output = run(cli, "stake", "withdraw", "--config", str(op.config))
    assert code == 1
    assert "StillUnbonding" in output and "wait until the unbonding period ends" in output
    code, output = run(cli, "stake", "add", "nothing", *config)
    assert code == 2 and "AMOUNT" in output
    assert op.account.key.hex() not in output


def test_audits_and_rewards_after_a_round(cli: CliRunner, chain: Anvil, tmp_path: Path) -> None:
    swarm = Swarm(chain)
    swarm.bind(swarm.account()).fund(10 * ETH)
    ops = [Operator(swarm, tmp_path, f"op{i}") for i in range(3)]
    for op in ops:
        op.ledger.register('{"model":"tiny"}', 2 * ETH, FAMILY)
    claims = [(30_000, 15_000), (10_000, 5_000), (64_000, 0)]  # (score, learning signal)
    for op, (claim, signal) in zip(ops, claims, strict=True):
        op.ledger.submit(0, digest(op.account.address), 8, claim, signal)
    cheat = ops[2]
    config = ["--config", str(ops[0].config)]
    code, output = run(cli, "audit", "submission", "0", ops[0].account.address, *config)
    assert code == 0 and "checkers drawn: 2 holding " in output, output
    assert " of 255 seats; voted: 0" in output
    assert "not voted yet: " in output
    assert "earns nothing yet: 0 of 1 agreeing checkers" in output  # no evidence, no credit
    swarm.await_beacon(0)
    ops[0].ledger.attest(0, ops[1].account.address, 10_000, 5_000)
    ops[1].ledger.attest(0, ops[0].account.address, 30_000, 15_000)
    ops[0].ledger.attest(0, cheat.account.address, 0, 0, findings=6)
    ops[1].ledger.attest(0, cheat.account.address, 0, 0)

    code, output = run(cli, "audit", "round", "0", *config, "--json")
    assert code == 0, output
    report = json.loads(output)
    assert set(report) == {"round", "final", "total_credited", "submissions"}
    assert report["final"] is False and report["total_credited"] == 20_000
    rows = {row["node"]: row for row in report["submissions"]}
    first = rows[ops[0].account.address]
    assert set(first) >= {
        "node",
        "digest",
        "cid",
        "rollouts",
        "score",
        "signal",
        "credited",
        "agrees",
        "disputes",
        "unavailable",
        "agree_seats",
        "dispute_seats",
        "unavailable_seats",
        "snapshot_block",
        "settled",
    }
    assert first["cid"] == digest_to_cid(digest(ops[0].account.address))
    assert rows[cheat.account.address]["credited"] == 0
    assert rows[cheat.account.address]["dispute_seats"] == sum(
        swarm.ledger.seats_of(0, cheat.account.address, op.account.address) for op in ops[:2]
    )

    wide = cli.invoke(app, ["audit", "round", "0", *config])  # (the fixture's 220 columns)
    assert wide.exit_code == 0 and "open to attestations" in wide.output
    assert first["cid"] in wide.output

    code, output = run(cli, "audit", "submission", "0", cheat.account.address, *config, "--json")
    assert code == 0, output
    sub = json.loads(output)
    assert [a["vote"] for a in sub["attestation_list"]] == ["dispute", "dispute"]
    assert sub["attestation_list"][0]["findings_text"] == "score differs, signal differs"
    assert sorted(sub["checkers"]) == sorted(op.account.address for op in ops[:2])
    assert (
        sub["why_not_credited"]
        == "no learning signal claimed (every group all-correct or all-wrong)"
    )
    code, output = run(cli, "audit", "submission", "0", cheat.account.address, *config)
    seats = sum(sub["seats"].values())
    assert code == 0 and "DISPUTES" in output, output
    assert f"checkers drawn: 2 holding {seats} of 255 seats; voted: 2" in output, output
    assert "earns nothing yet: no learning signal claimed" in output

    code, output = run(cli, "audit", "leaderboard", *config, "--json")
    board = json.loads(output)["nodes"]
    assert [r["node"] for r in board][:2] == [ops[0].account.address, ops[1].account.address]
    assert board[-1]["node"] == cheat.account.address and board[-1]["uncredited"] == 1

    swarm.goto(6)  # 0 + submitRounds(1) + challengeRounds(2) + appealRounds(2) < 6: final
    code, output = run(cli, "rewards", "show", *config, "--json")
    assert code == 0, output
    assert json.loads(output)["claimable"] == 3 * ETH // 4
    code, output = run(cli, "rewards", "claim", *config, "--json")
    assert code == 0, output
    assert json.loads(output)["paid"] == 3 * ETH // 4
    code, output = run(cli, "rewards", "claim", *config)
    assert code == 1 and "nothing to claim" in output
    # the claim settled the round it claimed; the cheat's disputed round is settled by anyone,
    # which slashes it (and its unbonding stake could not leave before)
    rows = json.loads(run(cli, "rewards", "show", *config, "--json")[1])["rounds"]
    assert [(r["round"], r["settled"]) for r in rows] == [(0, True)]
    code, output = run(cli, "rewards", "settle", cheat.account.address, *config, "--json")
    assert code == 0, output
    assert [(d["round"], d["disputed"]) for d in json.loads(output)["settled"]] == [(0, True)]
    assert swarm.ledger.node_info(cheat.account.address).active_stake == 2 * ETH * 9 // 10
    code, output = run(cli, "rewards", "settle", cheat.account.address, *config)
    assert code == 1 and "nothing to settle" in output

    code, output = run(cli, "audit", "node", ops[0].account.address, *config, "--json")
    node = json.loads(output)
    assert node["info"]["total_paid"] == 3 * ETH // 4
    assert len(node["attestations_given"]) == 2 and node["total_credited"] == 15_000
    code, output = run(cli, "audit", "node", ops[0].account.address, *config)
    assert code == 0 and "1 submissions" in output
    # a stranger's metadata is shown as text: a `[/]` in it stopped the command (MarkupError),
    # and an escape sequence (here: clear the screen) reached the auditor's terminal
    cheat.ledger.set_metadata('{"name": "[/]\x1b[2Jgone[bold]"}')
    code, output = run(cli, "audit", "node", cheat.account.address, *config)
    assert code == 0, output
    assert '"name": "[/]\\x1b[2Jgone[bold]"' in output and "\x1b" not in output, output


def test_an_appeal_by_hand_and_its_committee_in_the_audit(
    cli: CliRunner, chain: Anvil, tmp_path: Path
) -> None:
    """`rewards show` says when a batch can be appealed, `rewards appeal` files it, and `audit
    submission` tells the two committees' votes apart."""
    swarm = Swarm(chain)
    producer, whale, checker = ops = [Operator(swarm, tmp_path, f"op{i}") for i in range(3)]
    for op, stake in zip(ops, (2 * ETH, ETH, 4 * ETH), strict=True):
        op.ledger.register('{"model":"tiny"}', stake, FAMILY)  # of 255 seats: about 36 and 146
    producer.ledger.submit(0, digest("p"), 8, 30_000, 15_000)
    swarm.await_beacon(0)
    whale.ledger.attest(0, producer.account.address, 0, 0, findings=1)
    config = ["--config", str(producer.config)]
    code, output = run(cli, "rewards", "appeal", "0", *config)
    assert code == 1 and "NotAppealable" in output, output  # its first committee still votes
    swarm.goto(4)  # after r + W + C: the appeal round
    row = json.loads(run(cli, "rewards", "show", *config, "--json")[1])["rounds"][0]
    assert (row["appealable"], row["appealed"]) == (True, False)
    code, output = run(cli, "rewards", "appeal", "0", *config, "--json")
    assert code == 0, output
    assert json.loads(output)["appeal_block"] > 0
    code, output = run(cli, "rewards", "appeal", "0", *config)
    assert code == 1 and "AlreadyAppealed" in output, output
    swarm.mine(2)
    checker.ledger.attest(0, producer.account.address, 30_000, 15_000)
    whale.ledger.attest(0, producer.account.address, 0, 0, findings=1)
    code, output = run(cli, "audit", "submission", "0", producer.account.address, *config, "--json")
    assert code == 0, output
    sub = json.loads(output)
    assert [(a["committee"], a["vote"]) for a in sub["attestation_list"]] == [
        ("first", "dispute"),
        ("appeal", "agree"),
        ("appeal", "dispute"),
    ]
    assert sub["appeal"]["agrees"] == 1 and sub["credited"] == 15_000
    assert set(sub["appeal_seats"]) == {whale.account.address, checker.account.address}
    code, output = run(cli, "audit", "submission", "0", producer.account.address, *config)
    assert code == 0 and "committee" in output and "appealed in block" in output, output
    assert "credited: learning signal" in output


def test_chain_command_errors_are_one_line_and_name_the_fix(
    cli: CliRunner, chain: Anvil, tmp_path: Path
) -> None:
    swarm = Swarm(chain)
    op = Operator(swarm, tmp_path, "op")
    bare = tmp_path / "bare.toml"
    bare.write_text(f'[chain]\nrpc_url = "{swarm.url}"\n')
    code, output = run(cli, "audit", "round", "0", "--config", str(bare))
    assert code == 2 and "no ledger address: pass --ledger" in output
    code, output = run(cli, "audit", "round", "0", "--config", str(op.config), "--rpc", "ftp://x")
    assert code == 2 and "--rpc" in output
    dead = f"http://127.0.0.1:{free_loopback_port()}"
    code, output = run(cli, "chain", "info", "--config", str(op.config), "--rpc", dead)
    assert code == 1 and "RPC unavailable" in output
    code, output = run(
        cli, "chain", "info", "--config", str(op.config), "--ledger", swarm.deployer.address
    )
    assert code == 1 and "no contract at" in output
    cli_bad = CliRunner()
    result = cli_bad.invoke(
        app,
        ["stake", "add", "1 ether", "--config", str(op.config)],
        env={"SAPO_KEYSTORE_PASSWORD": "wrong"},
    )
    assert result.exit_code == 2 and "wrong password" in result.output
    assert op.account.key.hex() not in result.output


def test_anvil_rpc_helper_rejects_other_schemes() -> None:
    with pytest.raises(ValueError):
        rpc_call("file:///etc/passwd", "eth_chainId")


HEAVY = ("torch", "transformers", "reasoning_gym")


def imported_heavy(*args: str, env: dict[str, str] | None = None) -> set[str]:
    """Runs `sapo ARGS` in a fresh interpreter; returns the training-stack packages it imported."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SAPO_")}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "client.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=base | (env or {}),
        timeout=120,
    )
    names = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "client" in names, proc.stderr[-2000:]
    return names & set(HEAVY)


def test_query_commands_do_not_import_the_training_stack(swarm, tmp_path: Path) -> None:
    """`sapo --help` took 2.9 CPU-s when every command imported torch and transformers."""
    from client.chain.keystore import write_keystore

    keystore = tmp_path / "k.json"
    account = swarm.account()
    write_keystore(keystore, account.key, "pw")
    chain = {
        "SAPO_CHAIN__RPC_URL": swarm.url,
        "SAPO_CHAIN__LEDGER_ADDRESS": swarm.ledger.address,
    }
    devnet_toml = str(REPO / "configs/devnet.toml")
    commands = [
        ["--help"],
        ["config", "show", "--config", devnet_toml],
        ["audit", "round", "0", "--config", devnet_toml],
        ["audit", "leaderboard", "--config", devnet_toml],
        ["devnet", "status", "--data-dir", str(tmp_path / "no-devnet")],
        ["devnet", "ps"],
        ["rewards", "show", account.address, "--config", devnet_toml],
        ["stake", "--help"],
        ["chain", "info", "--config", devnet_toml],
        ["wallet", "address", "--keystore", str(keystore)],
        ["node", "--help"],
    ]
    for args in commands:
        heavy = imported_heavy(*args, env=chain)
        assert not heavy, f"`sapo {' '.join(args)}` imported {sorted(heavy)}"
