"""The node's configuration: one pydantic model per TOML section, every key typed and bounded.

Unknown keys are refused everywhere (a typo must never silently fall back to a default). Paths
are resolved by the loader (relative to the file that names them), so every consumer sees
absolute paths. Amounts of ether accept what `cast` users write: an integer number of wei, or a
string with a unit ("1 ether", "0.5 ether", "20 gwei").

(Over 400 lines, on purpose: it is the whole config file's schema, every key with its bounds and
description, which `sapo config` and the docs read from here.)
"""

from __future__ import annotations

import ipaddress
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from client.config.roles import expand
from client.units import format_score  # noqa: F401 - re-exported for the CLI

_UNITS = {"wei": 0, "gwei": 9, "ether": 18, "eth": 18}


def parse_wei(value: object) -> int:
    """Returns wei from an int, a digit string, or "<number> <unit>" (wei, gwei, ether)."""
    if isinstance(value, bool):
        raise ValueError("expected an amount such as 1000000000000000000 or '1 ether'")
    if isinstance(value, int):
        amount = value
    elif isinstance(value, str):
        text = value.strip().lower().replace("_", "")
        unit = next((u for u in sorted(_UNITS, key=len, reverse=True) if text.endswith(u)), "wei")
        number = text[: len(text) - len(unit)].strip() if text.endswith(unit) else text
        try:
            scaled = Decimal(number) * (Decimal(10) ** _UNITS[unit])
        except InvalidOperation:
            raise ValueError(
                f"expected an amount such as 1000000000000000000 or '1 ether', got {value!r}"
            ) from None
        if scaled != scaled.to_integral_value():
            raise ValueError(f"{value!r} is not a whole number of wei")
        amount = int(scaled)
    else:
        raise ValueError("expected an amount such as 1000000000000000000 or '1 ether'")
    if amount < 0:
        raise ValueError("an amount cannot be negative")
    return amount


def format_ether(wei: int) -> str:
    """Returns wei as a short ether figure for people ('2.5 ETH')."""
    text = f"{Decimal(wei) / Decimal(10**18):.6f}".rstrip("0").rstrip(".")
    return f"{text} ETH"


Wei = Annotated[int, BeforeValidator(parse_wei)]
Bps = Annotated[int, Field(ge=0, le=10_000, description="basis points, 10000 = 100%")]


def _check_rpc_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
        raise ValueError(
            f"expected an http(s):// or ws(s):// RPC URL such as http://127.0.0.1:8545, got {url!r}"
        )
    return url


def _check_address(value: str) -> str:
    text = value.strip()
    if len(text) != 42 or not text.startswith("0x"):
        raise ValueError(f"expected a 0x-prefixed 20-byte hex address, got {value!r}")
    try:
        int(text[2:], 16)
    except ValueError:
        raise ValueError(f"expected a 0x-prefixed 20-byte hex address, got {value!r}") from None
    # Mixed case means the writer meant an EIP-55 checksum; a wrong one is a typo, not a style.
    from eth_utils import is_checksum_address, to_checksum_address

    if (
        text[2:] != text[2:].lower()
        and text[2:] != text[2:].upper()
        and not is_checksum_address(text)
    ):
        raise ValueError(f"{value!r} fails its EIP-55 checksum (a typo?)")
    return to_checksum_address(text)


def _check_multiaddr(value: str) -> str:
    # The IPFS HTTP RPC address, as kubo prints it: /ip4/127.0.0.1/tcp/5001[/http]
    parts = value.strip("/").split("/")
    ok = (
        len(parts) in (4, 5)
        and parts[0] in ("ip4", "ip6", "dns", "dns4", "dns6")
        and parts[2] == "tcp"
        and parts[3].isdigit()
        and 0 < int(parts[3]) < 65536
        and (len(parts) == 4 or parts[4] in ("http", "https"))
    )
    if not ok:
        raise ValueError(
            f"expected an IPFS API multiaddr such as /ip4/127.0.0.1/tcp/5001/http, got {value!r}"
        )
    return value


