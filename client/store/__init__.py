"""The rollout store: batch format, content addressing, IPFS and local backends."""
