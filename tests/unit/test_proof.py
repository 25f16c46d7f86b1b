"""Proof of generation on whole batches: a real seed policy samples two local rounds from two
checkpoints; a checker with the opened weights passes the honest batch and fails every forgery
a farmer or a copycat can make without sampling (docs/proof-of-generation.md)."""

from __future__ import annotations

import math
import struct
import tracemalloc
from pathlib import Path

import pytest
import torch

from client.node.proving import OPENED_GROUPS, Prover, Snapshots, opened, opened_rows, openings
from client.node.rollouts import generation_seed, task_seed
from client.policy import load_policy
from client.policy.proof import LOGPROB_TOLERANCE, check_draws, within_model
from client.policy.weights import load_weights, weights_bytes
from client.store import Item, LocalStore, RolloutBatch, StoreError, digest_to_cid
from client.store.errors import SpoolError
from client.store.weights import CHUNK, WeightsError, get_weights, put_weights, split
from client.tasks import load_catalog, reference_answer, regenerate, render_prompt
from tests.harness.batches import LEDGER, NODE, round_7_batch
from tests.harness.batches import make_batch as make_test_batch
from tests.harness.policies import copied_seed_test

OTHER = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"
CHECKER = "0x90f79bf6eb2c4f870365e785982e1f101e93b906"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    """An honest batch of round 7: local round 0 sampled from the seed policy, local round 1
    from the weights a (stand-in) step left; the snapshots of both."""
    from tests.harness.batches import two_sampled_rounds

    root = tmp_path_factory.mktemp("proof")
    copied_seed_test(seed_test, root / "seed")
    policy = load_policy(root / "seed", device="cpu", dtype="float32")

    def step(policy) -> None:  # what a GRPO step does to the weights, coarsely
        policy.model.model.norm.weight.mul_(1.5)

    parts, weights = two_sampled_rounds(policy, Snapshots(root / "weights"), step)
    load_weights(policy.model, weights[parts[0].weights])
    batch = round_7_batch(policy, parts)
    return {"policy": policy, "batch": batch, "weights": weights, "root": root}


def check(world, batch, *, node=NODE, beacon=12345, weights=None):
    return Prover(world["policy"]).check(
        batch,
        beacon=beacon,
        weights=world["weights"] if weights is None else weights,
        generation_seed=lambda k: generation_seed(7, node, k),
    )


def with_items(batch, edit):
    """The batch with every item replaced by edit(k, task, item)."""
    catalog = load_catalog("tiny")
    rounds = []
    for lr in batch.local_rounds:
        items = []
        for item in lr.items:
            task = regenerate(catalog, item.task.entry, item.task.seed, item.task.index)
            items.append(Item(**{**item.model_dump(), **edit(lr.k, task, item)}))
        rounds.append(lr.model_copy(update={"items": items}))
    return batch.model_copy(update={"local_rounds": rounds})


@pytest.mark.slow
def test_an_honest_batch_passes_every_checker_under_any_beacon(world) -> None:
    batch = world["batch"]
    assert len({lr.weights for lr in batch.local_rounds}) == 2  # two checkpoints named
    for beacon in (1, 2**255 + 7, 987654321):
        result = check(world, batch, beacon=beacon)
        assert result.passed, result.reason
        rows = sum(len(r) for r in opened_rows(beacon, batch).values())
        assert rows in (4, 8)  # every completion of each opened group (one group drawn twice: 4)
        assert result.completions == 32 and result.redrawn == rows and result.tokens > rows
        assert result.min_margin > 0
    # the same checkpoints read from files, as a checker's spool holds them
    files = {}
    for ident, data in world["weights"].items():
        files[ident] = world["root"] / f"{ident[2:18]}.f32"
        files[ident].write_bytes(data)
    from_disk = check(world, batch, weights=files)
    assert from_disk == check(world, batch) and from_disk.passed


