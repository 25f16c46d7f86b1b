"""Task catalogs, the seeded draw and the verifiers, on real reasoning-gym datasets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from client.cli.main import app
from client.tasks import (
    CatalogError,
    check_against_ledger,
    draw,
    draw_refs,
    extract_answer,
    load_catalog,
    reference_answer,
    regenerate,
    reward,
    to_units,
)

REPO = Path(__file__).resolve().parents[2]
SEED = "0x" + "5a" * 32
# Verifiers of these datasets give partial credit to some wrong answers (as the paper notes).
PARTIAL_CREDIT = {"fraction_simplification", "propositional_logic"}


def test_shipped_catalogs_build_with_reasoning_gym() -> None:
    for name in ("tiny", "paper9"):
        catalog = load_catalog(name)
        catalog.check_datasets()
    assert [e.id for e in load_catalog("paper9").entries] == [
        "base_conversion",
        "basic_arithmetic",
        "arc_1d",
        "bf",
        "propositional_logic",
        "fraction_simplification",
        "decimal_arithmetic",
        "calendar_arithmetic",
        "binary_matrix",
    ]


def test_catalog_digest_is_stable_and_checked_against_the_ledger(tmp_path: Path) -> None:
    tiny = load_catalog("tiny")
    assert tiny.digest() == load_catalog(REPO / "configs/tasks/tiny.toml").digest()
    check_against_ledger(tiny, "0x" + tiny.digest().hex())
    changed = (REPO / "configs/tasks/tiny.toml").read_text().replace("max_n = 127", "max_n = 63")
    (tmp_path / "tiny.toml").write_text(changed)
    other = load_catalog(tmp_path / "tiny.toml")
    assert other.digest() != tiny.digest()
    with pytest.raises(CatalogError, match="the ledger pins task catalog 0x"):
        check_against_ledger(other, "0x" + tiny.digest().hex())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('name = "x"\nentries = []\n', "entries"),
        ('name = "x"\n[[entries]]\nid = "a"\ndataset = "chain_sum"\nweight = 0\n', "weight"),
        (
            'name = "x"\n[[entries]]\nid = "a"\ndataset = "chain_sum"\nweight = 1\n'
            '[[entries]]\nid = "a"\ndataset = "count_bits"\nweight = 1\n',
            "repeated",
        ),
        (
            'name = "x"\n[[entries]]\nid = "a"\ndataset = "chain_sum"\nweight = 1\n'
            "config = { seed = 3 }\n",
            "set by the draw",
        ),
        (
            'name = "x"\n[[entries]]\nid = "a"\ndataset = "chain_sum"\nweight = 1\nbogus = 1\n',
            "bogus",
        ),
        (  # a verifier nobody read for what a stranger's answer makes it do
            'name = "x"\n[[entries]]\nid = "a"\ndataset = "polynomial_equations"\nweight = 1\n',
            "'polynomial_equations': its verifier has not been read",
        ),
    ],
)
def test_bad_catalogs_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(CatalogError, match=message):
        load_catalog(path)


def test_unknown_catalog_lists_the_known_ones() -> None:
    with pytest.raises(CatalogError, match="known: paper9, tiny"):
        load_catalog("tinyy")


def test_a_generator_refusing_its_config_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        'name = "c"\n[[entries]]\nid = "a"\ndataset = "count_bits"\nweight = 1\n'
        "config = { min_n = 5, max_n = 1 }\n"
    )
    with pytest.raises(CatalogError, match="entry 'a'"):
        load_catalog(path).check_datasets()


def test_draw_is_deterministic_weighted_and_regenerable() -> None:
    catalog = load_catalog("tiny")
    tasks = draw(SEED, 40, catalog)
    assert [t.question for t in tasks] == [t.question for t in draw(SEED, 40, catalog)]
    assert draw(SEED, 10, catalog)[:5] == draw(SEED, 5, catalog)  # a prefix is stable
    assert [t.question for t in draw("0x" + "5b" * 32, 40, catalog)] != [t.question for t in tasks]
    assert len({t.entry for t in tasks}) == 5  # all five equally weighted entries show up
    seen = {(t.entry, t.seed, t.index) for t in tasks}
    assert len(seen) == 40, "no task is drawn twice in a round"
    for t in tasks[:8]:
        again = regenerate(catalog, t.entry, t.seed, t.index)
        assert (again.question, again.answer) == (t.question, t.answer)


def test_draw_is_identical_in_another_process() -> None:
    code = (
        "from client.tasks import draw, load_catalog; import json; "
        f"print(json.dumps([t.question for t in draw({SEED!r}, 12, load_catalog('paper9'))]))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    here = [t.question for t in draw(SEED, 12, load_catalog("paper9"))]
    assert json.loads(other.stdout.strip().splitlines()[-1]) == here


def test_weights_steer_the_draw(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(
        'name = "w"\n[[entries]]\nid = "a"\ndataset = "chain_sum"\nweight = 9\n'
        '[[entries]]\nid = "b"\ndataset = "count_bits"\nweight = 1\n'
    )
    refs = draw_refs(SEED, 1_000, load_catalog(path))
    share = sum(1 for entry, _, _ in refs if entry == "a") / len(refs)
    assert 0.85 < share < 0.95


@pytest.mark.parametrize("catalog", ["tiny", "paper9"])
def test_every_dataset_scores_right_wrong_and_malformed(catalog: str) -> None:
    cat = load_catalog(catalog)
    for entry in cat.entries:
        task = regenerate(cat, entry.id, 12345, 2)
        right = reference_answer(task)
        assert right is not None, f"{entry.id}: no reference answer"
        assert reward(task, f"thinking...<answer>{right}</answer>") == 1.0, entry.id
        wrong = reward(task, "<answer>definitely not it 0 0 0</answer>")
        assert wrong < 1.0 and (wrong == 0.0 or entry.dataset in PARTIAL_CREDIT), (entry.id, wrong)
        for malformed in ("", "<answer>", "no tags at all", "<answer>\x00\ud800</answer>" * 50):
            assert reward(task, malformed) in (0.0, wrong) and reward(task, malformed) < 1.0


def test_no_answer_a_stranger_writes_runs_as_code_or_holds_a_verifier(tmp_path: Path) -> None:
    """Every node scores its peers' answers (checkers, learners, `sapo audit verify`).
    reasoning-gym's binary_matrix verifier calls `eval` on the answer: until issue 57 the first
    answer below wrote its file in every checker, and `9**9**9**9` never returned; and
    propositional_logic's built a truth table over every atom of the answer."""
    proof = tmp_path / "ran"
    hostile = [
        f"open({str(proof)!r}, 'w').write('ran')",
        f"__import__('pathlib').Path({str(proof)!r}).write_text('ran')",
        "9**9**9**9",
        "[[1]*10**9]",
        "(" * 5_000 + "1" + ")" * 5_000,
        "[" * 1_000 + "]" * 1_000,
        "9" * 30_000,
        "1e999999999",
        "1" + "0" * 4_000 + ".5",
        # propositional_logic's truth table over every atom: 20 took 13 s, 40 would take days
        "∧".join(f"v{i}" for i in range(40)),
    ]
    catalogs = [load_catalog(name) for name in ("tiny", "paper9", "wide")]
    for cat in catalogs:
        for entry in cat.entries:
            task = regenerate(cat, entry.id, 12345, 2)
            for answer in hostile:
                assert reward(task, f"<answer>{answer}</answer>") < 1.0, (entry.id, answer[:20])
    assert not proof.exists(), "a verifier ran a stranger's answer as code"
    # the answers binary_matrix's verifier scores still score as they did: its oracle's text,
    # and a Python list of rows that prints as it (partial credit)
    paper = catalogs[1]
    matrix = next(e for e in paper.entries if e.dataset == "binary_matrix")
    task = regenerate(paper, matrix.id, 12345, 2)
    rows = [[int(x) for x in line.split()] for line in task.answer.splitlines()]
    assert reward(task, f"<answer>{task.answer}</answer>") == 1.0
    assert reward(task, f"<answer>{rows!r}</answer>") == 0.1
    assert reward(task, f"<answer>{[r[::-1] for r in rows]!r}</answer>") in (0.0, 0.1)
    assert reward(task, "<answer>[[0]] * 3</answer>") == 0.0  # an expression, not a literal
    # an answer longer than any verifier reads scores 0 unread (this one is the rows again,
    # spaced out)
    assert reward(task, f"<answer>[{' ' * 2_048}{repr(rows)[1:]}</answer>") == 0.0
    assert reward(task, f"<answer>[{' ' * 64}{repr(rows)[1:]}</answer>") == 0.1


