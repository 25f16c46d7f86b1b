"""Whether proofs of generation hold across hardware: completions sampled with the protocol's
seeded draws on one device and dtype, checked (client.policy.proof.draw_gaps) on another.

A checker re-draws a completion from the committed weights and accepts each token whose seeded u
lies inside the token's cumulative-probability interval give or take eps (client.policy.proof.EPS).
Sampler and checker compute those intervals with different kernels (batched and KV-cached against
one teacher-forced pass; a CPU against a GPU; float32 against bfloat16), so an honest token whose u
falls closer to an edge than their numeric difference is refused. This measures that difference.

  sample  draws completions on --device/--dtype and writes a record (the prompts, the token ids,
          the seed, the weights' hash, the hardware); --prompts-from reuses another record's
          prompts, so a machine without reasoning-gym can sample the same questions
  check   checks records on --device/--dtype and writes the gaps it measured (gzipped when
          --out ends in .gz)
  check   --batch B checks B completions in one teacher-forced pass (draw_gaps_batch: other
          kernels than the node's one-at-a-time check, so numerics as another checker's);
          --compact keeps only the gaps of tokens outside their interval (a record of 100k
          completions stays small); --forgeries also checks, per row, forged completions: the
          completion of the next row, the reference answer typed in, the honest completion
          with its answer replaced by the reference answer, and (--other RECORD) another
          model's completion for the same prompt and row
  check   --logprobs also re-computes each token's log-prob under its sampling distribution
          (the sample record holds the sampler's claims as a sapo.rollouts/5 batch writes them)
          and keeps, per completion, the largest |claimed - re-computed|
  logprobs prints, per sampler -> checker pair, how many honest checks of 8 completions a
          checker's log-prob tolerance (client.policy.proof.LOGPROB_TOLERANCE) would dispute
  verdict prints, for candidate verdicts on a completion (at most m tokens outside their
          interval by more than eps, none by more than delta), how often an honest check of
          8 completions would fail, and how often each forgery would pass
  table   prints the table of checked records: per sampler -> checker pair, the completions and
          tokens refused at the protocol's eps and at larger ones, the largest honest gap (the
          smallest eps that would accept them all), and how many completions equal another
          sampler's draw for the same row; then, per pair of checkers of the same records, how
          far apart their interval edges lie (the eps two honest checkers need)

Usage (python -m scripts.bench_numerics ...):
  sample --policy DIR --device cuda --dtype bfloat16 --out F.json
  check --policy DIR --device cpu --dtype float32 --out G.json F.json
  table G.json [...]
  verdict G.json [...]
  logprobs G.json [...]  (G checked with --logprobs)
"""

from __future__ import annotations

import gzip
import hashlib
import json
import platform
import time
from pathlib import Path

import torch

from client.policy import TransformersBackend, load_policy
from client.policy.proof import (
    EPS,
    LOGPROB_TOLERANCE,
    draw_gaps,
    draw_gaps_batch,
    logprob_differences,
    logprobs_batch,
    redraw,
)
from client.policy.sampling import STOP
from client.units import logprob_value, to_logprob_units
from scripts import arguments
from scripts.table import Table

REPO = Path(__file__).resolve().parent.parent

