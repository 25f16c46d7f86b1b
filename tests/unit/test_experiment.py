"""`sapo experiment`: the smoke experiment end to end through the real CLI (devnets, node
processes, the ledger), its outputs checked against the nodes' journals and the chain's record;
resuming; and clear errors for bad experiment files."""

from __future__ import annotations

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from client.config import with_sections
from client.experiment import ExperimentError, load_experiment
from client.experiment.cell import base_config, mixed_families, node_sections
from client.experiment.config import Cell
from client.experiment.heldout import evaluation_set
from client.experiment.inprocess import SimNode
from client.experiment.report import diff_ci95, summarize
from client.experiment.run import _remember_scale
from client.node.assemble import NodeConfigError, base_policy_path
from client.node.rollouts import task_seed
from client.policy import load_policy
from client.policy.evaluate import greedy_rewards
from client.store.batch import canonical_json, decode_batch
from client.tasks import draw, load_catalog, local_round_seed
from client.tasks.verify import plain_prompt
from tests.harness.policies import cached_seed_test
from tests.harness.processes import REPO, sapo_run


def sapo(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return sapo_run(*args, cwd=cwd, timeout=900)


def run_smoke(out: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return sapo(
        "experiment",
        "run",
        "--config",
        "smoke",
        "--out",
        str(out),
        "--cache-dir",
        str(cache),
        *extra,
    )


def journal_rewards(node_dir: Path, first: int, last: int) -> dict[int, float]:
    with sqlite3.connect(f"file:{node_dir / 'journal.sqlite'}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT round, data FROM metrics").fetchall()
    return {r: json.loads(d)["reward_local"] for r, d in rows if first <= r <= last}


@pytest.mark.e2e
@pytest.mark.slow
def test_smoke_experiment_outputs_match_journals_and_ledger(
    tmp_path: Path, seed_test: Path
) -> None:
    out, cache = tmp_path / "results", cached_seed_test(seed_test, tmp_path / "cache")
    ran = run_smoke(out, cache)
    assert ran.returncode == 0, ran.stderr[-3000:] + ran.stdout[-2000:]
    for name in ("summary.json", "table.md", "curves.png"):
        assert (out / name).is_file(), f"{name} was not written"
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((out / "summary.json").read_text())
    exp = load_experiment("smoke")
    assert summary["cells_done"] == summary["cells_total"] == len(exp.cells())
    table = (out / "table.md").read_text()
    for i, j in exp.splits:
        assert f"| homogeneous | {i}/{j} |" in table, table

    for cell in exp.cells():
        cell_dir = out / "cells" / cell.key
        record = json.loads((cell_dir / "cell.json").read_text())
        assert (cell_dir / "ledger-state.json").stat().st_size > 0, "the ledger's state is kept"
        first, last = record["first_round"], record["last_round"]
        assert last - first + 1 == exp.rounds
        cumulative = 0.0
        for node in record["nodes"]:
            # the journal kept in the cell says the same as the record ...
            rewards = journal_rewards(cell_dir / node["data_dir"], first, last)
            assert sorted(rewards) == list(range(first, last + 1)), "a scored round was not trained"
            assert node["policy"]["seed"] == 0, "the record says where the node started"
            for r in node["rounds"]:
                assert r["reward_local"] == pytest.approx(rewards[r["round"]])
                # ... and the ledger recorded the same number (claim / rollouts)
                assert r["reward_on_chain"] == pytest.approx(r["reward_local"], abs=1e-6)
                assert r["local_items"] is not None
                # the per-dataset split covers the node's whole batch: I x L rollouts
                by_entry = r["reward_by_entry"]
                rollouts = sum(n for _, n in by_entry.values())
                assert rollouts == cell.local * exp.completions, by_entry
                weighted = sum(mean * n for mean, n in by_entry.values()) / rollouts
                assert weighted == pytest.approx(r["reward_local"]), by_entry
            cumulative += sum(rewards.values())
        entry = summary["configurations"][cell.configuration]
        assert entry["seeds"][str(cell.seed)]["cumulative"] == pytest.approx(cumulative)
        assert entry["not_on_chain_or_different"] == 0
        if cell.external == 0:  # no external item is ever trained on in an I/0 split
            assert all(r["external_items"] == 0 for n in record["nodes"] for r in n["rounds"])
        check_devnet_held_out(exp, cell, cell_dir, record, cache)
    # the in-process swarm plays a node's round as the node played it: each node's first local
    # round (from the seed policy, before any step), played again in process from the same ledger
    # address and node address, is the same batch part byte for byte (questions, completions,
    # token ids, rewards, weights id)
    cell = exp.cells()[0]
    record = json.loads((out / "cells" / cell.key / "cell.json").read_text())
    base = base_config(exp, cell, cache)
    sections = node_sections(cell, base)
    catalog = load_catalog(base.tasks.catalog)
    for i, node in enumerate(record["nodes"]):
        journal = out / "cells" / cell.key / node["data_dir"] / "journal.sqlite"
        with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as db:
            round_, k, part = db.execute(
                "SELECT round, k, part FROM local_rounds ORDER BY round, k LIMIT 1"
            ).fetchone()
        cfg = with_sections(base, **sections(i))
        sim = SimNode(
            i,
            cfg,
            catalog,
            base.devnet.chain_id,
            record["ledger"],
            base_policy_path(cfg),
            address=node["address"],
        )
        _, data = sim.play(round_)
        replayed = decode_batch(data).local_rounds[0].model_dump(mode="json")
        assert k == 0 and canonical_json(replayed) == bytes(part), f"node {i}, round {round_}"

    # a split is compared with the baseline seed by seed (same seed: same questions)
    configurations = summary["configurations"]
    baseline = configurations[f"homogeneous {exp.baseline[0]}/0"]
    for entry in configurations.values():
        paired = entry["paired_vs_baseline"]
        for seed, delta in paired["per_seed"].items():
            expected = entry["seeds"][seed]["cumulative"] - baseline["seeds"][seed]["cumulative"]
            assert delta == pytest.approx(expected)
        assert paired["seeds"] == len(exp.seeds)
    assert "paired Δ" in table and "first → last quarter" in table, table

    # resuming: done cells are not played again (a cell without its record is played again: the
    # in-process test below interrupts a run for real and resumes it; the logic is the same)
    untouched = exp.cells()[0]
    kept = (out / "cells" / untouched.key / "cell.json").read_text()
    again = run_smoke(out, cache, "--json")
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["configurations"] == summary["configurations"]
    assert (out / "cells" / untouched.key / "cell.json").read_text() == kept, (
        "a done cell was replayed"
    )

    # resuming at another scale is refused before anything is played: the cells would not add up
    longer = tmp_path / "smoke.toml"
    text = (REPO / "configs" / "experiments" / "smoke.toml").read_text()
    longer.write_text(text.replace("rounds = 3\n", "rounds = 4\n"))
    refused = sapo(
        "experiment", "run", "--config", str(longer), "--out", str(out), "--cache-dir", str(cache)
    )
    assert refused.returncode != 0
    assert "rounds: 3 there, 4 now" in refused.stderr and "--out" in refused.stderr, refused.stderr
    assert (out / "cells" / untouched.key / "cell.json").read_text() == kept


def check_devnet_held_out(exp, cell: Cell, cell_dir: Path, record: dict, cache: Path) -> None:
    """A devnet cell's held-out evaluation is of the nodes' starting policies and of the
    checkpoints they saved, and leaves out every question a node drew for training."""
    held = record["held_out"]
    base = base_config(exp, cell, cache)
    tasks = evaluation_set(load_catalog(base.tasks.catalog), exp.eval_questions, exp.eval_set)
    start, end = held["evaluations"]
    assert (start["round"], end["round"]) == (0, exp.rounds)
    assert start["greedy"][0] == start["greedy"][1], "every node starts from the same policy"
    drawn: set[str] = set()
    for i, node in enumerate(record["nodes"]):
        node_dir = cell_dir / node["data_dir"]
        saved = load_policy(node_dir / "checkpoint")
        # the end is the greedy answers of the checkpoint the node saved when it stopped ...
        assert end["greedy"][i] == [
            round(x, 6) for x in greedy_rewards(saved, tasks, base.policy.max_new_tokens)
        ]
        # ... the node's last state: the step it stopped at
        events = [json.loads(line) for line in (node_dir / "events.jsonl").open()]
        [stopped] = [e["step"] for e in events if e["kind"] == "node.stopped"]
        assert end["steps"][i] == stopped
        with sqlite3.connect(f"file:{node_dir / 'journal.sqlite'}?mode=ro", uri=True) as db:
            parts = [bytes(p) for (p,) in db.execute("SELECT part FROM local_rounds")]
        drawn |= {item["question"] for p in parts for item in json.loads(p)["items"]}
    in_journals = {i for i, t in enumerate(tasks) if t.question in drawn}
    # every evaluation question a node drew (as its journal shows) is left out
    assert in_journals <= set(held["trained"]), (in_journals, held["trained"])
    assert held["pretrained"] is not None and held["set"] == exp.eval_set


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('name = "x"\nrounds = 2\nround_length_s = 5\nsplits = [[5, 2]]\n', "I + J must equal"),
        ('name = "x"\nrounds = 2\nround_length_s = 5\nvariants = ["mixed"]\n', "variants"),
        ('name = "x"\nround_length_s = 5\n', "rounds"),
        ('name = "x"\nrounds = 2\nround_length_s = 5\nwhat = 1\n', "what"),
        ("name = \n", "not valid TOML"),
        ('name = "x"\nrounds = 2\nround_length_s = 5\ncorrections = ["tis", "tis"]\n', "repeat"),
        (
            'name = "x"\nrounds = 2\nround_length_s = 5\n'
            '[node.sapo]\nexternal_correction = "tis"\n',
            "name the corrections to play in `corrections`",
        ),
    ],
)
def test_bad_experiment_files_are_refused_with_the_reason(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ExperimentError, match=re.escape(expected)):
        load_experiment(path)


