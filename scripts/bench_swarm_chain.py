"""What a swarm of N nodes costs the chain and each node's reads today, measured on a real anvil
with the committed SwarmLedger: N staked identities play honest rounds through the ledger's own
calls (submit, every drawn checker's attest, settle, claim), and every gas figure is summed from
the transactions' receipts.

Per chain round, per node (amortized over every transaction of the rounds played, registration
aside): gas, transactions, and the chain's Mgas/s at 60-s rounds for the whole swarm. Then one
observer node's reads for one round, through the node's own discovery and seat code
(client.node.intake: `discover`, then `Seats.drawn` on every peer submission, against a real
journal): RPC requests, bytes the RPC answered, CPU seconds, and its journal's growth.

The identities are addresses anvil lets send without a key (anvil_autoImpersonateAccount): the
gas of a call does not depend on who signed it, and signing 10^5 transactions in Python would
be most of the run. Each drawn checker's seats come from the ledger's draw recomputed here (the
documented rule, `Beacon.seats`), checked against `seatsOf` on a sample; at N above
--full-draw-max the committees of --sample producers are drawn and voted (the same producers
every round; the others' submissions are settled unvoted, and only the sampled claim), and the
per-node attest and claim gas is the sample's scaled to all N: the table says which.

Usage: python -m scripts.bench_swarm_chain [--nodes 100,1000] [--rounds 3] [--checkers 10]
                                           [--quorum 3] [--claim-every 10] [--full-draw-max 1000]
                                           [--sample 100]
"""

from __future__ import annotations

import random
import resource
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from eth_utils import keccak, to_checksum_address

from client.chain import Ledger
from client.chain.events import EventReader
from client.chain.models import Beacon, beacon_from
from client.devnet import Anvil
from scripts import arguments
from scripts.table import Table
from tests.harness.ledger_swarm import ETH, FAMILY, Swarm, digest

BATCH = 400  # JSON-RPC requests per HTTP request
# the ledger the swarm benches deploy (with their K and Q): 60-s rounds, the windows of a devnet
BENCH_LEDGER = {
    "round_length_s": 60,
    "unbonding_period_s": 3_600,
    "challenge_rounds": 3,
    "submit_rounds": 2,
    "appeal_rounds": 2,
    "appeal_checkers": 40,
    "reward_per_round": ETH,
}
SCORE, SIGNAL, ROLLOUTS = 500_000, 250_000, 64


class Rpc:
    """JSON-RPC to the anvil under test, in batches, counting what it is asked and answers."""

    def __init__(self, url: str):
        self.url = url
        self.session = requests.Session()

    def batch(self, calls: list[tuple[str, list[Any]]]) -> list[Any]:
        results: list[Any] = []
        for first in range(0, len(calls), BATCH):
            chunk = calls[first : first + BATCH]
            body = [
                {"jsonrpc": "2.0", "id": i, "method": m, "params": p}
                for i, (m, p) in enumerate(chunk)
            ]
            answer = self.session.post(self.url, json=body, timeout=600).json()
            by_id = {a["id"]: a for a in answer}
            for i, (method, _) in enumerate(chunk):
                a = by_id[i]
                if "error" in a:
                    raise RuntimeError(f"{method}: {a['error']}")
                results.append(a["result"])
        return results

    def call(self, method: str, params: list[Any]) -> Any:
        return self.batch([(method, params)])[0]

    def send_in_one_block(
        self, nonces: dict[str, int], to: str, txs: list[tuple[str, str, int]], gas: int
    ) -> list[dict | None]:
        """Sends (from, data, value) transactions to `to` from addresses anvil lets send without
        a key, mines them in one block and returns their receipts (None: not mined). Nonces are
        explicit and kept in `nonces`: with automine off, anvil numbers a sender's second pending
        transaction like its first (and refuses it as an underpriced replacement)."""
        numbered = []
        for sender, _, _ in txs:
            numbered.append(nonces[sender])
            nonces[sender] += 1
        self.call("evm_setAutomine", [False])
        hashes = self.batch(
            [
                (
                    "eth_sendTransaction",
                    [
                        {
                            "from": sender,
                            "to": to,
                            "data": data,
                            "value": hex(value),
                            "gas": hex(gas),
                            "nonce": hex(nonce),
                        }
                    ],
                )
                for (sender, data, value), nonce in zip(txs, numbered, strict=True)
            ]
        )
        self.call("evm_mine", [])
        self.call("evm_setAutomine", [True])
        return self.batch([("eth_getTransactionReceipt", [h]) for h in hashes])


