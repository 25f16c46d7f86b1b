"""The SAPO node: its compute stage runs local rounds back to back at the hardware's pace, while
publishing and peer intake run beside it on their own threads.

A local round (k = 0, 1, … within chain round r) is a whole round of the paper: I fresh
questions drawn from the ledger's task seed of (r, node) and k, L completions each, verifier
rewards, then one GRPO step on those I local groups plus J verified peer items (or gathered into
the step of `[train].rounds_per_update` local rounds). The chain round is the cadence of
publishing and credit: when the compute stage starts a local round of a later chain round, it
seals r's batch (every local round it finished in r, contiguous from 0) and the publisher pins
and submits it within the ledger's window (r + W). Compute never waits on the chain or IPFS;
when they are unreachable the node keeps learning and its outbox waits.

    compute (this thread)   generate k -> train k -> generate k+1 -> ...   (seal r at r+1)
    publisher (thread)      pin -> submit -> attest (queued by intake)        client.node.publishing
    intake (thread)         discover -> fetch -> verify -> queue attest        client.node.intake
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from pathlib import Path

import torch

from client.config.models import SapoSection, TrainSection
from client.node.datadir import DataDir
from client.node.eventlog import Event, Phase, Span, timed
from client.node.intake import Intake
from client.node.journal import LocalRoundRecord
from client.node.journal.states import RoundPhase
from client.node.proving import Snapshots
from client.node.publishing import Publisher
from client.node.publishing.relay import VoteInbox
from client.node.rollouts import LocalRollouts, generate_local_round, task_seed
from client.node.services import Services
from client.node.training import PeerPool, Trainer, mix, offpolicy_metrics
from client.policy import GenerationBackend
from client.policy.encode import Group
from client.store import BlockStore, Sampling
from client.store.batch import canonical_json
from client.tasks import Catalog
from client.units import SCORE_SCALE

SHUTDOWN_FLUSH_S = 10.0
log = logging.getLogger("sapo.node")


class StageFailed(Exception):
    """An I/O stage (publisher, intake) died of an unexpected error; the node stopped."""


class Node:
    """One node: its stages, wired through the journal, the event log and a clock."""

    def __init__(
        self,
        services: Services,
        *,
        sapo: SapoSection,
        train: TrainSection,
        data_dir: DataDir,
        catalog: Catalog,
        trainer: Trainer,
        backend: GenerationBackend,
        sampling: Sampling,
        snapshots: Snapshots,
        publisher: Publisher,
        intake: Intake,
        inbox: VoteInbox | None = None,
    ):
        """The builder (client.node.assemble.open_node) makes every part and gives each stage
        its own sections of the config; the node runs them. `inbox`: our checkers' relayed
        votes, taken on a thread of its own ([root_lane].relay_votes; None: no relay)."""
        self.services = services
        self.sapo, self.train = sapo, train
        self.data_dir = data_dir
        self.ledger, self.params = services.ledger, services.params
        self.journal, self.events, self.health = services.journal, services.events, services.health
        self.clock = services.clock
        self.catalog = catalog
        self.trainer = trainer
        self.policy = trainer.policy
        self.backend = backend
        self.sampling = sampling
        self.address = services.address
        self.chain_id = services.chain_id
        self.snapshots = snapshots
        self.publisher = publisher
        self.intake = intake
        self.inbox = inbox
        self.phase = Phase.STARTING
        self.paused = threading.Event()
        self.pool = PeerPool(self.journal)
        self._fits: dict[tuple[int, str, int], bool] = {}  # peer item -> fits the trainer
        self._last_round: int | None = None  # the chain round of the last local round this run

    @property
    def steps(self) -> int:
        """GRPO steps taken so far (checkpointed ones included)."""
        return self.trainer.steps

    @property
    def store(self) -> BlockStore:
        return self.publisher.store

    def current_round(self) -> int:
        return self.services.current_round()

    # ------------------------------------------------------------------------------- the loop

    def run(self, stop: threading.Event, rounds: int | None = None) -> int:
        """Runs local rounds until `stop` is set (or `rounds` chain rounds were sealed); returns
        the chain rounds sealed."""
        io_stop = threading.Event()
        failed: list[tuple[str, BaseException]] = []

        def stage(name: str, target):
            """Runs an I/O stage; if it dies, the whole node stops (fail-stop: a node without
            its intake would neither learn nor vote, and its peers would not know)."""

            def run() -> None:
                try:
                    target(io_stop)
                except Exception as exc:
                    log.exception("the %s stage failed; the node stops", name)
                    failed.append((name, exc))
                    stop.set()

            return threading.Thread(target=run, name=f"sapo-{name}")

        threads = [stage("publisher", self.publisher.run), stage("intake", self.intake.run)]
        if self.inbox is not None:
            threads.append(stage("relay", self.inbox.run))
        self.events.emit(
            Event.NODE_STARTED,
            f"node {self.address} started at round {self.current_round()} "
            f"(I={self.sapo.local_items} J={self.sapo.external_items} "
            f"L={self.sapo.completions}, step {self.steps}, "
            f"{torch.get_num_threads()} CPU threads, generating with {self.backend.name})",
            address=self.address,
            round=self.current_round(),
            step=self.steps,
            cpu_threads=torch.get_num_threads(),
            backend=self.backend.name,
        )
        for thread in threads:
            thread.start()
        sealed = 0
        try:
            while not stop.is_set():
                current = self.current_round()
                sealed += self._seal_before(current)
                if rounds is not None and sealed >= rounds:
                    break
                if self.paused.is_set():
                    self._set_phase(Phase.PAUSED)
                    self.clock.wait_until(self.clock.now() + 0.5, stop)
                    continue
                k, room = self._next_local_round(current)
                cap = self.sapo.max_local_rounds
                if cap and k >= cap:  # this chain round has its local rounds: wait for the next
                    self._set_phase(Phase.IDLE)
                    self.clock.wait_until(self.params.round_start(current + 1), stop)
                    continue
                self.local_round(current, k, publish=room)
        finally:
            self.shutdown(io_stop, threads)
        if failed:
            name, exc = failed[0]
            self.events.emit(
                Event.NODE_ERROR,
                f"the {name} stage failed: {type(exc).__name__}: {exc}",
                logging.ERROR,
                stage=name,
                error=str(exc),
            )
            raise StageFailed(
                f"the node's {name} stage failed ({type(exc).__name__}: {exc}); the node stopped "
                "with its journal intact: restart it, and report the traceback in its log if it "
                "happens again"
            ) from exc
        return sealed

    def _next_local_round(self, round_: int) -> tuple[int, bool]:
        """Returns (k of the next local round of `round_`, whether it goes into the round's
        batch: the batch is open, has room, and k follows its last local round)."""
        k = self.journal.next_k(round_)
        record = self.journal.round(round_)
        if record is not None and record.phase != RoundPhase.COLLECTING:
            return k, False  # sealed already (a restart in the same round): train, not publish
        parts = self.journal.local_rounds(round_)
        last = len(parts[-1].part) if parts else 0  # the next part is about as large
        return k, k == len(parts) and self.publisher.room(round_, last)

    def _seal_before(self, current: int) -> int:
        """Seals every open batch of a chain round before `current`; journals the chain rounds of
        this run in which no local round started. Returns how many it sealed."""
        sealed = 0
        for round_ in self.journal.collecting():
            if round_ < current and self.publisher.seal(round_):
                sealed += 1
        if self._last_round is not None and current > self._last_round + 1:
            for skipped in range(self._last_round + 1, current):
                if self.journal.round(skipped) is None:
                    reason = f"no local round started in it (round {self._last_round}'s ran on)"
                    self.journal.end(skipped, RoundPhase.SKIPPED, reason)
                    self.events.emit(
                        Event.ROUND_SKIPPED, f"round {skipped}: skipped: {reason}", round=skipped
                    )
        return sealed

    def local_round(self, round_: int, k: int, *, publish: bool = True) -> LocalRollouts:
        """Generates local round k of chain round `round_`, journals it in the round's batch
        (unless `publish` is False: the batch is full), and trains on it."""
        self._last_round = round_
        started = time.time()
        cpu = time.process_time()
        with timed(self.journal, Span.SNAPSHOT):  # the checkpoint this local round samples from
            weights = self.snapshots.take(self.policy.model, self.trainer.steps, round_)
        self._set_phase(Phase.GENERATING)
        with timed(self.journal, Span.GENERATE):
            rollouts = generate_local_round(
                self.policy,
                self.backend,
                self.catalog,
                seed=task_seed(self.chain_id, self.ledger.address, round_, self.address),
                round_=round_,
                node=self.address,
                k=k,
                items=self.sapo.local_items,
                completions=self.sapo.completions,
                sampling=self.sampling,
                weights=weights,
            )
        part = rollouts.part
        if publish:
            self.journal.add_local_round(
                LocalRoundRecord(
                    round_,
                    k,
                    canonical_json(part.model_dump(mode="json")),
                    rollouts.rollouts,
                    sum(sum(i.rewards) for i in part.items),
                    started,
                    time.time(),
                )
            )
        self._train(rollouts, published=publish, started=started, cpu=cpu)
        return rollouts

    def _train(self, rollouts: LocalRollouts, *, published: bool, started: float, cpu: float):
        self._set_phase(Phase.TRAINING)
        round_, k = rollouts.round, rollouts.k
        with timed(self.journal, Span.TRAIN):
            first = max(0, round_ - self.sapo.lookback_rounds)
            peers = self.pool.items(first, round_)
            self._fits = {key: v for key, v in self._fits.items() if key[0] >= first}

            def fits(item) -> bool:
                if item.key not in self._fits:
                    self._fits[item.key] = self.trainer.fits(item)
                return self._fits[item.key]

            local = [
                Group(t.question, list(i.completions), rs, False)
                for t, i, rs in zip(
                    rollouts.tasks, rollouts.part.items, rollouts.rewards, strict=True
                )
            ]
            rng = random.Random(f"sapo.sample:{self.address.lower()}:{round_}:{k}")  # noqa: S311
            chosen = mix(local, peers, self.sapo.external_items, rng, fits)
            stats = self.trainer.learn(chosen.groups)
        self.pool.mark_used(chosen.external_used)
        metrics = {
            "round": round_,
            "k": k,
            "published": published,
            "reward_local": rollouts.mean_reward,
            "reward_external": chosen.reward_external,
            "rollouts": rollouts.rollouts,
            "new_tokens": rollouts.new_tokens,
            "local_items": len(local) - chosen.local_dropped,
            "local_dropped": chosen.local_dropped,
            "too_long": chosen.too_long,
            "external_items": len(chosen.external_used),
            "external_eligible": chosen.eligible,
            "external_shortfall": chosen.shortfall,
            "gathered_rounds": len(self.trainer.gathered),
            "loss": stats.loss if stats else None,
            "clip_fraction": stats.clip_fraction if stats else None,
            "grad_norm": stats.grad_norm if stats else None,
            "kl": stats.kl if stats and self.train.kl_coef > 0 else None,
            "tokens": stats.tokens if stats else 0,
            **offpolicy_metrics(self.trainer, stats),
            "step": self.steps,
            "seconds": round(time.time() - started, 3),
            "cpu_s": round(time.process_time() - cpu, 3),
        }
        self.journal.metrics(round_, k, metrics)
        self.events.emit(
            Event.LOCAL_ROUND,
            f"round {round_}.{k}: reward {rollouts.mean_reward:.3f}, trained on "
            f"{metrics['local_items']} local + {metrics['external_items']} external items"
            + (f" (shortfall {chosen.shortfall})" if chosen.shortfall else "")
            + (
                f", loss {stats.loss:.4f}"
                if stats
                else (
                    f", gathering ({len(self.trainer.gathered)}/"
                    f"{self.train.rounds_per_update} local rounds)"
                    if self.trainer.gathered
                    else ", no item with signal: no step"
                )
            )
            + ("" if published else " (not published: the round's batch is full)"),
            **metrics,
        )
        if self.trainer.since_checkpoint >= self.train.checkpoint_every:
            self.checkpoint()

    # ----------------------------------------------------------------------------- stopping

    def shutdown(self, io_stop: threading.Event, threads: list[threading.Thread]) -> None:
        """Checkpoints unsaved training, seals the open batches, flushes the outbox a last time
        and stops the I/O threads."""
        self._set_phase(Phase.STOPPING)
        io_stop.set()
        for thread in threads:
            thread.join()
        if self.trainer.since_checkpoint:
            self.checkpoint()
        for round_ in self.journal.collecting():
            self.publisher.seal(round_)  # what was generated is submitted, even if we stay down
        left = self.publisher.drain(SHUTDOWN_FLUSH_S, threading.Event())
        if left:
            self.events.emit(
                Event.NODE_PENDING,
                f"{left} outbox entries kept for the next start",
                logging.WARNING,
                pending=left,
            )
        self.backend.close()
        self._set_phase(Phase.STOPPED)
        steps = self.steps
        self.events.emit(Event.NODE_STOPPED, f"node stopped at step {steps}", step=steps)

    def checkpoint(self) -> Path:
        self._set_phase(Phase.CHECKPOINTING)
        with timed(self.journal, Span.CHECKPOINT):
            path = self.trainer.checkpoint(self.data_dir.path)
        steps = self.steps
        self.events.emit(
            Event.NODE_CHECKPOINT, f"checkpoint at step {steps}", step=steps, path=str(path)
        )
        return path

    def _set_phase(self, phase: Phase) -> None:
        if phase != self.phase:
            self.phase = phase
            with contextlib.suppress(Exception):
                self.events.emit(Event.NODE_PHASE, f"phase: {phase}", logging.DEBUG, phase=phase)

    def mean_score(self, round_: int) -> float | None:
        """The mean verifier reward of the round's published local rounds (its claim/rollouts)."""
        record = self.journal.round(round_)
        if record is None or not record.rollouts:
            return None
        return (record.claimed or 0) / SCORE_SCALE / record.rollouts
