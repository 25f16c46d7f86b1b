"""What a stranger may publish, through the real checker, verifier and learner, longer than CI
runs it (tests/unit/test_hostile.py): N hostile batches and checkpoints and 3N metadata records,
new examples each run, and a table of how each ended and how long it took.

Usage: python -m scripts.fuzz_peers [N]   (default 3,400: 3,400 batches + 10,200 metadata records)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from scripts import arguments
from scripts.table import Table

REPO = Path(__file__).resolve().parents[1]


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"N must be a positive number of examples (got {text!r})")
    return int(text)


def main() -> int:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("n", nargs="?", type=positive, default=3400, help="examples (3,400)")
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile(prefix="sapo-fuzz-", suffix=".txt") as tally:
        env = dict(
            os.environ,
            SAPO_FUZZ_EXAMPLES=str(args.n),
            SAPO_FUZZ_RANDOM="1",
            SAPO_FUZZ_TALLY=tally.name,
        )
        started = time.monotonic()
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore"]
        status = subprocess.run(
            [*pytest, "tests/unit/test_hostile.py"], cwd=REPO, env=env
        ).returncode
        seconds = time.monotonic() - started
        ended = Counter(
            tuple(line.split(maxsplit=1)) for line in Path(tally.name).read_text().splitlines()
        )
    table = Table("input", "how it ended", "examples")
    for (what, how), count in sorted(ended.items()):
        table.row(what, how, count)
    table.print()
    uncaught = "0" if status == 0 else "see the failure above"
    print(f"\n{sum(ended.values())} examples in {seconds:.0f} s; uncaught exceptions: {uncaught}")
    return status


if __name__ == "__main__":
    sys.exit(main())
