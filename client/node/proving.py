"""Proof of generation at the level of batches (docs/credit.md), on both sides.

The producer: a node samples every local round from the weights its last GRPO step left, and which
local rounds it must publish is drawn only after it submits (`opened`). So it keeps a snapshot of
every checkpoint it sampled from until its submission's beacon is known: `Snapshots`, one file per
checkpoint under `<data_dir>/weights/<round>/`, written once per GRPO step (local rounds with no
step between them share one) and deleted once the opened ones are pinned or the round's window
has closed.

The checker (`Prover`, on its own copy of the model):
1. every completion, without weights: its text is the decoding of its token ids, and the ids end
   where the sampler ends (a stop, or max_new_tokens), so text cannot be edited or cut short;
2. the submission's beacon, unknown when it was sent, opens OPEN_ROUNDS of its local rounds
   (`opened`: the same for every checker, so the producer knows which checkpoints to publish);
   each checker loads those checkpoints and runs client.policy.proof.check_draws on CHECKED
   completions of each, drawn for it from the beacon and its address (`checked_rows`): each
   token must be the seeded draw and, in a v5 batch, its claimed log-probability the one the
   checkpoint gives (within LOGPROB_TOLERANCE), since learners weigh peers' tokens by it.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from client.policy import Policy, PolicyError
from client.policy.policy import parse_tokenizer_label, tokenizer_fingerprint
from client.policy.proof import EPS, check_draws
from client.policy.sampling import Stopping
from client.policy.weights import load_weights, parameter_count, weights_bytes
from client.store.batch import RolloutBatch
from client.store.weights import WeightsError, weights_id
from client.tasks import render_prompt
from client.units import logprob_value

OPEN_ROUNDS = 2  # local rounds of a batch whose checkpoints its beacon opens
CHECKED = 4  # completions a checker re-draws in each opened local round


def _pick(domain: bytes, key: bytes, count: int, size: int) -> list[int]:
    """`count` distinct numbers in [0, size), drawn from sha256(domain, key, i) (all of them when
    size <= count), in the order drawn."""
    if size <= count:
        return list(range(size))
    picked: list[int] = []
    i = 0
    while len(picked) < count:
        h = hashlib.sha256(domain + key + i.to_bytes(4, "big")).digest()
        n = int.from_bytes(h[:8], "big") % size
        if n not in picked:
            picked.append(n)
        i += 1
    return picked


def opened(beacon: int, local_rounds: int, count: int = OPEN_ROUNDS) -> list[int]:
    """The local rounds (k) whose checkpoints a submission with this beacon must publish."""
    return sorted(_pick(b"sapo.open/1", beacon.to_bytes(32, "big"), count, local_rounds))


def checked_rows(beacon: int, checker: str, k: int, rows: int, count: int = CHECKED) -> list[int]:
    """The rows of local round k that `checker` re-draws (item i's completion j is row i*L + j)."""
    key = beacon.to_bytes(32, "big") + bytes.fromhex(checker.lower().removeprefix("0x"))
    return sorted(_pick(b"sapo.check/1", key + k.to_bytes(4, "big"), count, rows))


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
        checker: str,
        weights: dict[str, bytes | Path] | None,
        generation_seed,
        eps: float = EPS,
    ) -> GenerationCheck:
        """Checks `batch` as drawn checker `checker` under `beacon`, with the opened checkpoints'
        bytes, or the files holding them, in `weights` (by id; None: only what needs no
        weights). `generation_seed(k)` is local round k's sampling seed. A batch that fails
        without weights is not re-drawn."""
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
                    bad = self.stopping.problem(ids, limit)
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
            for k in opened(beacon, len(batch.local_rounds)):
                lr = batch.local_rounds[k]
                data = weights.get(lr.weights)
                if data is None:
                    raise WeightsError(f"checkpoint {lr.weights[:12]}… of local round {k} missing")
                try:
                    load_weights(self.policy.model, data)
                except PolicyError as exc:
                    raise WeightsError(f"checkpoint {lr.weights[:12]}…: {exc}") from None
                n = len(lr.items[0].completions)
                for row in checked_rows(beacon, checker, k, n * len(lr.items)):
                    item = lr.items[row // n]
                    claimed = (
                        None
                        if item.logprobs is None  # a v4 batch claims none
                        else [logprob_value(x) for x in item.logprobs[row % n]]
                    )
                    draw = check_draws(
                        self.policy,
                        render_prompt(item.question, self.policy.tokenizer),
                        item.token_ids[row % n],
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
