"""An adversary node: its account, store and strategy, and the loop that plays it each poll."""

from __future__ import annotations

import logging
import threading

from client.chain import ChainError, Ledger
from client.chain.events import EventCursor, EventReader
from client.config import NodeConfig
from client.config.roles import STRATEGIES
from client.devnet.adversary.batches import LIAR_ROUNDS, Batches
from client.devnet.adversary.release import Release
from client.devnet.adversary.voting import Voting
from client.node.assemble import data_dir_deployment
from client.node.datadir import DataDir
from client.node.deployment import bind_data_dir
from client.node.eventlog import Event, EventLog
from client.store import (
    StoreError,
    open_store,
)
from client.store.batch import BatchLimits
from client.tasks import (
    check_against_ledger,
    load_catalog,
)

POLL_S = 1.0


class Adversary(Batches, Release, Voting):
    """One adversary node: its strategy, its ledger account and its store."""

    def __init__(
        self,
        cfg: NodeConfig,
        ledger: Ledger,
        strategy: str,
        *,
        partners: list[str] | None = None,
    ):
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}: expected one of {STRATEGIES}")
        if (strategy in ("colluder", "cartel", "sybil", "baiter")) != bool(partners):
            raise ValueError(
                "a colluder, cartel, sybil or bait member needs partners, and only they have any"
            )
        self.cfg = cfg
        self.ledger = ledger
        self.strategy = strategy
        self.partners = [p.lower() for p in partners or []]
        self.params = ledger.check(cfg.chain.chain_id)
        deployment = data_dir_deployment(cfg, ledger)  # before anything is written there
        self.catalog = load_catalog(cfg.tasks.catalog)
        check_against_ledger(self.catalog, self.params.catalog_digest)
        self.store = open_store(cfg.store)
        self.address = ledger.account_address
        self.chain_id = ledger.w3.eth.chain_id
        self.events = EventLog(DataDir(cfg.node.data_dir).events)
        bind_data_dir(DataDir(cfg.node.data_dir), deployment)
        self.reader = EventReader(
            ledger,
            chunk_blocks=cfg.chain.log_chunk_blocks,
            start_block=cfg.chain.ledger_deploy_block,
        )
        self.limits = BatchLimits(max_bytes=cfg.store.max_batch_bytes)
        self.submitted: set[int] = set()  # rounds we submitted (or gave up on)
        self.vouched: set[tuple[int, str]] = set()  # (round, partner) claims we looked at
        self.griefed: set[tuple[int, str, bool]] = set()  # (round, node, appeal) looked at
        self.appealed: set[tuple[int, str]] = set()  # others' appealed submissions
        self.copied: set[str] = set()  # digests we copied (or tried to)
        self.moved: set[tuple[int, str]] = set()  # (round, node) a stake mover's seats read
        self.baited: set[tuple[int, str, bool]] = set()  # (round, partner, appeal) looked at
        self.lent = 0  # wei a stake mover added and has not requested unstaked yet
        # round -> (batch, its bytes, its forged groups): submitted, not served yet (`serve`)
        self.held: dict[int, tuple] = {}
        self.outcomes: dict[int, str] = {}  # round -> "served" or "withheld", once decided
        self.cursor = EventCursor(next_block=cfg.chain.ledger_deploy_block)
        self.seen: dict[int, list[tuple[int, str]]] = {}  # round -> others' submissions
        self._seed = None  # the seed policy's descriptor, tokenizer and weights (farmers)
        self._seed_policy = None  # the seed policy itself, and a backend on it (a padder)
        self._backend = None
        self.model = {"name": f"none ({strategy})", "parameters": 0, "tokenizer": "none"}

    def run(self, stop: threading.Event) -> None:
        self.events.emit(
            Event.NODE_STARTED,
            f"adversary {self.strategy} {self.address} started at round "
            f"{self.ledger.current_round()}",
            address=self.address,
            adversary=self.strategy,
            partners=self.partners,
        )
        while not stop.is_set():
            try:
                self.step(self.ledger.current_round())
            except (ChainError, StoreError) as exc:  # an outage: try again next poll
                self.events.emit(
                    Event.NODE_ERROR, f"{self.strategy}: {exc}", logging.WARNING, error=str(exc)
                )
            stop.wait(POLL_S)
        self.events.emit(Event.NODE_STOPPED, f"adversary {self.strategy} stopped")

    def step(self, current: int) -> None:
        if self.strategy == "copycat":
            self.copy(current)
        elif self.strategy in ("griefer", "whale", "stake-mover"):
            if self.strategy == "stake-mover":
                self.move_stake(current)
            self.grief(current)
        elif current not in self.submitted:
            self.submitted.add(current)
            if self.strategy in ("free-claim", "colluder", "cartel", "sybil"):
                self.free_claim(current)
            elif self.strategy == "padder":
                self.pad(current)
            elif self.strategy == "logprob-liar":
                self.pad(current, local_rounds=LIAR_ROUNDS, lie=True)
            elif self.strategy == "baiter":
                self.pad(current, local_rounds=LIAR_ROUNDS, honest=True)
            elif self.strategy == "concentrator":
                self.concentrate(current)
            elif self.strategy == "splitter":
                self.split(current)
            else:
                withhold = self.strategy == "withholder"
                self.farm(
                    current,
                    mixed=self.strategy != "answer-farmer",
                    withhold=withhold,
                    nan=self.strategy == "nan-weights",
                    poison=self.strategy == "poison-token",
                )
        if self.held:
            self.serve(current)
        if self.strategy == "baiter":
            self.bait(current)
        elif self.partners:
            self.vouch(current)
        if self.strategy == "sybil":
            self.grief(current)