def test_answer_extraction_takes_the_last_complete_tag() -> None:
    assert extract_answer("<answer>1</answer> then <answer> 2 </answer>") == "2"
    assert extract_answer("<answer>unterminated") is None
    assert extract_answer("<answer>a\nb</answer>") == "a\nb"
    assert (to_units(1.0), to_units(0.05), to_units(0.0)) == (10_000, 500, 0)


def test_tasks_cli_regenerates_a_round(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app, ["tasks", "draw", "--seed", SEED, "--count", "6", "--catalog", "paper9", "--json"]
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)  # nothing but JSON on stdout (bf prints dots otherwise)
    assert [t["question"] for t in shown["tasks"]] == [
        t.question for t in draw(SEED, 6, load_catalog("paper9"))
    ]
    assert shown["digest"] == "0x" + load_catalog("paper9").digest().hex()
    bad = runner.invoke(app, ["tasks", "draw", "--seed", "0x12", "--count", "2"])
    assert bad.exit_code == 2 and "32 bytes" in bad.output
    listed = runner.invoke(app, ["tasks", "catalog", "--json"])
    assert json.loads(listed.stdout)["name"] == "tiny"


def test_the_verifier_worst_case_table_covers_every_shipped_dataset() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.bench_verifiers",
            "--chars",
            "64",
            "--tasks",
            "200",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    rows = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")]
    datasets = {
        e.dataset for name in ("tiny", "paper9", "wide") for e in load_catalog(name).entries
    }
    assert set(rows) - {"dataset", "---"} == datasets, out
