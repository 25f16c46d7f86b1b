"""The in-process swarm: a cell's N nodes played round by round in one process.

What is the node's own code: the seeded draw from each node's task seed, generation and scoring
(client.node.rollouts.generate_local_round), the SAPO mix of I own groups and J peer items
(client.node.training.mix, with the node's sampling rng), the trainer (client.node.training.
Trainer, as client.node.assemble.make_trainer builds it from the cell's [train] and [policy]),
the `sapo.rollouts/5` batch encoded to its canonical bytes and decoded again by every peer, and
peers' re-verification with their own verifiers (client.node.rollouts.verify_batch): an item
enters a peer's pool with the peer's rewards, as on the real path.

What is left out: the chain, IPFS, clocks and threads. A round is one local round of every node
in turn (the devnet experiment's `max_local_rounds = 1`); a batch of round r reaches every peer
before round r + 1 (on a devnet it arrives when fetched and verified, usually one round later,
sometimes two: the lookback window, [sapo].lookback_rounds, is the same). No credit, attestation
or proof of generation is played: no honest node's training depends on them. The ledger's
address and the nodes' addresses, which seed every draw, are derived from the cell's seed.

Held-out evaluation (`eval_questions` > 0, client.experiment.heldout): every node's greedy answer
to a fixed set of questions at the start, every `eval_every` rounds and at the end; the questions
any node of the cell drew for training are named, so that the report scores only the others.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from client.config import with_sections
from client.devnet.accounts import dev_account
from client.experiment.cell import RECORD, base_config, node_sections, write_whole
from client.experiment.config import Cell, ExperimentConfig
from client.experiment.heldout import evaluation_set, greedy, held_out_record
from client.node.assemble import base_policy_path, make_trainer
from client.node.journal.peers import PeerItem
from client.node.rollouts import generate_local_round, make_batch, task_seed, verify_batch
from client.node.training import Trainer, mix, offpolicy_metrics
from client.policy import TransformersBackend, load_policy
from client.policy.encode import Group
from client.policy.weights import weights_bytes
from client.store import Sampling
from client.store.batch import Sampled, decode_batch
from client.store.weights import weights_id
from client.tasks import Catalog, load_catalog


def cell_ledger(cell: Cell) -> str:
    """The ledger address a cell's draws are seeded with (no ledger is deployed)."""
    return "0x" + hashlib.sha256(f"sapo.in-process/1:{cell.seed}".encode()).hexdigest()[:40]


class SimNode:
    """One node of the in-process swarm: its policy and trainer, and the peer items it verified."""

    def __init__(
        self,
        index: int,
        cfg,
        catalog: Catalog,
        chain_id: int,
        ledger: str,
        path,
        address: str | None = None,
    ):
        self.index = index
        self.cfg = cfg
        self.catalog = catalog
        self.chain_id = chain_id
        self.ledger = ledger
        # a devnet's node i signs with dev account i + 1
        self.address = address or dev_account(index + 1).address
        device, dtype = "cpu", "float32"
        policy = load_policy(path, device=device, dtype=dtype)
        optimizer = torch.optim.Adam(policy.model.parameters(), lr=cfg.train.learning_rate)
        self.trainer: Trainer = make_trainer(
            cfg, policy, optimizer, 0, lambda: load_policy(path, device=device, dtype=dtype)
        )
        self.policy = policy
        self.backend = TransformersBackend(policy)
        self.max_new_tokens = cfg.policy.max_new_tokens
        self.sampling = Sampling.of(cfg.policy.temperature, cfg.policy.top_p, self.max_new_tokens)
        self.pool: dict[tuple[int, str], list[PeerItem]] = {}  # verified peer batches' items
        self.used: set[tuple[int, str, int]] = set()
        self._weights: tuple[int, str] | None = None  # (step, id) of the weights sampled from
        self.drawn: set[str] = set()  # every question this node trained on as its own

    def weights(self) -> str:
        """The id of the weights the next local round samples from (hashed once per step)."""
        if self._weights is None or self._weights[0] != self.trainer.steps:
            self._weights = (self.trainer.steps, weights_id(weights_bytes(self.policy.model)))
        return self._weights[1]

    def play(self, round_: int) -> tuple[dict[str, Any], bytes]:
        """Plays local round 0 of chain round `round_`: generate, mix, train. Returns the
        round's numbers and its batch's canonical bytes."""
        began = time.perf_counter()
        cfg = self.cfg
        rollouts = generate_local_round(
            self.policy,
            self.backend,
            self.catalog,
            seed=task_seed(self.chain_id, self.ledger, round_, self.address),
            round_=round_,
            node=self.address,
            k=0,
            items=cfg.sapo.local_items,
            completions=cfg.sapo.completions,
            sampling=self.sampling,
            weights=self.weights(),
        )
        self.drawn.update(t.question for t in rollouts.tasks)
        first = max(0, round_ - cfg.sapo.lookback_rounds)
        self.pool = {k: v for k, v in self.pool.items() if k[0] >= first}
        peers = [
            item
            for key in sorted(self.pool)
            for item in self.pool[key]
            if item.key not in self.used
        ]
        local = [
            Group(t.question, list(i.completions), rs, False)
            for t, i, rs in zip(rollouts.tasks, rollouts.part.items, rollouts.rewards, strict=True)
        ]
        rng = random.Random(f"sapo.sample:{self.address.lower()}:{round_}:0")  # noqa: S311
        chosen = mix(local, peers, cfg.sapo.external_items, rng, self.trainer.fits)
        stats = self.trainer.learn(chosen.groups)
        self.used.update(chosen.external_used)
        batch = make_batch(
            chain_id=self.chain_id,
            ledger=self.ledger,
            round_=round_,
            node=self.address,
            catalog=self.catalog,
            model=self.policy.descriptor(),
            sampling=self.sampling,
            local_rounds=[rollouts.part],
        )
        by_entry: dict[str, list[float]] = {}
        for task, rs in zip(rollouts.tasks, rollouts.rewards, strict=True):
            by_entry.setdefault(task.entry, []).extend(rs)
        numbers = {
            "round": round_,
            "reward_local": rollouts.mean_reward,
            "reward_on_chain": None,  # no ledger in process
            "reward_by_entry": {e: (sum(v) / len(v), len(v)) for e, v in sorted(by_entry.items())},
            "reward_external": chosen.reward_external,
            "local_items": len(local) - chosen.local_dropped,
            "external_items": len(chosen.external_used),
            "external_shortfall": chosen.shortfall,
            **offpolicy_metrics(self.trainer, stats),
            "compute_s": round(time.perf_counter() - began, 4),
            "swarm_s": 0.0,  # the peers' verification of this batch is added to theirs
            "step": self.trainer.steps,
        }
        return numbers, batch.encode()

    def receive(self, data: bytes, round_: int, producer: str) -> float:
        """Decodes and re-verifies a peer's batch; keeps its items with our rewards. Returns the
        seconds it took (a batch that fails verification is dropped, as a node drops it)."""
        began = time.perf_counter()
        batch = decode_batch(data)
        seed = task_seed(self.chain_id, self.ledger, round_, producer)
        check = verify_batch(batch, self.catalog, seed)
        if check.valid:
            node = producer.lower()
            self.pool[(round_, node)] = [
                PeerItem(
                    round_,
                    node,
                    i,
                    item.question,
                    list(item.completions),
                    c.rewards,
                    Sampled.of(batch, item),
                )
                for i, (item, c) in enumerate(zip(batch.items, check.items, strict=True))
            ]
        return time.perf_counter() - began


