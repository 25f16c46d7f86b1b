"""The `sapo` command line as an operator meets it: help, config show, honest placeholders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from client.cli.main import app
from tests.harness.policies import cached_seed_test

REPO = Path(__file__).resolve().parents[2]
GROUPS = [
    "config",
    "devnet",
    "node",
    "tui",
    "wallet",
    "stake",
    "rewards",
    "audit",
    "store",
    "chain",
    "policy",
    "experiment",
]


def test_help_lists_every_group(cli: CliRunner) -> None:
    result = cli.invoke(app, ["--help"])
    assert result.exit_code == 0
    for group in GROUPS:
        assert f" {group} " in result.output, f"`sapo --help` does not list {group}"


def test_installed_console_script_runs() -> None:
    sapo = Path(sys.executable).parent / "sapo"
    result = subprocess.run([str(sapo), "--version"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("sapo-swarm ")


def test_config_show_prints_the_devnet_config(cli: CliRunner) -> None:
    result = cli.invoke(app, ["config", "show", "--config", str(REPO / "configs/devnet.toml")])
    assert result.exit_code == 0, result.output
    assert "[sapo]" in result.output
    assert "external_items = 4" in result.output
    assert "round_length_s = 60" in result.output


def test_config_show_json_masks_secrets(cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "n.toml"
    path.write_text(
        '[chain]\nrpc_url = "https://u:secretpass@rpc.example.org/v2/KEY0123456789abcdef"\n'
    )
    result = cli.invoke(app, ["config", "show", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["chain"]["rpc_url"] == "https://***@rpc.example.org/v2/***"
    assert "secretpass" not in result.output and "KEY0123456789abcdef" not in result.output


def test_config_show_takes_sapo_config_from_the_environment(cli: CliRunner) -> None:
    result = cli.invoke(
        app,
        ["config", "show", "--json"],
        env={"SAPO_CONFIG": str(REPO / "configs/testnet.example.toml")},
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tasks"]["catalog"] == "paper9"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[ledger]\nround_length_s = -1\n", "[ledger].round_length_s"),
        ("[sapo]\nbogus = 1\n", "[sapo].bogus: unknown key"),
    ],
)
def test_config_show_rejects_bad_files_with_exit_2(
    cli: CliRunner, tmp_path: Path, text: str, needle: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    result = cli.invoke(app, ["config", "show", "--config", str(path)])
    assert result.exit_code == 2
    assert needle in result.output
    assert str(path) in result.output.replace("\n", "")


def test_unknown_command_is_a_usage_error(cli: CliRunner) -> None:
    result = cli.invoke(app, ["frobnicate"])
    assert result.exit_code == 2


def test_policy_seed_pretrains_on_the_catalog_named(cli: CliRunner, tmp_path: Path) -> None:
    refused = cli.invoke(app, ["policy", "seed", "--catalog", "nope", "--data-dir", str(tmp_path)])
    assert refused.exit_code == 2 and "known:" in refused.output and "wide" in refused.output
    # what the catalog decides is the corpus, not how long the model trains on it: 20 steps
    seed = ["policy", "seed", "--size", "test", "--catalog", "wide", "--steps", "20"]
    built = cli.invoke(app, [*seed, "--data-dir", str(tmp_path)])
    assert built.exit_code == 0, built.output
    record = json.loads(
        (tmp_path / "policies" / "seed-wide-0-h64l2-s20" / "seed-build.json").read_text()
    )
    assert record["spec"]["catalog"] == "wide"
    words = ("legs", "letter", "backward", "Calculate")
    assert all(any(w in q for w in words) for q in record["corpus_questions"])


def test_policy_seed_steps_build_a_longer_pretraining_under_its_own_name(
    cli: CliRunner, tmp_path: Path, seed_test: Path
) -> None:
    cached_seed_test(seed_test, tmp_path)  # the recipe's own build, already made this session
    args = ["policy", "seed", "--size", "test", "--data-dir", str(tmp_path), "--json"]
    built = cli.invoke(app, [*args, "--steps", "130"])
    assert built.exit_code == 0, built.output
    summary = json.loads(built.stdout)
    # the recipe's 150 steps of 32 would repeat its 4,000 examples (a pass is 125 steps); 130
    # steps get 4,160 fresh ones
    assert Path(summary["path"]).name == "seed-tiny-0-h64l2-s130" and summary["steps"] == 130
    assert summary["spec"]["corpus"] == 130 * 32
    again = cli.invoke(app, [*args, "--steps", "150"])  # the recipe's own steps: its usual name
    assert Path(json.loads(again.stdout)["path"]).name == "seed-tiny-0-h64l2"


def test_policy_seed_tagged_pretrains_some_answers_outside_the_verifiers_format(
    cli: CliRunner, tmp_path: Path
) -> None:
    from transformers import PreTrainedTokenizerFast

    from client.policy.seed.pretraining import _examples

    args = ["policy", "seed", "--size", "test", "--data-dir", str(tmp_path), "--json"]
    # what the share decides is the examples, not how long the model trains on them: 20 steps
    built = cli.invoke(app, [*args, "--tagged", "0.3", "--steps", "20"])
    assert built.exit_code == 0, built.output
    summary = json.loads(built.stdout)
    assert Path(summary["path"]).name == "seed-tiny-0-h64l2-s20-t0.3"
    assert summary["spec"]["tagged"] == 0.3
    # what it was pretrained on: 3 in 10 answers in <answer></answer>, the rest "Answer: A"
    tokenizer = PreTrainedTokenizerFast.from_pretrained(Path(summary["path"]))
    pairs = [("Q?", str(i)) for i in range(2000)]
    texts = [tokenizer.decode(ids[n:]) for ids, n in _examples(tokenizer, pairs, 0.3, 0)]
    share = sum("<answer>" in t for t in texts) / len(texts)
    assert 0.25 < share < 0.35 and all("<answer>" in t or "Answer: " in t for t in texts)
    refused = cli.invoke(app, [*args, "--tagged", "0"])
    assert refused.exit_code == 2


@pytest.mark.parametrize("command", [["node", "run"], ["tui"]])
def test_a_taken_metrics_port_is_refused_in_one_line_before_the_node_starts(
    cli: CliRunner, tmp_path: Path, command: list[str]
) -> None:
    """A real listener holds the port: the node says so, names the key, and starts nothing (it
    has no chain to start with: the refusal comes first)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "node.toml"
        config.write_text(
            f'[node]\nmetrics_addr = "127.0.0.1:{port}"\ndata_dir = "{tmp_path / "node"}"\n'
            '[chain]\nrpc_url = "http://127.0.0.1:9"\n'
            'ledger_address = "0x5FbDB2315678afecb367f032d93F642f64180aa3"\n'
        )
        result = cli.invoke(app, [*command, "--config", str(config)])
    assert result.exit_code == 2, result.output  # a setting to change, as a config error is
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and f"[node].metrics_addr 127.0.0.1:{port}" in lines[0], lines
    assert "already in use" in lines[0]
    assert not (tmp_path / "node").exists()  # no journal, no log: nothing was started
