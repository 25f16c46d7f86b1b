"""Proof of generation at the level of batches (docs/proof-of-generation.md), on both sides.

The producer: a node samples every local round from the weights its last GRPO step left, and which
local rounds it must publish is drawn only after it submits (`opened`). So it keeps a snapshot of
every checkpoint it sampled from until its submission's beacon is known: `Snapshots`, one file per
checkpoint under `<data_dir>/weights/<round>/`, written once per GRPO step (local rounds with no
step between them share one) and deleted once the opened ones are pinned or the round's window
has closed.

The checker (`Prover`, on its own copy of the model):
1. every completion, without weights: its text is the decoding of its token ids, and the ids end
   where the sampler ends (a stop, or max_new_tokens), so text cannot be edited or cut short;
2. the submission's beacon, unknown when it was sent, opens OPENED_GROUPS of its groups, each
   drawn in proportion to its learning signal (`openings`: what pays is what is checked); the
   producer publishes the checkpoints of their local rounds, and every drawn checker loads them
   and runs client.policy.proof.check_draws on every completion of each opened group (the same
   rows for every checker, so honest checkers never split): each token must be the seeded draw
   and, in a v5 batch, its claimed log-probability the one the checkpoint gives (within
   LOGPROB_TOLERANCE), since learners weigh peers' tokens by it.
Everything a peer sends is bounded before it reaches the model: token ids inside the model's
vocabulary, sequences inside its positions, checkpoint values finite (client.policy.weights);
and a NaN anywhere fails a comparison rather than passing it (client.policy.proof).
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import hashlib
import itertools
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from client.credit import group_signal
from client.policy import Policy, PolicyError
from client.policy.policy import parse_tokenizer_label, tokenizer_fingerprint
from client.policy.proof import EPS, check_draws, model_vocabulary, within_model
from client.policy.sampling import Stopping
from client.policy.weights import load_weights, parameter_count, weights_bytes
from client.store.batch import RolloutBatch
from client.store.weights import WeightsError, weights_id
from client.tasks import render_prompt
from client.units import logprob_value

# groups (items) a batch's beacon opens, each drawn in proportion to its learning signal; every
# checker re-draws every completion of each. Two, because with a share phi of a batch's signal
# forged the producer keeps (1 - phi)^2 of its credit in expectation (it withholds the batch when
# the beacon opens a forged group), less than the (1 - phi) its honest part alone earns: forging
# any share loses (docs/proof-of-generation.md, scripts/odds_forging.py). One would be a fair bet.
OPENED_GROUPS = 2
OPEN_ROUNDS = OPENED_GROUPS  # the most checkpoints a beacon opens (one per opened group)


def openings(beacon: int, batch: RolloutBatch, count: int = OPENED_GROUPS) -> list[tuple[int, int]]:
    """The groups (k, i): item i of local round k) that a submission with this beacon opens, the
    same for every checker: `count` draws with replacement, each group drawn with probability its
    learning signal / the batch's (client.credit, from the rewards the batch claims, which every
    checker re-scores), every group alike when the batch claims no signal. Drawn by what pays, a
    forged group is opened as often as the share of credit it would take, however the producer
    spreads it over local rounds (opening local rounds alike let one forged round of 256 groups
    beside 511 one-item rounds escape 99.6% of the time)."""
    groups = [(lr.k, i) for lr in batch.local_rounds for i in range(len(lr.items))]
    weights = [group_signal(item.rewards) for lr in batch.local_rounds for item in lr.items]
    if not any(weights):
        weights = [1] * len(groups)
    ends = list(itertools.accumulate(weights))  # group g holds [ends[g] - weights[g], ends[g])
    key = beacon.to_bytes(32, "big")
    picked: list[tuple[int, int]] = []
    for draw in range(count):
        h = hashlib.sha256(b"sapo.open/2" + key + draw.to_bytes(4, "big")).digest()
        x = int.from_bytes(h, "big") % ends[-1]  # 256 bits over a total < 2^40: no visible bias
        group = groups[bisect.bisect_right(ends, x)]
        if group not in picked:
            picked.append(group)
    return sorted(picked)


def opened(beacon: int, batch: RolloutBatch, count: int = OPENED_GROUPS) -> list[int]:
    """The local rounds (k) whose checkpoints a submission with this beacon must publish: those
    of its opened groups."""
    return sorted({k for k, _ in openings(beacon, batch, count)})


def opened_rows(beacon: int, batch: RolloutBatch) -> dict[int, list[int]]:
    """The rows each checker re-draws, by local round: every completion of each opened group
    (item i's completion j is row i * L + j), derived from the beacon alone, so two honest
    checkers of one batch always re-draw the same completions and reach the same verdict (rows
    drawn per checker let a producer that forged a few rows pick, once the beacon was known, a
    committee that splits, and the honest side that lost was slashed)."""
    rows: dict[int, list[int]] = {}
    for k, i in openings(beacon, batch):
        n = len(batch.local_rounds[k].items[i].completions)
        rows.setdefault(k, []).extend(range(i * n, (i + 1) * n))
    return rows


@dataclass(frozen=True)
class GenerationCheck:
    """A checker's verdict on a batch's generation: what it looked at and the first failure."""

    completions: int  # completions whose text and ending were checked (all of them)
    redrawn: int  # completions re-drawn against an opened checkpoint
    tokens: int  # tokens re-drawn
    failed: int  # completions that failed either check
    reason: str | None  # the first failure, in words
    min_margin: float  # the smallest margin of a re-drawn token inside its interval
    logprob_gap: float = 0.0  # the largest |claimed - re-computed| log-prob of a re-drawn token

    @property
    def passed(self) -> bool:
        return self.failed == 0


class Prover:
    """A checker's own copy of the model (and tokenizer), into which opened checkpoints are
    loaded; one check at a time (the intake's fetch workers share it)."""

    def __init__(self, policy: Policy):
        # an adapter's base is frozen: the copy shares its weights (one base in memory, however
        # many checks) and has its own adapter, into which opened checkpoints are loaded
        shared = {
            id(p): p
            for n, p in policy.model.named_parameters()
            if policy.adapter and "lora_" not in n
        }
        self.policy = Policy(
            policy.name,
            copy.deepcopy(policy.model, shared).eval(),
            copy.deepcopy(policy.tokenizer),
            policy.device,
            source=policy.source,
            adapter=policy.adapter,
            base=policy.base,
        )
        for p in self.policy.model.parameters():
            p.requires_grad_(False)
        self.stopping = Stopping(self.policy.tokenizer)
        self.parameters = parameter_count(self.policy.model)  # what a checkpoint holds
        self.vocabulary = model_vocabulary(self.policy)  # the ids a sampler of it can draw
        self.model_parameters = self.policy.parameters  # what a batch's descriptor counts
        self.lock = threading.Lock()

    def model_problem(self, batch: RolloutBatch) -> str | None:
        """Why this checker cannot re-draw the batch's model (None when it can): its parameter
        count, vocabulary size and tokenizer fingerprint must be ours (the descriptor's tokenizer
        label is `name:vocab:fingerprint`; its name part is a local path's, e.g. `checkpoint`
        after a restart, so it is not compared)."""
        if problem := self._adapter_problem(batch):  # it explains a count that differs too
            return problem
        mine = (self.model_parameters, len(self.policy.tokenizer))
        theirs_vocab, theirs_print = parse_tokenizer_label(batch.model.tokenizer)
        theirs = (batch.model.parameters, theirs_vocab)
        if mine != theirs:
            return (
                f"declares a model of {theirs[0]} parameters and a vocabulary of {theirs[1]}; "
                f"this swarm's has {mine[0]} and {mine[1]}"
            )
        ours = tokenizer_fingerprint(self.policy.tokenizer)
        if theirs_print != ours:
            return (
                f"declares a tokenizer with fingerprint {theirs_print or '(none)'}, this swarm's "
                f"is {ours}: the same size, other tokens (a seed policy's BPE trained on another "
                "corpus?); a checker re-draws only its own model family"
            )
        return None

    def _adapter_problem(self, batch: RolloutBatch) -> str | None:
        """Why this checker's model cannot hold the batch's checkpoints: an adapter over another
        base (another model family), an adapter of another shape, or an adapter where every
        weight is trained (or the other way round)."""
        mine = self.policy
        theirs = batch.model
        if theirs.base is None and mine.base is None:
            return None
        if theirs.base is None or mine.base is None:
            what = "trains every weight" if theirs.base is None else "trains a LoRA adapter"
            ours = "an adapter" if mine.base is not None else "every weight"
            return (
                f"{what}; this checker trains {ours}, so its model cannot load the batch's "
                "checkpoints"
            )
        if theirs.base != mine.base:
            return (
                f"adapts base {theirs.base[:12]}…, another model family: this checker's base is "
                f"{mine.base[:12]}…"
            )
        spec = theirs.adapter.model_dump()  # a base comes with its adapter (ModelDescriptor)
        if spec != mine.adapter.describe():
            return (
                f"an adapter of rank {spec['rank']}, alpha {spec['alpha']} on {spec['targets']}; "
                f"this checker's is rank {mine.adapter.rank}, alpha {mine.adapter.alpha} on "
                f"{list(mine.adapter.targets)} (a checker proves adapters of its own shape)"
            )
        return None

    def check(
        self,
        batch: RolloutBatch,
        *,
        beacon: int,
        weights: dict[str, bytes | Path] | None,
        generation_seed,
        eps: float = EPS,
    ) -> GenerationCheck:
        """Checks `batch` as any drawn checker does under `beacon` (`opened_rows`: every checker
        the same), with the opened checkpoints' bytes, or the files holding them, in `weights`
        (by id; None: only what needs no weights). `generation_seed(k)` is local round k's
        sampling seed. A batch that fails without weights is not re-drawn."""
        limit = batch.sampling.max_new_tokens
        completions = failed = 0
        reasons: list[str] = []
        problem = self.model_problem(batch)
        if problem:
            return GenerationCheck(batch.rollouts, 0, 0, batch.rollouts, problem, 0.0)
        for lr in batch.local_rounds:
            sizes = {len(item.completions) for item in lr.items}
            if len(sizes) > 1:
                reasons.append(
                    f"local round {lr.k}: groups of sizes {sorted(sizes)} (rows unclear)"
                )
                failed += sum(len(item.completions) for item in lr.items)
                continue
            for i, item in enumerate(lr.items):
                for j, (text, ids) in enumerate(zip(item.completions, item.token_ids, strict=True)):
                    completions += 1
                    # an id past the embedding table is no draw of this model, and would stop
                    # the teacher-forced pass (decode drops it, so the text check passes)
                    bad = next(
                        (
                            f"token {t} is id {x}, outside the model's vocabulary of "
                            f"{self.vocabulary}"
                            for t, x in enumerate(ids)
                            if x >= self.vocabulary
                        ),
                        None,
                    )
                    bad = bad or self.stopping.problem(ids, limit)
                    if bad is None and self.stopping.text_of(ids) != text:
                        bad = "its text is not the decoding of its token ids"
                    if bad:
                        failed += 1
                        reasons.append(f"local round {lr.k} item {i} completion {j}: {bad}")
        redrawn = tokens = 0
        margin, logprob_gap = 1.0, 0.0
        if failed or weights is None:
            return GenerationCheck(completions, 0, 0, failed, _summary(reasons), margin)
        with self.lock, torch.no_grad():
            for k, rows in opened_rows(beacon, batch).items():
                lr = batch.local_rounds[k]
                data = weights.get(lr.weights)
                if data is None:
                    raise WeightsError(f"checkpoint {lr.weights[:12]}… of local round {k} missing")
                try:
                    load_weights(self.policy.model, data)
                except PolicyError as exc:
                    raise WeightsError(f"checkpoint {lr.weights[:12]}…: {exc}") from None
                n = len(lr.items[0].completions)
                for row in rows:
                    item = lr.items[row // n]
                    claimed = (
                        None
                        if item.logprobs is None  # a v4 batch claims none
                        else [logprob_value(x) for x in item.logprobs[row % n]]
                    )
                    prompt = render_prompt(item.question, self.policy.tokenizer)
                    ids = item.token_ids[row % n]
                    prompt_ids = self.policy.tokenizer(prompt)["input_ids"]
                    if too_long := within_model(self.policy, prompt_ids + list(ids)):
                        redrawn += 1
                        failed += 1
                        reasons.append(f"local round {k} row {row}: {too_long}")
                        continue
                    draw = check_draws(
                        self.policy,
                        prompt,
                        ids,
                        seed=generation_seed(k),
                        row=row,
                        temperature=batch.sampling.temperature_value,
                        top_p=batch.sampling.top_p_value,
                        eps=eps,
                        logprobs=claimed,
                    )
                    redrawn += 1
                    tokens += draw.tokens
                    margin = min(margin, draw.min_margin)
                    logprob_gap = max(logprob_gap, draw.logprob_gap)
                    if draw.first_outside is not None:
                        failed += 1
                        reasons.append(
                            f"local round {k} row {row}: token {draw.first_outside} is not the "
                            f"seeded draw of checkpoint {lr.weights[:12]}…"
                        )
                    elif not draw.passed:
                        t = draw.first_logprob_off
                        failed += 1
                        reasons.append(
                            f"local round {k} row {row}: token {t}'s log-prob is claimed as "
                            f"{claimed[t]:.4f}, checkpoint {lr.weights[:12]}… gives another "
                            f"(off by {draw.logprob_gap:.2g} nats at most)"
                        )
        return GenerationCheck(
            completions, redrawn, tokens, failed, _summary(reasons), margin, logprob_gap
        )


def _summary(reasons: list[str]) -> str | None:
    if not reasons:
        return None
    return "; ".join(reasons[:3]) + (f" (and {len(reasons) - 3} more)" if reasons[3:] else "")


class Snapshots:
    """The checkpoints a node sampled from, kept per chain round until their opening."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._step: int | None = None  # the GRPO step of the last snapshot, and its id and file
        self._last: tuple[str, Path] | None = None

    def take(self, model, step: int, round_: int) -> str:
        """Returns the id of the model's current weights and keeps them for `round_` (written
        once per `step`: a local round with no step since the last shares its snapshot)."""
        if self._step != step or self._last is None or not self._last[1].is_file():
            data = weights_bytes(model)
            ident = weights_id(data)
            path = self._write(round_, ident, data)
            self._step, self._last = step, (ident, path)
            return ident
        ident, path = self._last
        target = self.root / str(round_) / f"{ident}.bin"
        if not target.is_file():  # the same weights, sampled again in a later chain round
            target.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.link(path, target)
        return ident

    def _write(self, round_: int, ident: str, data: bytes) -> Path:
        directory = self.root / str(round_)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{ident}.bin"
        if not path.is_file():
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".snap-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        return path

    def read(self, round_: int, ident: str) -> bytes | None:
        """The bytes of checkpoint `ident` sampled from in `round_`, or None if not kept."""
        path = self.root / str(round_) / f"{ident}.bin"
        return path.read_bytes() if path.is_file() else None

    def drop(self, round_: int) -> None:
        shutil.rmtree(self.root / str(round_), ignore_errors=True)

    def drop_before(self, round_: int) -> list[int]:
        """Deletes the snapshots of rounds before `round_`; returns those rounds."""
        if not self.root.is_dir():
            return []
        old = [
            int(p.name) for p in self.root.iterdir() if p.name.isdigit() and int(p.name) < round_
        ]
        for r in old:
            self.drop(r)
        return old

    def rounds(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return sorted(int(p.name) for p in self.root.iterdir() if p.name.isdigit())
