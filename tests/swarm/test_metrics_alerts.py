"""The shipped alert rules and dashboard (deploy/), checked with Prometheus' own promtool.

The rules are checked statically (`promtool check rules`) and played (`promtool test rules`) on
series scraped from a real devnet node while it is healthy and while its parts fail for real: its
stake unstaked below the ledger's minimum (`sapo stake unstake`), its IPFS daemon killed, its chain
(anvil) frozen with SIGSTOP, the node itself killed. promtool's
clock is not ours: each real scrape becomes one minute of promtool time (the rules' `for`
durations are minutes), and a scrape that fails becomes `up 0` with the node's series absent, as
Prometheus records it. Grafana is not packaged here: the dashboard is checked statically (JSON,
every query parsed as PromQL by promtool, every metric it names exported by a real node).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from client.cli.main import app
from tests.harness.devnets import MECHANICS_ENV, start_mechanics_devnet, stop_devnet
from tests.harness.policies import cached_seed_test
from tests.harness.processes import wait_until

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "sapo-node.json"
PROMTOOL = shutil.which("promtool")
ROUND_S = 6
INSTANCE = "node-0"
STEP = "1m"  # promtool time per real scrape


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None, "promtool not installed: run scripts/setup"
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


def rules() -> list[dict]:
    return [r for group in yaml.safe_load(ALERTS.read_text())["groups"] for r in group["rules"]]


def dashboard_queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [t["expr"] for panel in board["panels"] for t in panel.get("targets", [])]


def test_the_alert_rules_are_valid_and_each_has_a_runbook() -> None:
    checked = promtool("check", "rules", str(ALERTS))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for rule in rules():
        assert rule["alert"].startswith("Sapo") and rule["annotations"]["runbook"], rule
        assert rule["labels"]["severity"] in ("warning", "critical"), rule


def test_every_dashboard_query_parses_as_promql(tmp_path: Path) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 12
    # promtool parses a rule file's expressions: each query as a recording rule's
    as_rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [{"record": f"dashboard:q{i}", "expr": q} for i, q in enumerate(queries)],
            }
        ]
    }
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(as_rules))
    checked = promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def scrape(url: str) -> dict[tuple[str, tuple], float] | None:
    """A node's /metrics as (sample name, sorted labels) -> value; None when it does not answer
    (what Prometheus records as `up 0`)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - loopback
            text = answer.read().decode()
    except OSError:
        return None
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples, name: str, **labels: str) -> float | None:
    return None if samples is None else samples.get((name, tuple(sorted(labels.items()))))


class Recorder:
    """Scrapes one node, one scrape a step; remembers each scrape and where each phase ended."""

    def __init__(self, url: str):
        self.url = url
        self.scrapes: list[dict | None] = []
        self.ends: dict[str, int] = {}

    def step(self) -> dict | None:
        samples = scrape(self.url)
        self.scrapes.append(samples)
        time.sleep(0.5)  # a step is a minute of promtool's time, whatever it lasts here
        return samples

    def until(self, phase: str, fault, *, times: int, timeout_s: float) -> None:
        """Scrapes until `fault(samples)` held in `times` scrapes in a row; ends `phase`."""
        deadline, held = time.monotonic() + timeout_s, 0
        while held < times:
            assert time.monotonic() < deadline, f"{phase}: the fault never showed in the metrics"
            held = held + 1 if fault(self.step()) else 0
        self.ends[phase] = len(self.scrapes) - 1

    def input_series(self, names: set[str]) -> list[dict]:
        """promtool input series of the scraped samples named in `names`, plus `up`."""
        keys = sorted({k for s in self.scrapes if s for k in s if k[0] in names})
        series = []
        for name, labels in keys:
            values = []
            for s in self.scrapes:
                v = None if s is None else s.get((name, labels))
                values.append("_" if v is None else ("NaN" if v != v else repr(float(v))))
            selector = ",".join(
                f'{k}="{v}"' for k, v in [*labels, ("instance", INSTANCE), ("job", "sapo")]
            )
            series.append({"series": f"{name}{{{selector}}}", "values": " ".join(values)})
        up = " ".join("0" if s is None else "1" for s in self.scrapes)
        series.append({"series": f'up{{instance="{INSTANCE}",job="sapo"}}', "values": up})
        return series


def fired(alert: str) -> list[dict]:
    """The alert as promtool should see it firing for node-0: its labels, and its annotations
    rendered (the rules that fire here template only the instance)."""
    rule = next(r for r in rules() if r["alert"] == alert)
    annotations = {
        k: v.replace("{{ $labels.instance }}", INSTANCE) for k, v in rule["annotations"].items()
    }
    assert "{{" not in "".join(annotations.values()), annotations
    labels = {"instance": INSTANCE, "job": "sapo", **rule["labels"]}
    return [{"exp_labels": labels, "exp_annotations": annotations}]


