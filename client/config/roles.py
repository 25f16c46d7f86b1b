"""The roles of a devnet's nodes: honest, or one adversary strategy each (client.devnet.adversary
runs them). Pure names and pairing, no I/O: the config owns them, as `[devnet].adversaries`
names them, and the devnet's supervisor and adversaries read them from here."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """What a devnet node runs: the honest node, or one adversary strategy."""

    HONEST = "honest"
    FREE_CLAIM = "free-claim"
    ANSWER_FARMER = "answer-farmer"
    MIXED_FARMER = "mixed-farmer"
    WITHHOLDER = "withholder"
    COPYCAT = "copycat"
    COLLUDER = "colluder"
    CARTEL = "cartel"
    GRIEFER = "griefer"
    WHALE = "whale"  # a griefer with [devnet].whale_share of all stake


HONEST = Role.HONEST
STRATEGIES = tuple(role for role in Role if role is not Role.HONEST)
CARTEL = 3  # cartel members: each free claim gets 2 agreeing votes, the devnet's quorum Q
# what `--adversary` and [devnet].adversaries accept: a strategy, `colluders` (a pair of colluder
# nodes), `cartel` (CARTEL nodes vouching for each other) or `all` (one node of each other
# strategy, a colluder pair and a cartel)
CHOICES = (
    "free-claim",
    "answer-farmer",
    "mixed-farmer",
    "withholder",
    "copycat",
    "colluders",
    "cartel",
    "griefer",
    "whale",
    "all",
)
SINGLE = ("free-claim", "answer-farmer", "mixed-farmer", "withholder", "copycat", "griefer")


def expand(names: list[str]) -> list[Role]:
    """Returns the adversary nodes (one strategy each, in order) that the names ask for."""
    nodes: list[Role] = []
    for name in names:
        if name not in CHOICES:
            raise ValueError(f"unknown adversary {name!r}: expected one of {', '.join(CHOICES)}")
        if name == "all":
            nodes += [*map(Role, SINGLE), Role.COLLUDER, Role.COLLUDER, *[Role.CARTEL] * CARTEL]
        elif name == "colluders":
            nodes += [Role.COLLUDER, Role.COLLUDER]
        elif name == "cartel":
            nodes += [Role.CARTEL] * CARTEL
        else:
            nodes.append(Role(name))
    return nodes


def partners(roles: list[Role], addresses: list[str]) -> dict[int, list[str]]:
    """Whom each vouching node vouches for: node index -> its partners' addresses. Colluders
    pair up in order; the cartel's members (every `cartel` node) vouch for all the others."""
    colluders = [i for i, role in enumerate(roles) if role == Role.COLLUDER]
    cartel = [i for i, role in enumerate(roles) if role == Role.CARTEL]
    found: dict[int, list[str]] = {}
    for a, b in zip(colluders[::2], colluders[1::2], strict=True):
        found[a], found[b] = [addresses[b]], [addresses[a]]
    for i in cartel:
        found[i] = [addresses[j] for j in cartel if j != i]
    return found