@pytest.mark.slow
def test_farmed_completions_fail_as_not_the_seeded_draw(world) -> None:
    tok = world["policy"].tokenizer

    def mixed(k, task, item):  # the mixed farmer: right, wrong, right, wrong, typed in
        texts = [
            f"<answer>{reference_answer(task) if j % 2 == 0 else 'nope'}</answer>"
            for j in range(len(item.completions))
        ]
        ids = [tok.encode(t, add_special_tokens=False) for t in texts]
        return {"completions": texts, "token_ids": ids, "logprobs": [[0] * len(i) for i in ids]}

    result = check(world, with_items(world["batch"], mixed))
    assert not result.passed and "is not the seeded draw of checkpoint" in result.reason
    assert result.failed == result.redrawn >= 4  # every re-drawn completion fails


@pytest.mark.slow
def test_log_probs_that_lie_fail_and_honest_ones_pass(world) -> None:
    honest = check(world, world["batch"])
    assert honest.passed and 0 < honest.logprob_gap < LOGPROB_TOLERANCE / 5, honest.logprob_gap

    def lie(shift):  # every token claimed as `shift` nats likelier (or less) than sampled
        def edit(k, task, item):
            return {"logprobs": [[min(0, x + shift) for x in row] for row in item.logprobs]}

        return edit

    # a producer that says its model was sure of every token: learners would see a peer's
    # completions as far less likely under their own models than they are, and weigh them up
    sure = check(
        world,
        with_items(
            world["batch"],
            lambda k, task, item: {"logprobs": [[0] * len(row) for row in item.logprobs]},
        ),
    )
    assert not sure.passed and "log-prob is claimed as" in sure.reason
    assert sure.failed == sure.redrawn >= 4
    # a lie of 20 units (2e-3 nats) on every token fails; one of 5 (5e-4) is inside the tolerance
    assert not check(world, with_items(world["batch"], lie(-20))).passed
    assert check(world, with_items(world["batch"], lie(-5))).passed
    # a v4 batch (no log-probs) is checked as it always was
    v4 = with_items(world["batch"], lambda k, task, item: {"logprobs": None})
    v4 = v4.model_copy(update={"schema_": "sapo.rollouts/4"})
    assert check(world, v4).passed


@pytest.mark.slow
def test_text_that_is_not_its_token_ids_or_cut_short_fails_without_any_weights(world) -> None:
    def edited(k, task, item):  # honest ids, the reference answer as text
        return {"completions": [f"<answer>{reference_answer(task)}</answer>"] * 4}

    result = check(world, with_items(world["batch"], edited), weights={})
    assert not result.passed and "its text is not the decoding of its token ids" in result.reason
    tok = world["policy"].tokenizer

    def truncated(k, task, item):  # an honest draw cut before its stop (to turn it wrong)
        ids = [t[:-1] if len(t) > 1 and len(t) < 12 else t for t in item.token_ids]
        logprobs = [lp[: len(i)] for lp, i in zip(item.logprobs, ids, strict=True)]
        return {"token_ids": ids, "completions": [tok.decode(t) for t in ids], "logprobs": logprobs}

    result = check(world, with_items(world["batch"], truncated))
    assert not result.passed and "with no stop, before max_new_tokens 12" in result.reason


@pytest.mark.slow
def test_a_copied_batch_and_a_misnamed_checkpoint_fail(world) -> None:
    batch = world["batch"]
    # a copycat's batch: the producer's draws, checked against the copycat's seeds
    result = check(world, batch.model_copy(update={"node": OTHER}), node=OTHER)
    # (a short draw may be another seed's too: a copy fails on all but about one in eight)
    assert not result.passed and result.failed >= result.redrawn - 1 >= 3
    # local round 1 claims the checkpoint of local round 0 (a node that did not train)
    first = batch.local_rounds[0].weights
    misnamed = batch.model_copy(
        update={
            "local_rounds": [
                batch.local_rounds[0],
                batch.local_rounds[1].model_copy(update={"weights": first}),
            ]
        }
    )
    beacon = next(b for b in range(1, 1_000) if 1 in opened(b, misnamed))  # one opening it
    result = check(world, misnamed, beacon=beacon)
    assert not result.passed and "local round 1" in result.reason
    # a model this swarm does not run cannot be checked: it is a finding, not a pass
    foreign = batch.model_copy(update={"model": batch.model.model_copy(update={"parameters": 123})})
    result = check(world, foreign)
    assert not result.passed and "declares a model of 123 parameters" in result.reason


