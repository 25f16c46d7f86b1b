"""Prometheus metrics of a running node, served at http://[node].metrics_addr/metrics.

Every value comes from the node's read model, the one the TUI and `sapo devnet status` read
(client.node.view.watcher's `Watcher`): its journal (client.node.view.journal: local rounds, tokens,
chain rounds by phase, the outbox, peer batches by verdict, the stage spans), its event log, and
the ledger (client.node.view.ledger: stake, rewards, our submissions' outcomes, the votes we cast,
settlements, slashes and appeals; its family's standing). A scrape reads them afresh (at most
once a second: faster scrapes get the last reading), so nothing is computed while nobody
scrapes. What a scrape costs does not grow with the node's age: the journal is read through its
indexes and new rows only (no per-round history, which only the TUI draws), and the ledger's
state at most every LEDGER_EVERY_S (twice a round when rounds are shorter; whether the chain
answers is asked each time); `python -m scripts.bench_node --metrics` measures the cost. The
collector has its own watcher: a scrape never touches the node's threads, and a scrape that
fails (a part down, an error of ours) leaves the node as it was.

Names follow Prometheus' conventions: the `sapo_` prefix, base units (seconds; ether for money, as
operators read it), `_total` for counters (each only grows while the process runs), labels with
a handful of values each (no per-peer or per-round label). Counts that can fall (peer batches by
their current verdict, pending submissions, the outbox) are gauges. docs/operator.md lists each
metric and the alerts over them (deploy/prometheus/alerts.yml).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from client import __version__
from client.config import NodeConfig
from client.node.eventlog import Span
from client.node.view.journal import NodeTotals
from client.node.view.snapshot import Snapshot
from client.node.view.watcher import Watcher

log = logging.getLogger("sapo.metrics")

ETHER = 10**18
MIN_INTERVAL_S = 1.0  # scrapes closer together than this get the last reading
# the ledger's state (stake, rewards, votes, outcomes) is read again at most this often, or twice
# a round when rounds are shorter; the chain's reachability is asked at every reading
LEDGER_EVERY_S = 15.0
# stage durations: a proof's fetch or a GRPO step at the top, an attestation at the bottom
STAGE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
OUTCOMES = ("credited", "disputed", "unavailable", "uncredited")
VERDICTS = ("verified", "bad", "unavailable")
VOTES = ("agree", "dispute", "unavailable")


class StageHistograms:
    """Per stage, a histogram of its spans' durations: each span in the journal is read once
    (by its row id), so the counts only grow while this process runs."""

    def __init__(self) -> None:
        self.after = 0  # the last span row read
        self.buckets = {str(s): [0] * len(STAGE_BUCKETS) for s in Span}
        self.sums = {str(s): 0.0 for s in Span}
        self.counts = {str(s): 0 for s in Span}

    def add(self, spans: list[tuple[int, float, float, str]]) -> None:
        for rowid, started, ended, stage in spans:
            self.after = max(self.after, rowid)
            if stage not in self.counts:  # a stage of a newer client: not ours to name
                continue
            seconds = max(0.0, ended - started)
            for i, bound in enumerate(STAGE_BUCKETS):
                if seconds <= bound:
                    self.buckets[stage][i] += 1
            self.sums[stage] += seconds
            self.counts[stage] += 1

    def family(self) -> HistogramMetricFamily:
        family = HistogramMetricFamily(
            "sapo_stage_duration_seconds",
            "Wall time of each stage the node ran (generate and train on the compute thread; "
            "pin, submit, attest, discover, fetch, verify and prove on the I/O threads)",
            labels=["stage"],
        )
        for stage, counts in self.buckets.items():
            buckets = [(f"{b:g}", c) for b, c in zip(STAGE_BUCKETS, counts, strict=True)]
            buckets.append(("+Inf", self.counts[stage]))
            family.add_metric([stage], buckets, self.sums[stage])
        return family


def model_label(model: str) -> str:
    """The model as a label: `seed`, a hub name (`Qwen/Qwen2.5-0.5B`), or a local directory's
    last part, never its path (which says where an operator keeps things)."""
    if "/" not in model:
        return model
    hub = re.fullmatch(r"[\w.-]+/[\w.-]+", model) and not model.startswith(".")
    return model if hub and not Path(model).exists() else Path(model).name


class NodeCollector(Collector):
    """Reads the node's read model at each scrape and renders it as metric families."""

    def __init__(
        self, watcher: Watcher, cfg: NodeConfig, *, running: Callable[[], bool] = lambda: True
    ):
        self.watcher = watcher
        self.cfg = cfg
        self.running = running
        self.stages = StageHistograms()
        self._lock = threading.Lock()
        self._read_at = 0.0
        self._reading: tuple[Snapshot, NodeTotals] | None = None

    def describe(self) -> list[Metric]:
        return []  # registering reads nothing; the families are known at the first scrape

    def read(self) -> tuple[Snapshot, NodeTotals]:
        """The read model now (or as of the last read, within MIN_INTERVAL_S)."""
        with self._lock:
            now = time.monotonic()
            if self._reading is None or now - self._read_at >= MIN_INTERVAL_S:
                last = self.watcher.last
                every = LEDGER_EVERY_S
                if last.round_length:  # each round's chain state is read at least twice
                    every = min(every, last.round_length / 2)
                snap = self.watcher.snapshot(
                    running=self.running(), history=False, ledger_every_s=every
                )
                while spans := self.watcher.node.new_spans(self.stages.after):
                    self.stages.add(spans)
                self._reading = (snap, self.watcher.node.totals())
                self._read_at = now
            return self._reading

    def collect(self) -> Iterator[Metric]:
        snap, totals = self.read()
        tally = self.watcher.view.tally
        policy = self.cfg.policy
        yield _gauge(
            "sapo_build_info",
            "The client that serves these metrics (value 1)",
            1,
            version=__version__,
            model=model_label(policy.model),
            backend=policy.backend,
            adapter=policy.adapter,
            family=(snap.account.family or "") if snap.account else "",
        )
        yield _gauge("sapo_node_running", "1 while the node's round loop runs", snap.node_running)
        # the parts the node depends on
        yield _gauge(
            "sapo_chain_up", "1 if the chain's RPC answered at the last read", snap.chain.ok
        )
        yield _gauge(
            "sapo_chain_last_success_timestamp_seconds",
            "When the chain's RPC last answered (unix time)",
            snap.chain.as_of,
        )
        store = "ipfs" if self.cfg.store.backend == "ipfs" else "store"
        yield _gauge(
            f"sapo_{store}_up", f"1 if the {store} API answered at the last read", snap.store.ok
        )
        yield _gauge(
            f"sapo_{store}_last_success_timestamp_seconds",
            f"When the {store} API last answered (unix time)",
            snap.store.as_of,
        )
        # rounds and work
        yield _gauge("sapo_chain_round", "The ledger's current round (its clock)", snap.round)
        yield _gauge(
            "sapo_node_last_sealed_round",
            "The last chain round whose batch the node sealed",
            totals.last_sealed_round,
        )
        yield _gauge(
            "sapo_node_last_submitted_round",
            "The last chain round whose submission is mined",
            totals.last_submitted_round,
        )
        yield _counter(
            "sapo_local_rounds", "Local rounds generated and trained", totals.local_rounds
        )
        yield _counter("sapo_grpo_steps", "GRPO optimizer steps taken", totals.grpo_steps)
        yield _counter(
            "sapo_generated_tokens", "Completion tokens generated", totals.generated_tokens
        )
        yield _counter("sapo_trained_tokens", "Tokens trained on", totals.trained_tokens)
        yield _counter(
            "sapo_skipped_rounds", "Chain rounds in which no local round started", totals.skipped
        )
        yield _gauge(
            "sapo_node_busy_ratio",
            "Share of the last 10 rounds' wall time spent generating or training",
            snap.busy_share,
        )
        yield _gauge(
            "sapo_node_blocked_ratio",
            "Share of the last 10 rounds' wall time the compute thread waited on chain or IPFS",
            snap.blocked_share,
        )
        yield _gauge(
            "sapo_node_local_rounds_per_round",
            "Local rounds started per chain round over the last 10 rounds",
            snap.local_rounds_per_round,
        )
        yield self.stages.family()
        yield from _training(snap.training)
        # the outbox: transactions and pins waiting to be sent
        yield _by_label(
            GaugeMetricFamily,
            "sapo_outbox_pending",
            "Outbox entries not sent yet, per kind",
            "kind",
            dict(sorted(totals.outbox.items())),
        )
        yield _gauge(
            "sapo_outbox_oldest_age_seconds",
            "Age of the oldest unsent outbox entry (0 when the outbox is empty)",
            0.0 if totals.outbox_oldest is None else max(0.0, time.time() - totals.outbox_oldest),
        )
        # our submissions and the checkers' verdicts on them
        yield _by_label(
            CounterMetricFamily,
            "sapo_submissions",
            "Our submissions whose round is final, by outcome (credited, or why not); missed: "
            "rounds whose submission could not be made in the ledger's window",
            "outcome",
            {o: tally.outcomes.get(o, 0) for o in OUTCOMES} | {"missed": totals.missed},
        )
        yield _by_label(
            CounterMetricFamily,
            "sapo_book_submissions",
            "Our submissions in the root lane whose verdict root we audited, by outcome "
            "(credited or uncredited)",
            "outcome",
            {"credited": 0, "uncredited": 0} | totals.book,
        )
        yield _gauge(
            "sapo_relayed_votes",
            "Receipted votes our checkers relayed on our batches in the root lane, kept (rounds "
            "whose lies can still be proven; [root_lane].relay_votes)",
            totals.relayed_votes,
        )
        yield _gauge(
            "sapo_submissions_pending",
            "Our submissions whose round is not final yet (their credit can still change)",
            tally.outcomes.get("pending", 0),
        )
        yield _by_label(
            CounterMetricFamily,
            "sapo_settlements",
            "Our submissions settled, by verdict",
            "verdict",
            tally.settled,
        )
        yield _counter("sapo_slashes", "Times our stake was slashed", tally.slashes)
        yield _counter(
            "sapo_slashed_ether", "Stake slashed from us (ether)", tally.slashed_wei / ETHER
        )
        yield _counter("sapo_appeals", "Appeals of our submissions' verdicts", tally.appeals)
        # our work for the swarm: votes and peers' batches
        yield _by_label(
            CounterMetricFamily,
            "sapo_votes_cast",
            "Votes we cast on peers' batches, by kind",
            "kind",
            {k: tally.votes_cast[k] for k in VOTES},
        )
        yield _by_label(
            GaugeMetricFamily,
            "sapo_peer_batches",
            "Peers' batches in the journal, by our current verdict (an unavailable one may yet "
            "be fetched, and so change verdict)",
            "verdict",
            {v: totals.peer_batches.get(v, 0) for v in VERDICTS},
        )
        yield _gauge("sapo_peers", "Nodes registered on the ledger, us included", len(snap.peers))
        # money, in ether
        account = snap.account
        if account is not None:
            yield _gauge("sapo_registered", "1 if we are registered", account.registered)
            yield _gauge(
                "sapo_stake_active_ether", "Our active stake (ether)", account.active_stake / ETHER
            )
            yield _gauge(
                "sapo_stake_unbonding_ether",
                "Our stake waiting out its unbonding period (ether)",
                account.unbonding / ETHER,
            )
            yield _gauge(
                "sapo_wallet_balance_ether",
                "Our account's balance (ether)",
                account.balance / ETHER,
            )
            yield _gauge(
                "sapo_rewards_claimable_ether",
                "Rewards we may claim now (ether)",
                account.claimable / ETHER,
            )
            yield _gauge(
                "sapo_rewards_paid_ether",
                "Rewards paid to us so far (ether)",
                account.total_paid / ETHER,
            )
            yield _gauge(
                "sapo_family_checkers",
                "Staked nodes of our model family besides us: who can check our batches",
                account.family_nodes,
            )
            yield _gauge(
                "sapo_family_quorum_ok",
                "1 if our family can fill a quorum of checkers and no address holds a third of "
                "its stake (sapo doctor says which problem there is when 0)",
                not account.family_problems,
            )
        if snap.min_stake is not None:
            yield _gauge(
                "sapo_stake_min_ether", "The ledger's minimum stake (ether)", snap.min_stake / ETHER
            )
        if snap.reward_pool is not None:
            yield _gauge(
                "sapo_reward_pool_ether",
                "The ledger's reward pool (ether)",
                snap.reward_pool / ETHER,
            )


