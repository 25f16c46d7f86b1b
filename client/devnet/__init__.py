"""Local parts of a swarm, started as child processes on loopback and never left orphaned."""

from client.devnet.anvil import (
    DEV_MNEMONIC,
    Anvil,
    AnvilNotFound,
    FoundryToolNotFound,
    find_anvil,
    find_foundry_tool,
    rpc_call,
)
from client.devnet.ipfs import IpfsDaemon, IpfsNotFound, find_jsipfs, start_daemons
from client.devnet.process import (
    LOOPBACK,
    ServerProcess,
    ServerStartError,
    free_loopback_port,
    port_is_listening,
)
from client.pids import pid_alive

__all__ = [
    "DEV_MNEMONIC",
    "LOOPBACK",
    "Anvil",
    "AnvilNotFound",
    "FoundryToolNotFound",
    "IpfsDaemon",
    "IpfsNotFound",
    "ServerProcess",
    "ServerStartError",
    "find_anvil",
    "find_foundry_tool",
    "find_jsipfs",
    "free_loopback_port",
    "pid_alive",
    "port_is_listening",
    "rpc_call",
    "start_daemons",
]
