"""The project's measurements and checks, run as modules from the repository root with the
project's Python (`.venv/bin/python -m scripts.bench_node --rounds 6`, or `python -m ...` with
the virtual environment active). Each prints markdown tables (`scripts.table.Table`) that paste
into a closing note or a docs page. Names say what kind of answer a script gives:

- `bench_*`: what something costs on this machine (time, memory, bytes, gas);
- `odds_*`: the credit rules' arithmetic, exact or sampled (`odds_whale` on anvil, real votes);
- `check_*`: a pass or a fail (the gas snapshot, whether GRPO learns, the GPU path);
- `fuzz_*`, `mutate_*`: searches for a broken rule (forge campaigns, hostile inputs, seeded faults);
- `run_*`: experiments across many processes (the attack table, a sharing comparison).

They build their worlds with the test harness (`tests.harness`), as the tests do. The shell
entry points beside them (`setup`, `test`, `devnet`, `solc`, `build-contracts`) are README's
commands and the toolchain, not measurements.
"""

from __future__ import annotations

import argparse


def arguments(module: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser every script starts from: its usage as it is run (`python -m scripts.X`) and its
    whole docstring as the help's description, line breaks kept."""
    return argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