def parse_listen_addr(value: str) -> tuple[str, int]:
    """Returns (host, port) of `HOST:PORT` or `[IPv6]:PORT` where a server is to listen: HOST an
    IP address or `localhost`, PORT 1-65535. A ValueError says what is wrong."""
    text = value.strip()
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or (":" in host and not text.startswith("[")):
        raise ValueError(
            f"{value!r} is not HOST:PORT (e.g. 127.0.0.1:9464, or [::1]:9464 for IPv6)"
        )
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(
                f"{value!r}: {host!r} is not an IP address (name one, e.g. 127.0.0.1, or localhost)"
            ) from None
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"{value!r}: port {port} is not in 1-65535")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether a listen host (an IP address, or localhost) is this machine's loopback only."""
    return host == "localhost" or ipaddress.ip_address(host).is_loopback


def _check_backend(value: str) -> str:
    if value in ("transformers", "vllm"):
        return value
    raise ValueError(f"expected 'transformers' or 'vllm', got {value!r}")


def _check_bundle_id(value: str | None) -> str | None:
    if value is None or re.fullmatch(r"0x[0-9a-f]{64}", value):
        return value
    raise ValueError(
        "expected a base bundle id, 0x and 64 lowercase hex digits (`sapo policy id --bundle` "
        "prints a model's)"
    )


def _check_dtype(value: str) -> str:
    if value in ("auto", "float32"):
        return value
    if value in ("bfloat16", "float16"):
        raise ValueError(
            f"{value!r} is refused: peers prove a node's batches by re-drawing them in float32, "
            "and draws sampled in half precision miss their float32 intervals (measured: 1-5% of "
            "completions, on CPU and on an H100; docs/proof-of-generation.md), so its batches "
            'would be disputed and its stake slashed; set dtype = "float32" (or "auto", the same)'
        )
    raise ValueError(f"expected 'auto' or 'float32', got {value!r}")


