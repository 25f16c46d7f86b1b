"""The preflight an operator runs first (`sapo doctor`): each thing a node needs, checked for real,
with the fix when it fails.

Checks, in order (a check whose premise failed is skipped and says which): the RPC answers with
the configured chain id; the ledger at the address is this client's SwarmLedger; the data dir holds
no other deployment's journal; the keystore
exists, is private (mode 0600) and decrypts; the node's stake is at least the minimum; its model
family has enough other staked nodes to fill a quorum (and no address holds more than a third of
its stake: a warning); the IPFS
API answers and its swarm listens on an address peers can dial; at least one registered peer's
IPFS node can be dialled; this machine's clock agrees with the chain's; the disk holds what
`[store].retain_rounds` keeps; the policy loads. Nothing is written anywhere.
"""

from __future__ import annotations

import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from client.chain import ChainError, Ledger, connect
from client.chain.events import EventReader
from client.chain.keystore import KeystoreError, load_account
from client.chain.ledger_events import Registered
from client.config import NodeConfig
from client.config.models import format_ether
from client.node.assemble import seed_spec
from client.node.datadir import DataDir
from client.node.deployment import UnreadableDeployment, WrongDeployment, check_data_dir
from client.store import IpfsStore, StoreError, open_store
from client.store.peers import ipfs_addresses, peer_addresses

# Our clock may run ahead of the latest block by the block interval (seconds on L2s and anvil),
# plus a few seconds of drift; more than this shifts our rounds against the ledger's.
MAX_CLOCK_SKEW_S = 20.0