@dataclass
class GasBook:
    """Gas and transaction counts, by kind, from receipts."""

    gas: dict[str, int] = field(default_factory=dict)
    txs: dict[str, int] = field(default_factory=dict)
    reverted: int = 0

    def add(self, kind: str, receipts: list[dict]) -> None:
        for r in receipts:
            self.gas[kind] = self.gas.get(kind, 0) + int(r["gasUsed"], 16)
            self.txs[kind] = self.txs.get(kind, 0) + 1
            self.reverted += r["status"] != "0x1"


class Play:
    """N identities on one SwarmLedger, played through honest rounds."""

    def __init__(self, anvil: Anvil, nodes: int, checkers: int, quorum: int):
        self.swarm = Swarm(anvil, **BENCH_LEDGER, quorum=quorum, checkers=checkers)
        self.rpc = Rpc(anvil.url)
        self.ledger = self.swarm.ledger
        self.params = self.ledger.params()
        self.checkers, self.quorum = checkers, quorum
        self.rpc.call("anvil_autoImpersonateAccount", [True])
        # a block a second of chain time, however long this process takes between blocks: the
        # rounds are 60 s of chain time, and drawing a committee of 1,000 nodes takes longer
        self.rpc.call("anvil_setBlockTimestampInterval", [1])
        self.rpc.call("evm_setBlockGasLimit", [hex(2**40)])
        self.addresses = [
            to_checksum_address(keccak(f"sapo bench node {i}".encode())[12:]) for i in range(nodes)
        ]
        self.rpc.batch([("anvil_setBalance", [a, hex(10**6 * ETH)]) for a in self.addresses])
        self.stake = 2 * ETH
        self.nonces: dict[str, int] = dict.fromkeys(self.addresses, 0)  # Rpc.send_in_one_block
        self.gas = GasBook()
        self.submitted: dict[int, dict[str, int]] = {}  # round -> producer -> its block
        self.committees: dict[int, dict[str, list[str]]] = {}  # round -> producer -> checkers

    def send(self, kind: str, txs: list[tuple[str, str, int]], count: bool = True) -> list[dict]:
        """Sends (from, data, value) transactions to the ledger, mines them in one block and
        returns their receipts."""
        if not txs:
            return []
        receipts = self.rpc.send_in_one_block(self.nonces, self.ledger.address, txs, 2_000_000)
        if any(r is None for r in receipts):
            raise RuntimeError(f"{kind}: a transaction was not mined in its block")
        if count:
            self.gas.add(kind, receipts)
        return receipts

    def encode(self, name: str, *args: Any) -> str:
        return self.ledger.contract.encode_abi(name, args=list(args))

    def register(self) -> None:
        data = self.encode("register", '{"model":"bench"}', bytes.fromhex(FAMILY[2:]))
        receipts = self.send("register", [(a, data, self.stake) for a in self.addresses], False)
        funder = self.addresses[0]
        receipts += self.send("fund", [(funder, self.encode("fund"), 10**4 * ETH)], False)
        bad = sum(r["status"] != "0x1" for r in receipts)
        if bad:
            raise RuntimeError(f"{bad} registrations (or the pool's funding) reverted")

    def submit(self, round_: int) -> None:
        self.swarm.goto(round_, 0.1)
        txs = [
            (a, self.encode("submit", round_, digest(f"{round_}/{a}"), ROLLOUTS, SCORE, SIGNAL), 0)
            for a in self.addresses
        ]
        receipts = self.send("submit", txs)
        self.submitted[round_] = {
            a: int(r["blockNumber"], 16) for a, r in zip(self.addresses, receipts, strict=True)
        }
        self.swarm.mine(2)  # each beacon is the hash of the block after its submission's

    def seats(self, beacon: int, round_: int, producer: str, checker: str) -> int:
        """The ledger's draw (SeatDraw.seats, as the node computes it), with equal stakes."""
        draw = Beacon(round=round_, node=producer, beacon=beacon, block=0, ready=True)
        return draw.seats(checker, self.stake, self.stake * len(self.addresses), self.checkers)

    def draw(self, round_: int, producers: list[str]) -> dict[str, list[str]]:
        """Each producer's drawn checkers (with at least one seat)."""
        blocks = sorted({self.submitted[round_][p] + 1 for p in producers})
        answers = self.rpc.batch([("eth_getBlockByNumber", [hex(b), False]) for b in blocks])
        beacon_of = {b: beacon_from(a["hash"]) for b, a in zip(blocks, answers, strict=True)}
        out = {}
        for p in producers:
            beacon = beacon_of[self.submitted[round_][p] + 1]
            out[p] = [c for c in self.addresses if c != p and self.seats(beacon, round_, p, c) > 0]
        return out

    def check_draw(self, round_: int, committees: dict[str, list[str]], samples: int = 20) -> None:
        """The local draw is the ledger's: seatsOf on a sample of pairs."""
        rng = random.Random(round_)
        for p in rng.sample(sorted(committees), min(samples, len(committees))):
            for c in [*committees[p][:2], rng.choice(self.addresses)]:
                if c == p:
                    continue
                want = self.ledger.seats_of(round_, p, c)
                block = self.submitted[round_][p] + 1
                beacon = beacon_from(self.swarm.w3.eth.get_block(block)["hash"].hex())
                got = self.seats(beacon, round_, p, c)
                if got != want:
                    raise AssertionError(f"draw differs from seatsOf: {p} {c}: {got} != {want}")

    def attest(self, round_: int, producers: list[str]) -> dict[str, list[str]]:
        committees = self.draw(round_, producers)
        self.check_draw(round_, committees)
        txs = [
            (c, self.encode("attest", round_, p, SCORE, SIGNAL, 0), 0)
            for p, checkers in committees.items()
            for c in checkers
        ]
        self.send("attest", txs)
        self.committees[round_] = committees
        return committees

    def settle(self, round_: int) -> None:
        txs = [(a, self.encode("settle", round_, a), 0) for a in self.addresses]
        self.send("settle", txs)

    def credited(self, round_: int, producer: str) -> bool:
        """Whether the producer's batch earned: every drawn checker agreed, so it did once they
        were at least the quorum."""
        return len(self.committees.get(round_, {}).get(producer, ())) >= self.quorum

    def claim(self, rounds: list[int], claimants: list[str]) -> None:
        """Each claimant claims the rounds of `rounds` in which it was credited, as a node
        claims (a claim of nothing reverts)."""
        txs = []
        for a in claimants:
            mine = [r for r in rounds if self.credited(r, a)]
            if mine:
                txs.append((a, self.encode("claim", mine), 0))
        self.send("claim", txs)


