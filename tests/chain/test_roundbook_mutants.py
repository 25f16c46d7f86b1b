"""The round book's tests can fail: twelve of `python -m scripts.mutate_roundbook`'s seeded
faults, one per kind of rule that moves money (who is paid, how often, by whose seat, for what
silence, from which round, on whose receipt, in whose name a batch escalates, which checker is
slashed for equivocating, on whose receipts a dropped quorum is proven, which producer is
slashed for a double submission, who may post a round's root, and the ledger's side of one
reward a round over both lanes), are each caught by the test that names it. The script runs
all 62 (three of them on the ledger's side)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CI_FAULTS = (
    "claim-by-anyone",
    "tail-may-repeat",
    "seat-not-drawn",
    "silence-forgiven",
    "standing-with-challenges-open",
    "receipt-unchecked",
    "escalate-forged",
    "equivocation-of-a-kept-word",
    "uncredited-receipts-unchecked",
    "double-of-the-forced-batch",
    "post-by-any-registered-node",
    "ledger-share-ignores-the-book",  # a SwarmLedger of its own: ~8 s more of solcjs
)


def test_each_seeded_fault_on_the_book_is_caught() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.mutate_roundbook",
            *("--only", ",".join(CI_FAULTS), "--quick", "--no-baseline"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(CI_FAULTS)} of {len(CI_FAULTS)} seeded faults caught" in done.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "scripts.mutate_roundbook", "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert len(listed.splitlines()) == 62 and all(f"{f}:" in listed for f in CI_FAULTS)


def test_a_fault_whose_text_is_not_in_the_book_is_an_error(monkeypatch) -> None:
    from scripts import mutate_roundbook

    monkeypatch.setitem(mutate_roundbook.FAULTS, "ghost", ("nothing", "no such line;", "", ("x",)))
    with pytest.raises(SystemExit, match="occurs 0 times"):
        mutate_roundbook.write_project(["ghost"])
