"""Assembling a node from its config: account, ledger (checked), catalog (checked against the
ledger), store, and the policy to resume (last checkpoint, else the configured base model).

The training stack (torch, transformers) is imported only by the functions that load a policy,
so `sapo node register` and the devnet's query commands start in a fraction of a second."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from client.chain import Ledger, connect
from client.chain.errors import WrongChain
from client.chain.events import EventReader
from client.chain.families import short_family
from client.chain.keystore import load_account
from client.config import NodeConfig
from client.node.clock import SystemClock
from client.node.datadir import DataDir
from client.node.deployment import (
    Deployment,
    UnreadableDeployment,
    WrongDeployment,
    bind_data_dir,
    check_data_dir,
)
from client.node.eventlog import EventLog
from client.node.health import Health
from client.node.journal import Journal
from client.node.metadata import SEED_MODELS, node_metadata
from client.node.services import Services
from client.store import Sampling, open_store
from client.tasks import check_against_ledger, load_catalog

if TYPE_CHECKING:
    from client.node.node import Node

    # lazily, as above: torch
    from client.node.training import Trainer


class NodeConfigError(Exception):
    """The config cannot make a node; the message says what to set."""


def seed_spec(cfg: NodeConfig):
    """Returns the SeedSpec that [policy] names, or None when its model is not a seed policy."""
    if cfg.policy.model not in SEED_MODELS:
        return None
    catalog = cfg.tasks.catalog
    if "/" in catalog or catalog.endswith(".toml"):
        raise NodeConfigError(
            f"[tasks].catalog = {catalog!r} is a path, and a seed policy is pretrained on a named "
            "catalog (configs/tasks/<name>.toml, its name in the policy's cache directory): put "
            "the catalog there, or set [policy].model to a model directory"
        )
    try:
        return _seed_spec(cfg, catalog)
    except ValueError as exc:
        raise NodeConfigError(f"[policy].seed_heads: {exc}") from None


def _seed_spec(cfg: NodeConfig, catalog: str):
    # lazily: client.policy imports torch and transformers, which `sapo node register` and the
    # devnet's commands do without
    from client.policy import SeedSpec

    model = cfg.policy.model
    return SeedSpec.of(
        "test" if model.endswith("-test") else "small",
        cfg.policy.seed,
        catalog,
        entries=tuple(cfg.policy.seed_datasets),
        steps=cfg.policy.seed_steps,
        tagged=cfg.policy.seed_tagged,
        shared_tokenizer=cfg.policy.seed_shared_tokenizer,
        heads=cfg.policy.seed_heads,
        arch="llama" if model.startswith("seed-llama") else "qwen2",
    )


def base_policy_path(cfg: NodeConfig, progress=None, say=None) -> Path | str:
    """Returns the base model's path or name; builds the seed policy first if it is absent
    (`progress` gets the build's BuildProgress, or another process's build we wait for). With
    `[policy].base`, the base that bundle names: the configured model when it is that base, else
    fetched over IPFS (client.node.bases; `say` gets its progress lines)."""
    if cfg.policy.base is None:
        return _configured_model(cfg, progress)
    from client.node.bases import resolve_base
    from client.store.base import BaseError

    try:
        return resolve_base(cfg, lambda: _model_at_hand(cfg, progress), say)
    except BaseError as exc:
        raise NodeConfigError(f"[policy].base: {exc}") from None


def _model_at_hand(cfg: NodeConfig, progress=None) -> Path | str | None:
    """The configured model when this machine has it (a seed policy is built: its build is
    deterministic), else None."""
    model = _configured_model(cfg, progress)
    if seed_spec(cfg) is not None or Path(str(model)).is_dir():
        return model
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(model), local_files_only=True))
    except Exception:  # not in the Hugging Face cache: not at hand
        return None


def _configured_model(cfg: NodeConfig, progress=None) -> Path | str:
    spec = seed_spec(cfg)
    if spec is None:
        return cfg.policy.model
    # lazily, as above: torch
    from client.policy import ensure_seed_policy

    try:
        return ensure_seed_policy(Path(cfg.policy.cache_dir), spec, progress=progress)
    except ValueError as exc:  # an entry the catalog does not have
        raise NodeConfigError(f"[policy].seed_datasets: {exc}") from None


def node_family(cfg: NodeConfig, progress=None) -> str:
    """The model family a node of `cfg` registers in and is checked within (client.policy.family):
    its base's content id with an adapter, its architecture's id without. Loads the base (building
    the seed policy first if it is absent)."""
    # lazily, as above: torch
    from client.policy import load_policy
    from client.policy.family import family_id

    base = load_policy(
        base_policy_path(cfg, progress), device=cfg.policy.device, dtype=cfg.policy.dtype
    )
    return family_id(base.model, base.tokenizer, adapted=cfg.policy.adapter != "none")


def check_family(registered: str | None, runs: str, address: str, families) -> None:
    """Raises NodeConfigError when the family a node runs is not the one its address registered
    in, or one the ledger does not check: its batches would be checked by nodes that cannot run
    its model (or by nobody)."""
    if registered is not None and registered != runs:
        raise NodeConfigError(
            f"{address} is registered in model family {short_family(registered)}, but [policy] "
            f"runs family {short_family(runs)}: a family is fixed for an address's life, so run "
            "the model it registered with, or register another address (sapo wallet new; sapo "
            "node register)"
        )
    if runs not in families:
        checked = ", ".join(short_family(f) for f in families) or "none"
        raise NodeConfigError(
            f"[policy] runs model family {short_family(runs)}, which this ledger does not check "
            f"(it checks {checked}): nobody could check its batches; run one of those bases"
        )


def adapter_spec(cfg: NodeConfig):
    """The LoRA adapter [policy] asks for, or None when every weight is trained."""
    if cfg.policy.adapter == "none":
        return None
    # lazily, as above: torch
    from client.policy.adapter import AdapterSpec

    return AdapterSpec(
        rank=cfg.policy.lora_rank,
        alpha=cfg.policy.lora_alpha,
        targets=tuple(cfg.policy.lora_targets),
    )


def _training(spec) -> str:
    if spec is None:
        return 'every weight (adapter = "none")'
    return f"a LoRA adapter of rank {spec.rank}, alpha {spec.alpha} on {', '.join(spec.targets)}"


def signing_ledger(cfg: NodeConfig, password: str | None = None) -> Ledger:
    """Returns the configured ledger, signing with the node's keystore, checked on chain."""
    if not cfg.chain.rpc_url or not cfg.chain.ledger_address:
        raise NodeConfigError("set [chain].rpc_url and [chain].ledger_address to run a node")
    if cfg.chain.keystore is None:
        raise NodeConfigError(
            "set [chain].keystore to the node's encrypted keystore (create one: sapo wallet new)"
        )
    account = load_account(
        Path(cfg.chain.keystore), password=password, password_file=cfg.chain.password_file
    )
    ledger = Ledger(
        connect(cfg.chain.rpc_url, cfg.chain.request_timeout_s),
        cfg.chain.ledger_address,
        account=account,
        max_fee_gwei=cfg.chain.max_fee_gwei,
        priority_fee_gwei=cfg.chain.priority_fee_gwei,
        receipt_timeout_s=cfg.chain.receipt_timeout_s,
    )
    return ledger


