"""Publishing: our batches sealed from their local rounds, and the outbox sent.

- sealing: a chain round's batch, journaled with its pin and submission (compute's thread)
- sender: the publisher's thread, one handler per message type (client.node.journal.outbox)
- ours: our batch's pin, submission and openings
- votes: our votes as a drawn checker, and the beacons they rest on
- settlement: final submissions settled, and the votes that lost against them judged
- appeals: a verdict against our batch or our vote taken to a larger committee
- upkeep: on-chain metadata kept current, old pins released
"""

from client.node.publishing.sender import Publisher

__all__ = ["Publisher"]
