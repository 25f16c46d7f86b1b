"""Two block stores behind one small interface: a real IPFS node, or a local directory.

Both name a block by its CIDv1 (raw, sha2-256), verify every byte they return against it, refuse
oversized blocks before reading them whole, and keep a pin index for the retention rule. The
node never knows which one it has.

- `blockstore`: the interface, the CID check and the pin index rules both share
- `local`: `LocalStore`, a directory
- `ipfs`: `IpfsStore`, an IPFS daemon
"""

from client.store.backends.blockstore import BlockStore, StoreStatus
from client.store.backends.ipfs import IpfsStore
from client.store.backends.local import LocalStore

__all__ = ["BlockStore", "IpfsStore", "LocalStore", "StoreStatus"]
