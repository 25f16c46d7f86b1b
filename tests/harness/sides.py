"""One node's publisher and intake on their own, over its own journal, on the test chain's clock:
no node loop, no devnet (tests/chain/test_outbox.py, tests/chain/test_root_lane_node.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from client.chain import Ledger
from client.chain.book import RoundBook
from client.chain.events import EventReader
from client.config.models import SapoSection, StoreSection
from client.credit import batch_signal
from client.node.clock import SystemClock
from client.node.eventlog import EventLog
from client.node.health import Health
from client.node.intake import Intake
from client.node.journal import Journal, LocalRoundRecord
from client.node.journal.outbox import OutboxStatus
from client.node.proving import Snapshots
from client.node.publishing import Publisher
from client.node.publishing.rootlane import RootLane
from client.node.rollouts import task_seed
from client.node.services import Services
from client.store import LocalStore, Sampling
from client.store.pubsub import PubSub
from client.tasks import load_catalog
from tests.harness.batches import local_round
from tests.harness.ledger_swarm import Swarm


class Side:
    """One node's publisher and intake over its own journal, on a shared local block store."""

    def __init__(
        self,
        swarm: Swarm,
        ledger: Ledger,
        root: Path,
        policy,
        blocks: Path,
        *,
        book: str | None = None,
        submit: bool = False,
        pubsub: PubSub | None = None,
    ):
        """`book`: the root lane's round book (its batches checked and voted on too);
        `submit`: whether the publisher sends our submissions to its rounds' drawn aggregators
        (False: the ledger);
        `pubsub`: an IPFS daemon's pubsub, where our receipted votes are relayed to their
        producers ([root_lane].relay_votes; None: no relay)."""
        root.mkdir(parents=True)
        self.ledger, self.policy = ledger, policy
        self.address = ledger.account_address
        events = EventLog(root / "events.jsonl")
        self.journal = Journal(root / "journal.sqlite")
        self.services = Services(
            ledger=ledger,
            params=ledger.params(),
            chain_id=swarm.w3.eth.chain_id,
            journal=self.journal,
            events=events,
            health=Health(events),
            clock=SwarmClock(swarm),
        )
        self.store_cfg = StoreSection(backend="local", store_dir=blocks)
        self.store = LocalStore(blocks, max_bytes=self.store_cfg.max_batch_bytes)
        self.catalog = load_catalog("tiny")
        sapo = SapoSection()
        self.book = RoundBook(swarm.w3, book, nonces_of=ledger.tx) if book is not None else None
        self.root = (
            RootLane(self.services, self.book, submit, self.store, pubsub=pubsub)
            if self.book is not None
            else None
        )
        self.snapshots = Snapshots(root / "weights")
        self.publisher = Publisher(
            self.services,
            self.store,
            self.catalog,
            policy.descriptor(),
            Sampling.of(1.0, 1.0, 12),
            self.snapshots,
            store_cfg=self.store_cfg,
            sapo=sapo,
            metadata=lambda peer: "{}",
            reader=EventReader(ledger),
            root=self.root,
        )
        self.intake = Intake(
            self.services,
            self.store,
            self.catalog,
            self.publisher.wake,
            reader=EventReader(ledger),
            sapo=sapo,
            store_cfg=self.store_cfg,
            spool=root / "spool",
            book=self.book,
        )

    def generate(self, round_: int, k: int = 0) -> int:
        """Journals one real local round (`k`) of `round_`, as the compute stage does; returns
        its learning signal (0 when each question's completions were rewarded alike)."""
        seed = task_seed(self.services.chain_id, self.ledger.address, round_, self.address)
        self.snapshots.take(self.policy.model, 0, round_)  # what its openings pin
        lr = local_round(
            self.policy, seed=seed, round_=round_, node=self.address, k=k, items=4, completions=4
        )
        part = lr.part.model_dump_json().encode()
        record = LocalRoundRecord(round_, k, part, 16, 0, 0.0, 1.0)
        self.journal.add_local_round(record)
        return batch_signal(item.rewards for item in lr.part.items)

    def generate_learning(self, round_: int, most: int = 8) -> None:
        """Journals local rounds of `round_` until one has a learning signal (a batch without
        one earns nothing: a test of credit and payouts needs one)."""
        for k in range(most):
            if self.generate(round_, k):
                return
        raise AssertionError(f"no learning signal in {most} local rounds")

    def outbox(self) -> dict[str, OutboxStatus]:
        return {e.key: e.status for e in self.journal.outbox_entries()}


class SwarmClock(SystemClock):
    """The node's clock on the test chain's time (the swarm moves it, block by block)."""

    def __init__(self, swarm: Swarm):
        super().__init__()
        self.swarm = swarm

    def now(self) -> float:
        return float(self.swarm.now())

    def wait_until(self, moment: float, stop: threading.Event, *, at_most: float = 1.0) -> bool:
        return stop.wait(min(at_most, 0.05))
