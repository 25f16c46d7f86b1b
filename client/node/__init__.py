"""The node: the SAPO round loop, its journal and outbox, peer verification, the local swarm."""

from client.node.journal import Journal
from client.node.node import Node
from client.node.rollouts import generate_round, task_seed, verify_batch

__all__ = ["Journal", "Node", "generate_round", "task_seed", "verify_batch"]