def test_experiment_run_names_a_bad_file_and_what_is_wrong_and_exits_2(tmp_path: Path) -> None:
    """What `sapo experiment run` says of a file load_experiment refuses (each refusal above
    takes the same path to the terminal; one `sapo` process is ~5 s of imports)."""
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\nrounds = 2\nround_length_s = 5\nsplits = [[5, 2]]\n')
    ran = sapo("experiment", "run", "--config", str(path), "--out", str(tmp_path / "o"))
    said = "".join(ran.stderr.split())  # the console may wrap a long line anywhere
    assert ran.returncode == 2, ran.stderr
    assert "".join(str(path).split()) in said and "I+Jmustequal" in said, ran.stderr


def test_more_seeds_or_splits_extend_a_results_directory_but_another_scale_does_not(
    tmp_path: Path,
) -> None:
    exp = load_experiment("smoke")
    _remember_scale(exp, tmp_path)
    wider = exp.model_copy(update={"seeds": [0, 1], "splits": [(2, 0), (1, 1)]})
    _remember_scale(wider, tmp_path)  # the done cells stay comparable: accepted
    for change in ({"completions": 8}, {"node": {"policy": {"max_new_tokens": 9}}}):
        with pytest.raises(ExperimentError, match="another scale"):
            _remember_scale(exp.model_copy(update=change), tmp_path)
    (tmp_path / "experiment.json").write_text("{not json")
    with pytest.raises(ExperimentError, match="unreadable"):
        _remember_scale(exp, tmp_path)