def rewarded(rewards_by_round: list[list[list[int]]]) -> RolloutBatch:
    """A batch whose local round k's item i has the rewards rewards_by_round[k][i]."""
    batch = make_test_batch(items=1, completions=2, local_rounds=len(rewards_by_round))
    item = batch.local_rounds[0].items[0]
    rounds = []
    for lr, rewards in zip(batch.local_rounds, rewards_by_round, strict=True):
        items = []
        for r in rewards:
            n = len(r)
            items.append(
                item.model_copy(
                    update={
                        "completions": [item.completions[0]] * n,
                        "token_ids": [item.token_ids[0]] * n,
                        "logprobs": [item.logprobs[0]] * n,
                        "rewards": r,
                    }
                )
            )
        rounds.append(lr.model_copy(update={"items": items}))
    return batch.model_copy(update={"local_rounds": rounds})


MIXED, SAME = [10_000, 0, 10_000, 0], [10_000] * 4  # a group's signal: 20,000 and 0


def test_openings_are_the_beacons_alone_and_drawn_by_signal() -> None:
    batch = rewarded([[MIXED, SAME, MIXED], [SAME, [10_000, 0, 0, 0]]])  # signals 2, 0, 2; 0, 1.5
    # fixed by the beacon and the batch: every checker re-draws the same rows (no checker in it)
    assert openings(5, batch) == openings(5, batch) and len(openings(5, batch)) <= OPENED_GROUPS
    assert opened_rows(5, batch) == {
        k: [r for k2, i in openings(5, batch) if k2 == k for r in range(4 * i, 4 * i + 4)]
        for k in opened(5, batch)
    }
    draws = [openings(b, batch) for b in range(3_000)]
    opened_by_group = {
        g: sum(g in d for d in draws) for g in [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    }
    # a group with no signal earns nothing and is never opened; the others by their signal
    assert opened_by_group[(0, 1)] == opened_by_group[(1, 0)] == 0
    # P(opened in 2 draws) = 1 - (1 - share)^2: shares 0.36, 0.36, 0.27 -> 0.59, 0.59, 0.47
    for group, share in (((0, 0), 4 / 11), ((0, 2), 4 / 11), ((1, 1), 3 / 11)):
        p = 1 - (1 - share) ** 2
        sigma = (p * (1 - p) / 3_000) ** 0.5
        assert abs(opened_by_group[group] / 3_000 - p) < 4 * sigma, (group, opened_by_group)
    # a batch that claims no signal is opened group by group alike
    flat = rewarded([[SAME, SAME], [SAME]])
    assert {g for b in range(200) for g in openings(b, flat)} == {(0, 0), (0, 1), (1, 0)}


def test_a_forged_round_among_many_small_honest_rounds_is_opened_as_often_as_it_pays() -> None:
    # issue 57's concentrator: 511 one-item honest rounds beside one round of 256 forged groups
    # at full signal. Opening two local rounds alike found the forged one 0.4% of the time.
    honest = [[[10_000, 0, 0, 0]]] * 511  # signal 1.5 each
    batch = rewarded([*honest, [MIXED] * 256])  # 256 x 2.0
    share = 256 * 2 / (256 * 2 + 511 * 1.5)
    caught = sum(511 in opened(b, batch) for b in range(1_000)) / 1_000
    assert abs(caught - (1 - (1 - share) ** 2)) < 0.06, caught  # ~0.64, not 0.004


@pytest.mark.slow
def test_checkpoints_go_through_a_store_in_checked_chunks(world, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store", max_bytes=4096)  # the batch cap does not apply
    data = torch.randn((33 * CHUNK) // 8).numpy().tobytes()  # 16.5 chunks of float32
    ident = split(data)[0].id()
    assert put_weights(store, data, 7) == ident
    dest = tmp_path / "spool" / "checkpoint.f32"
    dest.parent.mkdir()
    tracemalloc.start()
    try:
        manifest = get_weights(store, ident, dest, parameters=len(data) // 4, network=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert dest.read_bytes() == data and len(manifest.chunks) == 17
    # streamed to disk: the fetch held a few copies of one chunk, not the 16.5 MiB checkpoint
    assert peak < len(data) / 3, f"{peak} bytes held to fetch {len(data)}"
    dest.unlink()
    with pytest.raises(WeightsError, match="the declared model has 5 parameters"):
        get_weights(store, ident, dest, parameters=5, network=False)
    # a block altered on disk is refused on read, and nothing of the fetch is left behind
    path = store._path(digest_to_cid(manifest.chunks[9]))
    path.write_bytes(b"\0" + path.read_bytes()[1:])
    with pytest.raises(StoreError, match="tampered block"):
        get_weights(store, ident, dest, parameters=len(data) // 4, network=False)
    assert list(dest.parent.iterdir()) == []
    # a spool we cannot write to is our fault (SpoolError), not a store's answer about the peer
    path.write_bytes(data[9 * CHUNK : 10 * CHUNK])
    with pytest.raises(SpoolError, match="could not write a fetched checkpoint"):
        get_weights(
            store,
            ident,
            tmp_path / "no-such-dir" / "x.f32",
            parameters=len(data) // 4,
            network=False,
        )
    # snapshots: one file per step, shared by later local rounds and chain rounds
    snapshots = Snapshots(tmp_path / "snaps")
    policy = world["policy"]
    a = snapshots.take(policy.model, 3, 8)
    assert snapshots.take(policy.model, 3, 9) == a and snapshots.read(9, a) == snapshots.read(8, a)
    assert a == split(weights_bytes(policy.model))[0].id()
    assert snapshots.drop_before(9) == [8] and snapshots.rounds() == [9]


def test_a_tokenizer_of_the_same_size_but_other_tokens_is_named_not_miscounted(world) -> None:
    """Two seed policies whose BPE was trained on other corpora (two specialists) have the same
    vocabulary size but decode the same ids to other text: the checker names the tokenizer as
    the reason, it does not report every completion as text that is not its ids' decoding."""
    import copy
    import json

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from client.policy import Policy
    from client.policy.policy import parse_tokenizer_label, tokenizer_fingerprint
    from tests.harness.batches import local_round

    policy = world["policy"]
    spec = json.loads(policy.tokenizer.backend_tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    vocab["1"], vocab["2"] = vocab["2"], vocab["1"]  # the same tokens, two ids swapped
    other = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)),
        eos_token=policy.tokenizer.eos_token,
        pad_token=policy.tokenizer.pad_token,
    )
    assert len(other) == len(policy.tokenizer)
    assert tokenizer_fingerprint(other) != tokenizer_fingerprint(policy.tokenizer)
    specialist = Policy(policy.name, copy.deepcopy(policy.model), other, policy.device)
    seed = task_seed(31_337, LEDGER, 7, NODE)
    lr = local_round(specialist, seed=seed, round_=7, node=NODE, k=0, items=4, completions=4)
    batch = round_7_batch(specialist, [lr.part])
    assert parse_tokenizer_label(batch.model.tokenizer) == (
        len(other),
        tokenizer_fingerprint(other),
    )
    result = check(world, batch)
    assert not result.passed and "declares a tokenizer with fingerprint" in result.reason
    assert "not the decoding" not in result.reason
    # its own family checks it: the same batch passes a checker with the specialist's tokenizer
    assert Prover(specialist).model_problem(batch) is None


def test_float32_draws_pass_across_thread_counts_and_bfloat16_draws_do_not(
    tmp_path: Path, seed_test: Path
) -> None:
    """Why a node samples in float32 (config refuses half precision): a checker re-draws in
    float32. Draws sampled with another thread count (other reduction orders, as on another CPU)
    pass; draws sampled in bfloat16 miss their float32 interval on some completions, so a bf16
    node's batches would be disputed (scripts/bench_numerics.py measured the same on an H100)."""
    from client.policy import TransformersBackend
    from client.policy.proof import EPS, draw_gaps
    from client.tasks import draw, render_prompt

    copied_seed_test(seed_test, tmp_path / "seed")
    checker = load_policy(tmp_path / "seed", device="cpu", dtype="float32")
    tasks = draw(bytes(32), 32, load_catalog("tiny"))
    prompts = [render_prompt(t.question, checker.tokenizer) for t in tasks]
    n, seed = 8, 20_261_124

    def refused(sampler) -> tuple[int, float]:
        out = TransformersBackend(sampler).generate(prompts, n, 64, 1.0, 1.0, seed)
        gaps = [
            draw_gaps(checker, p, ids, seed=seed, row=i * n + j, temperature=1.0, top_p=1.0)
            for i, p in enumerate(prompts)
            for j, ids in enumerate(out.token_ids[i])
        ]
        return sum(max(g) > EPS for g in gaps if g), max(max(g) for g in gaps if g)

    threads = torch.get_num_threads()
    torch.set_num_threads(1 if threads > 1 else 2)
    try:
        other_threads = load_policy(tmp_path / "seed", device="cpu", dtype="float32")
        assert refused(other_threads)[0] == 0
    finally:
        torch.set_num_threads(threads)
    count, worst = refused(load_policy(tmp_path / "seed", device="cpu", dtype="bfloat16"))
    assert count >= 1 and worst > 10 * EPS  # measured here: 13 of 256, worst gap 1.3e-3


NUMERICS = Path(__file__).resolve().parents[2] / "docs" / "results" / "numerics"


def bench_numerics(command: str, pattern: str, count: int) -> str:
    """What `python -m scripts.bench_numerics <command>` prints of the committed records
    `pattern`."""
    import subprocess
    import sys

    records = sorted(str(p) for p in NUMERICS.glob(pattern))
    assert len(records) == count, records
    return subprocess.run(
        [sys.executable, "-m", "scripts.bench_numerics", command, *records],
        cwd=NUMERICS.parent.parent.parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_the_committed_cross_hardware_table_is_made_from_its_records() -> None:
    """docs/results/numerics/table.md (CPU and H100 samplers and checkers) is what
    `python -m scripts.bench_numerics table` makes of the committed check records."""
    made = bench_numerics("table", "chk-*.json.gz", 16)
    assert made == (NUMERICS / "table.md").read_text()
    assert "NVIDIA H100" in made


def test_the_committed_verdict_table_is_made_from_its_records() -> None:
    """docs/results/numerics/verdict.md (the H200 run at scale: float32 and bfloat16 samplers
    and checkers, forgeries, candidate verdicts) is what `python -m scripts.bench_numerics verdict`
    makes of the committed compact records."""
    made = bench_numerics("verdict", "scale-*.json.gz", 3)
    assert made == (NUMERICS / "verdict.md").read_text()
    # float32, on the GPU and from the GPU to a CPU: no honest check of 40,000 refused at the
    # protocol's verdict
    strict = [
        line
        for line in made.splitlines()
        if line.startswith("| cuda float32 (NVIDIA H200) |")
        and "float32" in line.split("|")[2]  # the checker's column
        and "| 1e-05, inf, 0 |" in line
    ]
    assert len(strict) == 2 and all("| 0/40000 |" in line for line in strict), strict


def test_the_committed_logprob_table_is_made_from_its_records() -> None:
    """docs/results/numerics/logprobs.md (log-prob claims sampled on an H200 and this CPU,
    re-computed on the other and on the H200 in batches) is what `python -m scripts.bench_numerics
    logprobs` makes of the committed records, and no honest check fails at the protocol's
    tolerance in any pairing."""
    made = bench_numerics("logprobs", "lp-*.json.gz", 8)
    assert made == (NUMERICS / "logprobs.md").read_text()
    rows = [line.split(" | ") for line in made.splitlines() if line.startswith("| seed-")]
    assert len(rows) == 12
    at_tolerance = made.splitlines()[2].split(" | ").index("checks failed at 0.001")
    for row in rows:
        failed, checks = row[at_tolerance].split("/")
        assert failed == "0" and int(checks) >= 1024, row
    assert sum("NVIDIA H200" in row[2] and "AMD EPYC" in row[3] for row in rows) == 4


@pytest.mark.slow
def test_a_checkpoint_with_one_nan_weight_is_refused_and_nan_logits_fail_every_draw(world) -> None:
    # issue 57: one NaN weight made every gap and log-prob difference NaN; `nan > eps` is false,
    # so made-up completions passed the proof at any temperature and top-p
    batch, policy = world["batch"], world["policy"]
    tok = policy.tokenizer
    poisoned = {}
    for ident, data in world["weights"].items():
        raw = bytearray(data)
        raw[-4:] = struct.pack("<f", float("nan"))
        poisoned[ident] = bytes(raw)
    with pytest.raises(WeightsError, match=r"not finite \(NaN or ±inf\)"):
        check(world, batch, weights=poisoned)
    # and a model that holds a NaN however it got there fails every draw, not passes it
    prover = Prover(policy)
    with torch.no_grad():
        prover.policy.model.model.norm.weight[0] = float("nan")  # every logit NaN
    item = batch.local_rounds[0].items[0]
    made_up = tok.encode("<answer>42</answer>", add_special_tokens=False)
    prompt = render_prompt(item.question, tok)
    for temperature, top_p in ((1.0, 1.0), (1.0, 0.9), (0.0, 1.0)):
        draw = check_draws(
            prover.policy, prompt, made_up, seed=1, row=0, temperature=temperature, top_p=top_p
        )
        assert not draw.passed and draw.outside == len(made_up), (temperature, top_p, draw)
    claimed = [-1.0] * len(made_up)
    draw = check_draws(
        prover.policy, prompt, made_up, seed=1, row=0, temperature=1.0, top_p=1.0, logprobs=claimed
    )
    assert not draw.passed and math.isinf(draw.logprob_gap)


@pytest.mark.slow
def test_a_token_id_outside_the_vocabulary_is_a_finding_not_a_stopped_checker(world) -> None:
    # issue 57: decoding drops an id past the vocabulary, so the text check passed and the
    # teacher-forced pass raised IndexError (on a GPU, a device-side assert), stopping the node
    prover = Prover(world["policy"])
    tok = world["policy"].tokenizer
    outside = prover.vocabulary + 3

    def poisoned(k, task, item):
        ids = [list(t) for t in item.token_ids]
        ids[0][0] = outside
        texts = [prover.stopping.text_of(t) for t in ids]  # what decoding gives: it passes
        return {"token_ids": ids, "completions": texts}

    batch = with_items(world["batch"], poisoned)
    assert (
        tok.decode(batch.local_rounds[0].items[0].token_ids[0])
        == (batch.local_rounds[0].items[0].completions[0])
    )
    result = check(world, batch)
    assert not result.passed and result.redrawn == 0
    assert f"token 0 is id {outside}, outside the model's vocabulary of" in result.reason
    # the model's own bounds, asked before anything reaches it
    assert within_model(prover.policy, [outside]) is not None
    assert "positions" in (within_model(prover.policy, [1] * 100_000) or "")