def round_book(cfg: NodeConfig, ledger: Ledger):
    """The root lane's round book `[chain].round_book_address` names, checked to read this
    ledger, signing on the ledger's nonce sequence; None when unset."""
    if cfg.chain.round_book_address is None:
        return None
    from client.chain.book import RoundBook

    book = RoundBook(ledger.w3, cfg.chain.round_book_address, nonces_of=ledger.tx)
    try:
        book.check(ledger.address)
    except WrongChain as exc:
        raise NodeConfigError(f"[chain].round_book_address: {exc}") from None
    return book


def data_dir_deployment(cfg: NodeConfig, ledger: Ledger) -> Deployment:
    """Returns the deployment `ledger` (checked) is, once `[node].data_dir` is known to hold no
    other deployment's data (client.node.deployment); raises NodeConfigError naming both."""
    try:
        return check_data_dir(DataDir(cfg.node.data_dir), ledger, cfg.chain.ledger_deploy_block)
    except (WrongDeployment, UnreadableDeployment) as exc:
        raise NodeConfigError(str(exc)) from None


def check_node_data_dir(cfg: NodeConfig) -> None:
    """Raises NodeConfigError when `[node].data_dir` holds another deployment's data (and
    ChainError when the ledger cannot be checked): for a command that writes there before
    open_node (the TUI's log)."""
    ledger = Ledger(
        connect(str(cfg.chain.rpc_url), cfg.chain.request_timeout_s), str(cfg.chain.ledger_address)
    )
    ledger.check(cfg.chain.chain_id)
    data_dir_deployment(cfg, ledger)