RpcUrl = Annotated[str, AfterValidator(_check_rpc_url)]
Address = Annotated[str, AfterValidator(_check_address)]
Multiaddr = Annotated[str, AfterValidator(_check_multiaddr)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class NodeSection(Section):
    """Where the node keeps its journal, checkpoints and logs."""

    data_dir: Path = Path(".sapo/node")
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    metrics_addr: str | None = Field(
        None,
        description="serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9464); "
        "off when unset",
    )
    metrics_public: bool = Field(
        False,
        description="let metrics_addr be an address other than loopback (127.0.0.0/8, ::1): "
        "anyone who reaches it reads the node's stake, rounds and peers",
    )

    @model_validator(mode="after")
    def _metrics(self) -> NodeSection:
        if self.metrics_addr is None:
            return self
        host, port = parse_listen_addr(self.metrics_addr)  # a ValueError names what is wrong
        if not self.metrics_public and not is_loopback(host):
            raise ValueError(
                f"metrics_addr {self.metrics_addr!r} is not a loopback address: anyone who reaches "
                f"it reads this node's metrics. Serve on 127.0.0.1:{port} and scrape through a "
                "tunnel or a local Prometheus, or set [node].metrics_public = true"
            )
        return self


class ChainSection(Section):
    """The EVM chain and the deployed SwarmLedger this node talks to."""

    rpc_url: RpcUrl | None = Field(None, description="None: the devnet starts its own anvil")
    chain_id: int | None = Field(None, gt=0, description="checked against eth_chainId")
    ledger_address: Address | None = None
    keystore: Path | None = Field(None, description="encrypted JSON keystore (never a raw key)")
    password_file: Path | None = None
    request_timeout_s: float = Field(10.0, gt=0, le=300)
    receipt_timeout_s: float = Field(120.0, gt=0, le=3600)
    max_fee_gwei: float = Field(50.0, gt=0, description="cap on the EIP-1559 max fee")
    priority_fee_gwei: float = Field(1.0, ge=0)
    log_chunk_blocks: int = Field(2_000, gt=0, le=100_000, description="eth_getLogs range")
    ledger_deploy_block: int = Field(0, ge=0, description="event scans start here")

    @model_validator(mode="after")
    def _fees(self) -> ChainSection:
        if self.priority_fee_gwei > self.max_fee_gwei:
            raise ValueError(
                f"priority_fee_gwei ({self.priority_fee_gwei}) exceeds max_fee_gwei "
                f"({self.max_fee_gwei}); raise the cap or lower the tip"
            )
        return self


class StoreSection(Section):
    """Where rollout batches live: a real IPFS node (kubo or js-ipfs) or a local blockstore."""

    backend: Literal["ipfs", "local"] = "ipfs"
    ipfs_api: Multiaddr = "/ip4/127.0.0.1/tcp/5001/http"
    store_dir: Path = Path(".sapo/blocks")
    timeout_s: float = Field(10.0, gt=0, le=600)
    max_batch_bytes: int = Field(1 << 20, ge=1024, le=1 << 20, description="at most 1 MiB")
    retain_rounds: int = Field(
        100, gt=0, description="unpin batches (ours and the peers' we fetched) older than this"
    )
    allow_private_peers: bool = Field(
        False,
        description="dial peers' loopback and private (RFC 1918, link-local) swarm addresses: "
        "a devnet on one machine or a swarm in one LAN needs it; on the internet such an "
        "address in a peer's metadata is wrong or points at your own network",
    )
    connect_timeout_s: float = Field(
        5.0, gt=0, le=60, description="time to dial one of a peer's swarm addresses"
    )
    min_rate_kib_s: float = Field(
        256.0,
        gt=0,
        le=1 << 20,
        description="the least rate a peer's checkpoint must arrive at: a fetch ends by timeout_s "
        "plus the checkpoint's size at this rate, so a source that trickles its chunks cannot "
        "hold a fetch worker for longer",
    )
    fetches_per_producer: int = Field(
        2,
        ge=1,
        le=16,
        description="fetches of one producer's batches (and the checkpoints they open) in flight "
        "at once: a producer whose batches are slow to give, in every round still open, holds "
        "at most this many of the node's fetch workers and this many checkpoint spools",
    )
    spool_mib: int = Field(
        4096,
        ge=1,
        le=1 << 30,
        description="disk, in MiB, for peers' opened checkpoints while a drawn check fetches "
        "and re-draws them (the data dir's spool/, emptied when the node starts): proofs that "
        "would need more wait for room; one proof may always run",
    )


def least_unbonding_s(
    round_length_s: int, submit_rounds: int, challenge_rounds: int, appeal_rounds: int
) -> int:
    """The contract's rule: stake that backed a submission or a vote (made as early as its
    round) stays until the submission, challenge and appeal windows and a settlement period as
    long as the challenge window (in which votes are judged) have passed."""
    return (submit_rounds + 2 * challenge_rounds + appeal_rounds + 1) * round_length_s


class LedgerSection(Section):
    """SwarmLedger deployment parameters (fixed for the contract's life once deployed)."""

    round_length_s: int = Field(60, gt=0, le=86_400)
    min_stake: Wei = Field(default_factory=lambda: 10**18)
    unbonding_period_s: int = Field(3_600, ge=0, description="seconds before unstaked ether frees")
    challenge_rounds: int = Field(
        3, gt=0, le=10_000, description="rounds, after the submission window, to attest a batch"
    )
    submit_rounds: int = Field(
        2,
        gt=0,
        le=10_000,
        description="rounds after a round in which its batch is still accepted (W: slow "
        "hardware submits late rather than never)",
    )
    reward_per_round: Wei = Field(default_factory=lambda: 10**18)
    slash_bps: Bps = 1_000
    agree_tolerance_bps: Bps = 50
    quorum: int = Field(
        3,
        ge=1,
        le=255,
        description="Q: distinct drawn checkers who must agree before a batch earns anything",
    )
    checkers: int = Field(
        10,
        ge=1,
        le=255,
        description="K: seats per batch's committee on average (each node draws K trials, "
        "each won with its share of stake as of the submission; a vote counts once per seat); "
        "at least quorum",
    )
    appeal_rounds: int = Field(
        2,
        ge=2,
        le=10_000,
        description="rounds after the challenge window in which a producer appeals a batch "
        "that was not credited (all but the last) and the appeal's committee votes; a round is "
        "final after them",
    )
    appeal_checkers: int = Field(
        40,
        ge=1,
        le=255,
        description="seat trials per node on an appeal's committee (drawn afresh, from the same "
        "stake snapshot): larger than checkers, so a verdict a minority won by a small draw's "
        "luck does not survive it; at least quorum",
    )

    families: list[str] = Field(
        default_factory=list,
        description="the model families the ledger checks: content ids of base weights ('0x' + "
        "64 hex digits, `sapo policy id` prints a model's); empty: a devnet fills in its nodes' "
        "families, `sapo chain deploy` asks for them",
    )

    @field_validator("families")
    @classmethod
    def _family_ids(cls, value: list[str]) -> list[str]:
        out: list[str] = []
        for item in value:
            ident = item.strip().lower()
            if not re.fullmatch(r"0x[0-9a-f]{64}", ident) or ident == "0x" + "0" * 64:
                raise ValueError(
                    f"family {item!r} is not a base's content id ('0x' + 64 hex digits, not all "
                    "zero): `sapo policy id MODEL` prints one"
                )
            if ident in out:
                raise ValueError(f"family {ident[:14]}… is listed twice")
            out.append(ident)
        if len(out) > 255:
            raise ValueError(f"{len(out)} families: a ledger checks at most 255")
        return out

    def least_unbonding_s(self) -> int:
        """Returns the shortest unbonding period the contract accepts for these windows."""
        return least_unbonding_s(
            self.round_length_s, self.submit_rounds, self.challenge_rounds, self.appeal_rounds
        )

    @model_validator(mode="after")
    def _slashable_until_settled(self) -> LedgerSection:
        # The contract enforces it too: stake must outlast the submission and challenge windows
        # and a settlement period, or unstaking would dodge a slash.
        least = self.least_unbonding_s()
        if self.unbonding_period_s < least:
            raise ValueError(
                f"unbonding_period_s ({self.unbonding_period_s}) must be at least "
                "(submit_rounds + 2 * challenge_rounds + appeal_rounds + 1) * round_length_s "
                f"= {least}"
            )
        if self.min_stake < 10**9 or self.min_stake >= 2**96:
            raise ValueError("min_stake must be between 1 gwei and 2^96 wei")
        if self.checkers < self.quorum:
            raise ValueError(
                f"checkers ({self.checkers}) must be at least quorum ({self.quorum}): a batch "
                "could never reach its quorum"
            )
        if self.appeal_checkers < self.quorum:
            raise ValueError(
                f"appeal_checkers ({self.appeal_checkers}) must be at least quorum "
                f"({self.quorum}): an appeal could never reach its quorum"
            )
        return self


class SapoSection(Section):
    """The SAPO mix: I local and J external questions a local round, L completions per question;
    how many local rounds a chain round holds, and how fresh external items are."""

    local_items: int = Field(4, ge=1, le=256, description="I: own questions per round")
    external_items: int = Field(4, ge=0, le=256, description="J: peers' questions per round")
    completions: int = Field(8, ge=2, le=64, description="L: completions per question")
    lookback_rounds: int = Field(
        2,
        ge=0,
        le=100,
        description="external items come from peers' batches of the last this many chain "
        "rounds (their staleness)",
    )
    max_fetch_per_round: int = Field(
        8,
        ge=0,
        le=256,
        description="peer batches fetched per chain round to learn from, beyond those this "
        "node is drawn to check (attest_budget bounds these)",
    )
    attest_budget: int = Field(
        16,
        ge=0,
        le=256,
        description="votes (attestations and unavailable reports) sent, and drawn batches "
        "taken up (a retry of one nobody gave is not counted again), per chain round as a "
        "drawn checker; a node drawn more often leaves the rest short of their quorum",
    )
    unavailable_after: int = Field(
        3,
        ge=1,
        le=100,
        description="fetches in a row that find a batch we are drawn to check nowhere (not at "
        "its producer nor any attester) before we vote it unavailable",
    )
    max_local_rounds: int = Field(
        0,
        ge=0,
        le=512,
        description="local rounds per chain round (0: as many as the hardware allows; 1: one "
        "round of the paper per chain round, as the experiments play it)",
    )
    external_correction: Literal["none", "tis", "f-tis"] = Field(
        "none",
        description="how a peer's completion is trained: none (as if this node had sampled it, "
        "the paper's), tis (each token weighed by the truncated ratio of this node's probability "
        "to the producer's, from the batch's log-probs) or f-tis (tis, and peers' "
        "negative-advantage completions further off-policy than offpolicy_filter left out); "
        "a completion of another tokenizer, or of a batch without log-probs, is never weighed",
    )
    tis_cap: float = Field(
        2.0,
        ge=1.0,
        le=100.0,
        description="the largest importance weight of a peer's token (tis, f-tis)",
    )
    offpolicy_filter: float = Field(
        0.5,
        gt=0.0,
        le=100.0,
        description="f-tis: a peer's completion with negative advantage is left out when the "
        "mean over its tokens of log(producer's probability / ours) is above this (nats)",
    )


class PolicySection(Section):
    """The model being trained and how it generates."""

    model: str = Field(
        "seed",
        min_length=1,
        description="HF name, local dir, 'seed' (the CPU seed policy), 'seed-test' (smaller); "
        "'seed-llama' and 'seed-llama-test': their Llama-architecture siblings with a tokenizer "
        "of their own (another model family)",
    )
    seed: int = Field(0, ge=0, description="which seed policy ('seed' models only)")
    seed_datasets: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="pretrain the seed policy on these catalog entries only (a specialist)",
    )
    seed_steps: int = Field(
        0,
        ge=0,
        le=100_000,
        description="pretraining steps of the seed policy (0: its recipe's: 600 for 'seed', 150 "
        "for 'seed-test'); more steps pretrain on a larger corpus, cached under their own name",
    )
    seed_tagged: float = Field(
        1.0,
        gt=0,
        le=1,
        description="share of the seed policy's pretraining answers in the verifiers' "
        "<answer></answer> format (the others read 'Answer: A', which scores 0): below 1, a "
        "policy that must learn the format, cached under its own name",
    )
    seed_heads: int = Field(
        0,
        ge=0,
        le=64,
        description="attention heads of the seed policy (0: its recipe's: 4 for 'seed', head "
        "size 48; 2 for 'seed-test', head size 32); vLLM's CPU attention needs a head size of "
        "32, 64, 80, ...: 3 heads make 'seed' head size 64; cached under its own name",
    )
    seed_shared_tokenizer: bool = Field(
        False,
        description="a specialist seed policy (seed_datasets) takes the tokenizer of its recipe's "
        "generalist (trained on every entry's questions) instead of training its own: then "
        "specialists of one recipe are one model family, whose checkers can prove each other's "
        "batches on a devnet; cached under its own name",
    )
    base: Annotated[str | None, AfterValidator(_check_bundle_id)] = Field(
        None,
        description="the base bundle the node runs (`sapo policy id --bundle` prints a model's): "
        "[policy].model is used when it is that base, else the base is fetched over IPFS from "
        "the nodes of its family that pin it, checked block by block and cached under "
        "cache_dir/bases; unset: [policy].model as it is",
    )
    share_base: bool = Field(
        True,
        description="with adapter = 'lora' and an IPFS store: pin the base (kept while the node "
        "runs it) and name its bundle in the node's metadata, so the family's next node can "
        "fetch it from this one",
    )
    cache_dir: Path = Field(
        Path(".sapo"), description="where seed policies are built and fetched bases cached"
    )
    backend: Annotated[str, AfterValidator(_check_backend)] = Field(
        "transformers",
        description="generation backend: transformers, or vllm (needs the vllm extra: "
        "scripts/setup --vllm; the same seeded draws, so peers prove its batches)",
    )
    adapter: Literal["none", "lora"] = Field(
        "none",
        description="lora: train a low-rank adapter (PEFT) over the frozen model; snapshots, "
        "published checkpoints and what checkers fetch are the adapter only (megabytes, not the "
        "model's gigabytes), and checkers need the same base (its content hash is the model "
        "family). none: train every weight (tiny seed policies)",
    )
    lora_rank: int = Field(16, ge=1, le=1_024, description="the adapter's rank r")
    lora_alpha: int = Field(32, ge=1, le=65_536, description="LoRA's scale numerator (alpha / r)")
    lora_targets: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]] = Field(
        default_factory=lambda: [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ],
        min_length=1,
        max_length=16,
        description="the linear layers the adapter wraps (module names; Qwen2 and Llama: the "
        "seven of attention and MLP)",
    )
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    dtype: Annotated[str, AfterValidator(_check_dtype)] = Field(
        "auto",
        description="float32 on every device ('auto' is float32 too): proofs of generation "
        "re-draw completions in float32, which half-precision sampling does not match",
    )
    max_new_tokens: int = Field(64, gt=0, le=8_192)
    cpu_threads: int = Field(
        0,
        ge=0,
        le=1_024,
        description="torch CPU threads (0: torch's default, one per core); several nodes on one "
        "machine each taking every core slow each other down",
    )
    temperature: float = Field(1.0, gt=0, le=5)
    top_p: float = Field(1.0, gt=0, le=1)

    @model_validator(mode="after")
    def _adapter_backend(self) -> PolicySection:
        if self.adapter == "lora" and self.backend == "vllm":
            raise ValueError(
                'adapter = "lora" with backend = "vllm" is not supported yet: the vLLM backend '
                'samples from full weights it is sent each step; use backend = "transformers" '
                'or adapter = "none"'
            )
        if len(set(self.lora_targets)) != len(self.lora_targets):
            raise ValueError(f"lora_targets names a module twice: {self.lora_targets}")
        return self


