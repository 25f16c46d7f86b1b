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
    SYBIL = "sybil"  # one of a set of identities with unequal stakes: cartel and griefer at once
    STAKE_MOVER = "stake-mover"  # a griefer that adds stake once a batch is on chain
    PADDER = "padder"  # samples honestly, pads with zero-signal groups, claims the tolerance
    LOGPROB_LIAR = "logprob-liar"  # samples honestly, claims its tokens were unlikely draws
    NAN_WEIGHTS = "nan-weights"  # the mixed farmer's batches, opening a checkpoint with a NaN
    BAITER = "baiter"  # honest batches whose allies dispute them when they outseat the agreers
    POISON_TOKEN = "poison-token"  # noqa: S105 - the mixed farmer's, led by an id off the vocab
    CONCENTRATOR = "concentrator"  # a forged round beside one-item honest ones, held if opened
    SPLITTER = "splitter"  # one forged row in an honest batch, held if re-drawn


HONEST = Role.HONEST
STRATEGIES = tuple(role for role in Role if role is not Role.HONEST)
CARTEL = 3  # cartel members: each free claim gets 2 agreeing votes, the devnet's quorum Q
SYBILS = (4, 2, 1)  # a sybil set's identities, and how the set's stake is split among them
BAITERS = 2  # a bait set: each submits honest batches, the others dispute them when they can win
SINGLE = (  # one node each, and one of each in `all`
    "free-claim",
    "answer-farmer",
    "mixed-farmer",
    "withholder",
    "copycat",
    "griefer",
    "padder",
    "logprob-liar",
    "nan-weights",
    "poison-token",
    "concentrator",
    "splitter",
)
# what `--adversary` and [devnet].adversaries accept: a strategy, `colluders` (a pair of colluder
# nodes), `cartel` (CARTEL nodes vouching for each other), `baiters` (BAITERS bait nodes) or `all`
# (one node of each other strategy, a colluder pair, a cartel and a bait set)
CHOICES = (*SINGLE, "whale", "stake-mover", "colluders", "cartel", "sybils", "baiters", "all")


def expand(names: list[str]) -> list[Role]:
    """Returns the adversary nodes (one strategy each, in order) that the names ask for."""
    nodes: list[Role] = []
    for name in names:
        if name not in CHOICES:
            raise ValueError(f"unknown adversary {name!r}: expected one of {', '.join(CHOICES)}")
        if name == "all":
            nodes += [
                *map(Role, SINGLE),
                Role.COLLUDER,
                Role.COLLUDER,
                *[Role.CARTEL] * CARTEL,
                *[Role.BAITER] * BAITERS,
            ]
        elif name == "colluders":
            nodes += [Role.COLLUDER, Role.COLLUDER]
        elif name == "cartel":
            nodes += [Role.CARTEL] * CARTEL
        elif name == "sybils":
            nodes += [Role.SYBIL] * len(SYBILS)
        elif name == "baiters":
            nodes += [Role.BAITER] * BAITERS
        else:
            nodes.append(Role(name))
    return nodes


def partners(roles: list[Role], addresses: list[str]) -> dict[int, list[str]]:
    """Whom each vouching node vouches for: node index -> its partners' addresses. Colluders
    pair up in order; the cartel's members (every `cartel` node) vouch for all the others, and so
    do a sybil set's."""
    colluders = [i for i, role in enumerate(roles) if role == Role.COLLUDER]
    found: dict[int, list[str]] = {}
    for a, b in zip(colluders[::2], colluders[1::2], strict=True):
        found[a], found[b] = [addresses[b]], [addresses[a]]
    for role in (Role.CARTEL, Role.SYBIL, Role.BAITER):
        members = [i for i, r in enumerate(roles) if r == role]
        for i in members:
            found[i] = [addresses[j] for j in members if j != i]
    return found