@dataclass(frozen=True)
class Check:
    """One line of the preflight: ok True / False, or None when skipped."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""
    warning: bool = False  # ok, but the operator should know (the detail says what)

    def as_dict(self) -> dict:
        return asdict(self)


class Preflight:
    """Runs the checks in order; later checks use what earlier ones found."""

    def __init__(self, cfg: NodeConfig, *, load_model: bool = True):
        self.cfg = cfg
        self.load_model = load_model
        self.checks: list[Check] = []
        self.w3 = self.ledger = self.params = self.account = self.store = None
        self.info = None  # our node's record, as the stake check read it

    def run(self) -> list[Check]:
        steps: list[tuple[str, Callable[[], Check]]] = [
            ("rpc", self.rpc),
            ("ledger", self.ledger_code),
            ("data dir", self.data_dir),
            ("keystore", self.keystore),
            ("stake", self.stake),
            ("family", self.family),
            ("ipfs", self.ipfs),
            ("peers", self.peers),
            ("clock", self.clock),
            ("disk", self.disk),
            ("model", self.model),
        ]
        for name, step in steps:
            try:
                self.checks.append(step())
            except Exception as exc:  # a check must report, never crash the preflight
                self.checks.append(Check(name, False, f"{type(exc).__name__}: {exc}"[:300]))
        return self.checks

    def _ok(self, name: str) -> bool:
        return any(c.name == name and c.ok for c in self.checks)

    # ------------------------------------------------------------------------------ checks

    def rpc(self) -> Check:

        chain = self.cfg.chain
        if not chain.rpc_url:
            return Check("rpc", False, "no [chain].rpc_url", "set [chain].rpc_url")
        try:
            self.w3 = connect(chain.rpc_url, chain.request_timeout_s)
            chain_id = self.w3.eth.chain_id
        except (ChainError, OSError, ValueError) as exc:
            return Check(
                "rpc",
                False,
                f"{chain.rpc_url}: {exc}"[:300],
                "start the node's RPC endpoint or fix [chain].rpc_url",
            )
        if chain.chain_id and chain_id != chain.chain_id:
            return Check(
                "rpc",
                False,
                f"{chain.rpc_url} serves chain {chain_id}, the config names {chain.chain_id}",
                "point [chain].rpc_url at the right network or fix [chain].chain_id",
            )
        return Check("rpc", True, f"{chain.rpc_url}: chain {chain_id}")

    def ledger_code(self) -> Check:

        if not self._ok("rpc"):
            return Check("ledger", None, "skipped: the RPC did not answer")
        address = self.cfg.chain.ledger_address
        if not address:
            return Check("ledger", False, "no [chain].ledger_address", "set it (sapo chain info)")
        try:
            self.ledger = Ledger(self.w3, address)
            self.params = self.ledger.check(self.cfg.chain.chain_id or None)
        except ChainError as exc:
            return Check("ledger", False, str(exc), "fix [chain].ledger_address")
        return Check(
            "ledger",
            True,
            f"SwarmLedger at {address}: {self.params.round_length}-s rounds, window "
            f"{self.params.submit_rounds}+{self.params.challenge_rounds} rounds",
        )

    def data_dir(self) -> Check:
        """Whether [node].data_dir holds no other deployment's data (client.node.deployment)."""
        if not self._ok("ledger"):
            return Check("data dir", None, "skipped: no ledger to compare with")
        data_dir = DataDir(self.cfg.node.data_dir)
        try:
            here = check_data_dir(data_dir, self.ledger, self.cfg.chain.ledger_deploy_block)
        except (WrongDeployment, UnreadableDeployment) as exc:
            return Check("data dir", False, str(exc), "start the node on a new [node].data_dir")
        bound = "bound to" if data_dir.deployment.is_file() else "new; will be bound to"
        return Check("data dir", True, f"{data_dir.path}: {bound} {here.describe()}")

    def keystore(self) -> Check:

        path = self.cfg.chain.keystore
        if path is None:
            return Check("keystore", False, "no [chain].keystore", "create one: sapo wallet new")
        path = Path(path)
        if not path.is_file():
            return Check("keystore", False, f"{path} not found", "sapo wallet new, or fix the path")
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            return Check(
                "keystore",
                False,
                f"{path} is readable by others (mode {mode:o})",
                f"chmod 600 {path}",
            )
        try:
            self.account = load_account(path, password_file=self.cfg.chain.password_file)
        except KeystoreError as exc:
            return Check("keystore", False, str(exc), "set SAPO_KEYSTORE_PASSWORD or password_file")
        return Check("keystore", True, f"{path} (0600) decrypts to {self.account.address}")

    def stake(self) -> Check:

        if self.ledger is None or self.account is None:
            return Check("stake", None, "skipped: needs the ledger and the keystore")
        info = self.info = self.ledger.node_info(self.account.address)
        if not info.registered:
            return Check(
                "stake",
                False,
                f"{self.account.address} is not registered",
                "sapo node register --config FILE",
            )
        if info.active_stake < self.params.min_stake:
            return Check(
                "stake",
                False,
                f"active stake {format_ether(info.active_stake)} < minimum "
                f"{format_ether(self.params.min_stake)}",
                "sapo stake add AMOUNT --config FILE",
            )
        return Check("stake", True, f"{format_ether(info.active_stake)} active")

    def family(self) -> Check:
        """Whether this node's model family can check its batches: enough other staked nodes of
        the family for the quorum, and no address above a third of the family's stake."""
        from client.chain.families import family_standing, short_family

        if not self._ok("stake"):
            return Check("family", None, "skipped: needs a registered, staked node")
        me, family = self.account.address, self.info.family
        standing = family_standing(self.ledger, family)
        problems = standing.problems(me, self.params.quorum)
        others = standing.checkers_for(me)
        detail = (
            f"model family {short_family(family)}: {others} other staked node(s), "
            f"{format_ether(standing.stake)} staked"
        )
        if not standing.can_credit(me, self.params.quorum):
            return Check(
                "family",
                False,
                "; ".join(problems),
                "bring more nodes of this base, or run a base that more nodes run (`sapo chain "
                "info` lists the ledger's families) from another address",
            )
        if problems:
            return Check("family", True, f"{detail}; warning: {problems[0]}", warning=True)
        return Check("family", True, detail)

    def ipfs(self) -> Check:

        if self.cfg.store.backend != "ipfs":
            return Check("ipfs", None, "skipped: [store].backend is local (no peers can fetch)")
        store = open_store(self.cfg.store)
        if not isinstance(store, IpfsStore):  # backend "ipfs" opens one; say so if not
            return Check("ipfs", False, f"[store] opened a {store.name} store, not IPFS")
        self.store = store
        try:
            me = self.store.peer()
        except StoreError as exc:
            return Check("ipfs", False, str(exc), "start kubo (`ipfs daemon`) or fix ipfs_api")
        private = self.cfg.store.allow_private_peers
        found = ipfs_addresses(me, allow_private=private)
        if not found.dialable:
            return Check(
                "ipfs",
                False,
                f"peer {me['id'][:16]}…: no swarm address peers can dial ({found.reason})",
                "listen on a public TCP address (kubo: Addresses.Swarm, Addresses.Announce) "
                "and open that port",
            )
        return Check(
            "ipfs", True, f"peer {me['id'][:16]}… dialable at {', '.join(me['addresses'][:3])}"
        )

    def peers(self) -> Check:
        if self.ledger is None or not self._ok("ipfs"):
            return Check("peers", None, "skipped: needs the ledger and the IPFS node")
        me = self.account.address.lower() if self.account else ""
        nodes = {
            e.node
            for e in EventReader(
                self.ledger,
                chunk_blocks=self.cfg.chain.log_chunk_blocks,
                start_block=self.cfg.chain.ledger_deploy_block,
            ).events(Registered)
        } - {me}
        if not nodes:
            return Check("peers", None, "no other node is registered yet")
        tried = 0
        for node in sorted(nodes)[:16]:
            found = peer_addresses(
                self.ledger.node_info(node).metadata,
                allow_private=self.cfg.store.allow_private_peers,
            )
            if not found.dialable:
                continue
            tried += 1
            dialled, _ = self.store.connect(
                list(found.dialable[:3]), self.cfg.store.connect_timeout_s
            )
            if dialled:
                return Check("peers", True, f"dialled {node[:10]}… at {dialled.split('/p2p/')[0]}")
        return Check(
            "peers",
            False,
            f"none of {tried} registered peer(s) with dialable addresses answered "
            f"({len(nodes)} registered)",
            "check outbound TCP to the swarm ports; their operators may be down",
        )

    def clock(self) -> Check:
        if self.w3 is None or not self._ok("rpc"):
            return Check("clock", None, "skipped: the RPC did not answer")
        block = self.w3.eth.get_block("latest")
        skew = time.time() - float(block["timestamp"])
        if abs(skew) > MAX_CLOCK_SKEW_S:
            return Check(
                "clock",
                False,
                f"this clock is {skew:+.0f} s from the chain's latest block",
                "sync this machine's clock (NTP: timedatectl set-ntp true)",
            )
        return Check("clock", True, f"{skew:+.1f} s from the latest block's time")

    def disk(self) -> Check:
        store = self.cfg.store
        need = store.retain_rounds * store.max_batch_bytes * (1 + self.cfg.sapo.max_fetch_per_round)
        where = Path(self.cfg.node.data_dir)
        probe = (
            where if where.exists() else next((p for p in where.parents if p.exists()), Path("/"))
        )
        free = shutil.disk_usage(probe).free
        detail = (
            f"{free / 2**30:.1f} GiB free at {probe}; retain_rounds {store.retain_rounds} keeps "
            f"at most {need / 2**30:.2f} GiB of batches (ours and fetched)"
        )
        if free < need:
            return Check("disk", False, detail, "free space or lower [store].retain_rounds")
        return Check("disk", True, detail)

    def model(self) -> Check:
        if not self.load_model:
            return Check("model", None, "skipped (--no-model)")
        # lazily: the model check alone loads torch and transformers (the TUI's preflight runs the
        # others first)
        from client.policy import PolicyError, load_policy, seed_policy_dir

        spec = seed_spec(self.cfg)
        source: Path | str = self.cfg.policy.model
        if spec is not None:
            source = seed_policy_dir(Path(self.cfg.policy.cache_dir), spec)
            if not (source / "config.json").is_file():
                return Check(
                    "model",
                    False,
                    f"the seed policy is not built ({source})",
                    "sapo policy seed --config FILE (a few minutes on a CPU)",
                )
        if self.cfg.policy.base is not None:
            return self.named_base(source)
        try:
            policy = load_policy(source, device=self.cfg.policy.device, dtype="float32")
        except PolicyError as exc:
            return Check("model", False, str(exc), "fix [policy].model")
        return Check(
            "model", True, f"{source}: {policy.parameters:,} parameters on {policy.device}"
        )

    def named_base(self, source: Path | str) -> Check:
        """[policy].base: the base is cached, or the configured model is it, or nodes of the
        ledger name it and the node fetches it at start (which this check never does)."""
        from client.node.bases import cached_base, holders
        from client.policy import PolicyError, load_policy
        from client.policy.base import bundle_of
        from client.store.base import WEIGHTS_FILE, BaseError

        wanted = str(self.cfg.policy.base)
        cached = cached_base(self.cfg, wanted)
        if (cached / WEIGHTS_FILE).is_file():
            source = cached
        try:
            policy = load_policy(source, device=self.cfg.policy.device, dtype="float32")
            found = bundle_of(policy).id()
        except (PolicyError, BaseError) as exc:
            found, why = None, f"{source} does not load ({str(exc)[:120]})"
        if found == wanted:
            return Check(
                "model",
                True,
                f"{source}: base {wanted[:12]}…, {policy.parameters:,} parameters on "
                f"{policy.device}",
            )
        if found is not None:
            why = f"{source} is base bundle {found[:12]}…"
        named = holders(self.cfg, wanted)
        fix = "set [policy].model to a local copy of that base, or [policy].base to a bundle "
        fix += "your family's nodes share (sapo policy id --bundle)"
        if not named:
            who = "no registered node names it" if named == [] else "the ledger cannot be asked"
            return Check("model", False, f"{why}; [policy].base {wanted[:12]}…: {who}", fix)
        return Check(
            "model",
            True,
            f"{why}: the node fetches [policy].base {wanted[:12]}… over IPFS at start, from the "
            f"{len(named)} registered node(s) that name it",
            warning=True,
        )


def preflight(cfg: NodeConfig, *, load_model: bool = True) -> list[Check]:
    """Runs every check (see the module doc) and returns them in order."""
    return Preflight(cfg, load_model=load_model).run()
