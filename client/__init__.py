"""sapo-swarm: a node client for a blockchain-anchored SAPO swarm."""

__version__ = "0.1.0"
