"""The slowest answers found for each verifier of the shipped catalogs (issue 57): every node
re-scores its peers' answers (checkers, learners, `sapo audit verify`), so what a stranger's
answer costs a verifier is a cost it can make every checker pay. Hostile answers of at most
--chars characters (digits, nested brackets and parentheses, long sums, many atoms, chained
operators, Python that would run if evaluated), each cut to 64, 256 and --chars characters,
through `client.tasks.reward`, as a node scores them; per dataset the slowest, in ms (the
median of 3 runs of each answer).

Usage: python -m scripts.bench_verifiers [--chars 1024] [--tasks 400]
"""

from __future__ import annotations

import time

from client.tasks import draw, load_catalog, local_round_seed, reward
from client.tasks.catalog import CATALOG_DIR
from scripts import arguments
from scripts.table import Table


def answers(n: int) -> dict[str, str]:
    half = max(1, n // 2 - 1)
    return {
        "digits": "9" * n,
        "parentheses": "(" * half + "1" + ")" * half,
        "brackets": "[" * half + "]" * half,
        "sum": "+".join(["1"] * (n // 2)),
        "words": " ".join(["a"] * (n // 2)),
        "list of rows": "[" + ",".join(["[1]"] * max(1, n // 4 - 1)) + "]",
        "atoms": "∧".join(f"v{i}" for i in range(n // 5)),
        "implications": "→".join(["P"] * (n // 2)),
        "negations": "¬" * (n - 1) + "P",
        "power": "9**9**9**9",
        "code": "__import__('os').getpid()",
    }


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--chars", type=int, default=1024, help="the longest answer tried")
    parser.add_argument("--tasks", type=int, default=400, help="tasks drawn per catalog")
    args = parser.parse_args()
    tried = {
        f"{name} ({n})": text[:n]
        for n in sorted({64, 256, args.chars})
        for name, text in answers(n).items()
    }
    tasks = {}
    for path in sorted(CATALOG_DIR.glob("*.toml")):
        catalog = load_catalog(path.stem)
        for task in draw(local_round_seed(b"\1" * 32, 0), args.tasks, catalog):
            tasks.setdefault(task.dataset_name, task)
    rows = []
    for dataset, task in tasks.items():
        worst = (0.0, "")
        for name, text in tried.items():
            runs = []
            for _ in range(3):
                started = time.perf_counter()
                reward(task, f"<answer>{text}</answer>")
                runs.append(time.perf_counter() - started)
            worst = max(worst, (sorted(runs)[1], name))
        rows.append((dataset, *worst))
    print(f"{len(tried)} answers of at most {args.chars} characters, median of 3 runs each")
    table = Table("dataset", "slowest answer (ms)", "which", float_format=",.1f")
    for dataset, seconds, name in sorted(rows, key=lambda r: -r[1]):
        table.row(dataset, seconds * 1000, name)
    table.print()


if __name__ == "__main__":
    main()
