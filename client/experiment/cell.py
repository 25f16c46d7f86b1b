"""Playing one configuration with one seed: a fresh devnet, N real node processes, R rounds.

The cell's directory keeps everything: each node's journal, events and checkpoint
(`node-<i>/`), the ledger's final state (`ledger-state.json`, anvil's dump: reload it with
`anvil --load-state`), and `cell.json`, the record the report is made from, written last (its
presence is what makes a cell done; an interrupted cell is played again from scratch).

Seeds: a cell's seed decides the ledger's address (the deployer sends `seed` empty transactions
first), and with it every task seed and sampling seed of every node; configurations played with
the same seed therefore draw the same questions. Rounds are scored from the first round that
opens after every node has started; rounds a node played before that are warm-up. Each chain
round holds one local round ([sapo].max_local_rounds = 1): every split generates the same
completions and takes the same steps per round, as in the paper's protocol.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from client.chain import Ledger, connect
from client.chain.events import EventReader
from client.config import NodeConfig, load_config, with_sections
from client.devnet import Anvil, IpfsDaemon, rpc_call
from client.devnet.accounts import dev_account
from client.devnet.process import ServerProcess, start_together, stop_together
from client.devnet.provision import Provisioned, node_process, provision
from client.experiment.config import REPO, Cell, ExperimentConfig
from client.experiment.heldout import (
    checkpoint_evaluation,
    drawable,
    evaluation_set,
    greedy,
    held_out_record,
)
from client.node.assemble import base_policy_path
from client.node.eventlog import Span
from client.node.journal.states import RoundPhase
from client.node.view.journal import NodeView
from client.policy import load_policy
from client.policy.policy import tokenizer_fingerprint
from client.tasks import SCORE_SCALE, load_catalog

RECORD = "cell.json"


def write_whole(path: Path, text: str) -> None:
    """Writes a file that marks something done: temp file, fsync, rename, so that a crash
    leaves either no file or the whole one, never a half-written marker."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class CellFailed(Exception):
    """A cell could not be played (a part died, nodes did not finish); the message says which."""


def base_config(exp: ExperimentConfig, cell: Cell, cache_dir: Path) -> NodeConfig:
    """The nodes' config for a cell: configs/devnet.toml, the experiment's scale and overrides."""
    cfg = load_config(REPO / "configs" / "devnet.toml")
    if exp.round_length_s is not None:  # a devnet's; the in-process swarm has no chain clock
        windows = cfg.ledger.model_copy(update={"round_length_s": exp.round_length_s})
        cfg = with_sections(
            cfg,
            ledger={
                "round_length_s": exp.round_length_s,
                "unbonding_period_s": windows.least_unbonding_s(),
            },
        )
    cfg = with_sections(
        cfg,
        sapo={
            "local_items": cell.local,
            "external_items": cell.external,
            "completions": exp.completions,
            "max_local_rounds": 1,
        },
        store={"backend": exp.store},
        policy={"cache_dir": cache_dir},
        devnet={"nodes": exp.nodes},
    )
    cfg = with_sections(cfg, **exp.node) if exp.node else cfg
    return with_sections(cfg, sapo={"external_correction": cell.correction})


def node_sections(cell: Cell, base: NodeConfig) -> Callable[[int], dict[str, dict]]:
    """How node i's starting policy differs from the others' in the cell's variant."""
    entries = [e.id for e in load_catalog(base.tasks.catalog).entries]

    def sections(i: int) -> dict[str, dict]:
        if cell.variant == "seeds":
            return {"policy": {"seed": base.policy.seed + i}}
        if cell.variant == "specialties":
            pair = sorted({entries[(2 * i) % len(entries)], entries[(2 * i + 1) % len(entries)]})
            return {"policy": {"seed": base.policy.seed, "seed_datasets": pair}}
        return {"policy": {"seed": base.policy.seed}}

    return sections


