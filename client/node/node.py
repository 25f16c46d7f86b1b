"""The SAPO node: the round loop across the chain, the store and the policy.

Per round r (from the ledger's genesis and round length, on the local clock):
  1. draw I tasks from taskSeed(r, me), generate L completions each, score them;
  2. pin the batch, then submit(r, digest, I*L, score)  (both through the journal's outbox);
  3. read peers' `Submitted` events of rounds r-k..r, fetch a few batches, re-verify them
     completely and attest what we computed (0 for a batch with foreign tasks);
  4. train: I local items + J external items from the SAPO sampler (our own rewards);
  5. checkpoint on a schedule, record everything in the journal.
Rounds never wait for peers. When the chain or the store is unreachable the node keeps
training in silo and its outbox holds pins and transactions until they can go (or their round
closes, recorded as missed with the reason).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from client.chain import ChainError, Ledger
from client.chain.errors import LedgerRevert, RpcUnavailable, TransactionTimeout
from client.chain.events import EventReader
from client.chain.models import LedgerParams
from client.config import NodeConfig
from client.node.eventlog import EventLog
from client.node.journal import BAD, UNAVAILABLE, VERIFIED, Journal
from client.node.rollouts import generate_round, task_seed, verify_batch
from client.node.training import Trainer
from client.policy import Policy, TransformersBackend, load_checkpoint, save_checkpoint
from client.policy.encode import Group
from client.sapo import Candidate, training_set
from client.store import BlockStore, StoreError, decode_batch, fetch_batch
from client.store.errors import BatchDigestMismatch, BlockNotFound, StoreTimeout, StoreUnavailable
from client.tasks import SCORE_SCALE, Catalog

CHECKPOINT = "checkpoint"
# The phases `_timed` records, by kind: the node's own compute, and what the swarm costs it.
COMPUTE_PHASES = ("generate", "train", "checkpoint")
SWARM_PHASES = ("encode", "pin", "submit", "discover", "fetch", "verify", "attest")
SHUTDOWN_FLUSH_S = 10.0
MAX_CONCURRENT_TX = 8  # attestations in flight at once (each waits for its own receipt)
PHASE_IDLE = "idle"
# Store failures that say nothing about the peer (the block may exist, we could not get it).
_NOT_THE_PEERS_FAULT = (BlockNotFound, StoreTimeout, StoreUnavailable, BatchDigestMismatch)
_CHAIN_DOWN = (RpcUnavailable, TransactionTimeout)


@dataclass
class Submission:
    """A `Submitted` event the node knows of."""

    round: int
    node: str
    digest: str
    rollouts: int
    score: int


class Node:
    """One node: its config, ledger (signing), store, policy and journal."""

    def __init__(
        self,
        cfg: NodeConfig,
        ledger: Ledger,
        params: LedgerParams,
        store: BlockStore,
        catalog: Catalog,
        trainer: Trainer,
    ):
        self.cfg = cfg
        self.ledger = ledger
        self.params = params
        self.store = store
        self.catalog = catalog
        self.trainer = trainer
        self.policy = trainer.policy
        self.backend = TransformersBackend(self.policy)
        self.address = ledger.account_address
        self.chain_id = ledger.w3.eth.chain_id if cfg.chain.chain_id is None else cfg.chain.chain_id
        self.data_dir = Path(cfg.node.data_dir)
        self.journal = Journal(self.data_dir / "journal.sqlite")
        self.events = EventLog(self.data_dir / "events.jsonl")
        self.reader = EventReader(
            ledger,
            chunk_blocks=cfg.chain.log_chunk_blocks,
            start_block=cfg.chain.ledger_deploy_block,
        )
        self.next_block = cfg.chain.ledger_deploy_block
        self.submissions: dict[tuple[int, str], Submission] = {}
        self.used_items: set[tuple[int, str, int]] = set()
        self.gathered: list[list[Group]] = []  # groups of rounds waiting for the next step
        self._fits: dict[tuple[int, str, int], bool] = {}  # peer item -> fits the trainer
        self.phase = PHASE_IDLE
        self.paused = threading.Event()
        self.chain_ok = True
        self.store_ok = True
        self._status_lock = threading.Lock()
        self.timings: dict[str, list[float]] = {}  # phase -> [wall s, CPU s] since the last round

    @property
    def steps(self) -> int:
        """GRPO steps taken so far (checkpointed ones included)."""
        return self.trainer.steps

    @contextlib.contextmanager
    def _timed(self, phase: str) -> Iterator[None]:
        """Adds the wall and CPU time of the block to this round's timings (for bench-node)."""
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            spent = self.timings.setdefault(phase, [0.0, 0.0])
            spent[0] += time.perf_counter() - wall
            spent[1] += time.process_time() - cpu

    # ------------------------------------------------------------------------------- clock

    def current_round(self) -> int:
        """The round now, on the local clock (the ledger's formula; no RPC)."""
        return int((time.time() - self.params.genesis) // self.params.round_length)

    def round_ends_at(self, round_: int) -> float:
        return self.params.genesis + (round_ + 1) * self.params.round_length

    # ------------------------------------------------------------------------------- the loop

    def run(self, stop: threading.Event, rounds: int | None = None) -> int:
        """Plays rounds until `stop` is set (or `rounds` were played); returns rounds played."""
        self.events.emit(
            "node.started",
            f"node {self.address} started at round {self.current_round()} "
            f"(I={self.cfg.sapo.local_items} J={self.cfg.sapo.external_items} "
            f"L={self.cfg.sapo.completions}, step {self.trainer.steps}, "
            f"{torch.get_num_threads()} CPU threads)",
            address=self.address,
            round=self.current_round(),
            step=self.trainer.steps,
            cpu_threads=torch.get_num_threads(),
        )
        self.flush_outbox()
        played = 0
        while not stop.is_set() and (rounds is None or played < rounds):
            if self.paused.is_set():
                self._set_phase("paused")
                stop.wait(0.5)
                continue
            round_ = self.current_round()
            record = self.journal.round(round_)
            if record is None or not (record.reached("trained") or record.phase == "missed"):
                self.play_round(round_, stop)
                played += 1
                if rounds is not None and played >= rounds:
                    break
            self._wait_for_round(round_ + 1, stop)
        self.shutdown()
        return played

    def play_round(self, round_: int, stop: threading.Event) -> None:
        began = time.perf_counter()
        local_groups, local_reward = self._local_rollouts(round_)
        self.flush_outbox()  # pin, then submit this round's batch
        if stop.is_set():
            return
        self._verify_peers(round_)
        if stop.is_set():
            return
        self._train(round_, local_groups, local_reward, began)
        self._retain(round_)
        self._set_phase(PHASE_IDLE)

    def _retain(self, round_: int) -> None:
        """Unpins what is older than `[store].retain_rounds` (peers had their challenge window
        to fetch it: open_node checks retain_rounds against it)."""
        try:
            dropped = self.store.gc(round_, self.cfg.store.retain_rounds)
        except StoreError as exc:
            self._store_status(False, str(exc))
            return
        if dropped:
            self.events.emit(
                "store.unpinned",
                f"unpinned {len(dropped)} batch(es) older than round "
                f"{round_ - self.cfg.store.retain_rounds}",
                round=round_,
                cids=dropped,
            )

    def shutdown(self) -> None:
        """Checkpoints unsaved training and flushes the outbox once more."""
        if self.trainer.since_checkpoint:
            self.checkpoint()
        # A submission made in a round's first second waits for that round's first block: give
        # such entries a few seconds. Anything left (an outage) stays in the journal for the next
        # start.
        deadline = time.monotonic() + SHUTDOWN_FLUSH_S
        self.flush_outbox()
        while self.journal.pending() and self.chain_ok and self.store_ok:
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
            self.flush_outbox()
        if left := len(self.journal.pending()):
            self.events.emit(
                "node.pending",
                f"{left} outbox entries kept for the next start",
                logging.WARNING,
                pending=left,
            )
        self._set_phase("stopped")
        steps = self.trainer.steps
        self.events.emit("node.stopped", f"node stopped at step {steps}", step=steps)

    def _wait_for_round(self, round_: int, stop: threading.Event) -> None:
        self._set_phase(PHASE_IDLE)
        while (
            not stop.is_set()
            and time.time() < self.params.genesis + round_ * self.params.round_length
        ):
            if self.journal.pending():
                self.flush_outbox()
            stop.wait(
                min(
                    1.0,
                    max(
                        0.05, self.params.genesis + round_ * self.params.round_length - time.time()
                    ),
                )
            )

    def _set_phase(self, phase: str) -> None:
        if phase != self.phase:
            self.phase = phase
            self.events.emit("node.phase", f"phase: {phase}", logging.DEBUG, phase=phase)

    # ----------------------------------------------------------------------- 1-2: our batch

    def _local_rollouts(self, round_: int) -> tuple[list[Group], float]:
        """Returns this round's local groups; generates and journals the batch first unless the
        journal has it (a restart re-publishes exactly what was generated)."""
        record = self.journal.round(round_)
        if record is not None and record.batch is not None:
            batch = decode_batch(record.batch)
        else:
            self._set_phase("generating")
            with self._timed("generate"):
                local = generate_round(
                    self.policy,
                    self.backend,
                    self.catalog,
                    chain_id=self.chain_id,
                    ledger=self.ledger.address,
                    round_=round_,
                    node=self.address,
                    items=self.cfg.sapo.local_items,
                    completions=self.cfg.sapo.completions,
                    max_new_tokens=self.cfg.policy.max_new_tokens,
                    temperature=self.cfg.policy.temperature,
                    top_p=self.cfg.policy.top_p,
                )
            batch = local.batch
            with self._timed("encode"):
                data, digest = batch.encode(), "0x" + batch.digest().hex()
            self.journal.generated(round_, data, digest, batch.score)
            self.journal.enqueue(f"pin:{round_}", "pin", round_, {})
            self.journal.enqueue(
                f"submit:{round_}",
                "submit",
                round_,
                {"digest": digest, "rollouts": batch.rollouts, "score": batch.score},
            )
            self.events.emit(
                "round.generated",
                f"round {round_}: generated {batch.rollouts} rollouts, mean reward "
                f"{batch.score / SCORE_SCALE / batch.rollouts:.3f}",
                round=round_,
                digest=digest,
                rollouts=batch.rollouts,
                score=batch.score,
            )
        groups = [
            Group(it.question, list(it.completions), [r / SCORE_SCALE for r in it.rewards], False)
            for it in batch.items
        ]
        return groups, batch.score / SCORE_SCALE / batch.rollouts

    # ------------------------------------------------------------------------------- outbox

    def flush_outbox(self) -> None:
        """Sends what the outbox holds, oldest first; what cannot go yet stays pending.

        Attestations go last and together: their transactions are sent one after another (one
        nonce sequence) and their receipts awaited at once, so a round's attestations cost about
        one block rather than one block each (on a 12 s chain, 8 peers: ~12 s instead of ~96 s).
        """
        chain_down = store_down = False
        attestations = []
        for entry in self.journal.pending():
            if entry.kind == "pin" and not store_down:
                store_down = not self._pin(entry.round, entry.key)
            elif entry.kind == "submit" and not chain_down:
                pin = self.journal.outbox(f"pin:{entry.round}")
                if pin is not None and pin.status == "pending":
                    if self.current_round() > entry.round + 1:
                        self._give_up(
                            entry.key,
                            entry.round,
                            "the batch could not be pinned before the round closed",
                        )
                    continue  # a digest nobody can fetch earns nothing: pin first
                chain_down = not self._send(entry)
            elif entry.kind == "attest":
                attestations.append(entry)
        if attestations and not chain_down:
            self._set_phase("verifying peers")
            with (
                self._timed("attest"),
                ThreadPoolExecutor(
                    min(len(attestations), MAX_CONCURRENT_TX), thread_name_prefix="attest"
                ) as pool,
            ):
                list(pool.map(lambda e: self._send(e, timed=False), attestations))

    def _pin(self, round_: int, key: str) -> bool:
        record = self.journal.round(round_)
        if record is None or record.batch is None:
            self.journal.dropped(key, "no batch recorded for the round")
            return True
        self._set_phase("pinning")
        try:
            with self._timed("pin"):
                cid = self.store.put(record.batch, round_)
        except StoreError as exc:
            self.journal.attempted(key, str(exc))
            self._store_status(False, str(exc))
            return False
        self._store_status(True)
        self.journal.done(key)
        self.journal.advance(round_, "pinned", cid=cid)
        self.events.emit("round.pinned", f"round {round_}: pinned {cid}", round=round_, cid=cid)
        return True

    def _send(self, entry, timed: bool = True) -> bool:
        """Sends one submit or attest; returns False when the chain is unreachable."""
        if timed:
            self._set_phase("submitting" if entry.kind == "submit" else "verifying peers")
        try:
            with self._timed(entry.kind) if timed else contextlib.nullcontext():
                if entry.kind == "submit":
                    self._submit(entry)
                else:
                    self._attest(entry)
        except _CHAIN_DOWN as exc:
            self.journal.attempted(entry.key, str(exc))
            self._chain_status(False, str(exc))
            return False
        except LedgerRevert as exc:
            self._chain_status(True)
            if exc.name == "RoundNotOpen" and exc.current < entry.round:
                # our clock is ahead of the last block's: the round opens on chain in a moment
                self.journal.attempted(entry.key, str(exc))
                return True
            self._give_up(entry.key, entry.round, str(exc), kind=entry.kind)
        except ChainError as exc:
            self.journal.attempted(entry.key, str(exc))
            self._chain_status(False, str(exc))
            return False
        return True

    def _submit(self, entry) -> None:
        round_, p = entry.round, entry.payload
        on_chain = self.ledger.submission(round_, self.address)
        self._chain_status(True)
        if on_chain.rollouts:  # sent before a crash, or by an earlier attempt that timed out
            if on_chain.digest.lower() == p["digest"].lower():
                self._submitted(round_, entry.key, None)
                return
            self._give_up(entry.key, round_, f"another batch ({on_chain.digest}) is on chain")
            return
        if self.current_round() > round_ + 1:
            self._give_up(entry.key, round_, "the round closed before the submission could go")
            return
        result = self.ledger.submit(round_, p["digest"], p["rollouts"], p["score"])
        self._submitted(round_, entry.key, result.tx_hash)

    def _submitted(self, round_: int, key: str, tx_hash: str | None) -> None:
        self.journal.done(key, tx_hash)
        self.journal.advance(round_, "confirmed", tx_hash=tx_hash)
        record = self.journal.round(round_)
        self.events.emit(
            "round.submitted",
            f"round {round_}: submission confirmed"
            + (f" in {tx_hash}" if tx_hash else " (found on chain)"),
            round=round_,
            digest=record.digest if record else None,
            cid=record.cid if record else None,
            tx_hash=tx_hash,
        )

    def _attest(self, entry) -> None:
        round_, peer, score = entry.round, entry.payload["node"], entry.payload["score"]
        if self.ledger.has_attested(self.address, round_, peer):
            self.journal.done(entry.key)
            return
        if self.current_round() > round_ + self.params.challenge_rounds:
            self._give_up(entry.key, round_, "the challenge window closed", kind="attest")
            return
        result = self.ledger.attest(round_, peer, score)
        self._chain_status(True)
        self.journal.done(entry.key, result.tx_hash)
        self.events.emit(
            "peer.attested",
            f"round {round_}: attested {peer[:10]}… score {score / SCORE_SCALE:.4f}",
            round=round_,
            node=peer,
            score=score,
            tx_hash=result.tx_hash,
        )

    def _give_up(self, key: str, round_: int, reason: str, kind: str = "submit") -> None:
        self.journal.dropped(key, reason)
        if kind == "submit":
            self.journal.missed(round_, reason)
        self.events.emit(
            f"{kind}.dropped",
            f"round {round_}: {kind} dropped: {reason}",
            logging.WARNING,
            round=round_,
            reason=reason,
        )

    def _chain_status(self, ok: bool, reason: str = "") -> None:
        self._part_status("chain", ok, reason)

    def _store_status(self, ok: bool, reason: str = "") -> None:
        self._part_status("store", ok, reason)

    def _part_status(self, part: str, ok: bool, reason: str) -> None:
        """Records the chain's or the store's reachability; an event when it changes."""
        with self._status_lock:  # attestations report from several threads
            if ok == getattr(self, f"{part}_ok"):
                return
            setattr(self, f"{part}_ok", ok)
        self.events.emit(
            f"{part}.status",
            f"{part} reachable again" if ok else f"{part} unreachable: {reason}",
            logging.INFO if ok else logging.WARNING,
            ok=ok,
        )

    # ------------------------------------------------------------------------ 3: peers

    def _discover(self) -> None:
        """Adds the `Submitted` events since the last look to what the node knows."""
        head = self.reader.head()
        for event in self.reader.read(["Submitted"], from_block=self.next_block, to_block=head):
            a = event.args
            sub = Submission(
                a["round"], a["node"].lower(), str(a["digest"]).lower(), a["rollouts"], a["score"]
            )
            self.submissions[(sub.round, sub.node)] = sub
        self.next_block = head + 1

    def _verify_peers(self, round_: int) -> None:
        self._set_phase("verifying peers")
        try:
            with self._timed("discover"):
                self._discover()
            self._chain_status(True)
        except ChainError as exc:
            self._chain_status(False, str(exc))
            return
        first = max(0, round_ - self.cfg.sapo.lookback_rounds)
        me = self.address.lower()
        fresh = [
            s
            for (r, node), s in self.submissions.items()
            if first <= r <= round_ and node != me and not self._settled_peer(r, node)
        ]
        rng = random.Random(f"{me}:{round_}")  # noqa: S311 - sampling, not secrets
        attested = 0
        for sub in rng.sample(fresh, min(len(fresh), self.cfg.sapo.max_fetch_per_round)):
            verdict, score = self._check_peer(sub)
            window_open = self.current_round() <= sub.round + self.params.challenge_rounds
            if verdict != UNAVAILABLE and window_open and attested < self.cfg.sapo.attest_budget:
                attested += 1
                self.journal.enqueue(
                    f"attest:{sub.round}:{sub.node}",
                    "attest",
                    sub.round,
                    {"node": sub.node, "score": score},
                )
        self.flush_outbox()
        self.journal.advance(round_, "attested")

    def _settled_peer(self, round_: int, node: str) -> bool:
        """True when a peer batch was fetched before with a verdict (unavailable ones retry)."""
        return self.journal.peer_verdict(round_, node) not in (None, UNAVAILABLE)

    def _check_peer(self, sub: Submission) -> tuple[str, int]:
        """Fetches and re-verifies a peer's batch; journals and returns (verdict, our score)."""
        try:
            with self._timed("fetch"):
                batch = fetch_batch(
                    self.store,
                    sub.digest,
                    chain_id=self.chain_id,
                    ledger=self.ledger.address,
                    round_=sub.round,
                    node=sub.node,
                )
        except _NOT_THE_PEERS_FAULT as exc:
            self.journal.peer_batch(sub.round, sub.node, sub.digest, UNAVAILABLE, reason=str(exc))
            self.events.emit(
                "peer.unavailable",
                f"round {sub.round}: batch of {sub.node[:10]}… unavailable: {exc}",
                logging.WARNING,
                round=sub.round,
                node=sub.node,
                reason=str(exc),
            )
            return UNAVAILABLE, 0
        except StoreError as exc:  # the peer published something that is not a valid batch
            return self._reject(sub, str(exc), sub.score)
        seed = task_seed(self.chain_id, self.ledger.address, sub.round, sub.node)
        with self._timed("verify"):
            check = verify_batch(batch, self.catalog, seed)
        if not check.valid:
            return self._reject(sub, check.reason or "invalid batch", check.claimed)
        items = [
            {"question": item.question, "completions": list(item.completions), "rewards": c.rewards}
            for item, c in zip(batch.items, check.items, strict=True)
        ]
        reason = (
            None
            if check.agrees
            else (f"claimed {check.claimed} but our verifier gives {check.recomputed}")
        )
        self.journal.peer_batch(
            sub.round,
            sub.node,
            sub.digest,
            VERIFIED,
            reason=reason,
            claimed=check.claimed,
            recomputed=check.recomputed,
            items=items,
        )
        self.events.emit(
            "peer.verified",
            f"round {sub.round}: verified {sub.node[:10]}…: claimed {check.claimed}, "
            f"recomputed {check.recomputed}",
            round=sub.round,
            node=sub.node,
            claimed=check.claimed,
            recomputed=check.recomputed,
        )
        return VERIFIED, check.recomputed

    def _reject(self, sub: Submission, reason: str, claimed: int) -> tuple[str, int]:
        """Journals a peer batch that is available but not valid; we attest 0 for it."""
        self.journal.peer_batch(
            sub.round, sub.node, sub.digest, BAD, reason=reason, claimed=claimed, recomputed=0
        )
        self.events.emit(
            "peer.bad",
            f"round {sub.round}: bad batch from {sub.node[:10]}…: {reason}",
            logging.WARNING,
            round=sub.round,
            node=sub.node,
            reason=reason,
        )
        return BAD, 0

    # ------------------------------------------------------------------------ 4-5: training

    def _train(self, round_: int, local: list[Group], local_reward: float, began: float) -> None:
        self._set_phase("training")
        first = max(0, round_ - self.cfg.sapo.lookback_rounds)
        peer_items = [
            p
            for p in self.journal.verified_items(first, round_)
            if (p.round, p.node, p.index) not in self.used_items
        ]
        by_key: dict[Any, Group] = {}
        local_candidates = []
        too_long = 0  # peers' groups longer than we generate ourselves: left out, never cut
        for i, g in enumerate(local):
            by_key[("local", i)] = g
            local_candidates.append(Candidate(("local", i), tuple(g.rewards), external=False))
        external_candidates = []
        self._fits = {k: v for k, v in self._fits.items() if k[0] >= first}
        for p in peer_items:
            key = (p.round, p.node, p.index)
            group = Group(p.question, p.completions, p.rewards, True)
            if key not in self._fits:
                self._fits[key] = self.trainer.fits(group)
            if not self._fits[key]:
                too_long += 1
                continue
            by_key[key] = group
            external_candidates.append(Candidate(key, tuple(p.rewards)))
        rng = random.Random(f"sapo.sample:{self.address.lower()}:{round_}")  # noqa: S311
        chosen, selection, dropped_local = training_set(
            local_candidates, external_candidates, self.cfg.sapo.external_items, rng
        )
        groups = [by_key[c.key] for c in chosen]
        external_used = [c.key for c in selection.items]
        # rounds_per_update > 1: the step waits for k rounds of items (no update in between, so
        # every gathered rollout is still on-policy when the step comes)
        self.gathered.append(groups)
        stats = None
        if len(self.gathered) >= self.cfg.train.rounds_per_update:
            with self._timed("train"):
                stats = self.trainer.step([g for gathered in self.gathered for g in gathered])
            self.gathered = []
        for key in external_used:
            self.used_items.add(key)
        for (r, node), n in _count_by_batch(external_used).items():
            self.journal.used(r, node, n)
        external_rewards = [sum(by_key[k].rewards) / len(by_key[k].rewards) for k in external_used]
        metrics = {
            "round": round_,
            "reward_local": local_reward,
            "reward_external": (
                sum(external_rewards) / len(external_rewards) if external_rewards else None
            ),
            "local_items": len(local) - dropped_local,
            "local_dropped": dropped_local,
            "too_long": too_long,
            "external_items": len(external_used),
            "external_eligible": selection.eligible,
            "external_shortfall": selection.shortfall,
            "gathered_rounds": len(self.gathered),
            "loss": stats.loss if stats else None,
            "clip_fraction": stats.clip_fraction if stats else None,
            "grad_norm": stats.grad_norm if stats else None,
            "kl": stats.kl if stats and self.cfg.train.kl_coef > 0 else None,
            "tokens": stats.tokens if stats else 0,
            "step": self.trainer.steps,
            "seconds": round(time.perf_counter() - began, 3),
            "timings": {k: [round(w, 4), round(c, 4)] for k, (w, c) in self.timings.items()},
        }
        self.timings = {}
        self.journal.metrics(round_, metrics)
        self.journal.advance(round_, "trained")
        self.events.emit(
            "round.trained",
            f"round {round_}: trained on {metrics['local_items']} local + "
            f"{metrics['external_items']} external items (shortfall "
            f"{selection.shortfall}), reward {local_reward:.3f}"
            + (
                f", loss {stats.loss:.4f}"
                if stats
                else f", gathering ({len(self.gathered)}/{self.cfg.train.rounds_per_update} rounds)"
                if self.gathered
                else ", no item with signal: no step"
            ),
            **metrics,
        )
        if self.trainer.since_checkpoint >= self.cfg.train.checkpoint_every:
            self.checkpoint()
            self.journal.advance(round_, "checkpointed")

    def checkpoint(self) -> Path:
        self._set_phase("checkpointing")
        with self._timed("checkpoint"):
            path = save_checkpoint(
                self.policy, self.trainer.optimizer, self.trainer.steps, self.data_dir / CHECKPOINT
            )
        self.trainer.since_checkpoint = 0
        steps = self.trainer.steps
        self.events.emit(
            "node.checkpoint", f"checkpoint at step {steps}", step=steps, path=str(path)
        )
        return path


def _count_by_batch(keys: list[Any]) -> dict[tuple[int, str], int]:
    counts: dict[tuple[int, str], int] = {}
    for r, node, _ in keys:
        counts[(r, node)] = counts.get((r, node), 0) + 1
    return counts


def resume_policy(
    data_dir: Path, make_optimizer, device: str, dtype: str, load_base
) -> tuple[Policy, torch.optim.Optimizer, int]:
    """Returns (policy, optimizer, step) from the node's last checkpoint, or the base policy.

    A checkpoint is replaced by renaming; a kill between the two renames leaves only
    `checkpoint.old`, which is then the last checkpoint.
    """
    for candidate in (data_dir / CHECKPOINT, data_dir / f"{CHECKPOINT}.old"):
        if (candidate / "sapo.json").is_file():
            return load_checkpoint(candidate, make_optimizer, device=device, dtype=dtype)
    policy = load_base()
    return policy, make_optimizer(policy.model), 0