def open_node(cfg: NodeConfig, *, password: str | None = None, progress=None, clock=None) -> Node:
    """Returns a ready node: every check that can fail is done before any round starts.
    `clock` (client.node.clock) defaults to the system clock; tests pass a WarpClock."""
    import torch

    # lazily, as above: the node and its stages, training and generation import torch
    from client.node.intake import Intake
    from client.node.node import Node
    from client.node.proving import Prover, Snapshots
    from client.node.publishing import Publisher
    from client.node.training import resume_policy
    from client.policy import Policy, adapt, load_policy, make_backend

    ledger = signing_ledger(cfg, password)
    params = ledger.check(cfg.chain.chain_id)
    data_dir = DataDir(cfg.node.data_dir)
    deployment = data_dir_deployment(cfg, ledger)  # before anything is written there
    catalog = load_catalog(cfg.tasks.catalog)
    check_against_ledger(catalog, params.catalog_digest)
    registration = ledger.node_info(ledger.account_address)
    if not registration.registered:
        raise NodeConfigError(
            f"{ledger.account_address} is not registered on ledger {ledger.address}: run "
            "`sapo node register --config …` first"
        )
    windows = params.submit_rounds + params.challenge_rounds
    if cfg.store.retain_rounds <= windows:
        raise NodeConfigError(
            f"[store].retain_rounds ({cfg.store.retain_rounds}) must exceed the ledger's "
            f"submission and challenge windows ({windows} rounds): peers fetch and attest a "
            "batch until they close, and a batch they cannot fetch earns no credit"
        )
    if cfg.store.retain_rounds <= cfg.sapo.lookback_rounds:
        raise NodeConfigError(
            f"[store].retain_rounds ({cfg.store.retain_rounds}) must exceed "
            f"[sapo].lookback_rounds ({cfg.sapo.lookback_rounds}): a node trains on its peers' "
            "items of that many rounds back, and forgets what is older than retain_rounds"
        )
    store = open_store(cfg.store)
    device, dtype = cfg.policy.device, cfg.policy.dtype
    if cfg.policy.cpu_threads:
        torch.set_num_threads(cfg.policy.cpu_threads)

    def make_optimizer(model) -> torch.optim.Optimizer:
        # an adapter's base is frozen: Adam keeps state for the adapter's parameters only
        trained = [p for p in model.parameters() if p.requires_grad]
        return torch.optim.Adam(trained, lr=cfg.train.learning_rate)

    events = EventLog(data_dir.events)

    def say(line: str) -> None:
        events.emit("node.phase", line)

    def load_base() -> Policy:
        announce = _building_phase(events, progress)
        return load_policy(base_policy_path(cfg, announce, say), device=device, dtype=dtype)

    wanted = adapter_spec(cfg)

    def load_start() -> Policy:
        """The policy a node without a checkpoint starts from: the base, with a fresh adapter
        when [policy].adapter asks for one."""
        return load_base() if wanted is None else adapt(load_base(), wanted)

    policy, optimizer, step = resume_policy(
        data_dir.path, make_optimizer, device, dtype, load_start
    )
    if policy.adapter != wanted:
        raise NodeConfigError(
            f"{data_dir.checkpoint} trains {_training(policy.adapter)}, but [policy] says "
            f"{_training(wanted)}: set [policy] as the checkpoint was made, or start a new "
            "[node].data_dir"
        )
    from client.policy.family import policy_family

    check_family(
        registration.family, policy_family(policy), ledger.account_address, params.families
    )
    from client.node.bases import share_base

    shared = share_base(cfg, store, policy, say)  # the family's next node fetches it from us
    trainer = make_trainer(cfg, policy, optimizer, step, load_base)
    services = Services(
        ledger,
        params,
        ledger.chain_id,
        Journal(data_dir.journal),
        events,
        Health(events),
        clock or SystemClock(),
    )
    sampling = Sampling.of(cfg.policy.temperature, cfg.policy.top_p, cfg.policy.max_new_tokens)
    snapshots = Snapshots(data_dir.weights)
    book = round_book(cfg, ledger)
    root = None
    if book is not None:  # our votes on its batches, and our submissions if [root_lane] says
        from client.node.publishing.rootlane import RootLane

        pubsub = None
        if cfg.root_lane.relay_votes:  # the loader made sure the store is an IPFS daemon
            from client.store.pubsub import PubSub

            # a publish that hangs holds the publisher's pass: not past 5 s
            pubsub = PubSub(cfg.store.ipfs_api, timeout_s=min(cfg.store.timeout_s, 5.0))
        root = RootLane(
            services,
            book,
            cfg.root_lane.submit,
            store,
            allow_private_peers=cfg.store.allow_private_peers,
            challenge_lists=cfg.root_lane.challenge_lists,
            max_challenges_per_day=cfg.root_lane.max_challenges_per_day,
            pubsub=pubsub,
        )
    publisher = Publisher(
        services,
        store,
        catalog,
        policy.descriptor(),
        sampling,
        snapshots,
        store_cfg=cfg.store,
        sapo=cfg.sapo,
        metadata=lambda peer: node_metadata(cfg, peer=peer, base=shared),
        reader=EventReader(ledger, chunk_blocks=cfg.chain.log_chunk_blocks),
        root=root,
    )
    reader = EventReader(
        ledger, chunk_blocks=cfg.chain.log_chunk_blocks, start_block=cfg.chain.ledger_deploy_block
    )
    # intake reads peers' batches through a store client of its own (it runs beside the
    # publisher's) and re-draws peers' completions on a copy of our model
    intake = Intake(
        services,
        open_store(cfg.store),
        catalog,
        publisher.wake,
        Prover(policy),
        reader=reader,
        sapo=cfg.sapo,
        store_cfg=cfg.store,
        spool=data_dir.spool,
        book=book,
    )
    bind_data_dir(data_dir, deployment)
    return Node(
        services,
        sapo=cfg.sapo,
        train=cfg.train,
        data_dir=data_dir,
        catalog=catalog,
        trainer=trainer,
        backend=make_backend(cfg.policy.backend, policy),
        sampling=sampling,
        snapshots=snapshots,
        publisher=publisher,
        intake=intake,
        inbox=_inbox(root),
    )