class TrainSection(Section):
    """The GRPO update (the paper: no KL, asymmetric clip 0.2 / 0.28, Adam)."""

    learning_rate: float = Field(1e-5, gt=0, le=1)
    eps_low: float = Field(0.2, gt=0, lt=1)
    eps_high: float = Field(0.28, gt=0, lt=10)
    kl_coef: float = Field(0.0, ge=0)
    grad_clip: float = Field(1.0, gt=0)
    micro_batch: int = Field(16, gt=0, le=4_096)
    updates_per_round: int = Field(
        1, ge=1, le=64, description="optimizer steps on each round's batch (TRL num_iterations)"
    )
    rounds_per_update: int = Field(
        1,
        ge=1,
        le=64,
        description="gather this many local rounds' items into one GRPO step: a tiny policy needs "
        "~64 questions a step to learn rather than drift",
    )
    loss_agg: Literal["token-mean", "seq-mean"] = "token-mean"
    checkpoint_every: int = Field(10, gt=0, description="training steps between checkpoints")


class TasksSection(Section):
    """Which task catalog (configs/tasks/<name>.toml, or a path) tasks are drawn from."""

    catalog: str = Field("tiny", min_length=1)


# what may differ between a devnet's nodes (chain, store and ledger are the swarm's)
NODE_OVERRIDABLE = ("sapo", "policy", "train")