def test_committed_paper_cpu_results_are_complete_and_at_the_configs_scale() -> None:
    # docs/results/paper-cpu is what README and the comparison quote: if paper-cpu.toml changes
    # scale, or loses a cell, those results no longer describe it and must be played again
    exp = load_experiment("paper-cpu")
    committed = REPO / "docs" / "results" / "paper-cpu"
    assert (committed / "experiment.json").is_file(), "the committed results must name their scale"
    _remember_scale(exp, committed)  # refuses when the committed cells were played at another
    summary = json.loads((committed / "summary.json").read_text())
    assert summary["cells_done"] == summary["cells_total"] == len(exp.cells())
    assert {p.stem for p in (committed / "cells").glob("*.json")} == {
        cell.key for cell in exp.cells()
    }
    for entry in summary["configurations"].values():
        assert entry["missing_node_rounds"] == 0 and entry["not_on_chain_or_different"] == 0
        assert len(entry["seeds"]) == len(exp.seeds)
    for path in (committed / "cells").glob("*.json"):  # the records name no machine's paths
        for node in json.loads(path.read_text())["nodes"]:
            assert node["data_dir"] == Path(node["data_dir"]).name, (path, node["data_dir"])


def test_committed_sharing_search_tables_are_made_from_their_records(tmp_path: Path) -> None:
    # docs/results/sharing-search quotes these tables: each is what the report makes of the
    # committed cell records, under the preset (configs/experiments/<run>.toml) it was played with
    root = REPO / "docs" / "results" / "sharing-search"
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    assert runs, "no committed search run"
    for run in runs:
        assert_remade_from_records(run, tmp_path)