@dataclass
class Reads:
    requests: int
    answered_bytes: int
    cpu_s: float
    journal_bytes: int
    drawn: int
    peers: int
    node_infos: int = 0  # nodeInfo calls: the peers' families, looked up once for a node's life


NODE_INFO = b'"data":"0x' + keccak(text="nodeInfo(address)")[:4].hex().encode()


class CountingSession(requests.Session):
    """A requests session that counts the JSON-RPC requests it sends, the bytes answered, and
    the nodeInfo calls among them."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0
        self.answered = 0
        self.node_infos = 0

    def post(self, url, *args, **kwargs):  # type: ignore[override]
        response = super().post(url, *args, **kwargs)
        body = kwargs.get("data") or kwargs.get("json") or b""
        self.requests += body.count(b'"method"') if isinstance(body, bytes) else 1
        if isinstance(body, bytes):
            self.node_infos += body.replace(b" ", b"").count(NODE_INFO)
        self.answered += len(response.content)
        return response


class Observer:
    """One node's discovery and draw, through the node's own code (discover, the intake's Window,
    Seats.prepare and Seats.drawn), over a journal kept from round to round as a node keeps it: its
    first round also looks up every peer's family (once for its life), later rounds do not."""

    def __init__(self, play: Play, anvil: Anvil, from_block: int):
        from web3 import Web3

        from client.node.intake.seats import Seats
        from client.node.intake.window import Window
        from client.node.journal import Journal

        self.session = CountingSession()
        provider = Web3.HTTPProvider(
            anvil.url, session=self.session, exception_retry_configuration=None
        )
        ledger = Ledger(Web3(provider), play.ledger.address)
        self.reader = EventReader(ledger, start_block=from_block)
        self.me = play.addresses[0].lower()  # the typed events lower-case addresses
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-observer-"))
        self.journal = Journal(self.tmp / "journal.sqlite")
        self.seats = Seats(ledger, self.reader, self.journal, self.me, play.checkers)
        self.window = Window(self.journal.peers)

    def observe(self, round_: int) -> Reads:
        from client.node.intake.discovery import discover

        cpu0 = time.process_time()
        self.session.requests = self.session.answered = self.session.node_infos = 0
        discover(self.reader, self.journal, self.me)
        self.window.refresh(round_)
        peers = [s for s in self.window.submissions() if s.round == round_]
        self.seats.prepare(peers, self.window.blocks)
        drawn = sum(self.seats.drawn(s) for s in peers)
        cpu = time.process_time() - cpu0
        size = sum(f.stat().st_size for f in self.tmp.iterdir())
        return Reads(
            self.session.requests,
            self.session.answered,
            cpu,
            size,
            drawn,
            len(peers),
            self.session.node_infos,
        )

    def close(self) -> None:
        self.journal.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def play_one(
    n: int, rounds: int, checkers: int, quorum: int, claim_every: int, full_max: int, sample: int
):
    with Anvil(Path(tempfile.mkdtemp(prefix="bench-swarm-"))) as anvil:
        play = Play(anvil, n, checkers, quorum)
        started = time.monotonic()
        play.register()
        windows = play.params.submit_rounds + play.params.challenge_rounds
        final_after = windows + play.params.appeal_rounds
        first = play.ledger.current_round() + 1
        sampled = n > full_max
        producers = random.Random(0).sample(play.addresses, sample) if sampled else play.addresses
        reads = []
        observer = Observer(play, anvil, play.swarm.w3.eth.block_number + 1)
        for r in range(first, first + rounds):
            play.submit(r)
            play.attest(r, producers)
            if len(reads) < 2:  # the first round (peers' families looked up) and the next
                reads.append(observer.observe(r))
        observer.close()
        # the rounds go final; each is settled, then every node claims them together
        play.swarm.goto(first + rounds - 1 + final_after + 1)
        for r in range(first, first + rounds):
            play.settle(r)
        for start in range(first, first + rounds, claim_every):
            play.claim(list(range(start, min(start + claim_every, first + rounds))), producers)
        wall = time.monotonic() - started
    gas, txs = dict(play.gas.gas), dict(play.gas.txs)
    if sampled:  # the sampled committees' votes and claims, scaled to every producer's
        for kind in ("attest", "claim"):
            gas[kind] = gas.get(kind, 0) * n // sample
            txs[kind] = txs.get(kind, 0) * n // sample
    return play, gas, txs, reads, wall, sampled


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    parser.add_argument("--nodes", default="100,1000", help="swarm sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--checkers", type=int, default=10)
    parser.add_argument("--quorum", type=int, default=3)
    parser.add_argument("--claim-every", type=int, default=10, help="rounds a claim covers")
    parser.add_argument("--full-draw-max", type=int, default=1_000)
    parser.add_argument("--sample", type=int, default=100, help="producers voted above it")
    args = parser.parse_args()
    sizes = [int(s) for s in args.nodes.split(",")]
    per_node = Table(
        "N",
        "votes",
        "gas / node / round",
        "txs / node / round",
        "submit",
        "attest",
        "settle",
        "claim",
        "Mgas/s at 60-s rounds",
        "reverted",
        "wall s",
        formats={"txs / node / round": ".2f", "Mgas/s at 60-s rounds": ".2f", "wall s": ".0f"},
    )
    reads = Table(
        "N",
        "round",
        "peer batches",
        "drawn on",
        "RPC requests",
        "RPC answered (KB)",
        "CPU s (discover + draw)",
        "journal bytes",
        formats={"RPC answered (KB)": ".1f", "CPU s (discover + draw)": ".3f"},
    )
    for n in sizes:
        play, gas, txs, observed_rounds, wall, sampled = play_one(
            n,
            args.rounds,
            args.checkers,
            args.quorum,
            args.claim_every,
            args.full_draw_max,
            args.sample,
        )
        node_rounds = n * args.rounds
        total = sum(gas.values())
        per_node.row(
            n,
            "sampled" if sampled else "all",
            total // node_rounds,
            sum(txs.values()) / node_rounds,
            gas.get("submit", 0) // node_rounds,
            gas.get("attest", 0) // node_rounds,
            gas.get("settle", 0) // node_rounds,
            gas.get("claim", 0) // node_rounds,
            total / args.rounds / 60 / 1e6,
            play.gas.reverted,
            wall,
        )
        for which, observed in zip(("first", "next"), observed_rounds, strict=False):
            reads.row(
                n,
                which,
                observed.peers,
                observed.drawn,
                observed.requests,
                observed.answered_bytes / 1e3,
                observed.cpu_s,
                observed.journal_bytes,
            )
    per_node.print(
        f"Chain cost per node per round, SwarmLedger today (K = {args.checkers}, "
        f"Q = {args.quorum}, {args.rounds} rounds, a claim per {args.claim_every} rounds; "
        "gas from receipts)"
    )
    reads.print(
        "One observer's reads for a round (the node's discover, Seats.prepare and Seats.drawn; "
        "its first round also looks up every peer's family, once for the node's life)"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak memory of this process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