def play_cell(
    exp: ExperimentConfig,
    cell: Cell,
    cell_dir: Path,
    cache_dir: Path,
    progress: Callable[[int, int], None] | None = None,
    seed_progress: Callable | None = None,
) -> dict[str, Any]:
    """Plays the cell in `cell_dir` (emptied first); returns its record, also in cell.json.
    `progress(rounds done, rounds)` follows the cell; `seed_progress` gets a seed policy's
    BuildProgress while one is built first."""
    if cell_dir.exists():
        shutil.rmtree(cell_dir)
    cell_dir.mkdir(parents=True)
    base = base_config(exp, cell, cache_dir)
    sections = node_sections(cell, base)
    # build every starting policy before the clock starts
    starts = [
        base_policy_path(with_sections(base, **sections(i)), seed_progress)
        for i in range(exp.nodes)
    ]
    if problem := mixed_families(starts):
        raise CellFailed(f"{cell.key}: {problem}")
    anvil = Anvil(
        cell_dir, chain_id=base.devnet.chain_id, accounts=max(10, exp.nodes + 2), block_time_s=1
    )
    ipfs = IpfsDaemon(cell_dir / "ipfs") if exp.store == "ipfs" else None
    parts = [p for p in (anvil, ipfs) if p is not None]
    nodes: list[ServerProcess] = []
    began = time.time()
    try:
        for part in parts:
            part.start()
        _bump_nonce(anvil.url, cell.seed)
        swarm = provision(
            base,
            cell_dir,
            rpc_url=anvil.url,
            chain_id=anvil.chain_id,
            ipfs_api=ipfs.api if ipfs else None,
            nodes=exp.nodes,
            node_sections=sections,
        )
        nodes += [node_process(f"node-{i}", path) for i, path in enumerate(swarm.node_configs)]
        start_together(nodes)
        ledger = Ledger(connect(anvil.url), swarm.ledger)
        params = ledger.params()
        first = params.round_at(time.time()) + 1
        last = first + exp.rounds - 1
        deadline = params.genesis + (last + 3) * params.round_length
        dirs = [p.parent for p in swarm.node_configs]
        while True:
            done = min(len(_trained(d, first, last)) for d in dirs)
            if progress:
                progress(done, exp.rounds)
            if done >= exp.rounds:
                break
            dead = [n.name for n in nodes if not n.running] + [
                type(p).__name__ for p in parts if not p.running
            ]
            if dead:
                raise CellFailed(f"{cell.key}: {', '.join(dead)} exited; logs in {cell_dir}")
            if time.time() > deadline:
                raise CellFailed(
                    f"{cell.key}: the nodes did not train rounds {first}..{last} in time "
                    f"(round length {exp.round_length_s} s too short for {exp.nodes} nodes on "
                    "this machine? see node-*/node.log)"
                )
            time.sleep(1)
        stop_together(nodes, timeout_s=60)  # gracefully: checkpoint and flush, as `devnet down`
        (cell_dir / "ledger-state.json").write_text(
            json.dumps(rpc_call(anvil.url, "anvil_dumpState", timeout_s=60))
        )
        stopped = params.round_at(time.time()) + 1  # no node drew a task of a later round
        record = collect(exp, cell, swarm.addresses, dirs, ledger, swarm.deploy_block, first, last)
        for i, node in enumerate(record["nodes"]):  # where each node started from
            node["policy"] = sections(i)["policy"]
    finally:
        stop_together(nodes, timeout_s=60)
        for part in reversed(parts):
            part.stop()
    if exp.eval_questions:  # with the cores to itself: the swarm has stopped
        record["held_out"] = held_out(exp, base, sections, swarm, dirs, stopped)
    record["wall_s"] = round(time.time() - began, 1)
    write_whole(cell_dir / RECORD, json.dumps(record, indent=1))
    return record


def held_out(
    exp: ExperimentConfig,
    base: NodeConfig,
    sections: Callable[[int], dict[str, dict]],
    swarm: Provisioned,
    dirs: list[Path],
    stopped: int,
) -> dict[str, Any]:
    """The cell's held-out evaluation: the nodes' starting policies (round 0) and the checkpoints
    they saved when they stopped (after `exp.rounds` scored rounds, give or take the round or two
    a faster node played while the slowest finished: each checkpoint's step count is kept)."""
    catalog = load_catalog(base.tasks.catalog)
    tasks = evaluation_set(catalog, exp.eval_questions, exp.eval_set)
    starts = [base_policy_path(with_sections(base, **sections(i))) for i in range(exp.nodes)]
    tokens = base.policy.max_new_tokens
    first = greedy([load_policy(p) for p in starts], tasks, tokens)
    try:
        end = checkpoint_evaluation(dirs, tokens, tasks)
    except FileNotFoundError as exc:
        raise CellFailed(f"{exc} (see its node.log)") from None
    drawn = drawable(
        catalog,
        base.devnet.chain_id,
        swarm.ledger,
        swarm.addresses,
        range(stopped + 1),
        base.sapo.max_local_rounds,
        base.sapo.local_items,
    )
    evaluations = [{"round": 0, "greedy": first}, {"round": exp.rounds, **end}]
    return held_out_record(exp.eval_set, tasks, drawn, starts, evaluations)