def _inbox(root):
    """Our checkers' relayed votes on our batches: with [root_lane].relay_votes, where our
    batches go to an aggregator."""
    if root is None or root.pubsub is None or not root.submit:
        return None
    from client.node.publishing.relay import VoteInbox

    return VoteInbox(root, root.pubsub)


def _building_phase(events: EventLog, progress, every_s: float = 5.0):
    """Returns a build-progress callback that also tells the node's event log (the TUI shows it
    as the node's phase) at most every `every_s` seconds, and passes each update to `progress`."""
    last = {"at": 0.0, "stage": None}

    def show(p) -> None:
        now = time.monotonic()
        if p.stage != last["stage"] or now - last["at"] >= every_s:
            last.update(at=now, stage=p.stage)
            who = f"waiting for pid {p.builder_pid}'s build of" if p.waiting else "building"
            events.emit(
                "node.phase",
                f"{who} the seed policy {p.policy}: {p.describe()}",
                phase=f"{who} the seed policy: {p.describe()}",
                build={"step": p.step, "steps": p.steps, "stage": p.stage},
            )
        if progress:
            progress(p)

    return show


def make_trainer(cfg: NodeConfig, policy, optimizer, step: int, load_base) -> Trainer:
    """Returns the node's trainer as [train] and [policy] say; `load_base()` loads the base
    model again, as the frozen reference of the KL term when kl_coef > 0 (as in TRL)."""
    from client.node.training import Trainer

    return Trainer(
        policy,
        optimizer,
        cfg.train,
        max_completion_tokens=cfg.policy.max_new_tokens,
        reference=load_base() if cfg.train.kl_coef > 0 else None,
        steps=step,
        correction=cfg.sapo.external_correction,
        tis_cap=cfg.sapo.tis_cap,
        offpolicy_filter=cfg.sapo.offpolicy_filter,
    )