def test_committed_sharing_runs_are_made_from_their_records(tmp_path: Path) -> None:
    # docs/results/sharing-format (and its heterogeneous companion, once committed) quote these
    runs = [REPO / "docs" / "results" / name for name in SHARING_RUNS]
    assert runs[0].is_dir(), "the homogeneous sharing run is not committed"
    for run in runs:
        if run.is_dir():
            assert_remade_from_records(run, tmp_path)
            summary = json.loads((run / "summary.json").read_text())
            for entry in summary["configurations"].values():  # 5 seeds, paired intervals
                assert len(entry["seeds"]) >= 5, run.name


SHARING_RUNS = (
    "sharing-format",
    "sharing-format-specialists",
    "sharing-format-specialists-shared",
    "offpolicy-format",
    "offpolicy-format-specialists-shared",
    "offpolicy-format-specialists-shared-long",
)


def assert_remade_from_records(run: Path, tmp_path: Path, *, complete: bool = True) -> None:
    """The committed run's summary.json and table.md are what the report makes of its cell
    records, under the preset (configs/experiments/<run>.toml) it was played with."""
    exp = load_experiment(run.name)
    _remember_scale(exp, run)  # refuses when the cells were played at another scale
    again = tmp_path / run.name
    shutil.copytree(run / "cells", again / "cells")
    summary = summarize(exp, again)
    if complete:
        assert summary["cells_done"] == summary["cells_total"], run.name
    assert (again / "table.md").read_text() == (run / "table.md").read_text(), run.name
    written = json.loads((run / "summary.json").read_text())
    assert json.loads(json.dumps(summary)) == written, run.name  # tuples are JSON lists