def play_inprocess_cell(
    exp: ExperimentConfig,
    cell: Cell,
    cell_dir: Path,
    cache_dir: Path,
    progress: Callable[[int, int], None] | None = None,
    seed_progress: Callable | None = None,
) -> dict[str, Any]:
    """Plays the cell in one process; returns its record (also in `cell_dir`/cell.json, written
    last: an interrupted cell is played again from scratch)."""
    if cell_dir.exists():
        shutil.rmtree(cell_dir)
    cell_dir.mkdir(parents=True)
    if exp.threads:
        torch.set_num_threads(exp.threads)
    base = base_config(exp, cell, cache_dir)
    sections = node_sections(cell, base)
    catalog = load_catalog(base.tasks.catalog)
    ledger = cell_ledger(cell)
    chain_id = base.devnet.chain_id
    began = time.time()
    nodes, paths = [], []
    for i in range(exp.nodes):
        cfg = with_sections(base, **sections(i))
        paths.append(path := base_policy_path(cfg, seed_progress))
        nodes.append(SimNode(i, cfg, catalog, chain_id, ledger, path))
    held_out = (
        evaluation_set(catalog, exp.eval_questions, exp.eval_set) if exp.eval_questions else []
    )
    evals: list[dict[str, Any]] = []
    max_new_tokens = base.policy.max_new_tokens  # every node's: a variant changes its start only

    def evaluate(after: int) -> None:
        if held_out:
            policies = [n.policy for n in nodes]
            evals.append({"round": after, "greedy": greedy(policies, held_out, max_new_tokens)})

    evaluate(0)
    rounds: list[list[dict[str, Any]]] = [[] for _ in nodes]
    for r in range(1, exp.rounds + 1):
        batches = []
        for n in nodes:
            numbers, data = n.play(r)
            rounds[n.index].append(numbers)
            batches.append(data)
        for n in nodes:
            for producer, data in zip(nodes, batches, strict=True):
                if producer is not n:
                    took = n.receive(data, r, producer.address)
                    rounds[n.index][-1]["swarm_s"] += round(took, 4)
        if exp.eval_every and r % exp.eval_every == 0 and r != exp.rounds:
            evaluate(r)
        if progress:
            progress(r, exp.rounds)
    evaluate(exp.rounds)
    drawn = set().union(*(n.drawn for n in nodes))
    record: dict[str, Any] = {
        "swarm": "in-process",
        "cell": cell.model_dump(),
        "configuration": cell.configuration,
        "ledger": ledger,
        "first_round": 1,
        "last_round": exp.rounds,
        "nodes": [
            {
                "address": n.address,
                "policy": sections(n.index)["policy"],
                "steps": n.trainer.steps,
                "rounds": rounds[n.index],
            }
            for n in nodes
        ],
    }
    if held_out:
        record["held_out"] = held_out_record(exp.eval_set, held_out, drawn, paths, evals)
    record["wall_s"] = round(time.time() - began, 1)
    write_whole(cell_dir / RECORD, json.dumps(record, indent=1))
    return record
