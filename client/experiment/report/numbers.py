"""One cell's numbers from its record: the cumulative reward (for one configuration and seed, the
sum over the scored rounds r and over the nodes n of the mean verifier reward of n's local
rollouts in round r: its I x L completions, the same number the node recorded on the ledger as
its claim divided by its rollouts), the learning within the run (first and last quarter), the
held-out scores, and the checks that the journal and the ledger agree."""

from __future__ import annotations

import statistics
from typing import Any

TOLERANCE = 1e-6  # the journal's reward and the ledger's claim/rollouts are one number


def held_out_numbers(held: dict[str, Any], trained: set[int]) -> dict[str, Any]:
    """A cell's held-out scores: per evaluation, the mean over nodes of greedy pass@1 (a reward
    of 1) and of greedy reward, over the evaluation questions outside `trained` (those a node
    of any cell of the experiment drew for training: one held-out set for every cell)."""
    kept = [i for i in range(held["questions"]) if i not in trained]
    curve = []
    for e in held["evaluations"]:
        per_node = [[rewards[i] for i in kept] for rewards in e["greedy"]]
        curve.append(
            {
                "round": e["round"],
                "pass1": statistics.fmean(
                    statistics.fmean(r >= 1.0 - TOLERANCE for r in rs) for rs in per_node
                )
                if kept
                else None,
                "reward": statistics.fmean(statistics.fmean(rs) for rs in per_node)
                if kept
                else None,
            }
        )
    start, end = curve[0], curve[-1]
    entries = held.get("entries") or []
    by_entry: dict[str, dict[str, Any]] = {}
    for entry in sorted(set(entries)):
        mine = [i for i in kept if entries[i] == entry]
        first, last = held["evaluations"][0]["greedy"], held["evaluations"][-1]["greedy"]
        by_entry[entry] = {
            "questions": len(mine),
            **{
                f"{what}_{when}": statistics.fmean(
                    statistics.fmean(
                        (r[i] >= 1.0 - TOLERANCE) if what == "pass1" else r[i] for i in mine
                    )
                    for r in rewards
                )
                if mine
                else None
                for what in ("pass1", "reward")
                for when, rewards in (("start", first), ("end", last))
            },
        }
    return {
        "held_out_by_entry": by_entry,
        "held_out_questions": len(kept),
        "held_out_excluded": len(trained),
        "held_out_curve": curve,
        "held_out_pass1_start": start["pass1"],
        "held_out_pass1_end": end["pass1"],
        "held_out_pass1_gain": None if start["pass1"] is None else end["pass1"] - start["pass1"],
        "held_out_reward_start": start["reward"],
        "held_out_reward_end": end["reward"],
    }


# mean local reward per node-round in the first and the last quarter of the scored rounds; for
# specialists also on the entries they were pretrained on (home) and on the others (foreign)
LEARNING_KEYS = (
    *(f"{part}{q}_quarter" for part in ("", "home_", "foreign_") for q in ("first", "last")),
    "external_used_per_round",
)
HELD_OUT_KEYS = (
    "held_out_pass1_start",
    "held_out_pass1_end",
    "held_out_pass1_gain",
    "held_out_reward_start",
    "held_out_reward_end",
)


def _quarters(values: list[float | None]) -> tuple[float | None, float | None]:
    """Returns the mean of the first and of the last quarter of a run's values (Nones skipped)."""
    q = max(1, len(values) // 4)

    def mean(part: list[float | None]) -> float | None:
        kept = [v for v in part if v is not None]
        return statistics.fmean(kept) if kept else None

    return mean(values[:q]), mean(values[-q:])


def _entry_reward(rounds: list[dict[str, Any]], keep) -> list[float | None]:
    """Per round, the mean local reward over the catalog entries `keep` accepts (None: none
    drawn that round)."""
    out = []
    for r in rounds:
        values = [mean for e, (mean, _) in (r.get("reward_by_entry") or {}).items() if keep(e)]
        out.append(statistics.fmean(values) if values else None)
    return out


def _cell_numbers(record: dict[str, Any], trained: set[int]) -> dict[str, Any]:
    on_chain = record.get("swarm", "devnet") == "devnet"  # the in-process swarm has no ledger
    rounds = len(record["nodes"][0]["rounds"])
    per_round = [0.0] * rounds
    missing = mismatched = 0
    compute = swarm = 0.0
    node_curves, home, foreign, external_used = [], [], [], []
    for node in record["nodes"]:
        node_curves.append([r["reward_local"] for r in node["rounds"]])
        for k, r in enumerate(node["rounds"]):
            if r["reward_local"] is None:
                missing += 1
                continue
            external_used.append(r["external_items"] or 0)
            per_round[k] += r["reward_local"]
            chain = r["reward_on_chain"]
            if on_chain and (chain is None or abs(chain - r["reward_local"]) > TOLERANCE):
                mismatched += 1
            compute += r["compute_s"]
            swarm += r["swarm_s"]
        specialties = set((node.get("policy") or {}).get("seed_datasets") or ())
        if specialties:  # a specialist: its pretrained entries and the others, apart
            home.append(_entry_reward(node["rounds"], lambda e, s=specialties: e in s))
            foreign.append(_entry_reward(node["rounds"], lambda e, s=specialties: e not in s))
    numbers = {
        "cumulative": sum(per_round),
        "per_round": per_round,
        "first_quarter": _mean_of(_quarters(c)[0] for c in node_curves),
        "last_quarter": _mean_of(_quarters(c)[1] for c in node_curves),
        # J asked for, J got: the sampler falls short when peers publish too few items with signal
        "external_used_per_round": _mean_of(external_used),
        "missing_node_rounds": missing,
        "not_on_chain_or_different": mismatched if on_chain else None,
        "compute_s": compute,
        "swarm_s": swarm,
        "wall_s": record.get("wall_s", 0.0),
    }
    if record.get("held_out"):
        numbers.update(held_out_numbers(record["held_out"], trained))
    if home:
        for name, curves in (("home", home), ("foreign", foreign)):
            numbers[f"{name}_first_quarter"] = _mean_of(_quarters(c)[0] for c in curves)
            numbers[f"{name}_last_quarter"] = _mean_of(_quarters(c)[1] for c in curves)
    return numbers


def _mean_of(values) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None