def test_welch_interval_of_two_runs() -> None:
    # equal variances and sizes: df = 4, t = 2.776, standard error sqrt(1/3 + 1/3)
    diff, half = diff_ci95([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert diff == pytest.approx(3.0) and half == pytest.approx(2.776 * (2 / 3) ** 0.5)
    # unequal: variances 1 over 3 and 10 over 5, df = (1/3 + 2)^2 / ((1/3)^2 / 2 + 2^2 / 4) =
    # 5.16, taken as 5 (t = 2.571)
    diff, half = diff_ci95([1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 8.0, 10.0])
    assert diff == pytest.approx(4.0) and half == pytest.approx(2.571 * (1 / 3 + 2) ** 0.5)
    assert diff_ci95([1.0], [1.0, 2.0]) is None


@pytest.mark.parametrize(
    ("name", "against", "names"),
    [
        # paper-cpu played in process, set beside the committed devnet run
        ("paper-cpu-inprocess", "paper-cpu", ("devnet", "in-process")),
        # sharing-format's 8/0 and 4/4 played on devnets, set beside the in-process run
        ("sharing-format-devnet", "sharing-format", ("in-process", "devnet")),
        # the one-tokenizer specialists played on devnets, beside the in-process run
        (
            "sharing-format-specialists-devnet",
            "sharing-format-specialists-shared",
            ("in-process", "devnet"),
        ),
        # issue 42's corrections among specialists on devnets, beside the in-process run
        (
            "offpolicy-format-specialists-devnet",
            "offpolicy-format-specialists-shared",
            ("in-process", "devnet"),
        ),
    ],
)
def test_committed_agreement_runs_and_their_comparisons_are_made_from_records(
    name: str, against: str, names: tuple[str, str], tmp_path: Path
) -> None:
    run = REPO / "docs" / "results" / name
    assert_remade_from_records(run, tmp_path)
    compared = subprocess.run(
        [
            str(REPO / ".venv" / "bin" / "python"),
            "-m",
            "scripts.run_compare",
            str(REPO / "docs" / "results" / against),
            str(run),
            "--names",
            *names,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert compared.stdout == (run / "comparison.md").read_text()
    assert " 4/4 |" in compared.stdout
    both_held_out = all(
        "held_out_pass1_end_mean" in e
        for d in (run, REPO / "docs" / "results" / against)
        for e in json.loads((d / "summary.json").read_text())["configurations"].values()
    )
    assert ("held-out greedy pass@1 at the end" in compared.stdout) == both_held_out


def test_unknown_experiment_names_the_presets() -> None:
    with pytest.raises(ExperimentError, match=r"presets: .*smoke"):
        load_experiment("no-such-experiment")


def test_specialist_seed_policies_are_pretrained_on_their_entries_only(
    tmp_path: Path, seed_test: Path
) -> None:
    exp = load_experiment("smoke")
    cell = Cell(variant="specialties", local=2, external=0, seed=0)
    base = base_config(exp, cell, tmp_path / "cache")
    sections = node_sections(cell, base)
    pairs = [sections(i)["policy"]["seed_datasets"] for i in range(3)]
    assert pairs == [
        ["basic_arithmetic", "chain_sum"],
        ["count_bits", "leg_counting"],
        ["basic_arithmetic", "fraction_simplification"],
    ]
    # what the entries decide is the corpus and its tokenizer, not how long the model trains on
    # them: 20 steps (the recipe's 150 cost twice the build for nothing this test reads)
    specialist = {**sections(1)["policy"], "seed_steps": 20}
    path = base_policy_path(with_sections(base, policy=specialist))
    assert path.name.endswith("-on-count_bits+leg_counting-s20")
    build = json.loads((path / "seed-build.json").read_text())
    questions = build["corpus_questions"]
    assert questions and all("bits" in q or "legs" in q for q in questions), questions[:3]
    with pytest.raises(NodeConfigError, match="no entries"):
        base_policy_path(with_sections(base, policy={"seed_datasets": ["no_such_task"]}))
    # its BPE was trained on its own corpus: the same size as the generalist's, other tokens, so
    # a devnet of both would dispute each other's honest batches and is refused before it starts
    problem = mixed_families([seed_test, path])
    assert problem and "2 different tokenizers" in problem and "in-process" in problem
    assert mixed_families([seed_test, seed_test]) is None
    # [policy].seed_shared_tokenizer: the specialist takes the generalist's tokenizer, token for
    # token (trained on every entry's questions), and is pretrained on its entries only; a
    # devnet of it and the generalist is one model family
    policy = {**specialist, "seed_shared_tokenizer": True}
    shared = base_policy_path(with_sections(base, policy=policy))
    assert shared.name == path.name + "-shared-tok"
    assert (shared / "tokenizer.json").read_bytes() == (seed_test / "tokenizer.json").read_bytes()
    assert json.loads((shared / "seed-build.json").read_text())["corpus_questions"] == questions
    assert mixed_families([seed_test, shared]) is None


IN_PROCESS = """
name = "inproc"
swarm = "in-process"
nodes = 2
rounds = 4
questions = 2
completions = 4
splits = [[2, 0], [1, 1]]
corrections = ["f-tis"]
seeds = [0, 1]
eval_questions = 24
eval_every = 2

[node.policy]
model = "seed-test"
max_new_tokens = 12

[node.train]
rounds_per_update = 1
"""


@pytest.mark.slow
def test_in_process_experiment_shares_evaluates_held_out_questions_and_resumes(
    tmp_path: Path, seed_test: Path
) -> None:
    path, out = tmp_path / "inproc.toml", tmp_path / "results"
    cache = cached_seed_test(seed_test, tmp_path / "cache")
    path.write_text(IN_PROCESS)
    exp = load_experiment(path)
    # played seed by seed: a run stopped part way has whole seeds of every split to pair; I/0
    # has no peers' completions to correct, so it is played under none only
    assert [(c.local, c.seed, c.correction) for c in exp.cells()] == [
        (2, 0, "none"),
        (1, 0, "f-tis"),
        (2, 1, "none"),
        (1, 1, "f-tis"),
    ]
    assert exp.cells()[1].key == "homogeneous-1x1-f-tis-s0"
    command = ["experiment", "run", "--config", str(path), "--out", str(out)]
    command += ["--cache-dir", str(cache)]
    # interrupted for real once the first cell is done, then resumed by the same command
    first = out / "cells" / exp.cells()[0].key / "cell.json"
    proc = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "sapo"), *command],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(600):
            if first.is_file() or proc.poll() is not None:
                break
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert first.is_file(), err[-3000:]
    kept = first.read_text()
    ran = sapo(*command)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert first.read_text() == kept, "a cell done before the interruption was played again"

    summary = json.loads((out / "summary.json").read_text())
    assert summary["cells_done"] == summary["cells_total"] == len(exp.cells())
    base = base_config(exp, exp.cells()[0], cache)
    catalog = load_catalog(base.tasks.catalog)
    held_out = evaluation_set(catalog, exp.eval_questions, "test")
    build = Path(base_policy_path(base)) / "seed-build.json"
    corpus = set(json.loads(build.read_text())["corpus_questions"])
    excluded: set[int] = set()
    for cell in exp.cells():
        record = json.loads((out / "cells" / cell.key / "cell.json").read_text())
        assert [r["round"] for r in record["nodes"][0]["rounds"]] == list(range(1, exp.rounds + 1))
        drawn: set[str] = set()
        for node in record["nodes"]:
            for r in node["rounds"]:
                # each node drew its own questions from its task seed, as a node on a ledger does
                seed = task_seed(
                    base.devnet.chain_id, record["ledger"], r["round"], node["address"]
                )
                drawn |= {t.question for t in draw(local_round_seed(seed, 0), cell.local, catalog)}
                assert sum(n for _, n in r["reward_by_entry"].values()) == cell.local * 4
                assert r["external_items"] <= cell.external
        held = record["held_out"]
        # a held-out question is one no node of the cell drew for training
        assert held["trained"] == [i for i, t in enumerate(held_out) if t.question in drawn]
        # nor one in the pretraining corpus of the nodes' seed policy
        assert held["pretrained"] == [
            i for i, t in enumerate(held_out) if plain_prompt(t.question) in corpus
        ]
        excluded |= set(held["trained"]) | set(held["pretrained"])
        assert [e["round"] for e in held["evaluations"]] == [0, 2, 4]
        start = held["evaluations"][0]["greedy"]
        assert len(start) == exp.nodes and start[0] == start[1], "every node starts the same"
        if cell.external:  # peers' verified items were trained on, weighed as off-policy
            rounds = [r for n in record["nodes"] for r in n["rounds"]]
            assert sum(r["external_items"] for r in rounds) > 0
            weighed = [r for r in rounds if r["external_weighed"]]
            assert weighed and all(r["external_unweighed"] == 0 for r in rounds)
            # one tokenizer, nodes a few steps apart: ratios near 1, and nothing capped at 2
            assert all(0.5 < r["offpolicy_ratio"] < 1.5 for r in weighed), weighed
            assert all(r["offpolicy_filtered"] is not None for r in weighed)

    configurations = summary["configurations"]
    assert 0 < len(excluded) < exp.eval_questions
    for configuration in configurations.values():  # every cell is scored on one held-out set
        for numbers in configuration["seeds"].values():
            assert numbers["held_out_questions"] == exp.eval_questions - len(excluded)
    baseline, shared = configurations["homogeneous 2/0"], configurations["homogeneous 1/1 f-tis"]
    assert shared["correction"] == "f-tis" and "correction" not in baseline
    paired = shared["held_out_paired_vs_baseline"]
    for seed in ("0", "1"):
        expected = (
            shared["seeds"][seed]["held_out_pass1_end"]
            - baseline["seeds"][seed]["held_out_pass1_end"]
        )
        assert paired["per_seed"][seed] == pytest.approx(expected)
    assert paired["seeds"] == 2 and paired["ci95"] is not None
    table = (out / "table.md").read_text()
    assert "in process" in table and "Held-out: greedy pass@1" in table, table
    assert "| homogeneous | 1/1 f-tis |" in table and "95% CI" in table, table