class DevnetSection(Section):
    """The local swarm that `sapo devnet up` starts (anvil, IPFS, N nodes) on loopback."""

    nodes: int = Field(3, ge=1, le=64)
    metrics: bool = Field(
        False,
        description="serve each node's Prometheus metrics ([node].metrics_addr): on a free "
        "loopback port, or under --netns on port 9464 of the node's namespace address",
    )
    chain_id: int = Field(31_337, gt=0)
    accounts: int = Field(10, ge=1, le=256, description="funded dev accounts")
    balance_eth: int = Field(10_000, gt=0)
    reward_pool: Wei = Field(default_factory=lambda: 100 * 10**18)
    node_overrides: dict[int, dict[str, dict[str, Any]]] = Field(
        default_factory=dict,
        description="per node index (honest nodes first, then adversaries), sections of its "
        "config that differ from the others' ([sapo], [policy], [train]): e.g. a slower node, "
        "[devnet.node_overrides.2.sapo] completions = 24, or another model family, "
        "[devnet.node_overrides.2.policy] model = 'seed-llama'",
    )
    adversaries: list[str] = Field(
        default_factory=list,
        description="adversary nodes added beside the honest ones, each running one strategy "
        "for farming credit or denying it to others (client.devnet.adversary): free-claim, "
        "answer-farmer, mixed-farmer, withholder, copycat, colluders (a pair), cartel (three "
        "vouching for each other), griefer, whale (a griefer holding whale_share of all "
        "stake), sybils (three identities holding whale_share together, 4:2:1, vouching for "
        "each other and disputing the rest), stake-mover (a griefer adding whale_share of "
        "stake once a batch is on chain), padder (honest samples, a claim padded by v3's "
        "tolerance), logprob-liar (honest samples whose log-probs claim each token an unlikely "
        "draw, so that learners weigh them up), nan-weights (hand-made groups opening a "
        "checkpoint with a NaN value), poison-token (hand-made groups whose token ids start "
        "past the vocabulary), concentrator (one forged local round beside one-item honest "
        "ones, the batch withheld when the beacon opens a forged group), splitter (one forged "
        "row in an honest batch, withheld when re-drawn), baiters (two honest producers, each "
        "disputing the other's batch "
        "in the window's last round when it out-seats the agreers), or all (every strategy but "
        "the whale, the "
        "sybils and the stake mover, whose stake would change the others' world)",
    )
    node_stake: Wei | None = Field(
        None,
        description="what each node registers with (default 2 x [ledger].min_stake; at least "
        "min_stake); the heavy adversaries hold whale_share of all stake whatever it is",
    )
    adversary_stake: Wei | None = Field(
        None,
        description="what each adversary node registers with (default node_stake; at least "
        "min_stake): below node_stake, the honest nodes hold most of the stake, which the rules "
        "assume (scripts/attack-table --adversary-stake)",
    )
    whale_share: float = Field(
        0.10,
        gt=0,
        lt=0.5,
        description="the share of all active stake a whale adversary registers with (each "
        "whale alike; at least [ledger].min_stake, so a small devnet's whale may hold more)",
    )

    @field_validator("adversaries")
    @classmethod
    def _known_adversaries(cls, names: list[str]) -> list[str]:
        expand(names)  # raises ValueError naming what is unknown
        return names

    def adversary_roles(self) -> list[str]:
        """The adversary nodes, one strategy each (a colluder pair is two)."""
        return expand(self.adversaries)

    @model_validator(mode="after")
    def _overrides_name_nodes_and_sections(self) -> DevnetSection:
        # adversary nodes follow the honest ones: a farmer of a second model family is one
        every = self.nodes + len(self.adversary_roles())
        for index, sections in self.node_overrides.items():
            if not 0 <= index < every:
                raise ValueError(f"node_overrides.{index}: the devnet has nodes 0..{every - 1}")
            if unknown := sorted(set(sections) - set(NODE_OVERRIDABLE)):
                raise ValueError(
                    f"node_overrides.{index}: {unknown} cannot differ between a devnet's nodes "
                    f"(they may override {', '.join(NODE_OVERRIDABLE)})"
                )
        return self

    @model_validator(mode="after")
    def _enough_accounts(self) -> DevnetSection:
        # account 0 deploys and funds the pool; every node (adversaries too) needs its own
        adversaries = len(self.adversary_roles())
        need = self.nodes + adversaries + 1
        if self.accounts < need:
            what = "nodes + adversary nodes + 1" if adversaries else "nodes + 1"
            raise ValueError(f"accounts ({self.accounts}) must be at least {what} ({need})")
        return self