SAMPLE_KIND = "sapo.numerics.sample/1"
CHECK_KIND = "sapo.numerics.check/1"
EPSILONS = (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
COUNTS = {"completions": "d", "tokens": "d"}  # the committed tables' counts: no separators


def by_record(r: dict) -> tuple:
    """A table's row order: policy, sampling, sampler, checker."""
    return (r["policy"], str(r["sampling"]), r["sampler"]["label"], r["checker"]["label"])


def weights_hash(directory: Path) -> str:
    """sha256 over the policy directory's safetensors files (name and bytes), in name order."""
    digest = hashlib.sha256()
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise SystemExit(f"{directory}: no *.safetensors files (not a saved policy?)")
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def hardware(device: torch.device, dtype: torch.dtype) -> dict:
    """What computed the numbers: the device's name, the dtype, torch's version and settings."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        tf32 = torch.backends.cuda.matmul.allow_tf32
    else:
        name = next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor() or "cpu",
        )
        tf32 = False
    return {
        "device": device.type,
        "name": name,
        "dtype": str(dtype).removeprefix("torch."),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "tf32": tf32,
        "label": f"{device.type} {str(dtype).removeprefix('torch.')} ({name})",
    }


def read_json(path: str, kind: str) -> dict:
    try:
        data = Path(path).read_bytes()
        record = json.loads(gzip.decompress(data) if path.endswith(".gz") else data)
    except (OSError, json.JSONDecodeError, gzip.BadGzipFile) as exc:
        raise SystemExit(f"{path}: cannot read a {kind} record: {exc}") from None
    if not isinstance(record, dict) or record.get("kind") != kind:
        raise SystemExit(f"{path}: not a {kind} record (wrong file?)")
    return record


def sample(args) -> None:
    policy = load_policy(args.policy, device=args.device, dtype=args.dtype)
    if args.prompts_from:
        source = read_json(args.prompts_from, SAMPLE_KIND)
        prompts = source["prompts"][: args.questions]
        answers = source.get("answers", [None] * len(prompts))[: args.questions]
    else:
        from client.tasks import draw, load_catalog, reference_answer, render_prompt

        catalog, tasks = load_catalog(args.catalog), []
        while len(tasks) < args.questions:  # a draw holds at most 4,096: beacons 0, 1, ...
            beacon = (len(tasks) // 4096).to_bytes(32, "big")
            tasks += draw(beacon, min(4096, args.questions - len(tasks)), catalog)
        prompts = [render_prompt(t.question, policy.tokenizer) for t in tasks]
        answers = [reference_answer(t) for t in tasks]
    backend = TransformersBackend(policy, batch_size=args.batch)
    began = time.perf_counter()
    out = backend.generate(
        prompts, args.completions, args.max_new_tokens, args.temperature, args.top_p, args.seed
    )
    seconds = time.perf_counter() - began
    record = {
        "kind": SAMPLE_KIND,
        "policy": Path(args.policy).name,
        "weights": weights_hash(Path(args.policy)),
        "sampler": hardware(policy.device, next(policy.model.parameters()).dtype),
        "sampling": {
            "seed": args.seed,
            "n": args.completions,
            "max_new_tokens": args.max_new_tokens,
            "temperature": args.temperature,
            "top_p": args.top_p,
            "batch": args.batch,
        },
        "prompts": prompts,
        "answers": answers,  # each question's reference answer (what an answer farmer types)
        "token_ids": out.token_ids,
        # each token's log-prob as the sampler claims it in a sapo.rollouts/5 batch (units of
        # 1/LOGPROB_SCALE nats, client.units)
        "logprobs": [
            [[to_logprob_units(x) for x in row] for row in group] for group in out.sampled_logprobs
        ],
        "new_tokens": out.new_tokens,
        "seconds": seconds,
    }
    Path(args.out).write_text(json.dumps(record))
    print(
        f"{args.out}: {len(prompts)} x {args.completions} completions, {out.new_tokens} tokens "
        f"on {record['sampler']['label']} in {seconds:.2f} s"
    )


def forgeries(
    record: dict, tokenizer, other: dict | None, questions: int
) -> dict[str, list[list[int] | None]]:
    """Per forgery kind, per row of the first `questions` (prompt-major, as the record's rows),
    the forged token ids of that row, or None where the kind makes none (no reference answer,
    no `<answer>` to edit)."""
    n = record["sampling"]["n"]
    answers = record.get("answers") or [None] * len(record["prompts"])
    stop = tokenizer.encode(STOP, add_special_tokens=False)
    kinds: dict[str, list[list[int] | None]] = {
        "another row": [],
        "reference answer": [],
        "edited answer": [],
    }
    if other is not None:
        kinds["another model"] = []
    for i, group in enumerate(record["token_ids"][:questions]):
        answer = answers[i]
        typed = (
            None
            if answer is None
            else tokenizer.encode(f"<answer>{answer}", add_special_tokens=False) + stop
        )
        for j, ids in enumerate(group):
            kinds["another row"].append(group[(j + 1) % n])
            kinds["reference answer"].append(typed)
            text = tokenizer.decode(ids)
            edited = None
            if answer is not None and "<answer>" in text:
                # the honest completion up to its answer, then the reference answer: what a
                # farmer that keeps the reasoning and fixes the answer sends
                head = text[: text.rindex("<answer>")]
                edited = (
                    tokenizer.encode(f"{head}<answer>{answer}", add_special_tokens=False) + stop
                )
            kinds["edited answer"].append(edited)
            if other is not None:
                kinds["another model"].append(other["token_ids"][i][j])
    return kinds


def gaps_of(policy, prompts: list[str], rows: list[int], ids: list[list[int]], s: dict, batch: int):
    """draw_gaps of each (prompt, row, ids), `batch` completions a teacher-forced pass (1: the
    node's own one-at-a-time check)."""
    out: list[list[float]] = []
    tokenized: dict[str, list[int]] = {}
    if batch > 1:  # one tokenization per distinct prompt, not per completion
        for p in prompts:
            if p not in tokenized:
                tokenized[p] = policy.tokenizer(p)["input_ids"]
    for start in range(0, len(ids), batch):
        chunk = slice(start, start + batch)
        if batch == 1:
            out.append(
                draw_gaps(
                    policy,
                    prompts[start],
                    ids[start],
                    seed=s["seed"],
                    row=rows[start],
                    temperature=s["temperature"],
                    top_p=s["top_p"],
                )
            )
        else:
            out += draw_gaps_batch(
                policy,
                [tokenized[p] for p in prompts[chunk]],
                ids[chunk],
                seed=s["seed"],
                rows=rows[chunk],
                temperature=s["temperature"],
                top_p=s["top_p"],
            )
    return out


def logprob_worst(
    policy, prompts: list[str], ids: list[list[int]], claims: list[list[int]], s: dict, batch: int
) -> list[float]:
    """Per completion, the largest |claimed - re-computed| log-prob (nats, 3 digits): with batch
    1 as the node's checker re-computes it (client.policy.proof.redraw, one completion a pass),
    else `batch` completions a teacher-forced pass (logprobs_batch, as a vLLM node computes its
    claims: other kernels, so another checker's numerics)."""
    if batch == 1:
        ours = [
            redraw(
                policy, p, c, seed=s["seed"], row=0, temperature=s["temperature"], top_p=s["top_p"]
            )[1]
            for p, c in zip(prompts, ids, strict=True)
        ]
    else:
        ours = logprobs_batch(
            policy,
            prompts,
            ids,
            temperature=s["temperature"],
            top_p=s["top_p"],
            sequences=batch,
        )
    return [
        float(f"{max(logprob_differences([logprob_value(x) for x in c], o), default=0.0):.3e}")
        for c, o in zip(claims, ours, strict=True)
    ]


def outside(gaps: list[list[float]]) -> list[list[float]]:
    """Per completion, the gaps of its tokens outside their interval (gap > 0), 3 digits."""
    return [[float(f"{g:.3e}") for g in row if g > 0] for row in gaps]


def check(args) -> None:
    policy = load_policy(args.policy, device=args.device, dtype=args.dtype)
    mine = weights_hash(Path(args.policy))
    checker = hardware(policy.device, next(policy.model.parameters()).dtype)
    checker["batch"] = args.batch
    other = read_json(args.other, SAMPLE_KIND) if args.other else None
    results = []
    for path in args.records:
        record = read_json(path, SAMPLE_KIND)
        if record["weights"] != mine:
            raise SystemExit(
                f"{path}: sampled from weights {record['weights'][:12]}…, but {args.policy} holds "
                f"{mine[:12]}…: check with the policy it was sampled from"
            )
        s = record["sampling"]
        n = s["n"]
        questions = len(record["prompts"])
        if args.limit:
            questions = min(questions, max(1, args.limit // n))
            record["prompts"] = record["prompts"][:questions]
            record["token_ids"] = record["token_ids"][:questions]
            record["answers"] = (record.get("answers") or [None] * questions)[:questions]
            if "logprobs" in record:
                record["logprobs"] = record["logprobs"][:questions]
        forged_q = min(questions, max(1, args.forge_limit // n)) if args.forge_limit else questions
        if other is not None and other["prompts"][:forged_q] != record["prompts"][:forged_q]:
            raise SystemExit(
                f"{args.other}: not sampled for the first {forged_q} prompts of {path} "
                "(sample it with --prompts-from)"
            )
        prompts = [p for p in record["prompts"] for _ in range(n)]
        rows = list(range(questions * n))
        honest = [ids for group in record["token_ids"] for ids in group]
        began = time.perf_counter()
        gaps = gaps_of(policy, prompts, rows, honest, s, args.batch)
        seconds = time.perf_counter() - began
        result = {
            "record": Path(path).name,
            "policy": record["policy"],
            "sampler": record["sampler"],
            "checker": checker,
            "sampling": s,
            "token_ids": record["token_ids"],
            "seconds": seconds,
        }
        worst = max((g for row in gaps for g in row), default=0.0)
        if args.compact:
            # the tokens outside their interval are what any verdict looks at; the rest only
            # set the smallest margin
            result.pop("token_ids")
            result["tokens"] = [len(row) for row in gaps]
            result["outside"] = outside(gaps)
            result["min_margin"] = min((-g for row in gaps for g in row if g <= 0), default=1.0)
        else:
            result["gaps"] = gaps
        if args.logprobs:
            if "logprobs" not in record:
                raise SystemExit(
                    f"{path}: the record has no log-probs (sampled before bench-numerics wrote "
                    "them): sample it again, or check it without --logprobs"
                )
            claims = [row for group in record["logprobs"] for row in group]
            began = time.perf_counter()
            result["logprob_worst"] = logprob_worst(policy, prompts, honest, claims, s, args.batch)
            result["logprob_seconds"] = time.perf_counter() - began
            result.setdefault("tokens", [len(ids) for ids in honest])
        if args.forgeries:
            forged = {}
            for kind, ids in forgeries(record, policy.tokenizer, other, forged_q).items():
                use = [r for r in rows[: len(ids)] if ids[r] is not None and ids[r] != honest[r]]
                fg = gaps_of(
                    policy, [prompts[r] for r in use], use, [ids[r] for r in use], s, args.batch
                )
                forged[kind] = {
                    "rows": len(use),
                    "tokens": [len(g) for g in fg],
                    "outside": outside(fg),
                }
            result["forgeries"] = forged
        results.append(result)
        print(
            f"{path}: {len(gaps)} completions from {record['sampler']['label']} checked on "
            f"{checker['label']} (batch {args.batch}) in {seconds:.1f} s: largest gap {worst:.2e}"
            + (
                f"; largest log-prob difference {max(result['logprob_worst'], default=0.0):.2e} "
                f"nats in {result['logprob_seconds']:.1f} s"
                if args.logprobs
                else ""
            ),
            flush=True,
        )
        # written after each record, so a run stopped part way keeps the records it checked
        text = json.dumps({"kind": CHECK_KIND, "results": results}).encode()
        Path(args.out).write_bytes(gzip.compress(text) if args.out.endswith(".gz") else text)


def table(args) -> None:
    results = [r for path in args.checks for r in read_json(path, CHECK_KIND)["results"]]
    results = [r for r in results if "gaps" in r]  # compact records: see `verdict`
    by_sampler: dict[tuple, list] = {}
    for r in results:  # the draws of each sampler, to compare samplers of one policy and setting
        key = (r["policy"], json.dumps(r["sampling"], sort_keys=True), r["sampler"]["label"])
        by_sampler[key] = [ids for group in r["token_ids"] for ids in group]
    refused_at = [f"refused at {e:g}" for e in EPSILONS]
    equal_to = "draws equal to a CPU float32 sampler's"
    out = Table(
        *("policy", "T, top-p", "sampled on", "checked on", "completions", "tokens"),
        *refused_at,
        *("largest gap", "smallest margin", equal_to),
        right=[*refused_at, equal_to],
        formats=COUNTS | {"largest gap": ".2e", "smallest margin": ".2e"},
    )
    for r in sorted(results, key=by_record):
        gaps = r["gaps"]
        tokens = [g for row in gaps for g in row]
        refused = []
        for e in EPSILONS:
            rows = sum(any(g > e for g in row) for row in gaps)
            toks = sum(g > e for g in tokens)
            refused.append(f"{rows} ({toks} tok)")
        inside = [-g for g in tokens if g <= 0]
        s = r["sampling"]
        reference = next(
            (
                v
                for (p, setting, label), v in by_sampler.items()
                if p == r["policy"]
                and setting == json.dumps(s, sort_keys=True)
                and label.startswith("cpu float32")
            ),
            None,
        )
        mine = [ids for group in r["token_ids"] for ids in group]
        equal = (
            f"{sum(a == b for a, b in zip(mine, reference, strict=True))}/{len(mine)}"
            if reference is not None and len(reference) == len(mine)
            else None
        )
        out.row(
            r["policy"],
            f"{s['temperature']:g}, {s['top_p']:g}",
            r["sampler"]["label"],
            r["checker"]["label"],
            len(gaps),
            len(tokens),
            *refused,
            max(tokens, default=0.0),
            min(inside, default=1.0),
            equal,
        )
    print(out.render())
    print_edge_differences(results)
    print(
        f"\nrefused at eps: completions with a token whose u lies more than eps outside its "
        f"interval (tokens in brackets); the protocol's eps is {EPS:g}"
    )


def print_edge_differences(results: list[dict]) -> None:
    """How far two checkers' interval edges lie apart on the same tokens: a token's gap is u
    minus its nearest edge, u is the same for both, so the difference of their gaps is the
    difference of their numerics (the eps two honest checkers need to agree on every token)."""
    by_record: dict[tuple, dict[str, list[float]]] = {}
    for r in results:
        key = (r["policy"], json.dumps(r["sampling"], sort_keys=True), r["record"])
        flat = [g for row in r["gaps"] for g in row]
        by_record.setdefault(key, {})[r["checker"]["label"]] = flat
    pairs: dict[tuple, list[float]] = {}
    for (policy, setting, _), checkers in by_record.items():
        labels = sorted(checkers)
        for i, a in enumerate(labels):
            for b in labels[i + 1 :]:
                diffs = [abs(x - y) for x, y in zip(checkers[a], checkers[b], strict=True)]
                pairs.setdefault((policy, setting, a, b), []).extend(diffs)
    if not pairs:
        return
    out = Table(
        *("policy", "T, top-p", "checker", "other checker", "tokens"),
        *("largest edge difference", "median"),
        formats={"tokens": "d", "largest edge difference": ".2e", "median": ".2e"},
    )
    for (policy, setting, a, b), diffs in sorted(pairs.items()):
        s = json.loads(setting)
        diffs.sort()
        out.row(
            policy,
            f"{s['temperature']:g}, {s['top_p']:g}",
            a,
            b,
            len(diffs),
            diffs[-1],
            diffs[len(diffs) // 2],
        )
    out.print()


PER_CHECK = 8  # the committed tables' unit: a check until issue 57 (now 2 groups whole: 2L)
RULES = [  # (eps, delta, m): at most m tokens of a check outside by more than eps, none by delta
    (EPS, float("inf"), 0),  # the protocol's float32 verdict
    (EPS, 1e-2, 0),
    (EPS, 1e-2, 2),
    (EPS, 3e-2, 2),
    (EPS, 1e-1, 2),
    (EPS, 1e-1, 4),
    (EPS, 1.0, 8),
]


def upper95(failures: int, trials: int) -> float:
    """The one-sided 95% upper bound on a rate of which `failures` in `trials` were seen
    (Clopper-Pearson: the p at which seeing at most `failures` has probability 5%)."""
    import math

    if trials == 0:
        return 1.0

    def at_most(p: float) -> float:
        if p <= 0:
            return 1.0
        if p >= 1:
            return 0.0
        return sum(
            math.exp(
                math.lgamma(trials + 1)
                - math.lgamma(k + 1)
                - math.lgamma(trials - k + 1)
                + k * math.log(p)
                + (trials - k) * math.log1p(-p)
            )
            for k in range(failures + 1)
        )

    lo, hi = failures / trials, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if at_most(mid) > 0.05 else (lo, mid)
    return hi


def passes(outside_gaps: list[float], eps: float, delta: float, m: int) -> bool:
    return max(outside_gaps, default=0.0) <= delta and sum(g > eps for g in outside_gaps) <= m


def parse_rules(text: str | None) -> list[tuple[float, float, int]]:
    if not text:
        return RULES
    rules = []
    for part in text.split(","):
        try:
            eps, delta, m = part.split(":")
            rules.append((float(eps), float(delta), int(m)))
        except ValueError:
            raise SystemExit(f"--rules: {part!r} is not eps:delta:m (e.g. 1e-5:0.01:2)") from None
    return rules


def verdict(args) -> None:
    import random

    rules = parse_rules(args.rules)
    results = [r for path in args.checks for r in read_json(path, CHECK_KIND)["results"]]
    print(
        f"A check re-draws {PER_CHECK} completions; it passes when at most m of their tokens lie "
        "outside their interval by more than eps and none by more than delta. Honest checks: the "
        f"completions of a record in random groups of {PER_CHECK} (seed 0); upper = one-sided 95% "
        "bound. Forgeries: one forged completion per check (the others honest), the share "
        "that passes."
    )
    kinds: list[str] = []
    for r in results:
        kinds += [k for k in r.get("forgeries", {}) if k not in kinds]
    forged_columns = [f"{k} passes" for k in kinds]
    verdicts = Table(
        *("sampled on", "checked on", "eps, delta, m", "completions", "tokens"),
        *("honest checks failed", "upper", *forged_columns),
        right=["honest checks failed", *forged_columns],
        formats=COUNTS | {"upper": ".1e"},
    )
    for r in sorted(results, key=lambda r: (r["sampler"]["label"], r["checker"]["label"])):
        if "gaps" in r:
            out, tokens = outside(r["gaps"]), [len(row) for row in r["gaps"]]
        else:
            out, tokens = r["outside"], r["tokens"]
        order = list(range(len(out)))
        random.Random(0).shuffle(order)
        groups = [order[i : i + PER_CHECK] for i in range(0, len(order) - PER_CHECK + 1, PER_CHECK)]
        checker = r["checker"]["label"] + (
            f", batch {r['checker']['batch']}" if r["checker"].get("batch", 1) > 1 else ""
        )
        for eps, delta, m in rules:
            failed = sum(
                not passes([g for c in group for g in out[c]], eps, delta, m) for group in groups
            )
            cells: list[str | None] = []
            for k in kinds:
                forged = r.get("forgeries", {}).get(k)
                if forged is None:
                    cells.append(None)
                    continue
                ok = sum(passes(row, eps, delta, m) for row in forged["outside"])
                cells.append(f"{ok}/{len(forged['outside'])}")
            verdicts.row(
                r["sampler"]["label"],
                checker,
                f"{eps:g}, {delta:g}, {m}",
                len(out),
                sum(tokens),
                f"{failed}/{len(groups)}",
                upper95(failed, len(groups)),
                *cells,
            )
    verdicts.print()


LOGPROB_TOLERANCES = (1e-4, LOGPROB_TOLERANCE, 1e-2)


def logprobs(args) -> None:
    import random

    results = [
        r
        for path in args.checks
        for r in read_json(path, CHECK_KIND)["results"]
        if "logprob_worst" in r
    ]
    if not results:
        raise SystemExit("no check record here holds log-prob differences (check --logprobs)")
    print(
        f"A checker re-computes each re-drawn token's log-prob and disputes a claim off by more "
        f"than {LOGPROB_TOLERANCE:g} nats (client.policy.proof.LOGPROB_TOLERANCE); claims are "
        f"rounded to 5e-5. A check re-draws {PER_CHECK} completions: honest completions in "
        f"random groups of {PER_CHECK} (seed 0); upper = one-sided 95% bound per check at the "
        "protocol's tolerance."
    )
    failed_at = [f"checks failed at {t:g}" for t in LOGPROB_TOLERANCES]
    largest, median = "largest difference (nats)", "median of completions' largest"
    out = Table(
        *("policy", "T, top-p", "sampled on", "checked on", "completions", "tokens"),
        *(largest, median, *failed_at, "upper"),
        right=failed_at,
        formats=COUNTS | {largest: ".2e", median: ".2e", "upper": ".1e"},
    )
    for r in sorted(results, key=by_record):
        worst = r["logprob_worst"]
        order = list(range(len(worst)))
        random.Random(0).shuffle(order)
        groups = [order[i : i + PER_CHECK] for i in range(0, len(order) - PER_CHECK + 1, PER_CHECK)]
        failed = [sum(max(worst[c] for c in g) > t for g in groups) for t in LOGPROB_TOLERANCES]
        protocol = failed[LOGPROB_TOLERANCES.index(LOGPROB_TOLERANCE)]
        checker = r["checker"]["label"] + (
            f", batch {r['checker']['batch']}" if r["checker"].get("batch", 1) > 1 else ""
        )
        s = r["sampling"]
        out.row(
            r["policy"],
            f"{s['temperature']:g}, {s['top_p']:g}",
            r["sampler"]["label"],
            checker,
            len(worst),
            sum(r["tokens"]),
            max(worst),
            sorted(worst)[len(worst) // 2],
            *(f"{f}/{len(groups)}" for f in failed),
            upper95(protocol, len(groups)),
        )
    out.print()


def main() -> None:
    parser = arguments(__spec__.name, __doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="draw completions and write a record")
    c = sub.add_parser("check", help="check records' completions and write the gaps")
    for p in (s, c):
        p.add_argument("--policy", required=True, help="a saved policy directory")
        p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "mps"))
        p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
        p.add_argument("--out", required=True)
    s.add_argument("--prompts-from", help="a sample record whose prompts to draw for")
    s.add_argument("--catalog", default="tiny")
    s.add_argument("--questions", type=int, default=16)
    s.add_argument("--completions", type=int, default=8)
    s.add_argument("--max-new-tokens", type=int, default=64)
    s.add_argument("--temperature", type=float, default=1.0)
    s.add_argument("--top-p", type=float, default=1.0)
    s.add_argument("--seed", type=int, default=20_261_124)
    s.add_argument("--batch", type=int, default=64, help="the backend's batch (the node's: 64)")
    c.add_argument("--batch", type=int, default=1, help="completions a teacher-forced pass")
    c.add_argument("--limit", type=int, default=0, help="check at most this many per record")
    c.add_argument("--compact", action="store_true", help="keep only gaps outside intervals")
    c.add_argument("--forgeries", action="store_true", help="check forged completions too")
    c.add_argument("--forge-limit", type=int, default=0, help="forge at most this many rows")
    c.add_argument("--other", help="another model's sample record (same prompts): a forgery")
    c.add_argument("--logprobs", action="store_true", help="re-compute the claimed log-probs")
    c.add_argument("records", nargs="+")
    t = sub.add_parser("table", help="print the table of check results")
    t.add_argument("checks", nargs="+")
    v = sub.add_parser("verdict", help="print how candidate verdicts treat honest and forged draws")
    v.add_argument("--rules", help="eps:delta:m,... (default: a grid around the protocol's)")
    v.add_argument("checks", nargs="+")
    lp = sub.add_parser("logprobs", help="print how honest log-prob claims fare at tolerances")
    lp.add_argument("checks", nargs="+")
    args = parser.parse_args()
    commands = {"sample": sample, "check": check, "table": table, "verdict": verdict}
    commands["logprobs"] = logprobs
    commands[args.command](args)


if __name__ == "__main__":
    main()
