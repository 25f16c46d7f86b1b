"""The roles of a devnet's nodes: honest, or one adversary strategy each (client.devnet.adversary
runs them). Pure names and pairing, no I/O: the config validates `[devnet].adversaries` here."""

from __future__ import annotations

HONEST = "honest"
STRATEGIES = ("free-claim", "answer-farmer", "mixed-farmer", "copycat", "colluder")
# what `--adversary` and [devnet].adversaries accept: a strategy, `colluders` (a pair of colluder
# nodes) or `all` (one node of each strategy and a colluder pair)
CHOICES = ("free-claim", "answer-farmer", "mixed-farmer", "copycat", "colluders", "all")


def expand(names: list[str]) -> list[str]:
    """Returns the adversary nodes (one strategy each, in order) that the names ask for."""
    nodes: list[str] = []
    for name in names:
        if name not in CHOICES:
            raise ValueError(f"unknown adversary {name!r}: expected one of {', '.join(CHOICES)}")
        if name == "all":
            nodes += [s for s in STRATEGIES if s != "colluder"] + ["colluder", "colluder"]
        elif name == "colluders":
            nodes += ["colluder", "colluder"]
        else:
            nodes.append(name)
    return nodes


def partners(roles: list[str], addresses: list[str]) -> dict[int, str]:
    """Pairs the colluders among the nodes, in order: node index -> its partner's address."""
    colluders = [i for i, role in enumerate(roles) if role == "colluder"]
    pairs: dict[int, str] = {}
    for a, b in zip(colluders[::2], colluders[1::2], strict=True):
        pairs[a], pairs[b] = addresses[b], addresses[a]
    return pairs
