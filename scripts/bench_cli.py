"""Start-up cost of the query commands: CPU seconds (user + system) per command, and whether it
imported the training stack (torch, transformers, reasoning_gym).

Each command runs as a fresh `python -X importtime -m client.cli ...` process; CPU time is the
child's rusage, so a busy machine inflates wall time but hardly CPU time. A chain command runs
against an anvil started here with a ledger deployed on it (stopped at the end). Prints one table.
Usage: python -m scripts.bench_cli [--repeats N]
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts import arguments
from scripts.table import Table

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "reasoning_gym")


def run(args: list[str], env: dict[str, str]) -> tuple[float, float, set[str], int]:
    """Returns (CPU s, wall s, heavy packages imported, exit code) of one `sapo ARGS`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "client.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    imported = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:"):
            name = line.rsplit("|", 1)[-1].strip()
            if name.split(".")[0] in HEAVY:
                imported.add(name.split(".")[0])
    return cpu, wall, imported, proc.returncode


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from eth_account import Account

    from client.chain import connect, deploy_ledger
    from client.chain.keystore import write_keystore
    from client.config import load_config
    from client.devnet import Anvil
    from client.devnet.accounts import dev_account
    from client.tasks import load_catalog

    env = {k: v for k, v in os.environ.items() if not k.startswith("SAPO_")}
    with tempfile.TemporaryDirectory() as tmp, Anvil(Path(tmp) / "chain") as anvil:
        cfg = load_config(ROOT / "configs" / "devnet.toml")
        # a stand-in family: the commands timed here read the ledger, none registers
        params = cfg.ledger.model_copy(update={"families": ["0x" + "11" * 32]})
        ledger, deployed = deploy_ledger(
            connect(anvil.url), dev_account(0), params, load_catalog(cfg.tasks.catalog).digest()
        )
        keystore = Path(tmp) / "node.json"
        write_keystore(keystore, Account.create().key, "bench")
        env |= {
            "SAPO_CHAIN__RPC_URL": anvil.url,
            "SAPO_CHAIN__LEDGER_ADDRESS": ledger.address,
            "SAPO_CHAIN__LEDGER_DEPLOY_BLOCK": str(deployed.block_number),
        }
        commands = {
            "sapo --help": ["--help"],
            "sapo config show": ["config", "show", "--config", "configs/devnet.toml"],
            "sapo audit round 0": ["audit", "round", "0", "--config", "configs/devnet.toml"],
            "sapo devnet status": ["devnet", "status", "--data-dir", str(Path(tmp) / "none")],
            "sapo rewards show": [
                "rewards",
                "show",
                "--config",
                "configs/devnet.toml",
                dev_account(1).address,
            ],
            "sapo stake --help": ["stake", "--help"],
            "sapo wallet address": ["wallet", "address", "--keystore", str(keystore)],
        }
        rows = []
        for label, argv in commands.items():
            runs = [run(argv, env) for _ in range(args.repeats)]
            cpu = [r[0] for r in runs]
            wall = [r[1] for r in runs]
            heavy = sorted(set().union(*(r[2] for r in runs)))
            rows.append(
                (
                    label,
                    statistics.median(cpu),
                    max(cpu),
                    statistics.median(wall),
                    ", ".join(heavy) or "-",
                    runs[0][3],
                )
            )

    print(
        f"start-up of query commands ({args.repeats} runs each; CPU = user + system of the "
        "child process)"
    )
    table = Table("command", "CPU s (median)", "CPU s (max)", "wall s (median)", "imports", "exit")
    for row in rows:
        table.row(*row)
    table.print()


if __name__ == "__main__":
    main()
