"""Local parts of a swarm, started as child processes on loopback and never left orphaned."""

from client.devnet.anvil import DEV_MNEMONIC, Anvil, AnvilNotFound, find_anvil, rpc_call
from client.devnet.ipfs import IpfsDaemon, IpfsNotFound, find_jsipfs
from client.devnet.process import (
    LOOPBACK,
    ServerProcess,
    ServerStartError,
    free_loopback_port,
    pid_alive,
    port_is_listening,
)

__all__ = [
    "DEV_MNEMONIC",
    "LOOPBACK",
    "Anvil",
    "AnvilNotFound",
    "IpfsDaemon",
    "IpfsNotFound",
    "ServerProcess",
    "ServerStartError",
    "find_anvil",
    "find_jsipfs",
    "free_loopback_port",
    "pid_alive",
    "port_is_listening",
    "rpc_call",
]
