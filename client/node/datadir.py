"""The files of a node's data dir, named in one place: whatever writes or reads one of them (the
node, its builder, the read model, the devnet, the TUI command) asks this type for its path."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DataDir:
    """One node's data dir (`[node].data_dir`)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def events(self) -> Path:
        """The event log: one JSON object a line (client.node.eventlog)."""
        return self.path / "events.jsonl"

    @property
    def deployment(self) -> Path:
        """Which ledger deployment the data dir belongs to (client.node.deployment)."""
        return self.path / "deployment.json"

    @property
    def journal(self) -> Path:
        """The journal's SQLite file (client.node.journal)."""
        return self.path / "journal.sqlite"

    @property
    def checkpoint(self) -> Path:
        """The policy's last checkpoint (its previous one is beside it, `.old`)."""
        return self.path / "checkpoint"

    @property
    def weights(self) -> Path:
        """The snapshots of the checkpoints sampled from, a folder per chain round, kept until
        the round's beacon opens some (client.node.proving.Snapshots)."""
        return self.path / "weights"

    @property
    def spool(self) -> Path:
        """Peers' opened checkpoints while a drawn check fetches and re-draws them, a file
        each, deleted once checked; emptied when the node starts (client.node.intake)."""
        return self.path / "spool"

    @property
    def log(self) -> Path:
        """The node process's own output, when a devnet or the TUI runs it."""
        return self.path / "node.log"

    @property
    def config(self) -> Path:
        """The node's config, where a devnet writes it."""
        return self.path / "node.toml"

    @property
    def keystore(self) -> Path:
        """The node's encrypted keystore, where a devnet writes it."""
        return self.path / "keystore.json"
