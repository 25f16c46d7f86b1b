"""The node: the SAPO round loop, its journal and outbox, peer verification, the local swarm.

Nothing is imported here: `client.node.journal` and `client.node.eventlog` are read by query
commands that must not pay for the training stack `client.node.node` imports.
"""