def mixed_families(paths: list) -> str | None:
    """Why the starting policies at `paths` cannot share a devnet (None when they can): a
    node's drawn checkers re-draw its completions on their own model
    (docs/proof-of-generation.md), so every node must run one model family: the same tokenizer,
    token for token.
    Seed policies pretrained on other corpora (the `seeds` and `specialties` variants) each
    train their own BPE, of one size but other tokens; on a devnet every checker would dispute
    every peer's honest batch, and nobody would learn from anybody."""
    from transformers import AutoTokenizer

    prints = [
        tokenizer_fingerprint(AutoTokenizer.from_pretrained(str(p), local_files_only=True))
        for p in paths
    ]
    if len(set(prints)) == 1:
        return None
    return (
        f"the nodes' starting policies have {len(set(prints))} different tokenizers "
        f"({', '.join(prints)}): their checkers would dispute each other's honest batches "
        "(proof of generation re-draws on the checker's own model family). Play this variant "
        'with swarm = "in-process" (no proofs), or start the nodes from one tokenizer'
    )


def _bump_nonce(url: str, count: int) -> None:
    """Sends `count` empty transactions from the deployer: its next contract (the ledger) then
    lands at another address, so every task seed of the cell differs from other seeds'."""
    deployer = dev_account(0).address
    for _ in range(count):
        rpc_call(url, "eth_sendTransaction", [{"from": deployer, "to": deployer, "value": "0x0"}])
    while count and int(rpc_call(url, "eth_getTransactionCount", [deployer, "latest"]), 16) < count:
        time.sleep(0.2)


def _trained(node_dir: Path, first: int, last: int) -> list[int]:
    """The chain rounds first..last whose batch the node sealed (it moved on from them)."""
    view = NodeView(node_dir)
    try:
        return [
            r.round
            for r in view.rounds()
            if first <= r.round <= last and r.local_rounds and r.phase != RoundPhase.COLLECTING
        ]
    finally:
        view.close()


def collect(
    exp: ExperimentConfig,
    cell: Cell,
    addresses: list[str],
    dirs: list[Path],
    ledger: Ledger,
    deploy_block: int,
    first: int,
    last: int,
) -> dict[str, Any]:
    """The cell's record: per node and round, the journal's numbers and the ledger's."""
    reader = EventReader(ledger, start_block=deploy_block)
    on_chain: dict[tuple[str, int], float] = {}
    for event in reader.read(["Submitted"]):
        a = event.args
        on_chain[(a["node"].lower(), a["round"])] = a["score"] / SCORE_SCALE / a["rollouts"]
    params = ledger.params()
    nodes = []
    for address, node_dir in zip(addresses, dirs, strict=True):
        view = NodeView(node_dir)
        metrics = view.round_rewards(first, last)
        by_entry = view.reward_by_entry(first, last)
        rounds = []
        for r in range(first, last + 1):
            m = metrics.get(r, {})
            start = params.round_start(r)
            blocked = view.shares(start, start + params.round_length).stage_s
            rounds.append(
                {
                    "round": r,
                    "reward_local": m.get("reward_local"),
                    "reward_on_chain": on_chain.get((address.lower(), r)),
                    "reward_by_entry": by_entry.get(r),
                    "reward_external": m.get("reward_external"),
                    "local_items": m.get("local_items"),
                    "external_items": m.get("external_items"),
                    "external_shortfall": m.get("external_shortfall"),
                    "compute_s": m.get("seconds", 0.0),
                    # the compute stage's waits on chain and IPFS (the I/O itself runs beside it)
                    "swarm_s": blocked.get(str(Span.BLOCKED), 0.0),
                }
            )
        view.close()
        # relative to the cell's directory: the record moves with it and names no machine's paths
        nodes.append({"address": address, "data_dir": node_dir.name, "rounds": rounds})
    return {
        "cell": cell.model_dump(),
        "configuration": cell.configuration,
        "ledger": ledger.address,
        "first_round": first,
        "last_round": last,
        "nodes": nodes,
    }
