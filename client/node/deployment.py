"""Which ledger deployment a node's data dir belongs to, and the refusal to mix two.

A journal's rounds, its outbox of votes and submissions, its snapshots and its spool are facts
about one deployment of the SwarmLedger on one chain. A chain reset or a new deployment at the
same address (anvil's first deploy is always 0x5FbD…0aa3) starts again at round 0, and a node
that resumed the old journal there would find every round "already sealed" and submit nothing
until the new chain passed the old one's last round. So a data dir records its deployment in
`deployment.json` the first time a node starts in it, and a node refuses to start in a data dir
of another deployment, before it writes anything there.

A deployment is named by what no redeployment keeps: the chain id, the ledger's address, the
ledger's genesis (the timestamp of its round 0, set when it was deployed) and the hash of one
block at or before the deployment (`[chain].ledger_deploy_block`, the chain's genesis block when
unset), which a new chain never repeats.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from client.chain import Ledger
from client.node.datadir import DataDir
from client.node.journal import Journal


class Deployment(BaseModel):
    """One deployment of the ledger, as `deployment.json` holds it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chain_id: int = Field(gt=0)
    ledger: str = Field(pattern=r"^0x[0-9a-fA-F]{40}$")
    genesis: int = Field(ge=0)  # the ledger's round 0 (unix seconds), fixed at deployment
    block: int = Field(ge=0)
    block_hash: str | None = Field(pattern=r"^0x[0-9a-f]{64}$")  # that block's (None: no such)

    def describe(self) -> str:
        block = f"{self.block_hash[:10]}…" if self.block_hash else "not mined"
        return (
            f"ledger {self.ledger} on chain {self.chain_id} (round 0 at {self.genesis}, block "
            f"{self.block} {block})"
        )

    def same(self, other: Deployment) -> bool:
        def key(d: Deployment) -> tuple:
            return d.chain_id, d.ledger.lower(), d.genesis, d.block, d.block_hash

        return key(self) == key(other)


class WrongDeployment(ValueError):
    """The data dir holds a node's data of another deployment (the message names both)."""


class UnreadableDeployment(ValueError):
    """The data dir's deployment.json cannot be read (the message says what to do)."""


def deployment_of(ledger: Ledger, block: int) -> Deployment:
    """Returns the deployment `ledger` (checked: Ledger.check) is, as its chain answers, named
    at `block` (its block_hash None when the chain has no such block)."""
    return Deployment(
        chain_id=ledger.tx.rpc(lambda: ledger.w3.eth.chain_id, "eth_chainId"),
        ledger=ledger.address,
        genesis=ledger.params().genesis,
        block=block,
        block_hash=ledger.block_hash(block),
    )


def recorded(data_dir: DataDir) -> Deployment | None:
    """The deployment the data dir was bound to, or None when none was recorded."""
    path = data_dir.deployment
    try:
        return Deployment.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else exc.errors()[0]["msg"]
        raise UnreadableDeployment(
            f"{path} cannot be read ({why}): it names the deployment this data dir's journal "
            "belongs to; restore it, or start the node on a new [node].data_dir"
        ) from None


def check_data_dir(data_dir: DataDir, ledger: Ledger, deploy_block: int) -> Deployment:
    """Returns the deployment `ledger` (checked: Ledger.check) is, to bind the data dir to once
    the node starts; raises WrongDeployment when the data dir holds data of another one, and
    changes nothing in it. A recorded deployment is compared at its own block (a config that
    corrects `[chain].ledger_deploy_block` later names the same deployment). A data dir from
    before deployments were recorded (a journal, no deployment.json) is taken as this
    deployment's unless its journal holds rounds this ledger has not reached, which only
    another deployment's could."""
    bound = recorded(data_dir)
    if bound is not None:
        here = deployment_of(ledger, bound.block)
        if bound.same(here):
            return here
        raise WrongDeployment(
            f"{data_dir.path} holds a node's data of {bound.describe()}, but the config names "
            f"{here.describe()}: another deployment; start this node on a new "
            "[node].data_dir, or move that one aside (nothing in it was changed)"
        )
    here = deployment_of(ledger, deploy_block)
    if here.block_hash is None:
        raise WrongDeployment(
            f"[chain].ledger_deploy_block = {deploy_block}, but the chain has no block "
            f"{deploy_block} yet: set it to the block the ledger {ledger.address} was deployed in"
        )
    if not data_dir.journal.is_file():
        return here
    try:
        last = Journal.last_round_in(data_dir.journal)
    except sqlite3.Error as exc:
        raise WrongDeployment(
            f"{data_dir.journal} cannot be read ({exc}): it is not a journal this node can "
            "resume; start this node on a new [node].data_dir, or move that one aside"
        ) from None
    current = ledger.current_round()
    if last is not None and last > current:
        raise WrongDeployment(
            f"{data_dir.path} holds a journal up to round {last}, but {here.describe()} is at "
            f"round {current}: the journal is of another deployment; start this node on a new "
            "[node].data_dir, or move that one aside (nothing in it was changed)"
        )
    return here


def bind_data_dir(data_dir: DataDir, here: Deployment) -> None:
    """Records `here` as the data dir's deployment unless one is recorded (written whole:
    temp file, rename)."""
    path = data_dir.deployment
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(f"{path}.tmp")
    tmp.write_text(here.model_dump_json(indent=1) + "\n")
    os.replace(tmp, path)
