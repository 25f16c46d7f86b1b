"""What a checker's read of one posted round costs in the root lane
(client/node/intake/rootlane.py), without a chain. N producers' signed submissions (each its own
key) make the submission list and root an aggregator posts; then, timed on this machine (CPU
seconds of this process):

- the list checked against its root and count (`open_submission_list`: each entry hashed, the
  tree built);
- its entries decoded to claims (`listed_claims`);
- the claims journaled (`PeerBook.found_in_root`, one SQLite transaction) and added to the
  intake's window (`Window.add`);
- one entry's signature and ranges checked (`Auditor.forged_lie`), what a node does for each
  seat the draw gives it (about K a round), not for the whole list.

The seat draw was measured with the simulator (docs/scaling.md: 0.16 s over a family of 10,000).
Usage: python -m scripts.bench_root_intake [--nodes 1000 10000]
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from pathlib import Path

from client.chain.messages import Domain, Signed, Submission
from client.chain.roots import SubmissionRoot, open_submission_list, submission_list
from client.node.aggregation.auditor import Auditor
from client.node.intake.rootlane import listed_claims
from client.node.intake.window import Window
from client.node.journal import Journal
from client.units import SCORE_SCALE
from scripts import arguments
from scripts.table import Table

DOMAIN = Domain(chain_id=31_337, contract="0x" + "b0" * 20)
ROUND = 7


class _Registered:
    """What the auditor reads of the ledger, for `forged_lie`: every producer registered."""

    def node_info(self, node: str):
        return type("Info", (), {"registered": True, "family": "f"})()


def signed_round(n: int) -> list[Signed]:
    out = []
    for i in range(n):
        key = hashlib.sha256(f"producer {i}".encode()).digest()
        claim = Submission(
            round=ROUND,
            digest="0x" + hashlib.sha256(f"batch {i}".encode()).hexdigest(),
            rollouts=64,
            score=20 * SCORE_SCALE,
            signal=5 * SCORE_SCALE,
        )
        out.append(Signed.sign(claim, DOMAIN, key))
    return out


def cpu(fn):
    began = time.process_time()
    result = fn()
    return time.process_time() - began, result


def measure(n: int, directory: Path) -> list[tuple[str, float]]:
    root = SubmissionRoot(signed_round(n))
    data = submission_list(root.signed)
    me = "0x" + "ee" * 20
    checked, (entries, _) = cpu(lambda: open_submission_list(data, root.root, n))
    decoded, rows = cpu(lambda: listed_claims(entries, ROUND, me))
    claims = [claim for _, _, claim in rows]
    journal = Journal(directory / f"journal-{n}.sqlite")
    journaled, _ = cpu(lambda: journal.peers.found_in_root(claims, 100))
    window = Window(journal.peers)
    window.refresh(ROUND)
    added, _ = cpu(lambda: window.add(claims, 100))
    auditor = Auditor(
        DOMAIN,
        _Registered(),
        quorum=3,
        checkers=10,
        tolerance_bps=50,
        min_stake=1,  # type: ignore[arg-type]
    )
    one, lie = cpu(lambda: auditor.forged_lie(ROUND, rows[0][1]))
    assert lie == "", lie
    journal.close()
    return [
        ("list bytes", len(data)),
        ("checked against the root (s)", checked),
        ("decoded to claims (s)", decoded),
        ("journaled (s)", journaled),
        ("added to the window (s)", added),
        ("all of the above (s)", checked + decoded + journaled + added),
        ("one seat's signature checked (ms)", one * 1000),
    ]


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1_000, 10_000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {n: measure(n, Path(tmp)) for n in args.nodes}
    table = Table("per round", *(f"N = {n:,}" for n in args.nodes), float_format=".3f")
    names = [name for name, _ in results[args.nodes[0]]]
    for i, name in enumerate(names):
        table.row(name, *(results[n][i][1] for n in args.nodes))
    table.print()


if __name__ == "__main__":
    main()