@pytest.mark.e2e
@pytest.mark.slow
def test_each_alert_fires_under_its_fault_and_stays_silent_while_healthy(
    tmp_path: Path, seed_test: Path
) -> None:
    env = dict(MECHANICS_ENV) | {
        "SAPO_POLICY__CACHE_DIR": str(cached_seed_test(seed_test, tmp_path / "policies")),
        # node-0, whose alerts are checked, uncapped as a node runs: its busy share is real; its
        # peer, there to attest it, stays capped (an uncapped one took a core the other test
        # worker needs, for nothing this test reads)
        "SAPO_DEVNET__NODE_OVERRIDES": json.dumps({"0": {"sapo": {"max_local_rounds": 0}}}),
    }
    data_dir = tmp_path / "devnet"
    proc, state = start_mechanics_devnet(data_dir, 2, ROUND_S, "--metrics", env=env)
    try:
        node = state["nodes"][0]
        recorder = Recorder(node["metrics"])
        wait_until(
            lambda: (
                (value(scrape(node["metrics"]), "sapo_node_last_submitted_round") or 0) > 0
                and (
                    value(scrape(node["metrics"]), "sapo_submissions_total", outcome="credited")
                    or 0
                )
                > 0
            ),
            timeout_s=ROUND_S * 20,
            what="node-0's first credited submission",
        )
        exported = {name for name, _ in scrape(node["metrics"]) or {}}
        recorder.until(
            "healthy",
            lambda s: s is not None and value(s, "sapo_ipfs_up") == 1,
            times=16,
            timeout_s=120,
        )
        # node-0's operator unstakes below the ledger's minimum
        now = recorder.scrapes[-1]
        active, minimum = (value(now, f"sapo_stake_{k}_ether") for k in ("active", "min"))
        assert active is not None and minimum is not None and active > minimum
        unstaked = CliRunner().invoke(
            app,
            ["stake", "unstake", f"{active - minimum / 2:.6f} ether", "--config", node["config"]],
        )
        assert unstaked.exit_code == 0, unstaked.output
        recorder.until(
            "stake",
            lambda s: (
                value(s, "sapo_stake_active_ether") is not None
                and value(s, "sapo_stake_active_ether") < minimum
            ),
            times=4,
            timeout_s=ROUND_S * 10,
        )
        os.kill(state["ipfs"][0]["pid"], signal.SIGKILL)  # node-0's IPFS daemon
        recorder.until(
            "ipfs", lambda s: value(s, "sapo_ipfs_up") == 0, times=4, timeout_s=ROUND_S * 10
        )
        os.kill(state["anvil_pid"], signal.SIGSTOP)  # the chain stops answering
        try:
            recorder.until(
                "chain", lambda s: value(s, "sapo_chain_up") == 0, times=4, timeout_s=120
            )
        finally:
            os.kill(state["anvil_pid"], signal.SIGCONT)
        os.kill(node["pid"], signal.SIGKILL)  # the node itself
        recorder.until("node", lambda s: s is None, times=4, timeout_s=60)
    finally:
        if proc.poll() is None:
            stop_devnet(proc)

    # every metric the dashboard names is one a real node exports
    named = {m for q in dashboard_queries() for m in re.findall(r"\bsapo_[a-z_]+", q)}
    base = {re.sub(r"_(bucket|count|sum)$", "", n) for n in exported} | exported
    assert named <= base, named - base

    alerts = [r["alert"] for r in rules()]
    names = {m for r in rules() for m in re.findall(r"\bsapo_[a-z_]+", r["expr"])}
    ends = recorder.ends
    tests = [
        # healthy: no alert at the end of the healthy scrapes
        *({"eval_time": f"{ends['healthy']}m", "alertname": a, "exp_alerts": []} for a in alerts),
        {
            "eval_time": f"{ends['stake']}m",
            "alertname": "SapoStakeBelowMinimum",
            "exp_alerts": fired("SapoStakeBelowMinimum"),
        },
        {"eval_time": f"{ends['stake']}m", "alertname": "SapoIpfsUnreachable", "exp_alerts": []},
        {
            "eval_time": f"{ends['ipfs']}m",
            "alertname": "SapoIpfsUnreachable",
            "exp_alerts": fired("SapoIpfsUnreachable"),
        },
        {"eval_time": f"{ends['ipfs']}m", "alertname": "SapoChainUnreachable", "exp_alerts": []},
        {
            "eval_time": f"{ends['chain']}m",
            "alertname": "SapoChainUnreachable",
            "exp_alerts": fired("SapoChainUnreachable"),
        },
        {"eval_time": f"{ends['chain']}m", "alertname": "SapoNodeDown", "exp_alerts": []},
        {
            "eval_time": f"{ends['node']}m",
            "alertname": "SapoNodeDown",
            "exp_alerts": fired("SapoNodeDown"),
        },
    ]
    spec = {
        "rule_files": [str(ALERTS)],
        "evaluation_interval": STEP,
        "tests": [
            {
                "interval": STEP,
                "input_series": recorder.input_series(names),
                "alert_rule_test": tests,
            }
        ],
    }
    (tmp_path / "alerts-test.yml").write_text(yaml.safe_dump(spec, sort_keys=False, width=1000))
    played = promtool("test", "rules", "alerts-test.yml", cwd=tmp_path)
    assert played.returncode == 0, played.stdout + played.stderr
    # the same series cannot pass for the opposite: the node down while it was healthy
    spec["tests"][0]["alert_rule_test"] = [
        {
            "eval_time": f"{ends['healthy']}m",
            "alertname": "SapoNodeDown",
            "exp_alerts": fired("SapoNodeDown"),
        }
    ]
    (tmp_path / "opposite.yml").write_text(yaml.safe_dump(spec, sort_keys=False, width=1000))
    opposite = promtool("test", "rules", "opposite.yml", cwd=tmp_path)
    assert opposite.returncode == 1 and "SapoNodeDown" in opposite.stdout + opposite.stderr
