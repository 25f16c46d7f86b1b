"""The node's configuration: one pydantic model per TOML section, every key typed and bounded.

Unknown keys are refused everywhere (a typo must never silently fall back to a default). Paths
are resolved by the loader (relative to the file that names them), so every consumer sees
absolute paths. `sapo config` and the docs read every key's bounds and description from here.

- `values`: the kinds of value a key holds (amounts of ether, basis points, addresses, URLs)
- `section`: the base every section shares
- `node`, `chain` (with `[ledger]`), `store`, `policy`, `training` (`[sapo]`, `[train]`,
  `[tasks]`), `devnet`: the sections, one file per part of the node they configure
"""

from client.config.models.aggregator import AggregatorSection
from client.config.models.chain import ChainSection, LedgerSection, least_unbonding_s
from client.config.models.devnet import NODE_OVERRIDABLE, DevnetSection
from client.config.models.node import NodeSection
from client.config.models.policy import PolicySection
from client.config.models.root_lane import RootLaneSection
from client.config.models.section import Section
from client.config.models.store import StoreSection
from client.config.models.training import SapoSection, TasksSection, TrainSection
from client.config.models.values import (
    Address,
    Bps,
    Multiaddr,
    RpcUrl,
    Wei,
    format_ether,
    is_loopback,
    parse_listen_addr,
    parse_wei,
)
from client.units import format_score  # re-exported for the CLI

__all__ = [
    "NODE_OVERRIDABLE",
    "Address",
    "AggregatorSection",
    "Bps",
    "ChainSection",
    "DevnetSection",
    "LedgerSection",
    "Multiaddr",
    "NodeSection",
    "PolicySection",
    "RootLaneSection",
    "RpcUrl",
    "SapoSection",
    "Section",
    "StoreSection",
    "TasksSection",
    "TrainSection",
    "Wei",
    "format_ether",
    "format_score",
    "is_loopback",
    "least_unbonding_s",
    "parse_listen_addr",
    "parse_wei",
]