def _training(t) -> Iterator[Metric]:
    """The last local round's training numbers (the journal's metrics row; NaN before one)."""
    yield _by_label(
        GaugeMetricFamily,
        "sapo_reward_mean",
        "Mean verifier reward of the last local round's completions: its own (local) and the "
        "peers' it trained on (external)",
        "source",
        {"local": t.reward_local if t else None, "external": t.reward_external if t else None},
    )
    yield _gauge("sapo_train_loss", "The last GRPO step's loss", t.loss if t else None)
    yield _gauge(
        "sapo_train_clip_ratio",
        "Share of the last step's tokens whose ratio was clipped",
        t.clip_fraction if t else None,
    )
    yield _by_label(
        GaugeMetricFamily,
        "sapo_external_completions",
        "Peers' completions in the last step: weighed as off-policy samples by the external "
        "correction, or not (another tokenizer, no log-probs in their batch)",
        "weighed",
        {"true": t.external_weighed if t else 0, "false": t.external_unweighed if t else 0},
    )
    yield _gauge(
        "sapo_offpolicy_importance_ratio",
        "Mean importance ratio (learner / producer) of the last step's weighed external tokens",
        t.offpolicy_ratio if t else None,
    )
    yield _gauge(
        "sapo_offpolicy_truncated_ratio",
        "Share of the last step's weighed external tokens whose ratio was capped at tis_cap",
        t.offpolicy_truncated if t else None,
    )
    yield _gauge(
        "sapo_offpolicy_filtered_ratio",
        "Share of the last step's weighed external completions the f-tis filter dropped",
        t.offpolicy_filtered if t else None,
    )


def _nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def _by_label(kind, name: str, doc: str, label: str, values: dict[str, float | None]) -> Metric:
    """A gauge or counter family of one sample per value of `label` (NaN for an unknown value)."""
    family = kind(name, doc, labels=[label])
    for key, value in values.items():
        family.add_metric([key], _nan(value))
    return family


def _gauge(name: str, doc: str, value: float | bool | None, **labels: str) -> GaugeMetricFamily:
    """A gauge of one sample; NaN while the read model has no value for it (never a made-up 0)."""
    family = GaugeMetricFamily(name, doc, labels=list(labels))
    family.add_metric(list(labels.values()), _nan(value))
    return family


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)
