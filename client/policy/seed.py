"""The seed policy: a tiny Qwen2 model pretrained locally on a task catalog's tasks (the node's
[tasks].catalog, by default `tiny`), no download; or its Llama-architecture sibling with a
tokenizer of its own (`arch="llama"`: another model family, for swarms of mixed families).

CPU swarms start from it. It is built once per seed and cached:
1. a corpus of questions from the catalog with their reference answers, drawn with seeds from
   `random.Random(seed)` (far from the ledger's seeds, so evaluation questions stay fresh);
2. a byte-level BPE tokenizer trained on that corpus, digits split one per token, with the
   special tokens <pad>, <eos>, <answer>, </answer>;
3. a Qwen2ForCausalLM trained with AdamW (cosine schedule) on prompt -> "<answer>A</answer>",
   the loss on the answer tokens only, for a fixed number of steps (deterministic for a seed).
The `--minutes` cap can end a build early; the build's record then says it was cut short.

A build reports its progress (stage, step, loss) to a file beside the policy, keeps what it has
done in `<name>.partial/` so that a stopped build resumes where it last saved (to the same
weights), and publishes the finished policy by one rename. Processes sharing a cache build a
policy once: the others wait on a lock and follow the builder's progress (ensure_seed_policy).

(Over 400 lines, on purpose: corpus, tokenizer, model and resumable training are the steps of one
deterministic build, and its resume must restore every one of them as it saved them.)
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from client.tasks import load_catalog, regenerate
from client.tasks.verify import plain_prompt, reference_answer

SPECIAL = ["<pad>", "<eos>", "<answer>", "</answer>"]
ARCHITECTURES = ("qwen2", "llama")
LLAMA_VOCAB_SHARE = 0.875  # the Llama seed's tokenizer: 7/8 of its recipe's vocabulary


@dataclass(frozen=True)
class SeedSpec:
    """Everything that determines a seed policy; its JSON is stored beside the weights."""

    seed: int = 0
    catalog: str = "tiny"
    vocab_size: int = 512
    hidden: int = 192
    layers: int = 4
    heads: int = 4
    intermediate: int = 512
    corpus: int = 40_000  # (question, answer) pairs
    steps: int = 600
    batch: int = 64
    lr: float = 2e-3
    warmup: int = 30
    # pretrain on these catalog entries only (a specialist); empty: every entry
    entries: tuple[str, ...] = ()
    # the share of pretraining answers written in the verifier's format, <answer>A</answer>;
    # the others read "Answer: A", which the verifiers score 0 (a policy that knows answers
    # but not reliably the format: RL has a behaviour to find that every question shares)
    tagged: float = 1.0
    # a specialist's tokenizer: False, trained on its own corpus (its entries' questions: a BPE
    # of the same size with other tokens than its recipe's generalist); True, on the corpus of
    # the same recipe without `entries`, so it is the generalist's tokenizer token for token and
    # specialists of one recipe are one model family (a devnet's checkers can prove each other)
    shared_tokenizer: bool = False
    # the architecture: "qwen2" (tied embeddings, attention biases) or "llama" (untied, no
    # biases), whose tokenizer is its own: a BPE of LLAMA_VOCAB_SHARE of the recipe's size, so
    # no token id means the same text in both
    arch: str = "qwen2"

    @classmethod
    def tiny_test(cls, seed: int = 0) -> SeedSpec:
        """An even smaller policy that builds in seconds, by the same code (for tests)."""
        # ~0.1M parameters, ~10 s on 2 cores; enough to answer a few percent of questions, so
        # that a devnet of test policies has groups with signal to share
        return cls(
            seed=seed,
            vocab_size=320,
            hidden=64,
            layers=2,
            heads=2,
            intermediate=128,
            corpus=4_000,
            steps=150,
            batch=32,
        )

    @classmethod
    def of(
        cls,
        size: str,
        seed: int = 0,
        catalog: str = "tiny",
        *,
        entries: tuple[str, ...] = (),
        steps: int = 0,
        tagged: float = 1.0,
        shared_tokenizer: bool = False,
        heads: int = 0,
        arch: str = "qwen2",
    ) -> SeedSpec:
        """The spec of a recipe ('small': the swarm's default, 'test': seconds, for tests) on a
        named catalog, optionally a specialist on `entries` (with the generalist's tokenizer if
        `shared_tokenizer`), pretrained for `steps` steps (0: the recipe's) with `tagged` of its
        answers in the verifiers' format, with `heads` attention heads (0: the recipe's; vLLM's
        CPU attention takes head sizes 32, 64, 80, ..., not the small recipe's 192 / 4 = 48)."""
        spec = replace(cls(seed=seed) if size == "small" else cls.tiny_test(seed), catalog=catalog)
        if arch not in ARCHITECTURES:
            raise ValueError(f"architecture {arch!r}: the seed recipes build {ARCHITECTURES}")
        if arch != spec.arch:
            spec = replace(spec, arch=arch, vocab_size=int(spec.vocab_size * LLAMA_VOCAB_SHARE))
        if heads and heads != spec.heads:
            if spec.hidden % heads:
                raise ValueError(
                    f"{heads} attention heads do not divide the {size} recipe's hidden size "
                    f"{spec.hidden}"
                )
            spec = replace(spec, heads=heads)
        if entries:
            spec = replace(spec, entries=tuple(sorted(entries)), shared_tokenizer=shared_tokenizer)
        if steps:
            spec = spec.with_steps(steps)
        return replace(spec, tagged=tagged) if tagged != 1.0 else spec

    def with_steps(self, steps: int) -> SeedSpec:
        """The same recipe pretrained for `steps` steps, on a corpus large enough that no
        example is seen twice (the default recipe's corpus is one pass of its steps)."""
        return replace(self, steps=steps, corpus=max(self.corpus, steps * self.batch))

    @property
    def recipe(self) -> SeedSpec:
        """The recipe this spec's size comes from."""
        test = SeedSpec.tiny_test()
        return test if (self.hidden, self.layers) == (test.hidden, test.layers) else SeedSpec()

    @property
    def recipe_steps(self) -> int:
        """The pretraining steps of the recipe this spec's size comes from."""
        return self.recipe.steps


def corpus(spec: SeedSpec) -> list[tuple[str, str]]:
    """Returns (prompt, answer) pairs from the catalog for the spec's seed."""
    catalog = load_catalog(spec.catalog)
    known = [e.id for e in catalog.entries]
    if unknown := sorted(set(spec.entries) - set(known)):
        raise ValueError(f"no entries {unknown} in catalog {spec.catalog!r} (it has {known})")
    entries = [e for e in catalog.entries if not spec.entries or e.id in spec.entries]
    rng = random.Random(spec.seed)
    pairs = []
    per_entry = math.ceil(spec.corpus / len(entries))
    for entry in entries:
        for _ in range(math.ceil(per_entry / 64)):
            seed = rng.getrandbits(62)
            for index in range(64):
                task = regenerate(catalog, entry.id, seed, index)
                pairs.append((plain_prompt(task.question), str(reference_answer(task))))
    rng.shuffle(pairs)
    return pairs[: spec.corpus]


def train_tokenizer(pairs: list[tuple[str, str]], vocab_size: int):
    """Returns a PreTrainedTokenizerFast trained on the corpus (byte-level BPE)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator((p + a for p, a in pairs), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="<pad>",
        eos_token="<eos>",
        additional_special_tokens=["<answer>", "</answer>"],
    )
    fast.padding_side = "left"
    return fast


def _examples(
    tokenizer, pairs: list[tuple[str, str]], tagged: float = 1.0, seed: int = 0
) -> list[tuple[list[int], int]]:
    """Returns (token ids, prompt length) for prompt + "<answer>A</answer><eos>", or, for a
    seeded draw of 1 - `tagged` of the pairs, prompt + "Answer: A<eos>"."""
    out = []
    untagged = random.Random(f"seed-policy-format:{seed}")
    for prompt, answer in pairs:
        p = tokenizer.encode(prompt, add_special_tokens=False)
        tag = tagged >= 1.0 or untagged.random() < tagged
        text = f"<answer>{answer}</answer><eos>" if tag else f"Answer: {answer}<eos>"
        a = tokenizer.encode(text, add_special_tokens=False)
        out.append((p + a, len(p)))
    return out


@dataclass(frozen=True)
class BuildProgress:
    """Where a seed policy's build stands, as the builder last reported it.

    The builder writes it to a file beside the policy (`progress_path`), so that a caller that
    waits for another process's build, and `sapo devnet status`, can show it too."""

    policy: str  # the policy's directory name
    stage: str  # corpus, tokenizer, training, saving, done
    step: int
    steps: int
    loss: float | None
    elapsed_s: float  # since this build process started
    builder_pid: int
    resumed_from: int = 0  # the step a resumed build started from (0: from scratch)
    saved_step: int = 0  # the last step a resumable state was written for
    waiting: bool = False  # set for a caller that waits for this build: not its own

    @property
    def eta_s(self) -> float | None:
        """Seconds left, from this process's pace (None before training has a pace)."""
        done = self.step - self.resumed_from
        if self.stage != "training" or done <= 0:
            return None
        return self.elapsed_s / done * (self.steps - self.step)

    def describe(self) -> str:
        """Returns one line for people: stage, step, loss and time left."""
        if self.stage != "training":
            text = {
                "corpus": "drawing the corpus",
                "tokenizer": "training the tokenizer",
                "saving": "saving",
                "done": "done",
            }.get(self.stage, self.stage)
        else:
            text = f"step {self.step}/{self.steps}"
            if self.loss is not None:
                text += f", loss {self.loss:.3f}"
            if (eta := self.eta_s) is not None and self.step < self.steps:
                text += f", ~{_duration(eta)} left"
        if self.resumed_from:
            text += f" (resumed at step {self.resumed_from})"
        return text


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def progress_path(directory: Path) -> Path:
    """Returns the file where the build of `directory` reports its progress."""
    return directory.with_name(f".{directory.name}.progress.json")


def read_progress(directory: Path) -> BuildProgress | None:
    """Returns the last progress the build of `directory` reported (None: none reported)."""
    try:
        return BuildProgress(**json.loads(progress_path(directory).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write_json(path: Path, data: dict) -> None:
    """Writes `data` whole or not at all (temp file, rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _save_torch(path: Path, state: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def build_seed_policy(
    spec: SeedSpec,
    directory: Path,
    *,
    minutes: float | None = None,
    progress: Callable[[BuildProgress], None] | None = None,
) -> dict:
    """Builds the seed policy into `directory`; returns its build record (also saved).

    The build works in `<directory>.partial/` and keeps what it has done there (the corpus, the
    tokenizer, and every `save_every` training steps the model, optimizer and sampling state),
    so a build that is stopped resumes where it was saved and ends with the same weights as an
    uninterrupted one. The finished policy appears in `directory` by one rename: a reader never
    sees half a policy.
    """
    from transformers import PreTrainedTokenizerFast

    began = time.perf_counter()
    work = directory.with_name(directory.name + ".partial")
    work.mkdir(parents=True, exist_ok=True)
    spec_json = json.dumps(asdict(spec), sort_keys=True)
    if (work / "spec.json").is_file() and (work / "spec.json").read_text() != spec_json:
        shutil.rmtree(work)  # a leftover of another spec under this name: start over
        work.mkdir(parents=True)
    (work / "spec.json").write_text(spec_json)
    state = {"stage": "corpus", "step": 0, "loss": None, "resumed_from": 0, "saved_step": 0}

    def report(**changes) -> None:
        state.update(changes)
        update = BuildProgress(
            policy=directory.name,
            stage=state["stage"],
            step=state["step"],
            steps=spec.steps,
            loss=state["loss"],
            elapsed_s=round(time.perf_counter() - began, 1),
            builder_pid=os.getpid(),
            resumed_from=state["resumed_from"],
            saved_step=state["saved_step"],
        )
        _write_json(progress_path(directory), asdict(update))
        if progress:
            progress(update)

    report()
    torch.manual_seed(spec.seed)
    random.seed(spec.seed)
    if (work / "corpus.json").is_file():
        pairs = [tuple(p) for p in json.loads((work / "corpus.json").read_text())]
    else:
        pairs = corpus(spec)
        _write_json(work / "corpus.json", pairs)
    report(stage="tokenizer")
    if (work / "tokenizer" / "tokenizer.json").is_file():
        tokenizer = PreTrainedTokenizerFast.from_pretrained(work / "tokenizer")
    else:
        # a shared tokenizer is trained on the generalist's corpus (the same recipe on every entry)
        text = corpus(replace(spec, entries=())) if spec.shared_tokenizer else pairs
        tokenizer = train_tokenizer(text, spec.vocab_size)
        tokenizer.save_pretrained(work / "tokenizer.tmp")
        shutil.rmtree(work / "tokenizer", ignore_errors=True)
        os.replace(work / "tokenizer.tmp", work / "tokenizer")
    examples = _examples(tokenizer, pairs, spec.tagged, spec.seed)
    longest = max(len(ids) for ids, _ in examples)
    model = _model(spec, tokenizer, max(256, longest + 64))
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.01)

    def lr_at(step: int) -> float:
        if step < spec.warmup:
            return spec.lr * (step + 1) / spec.warmup
        progress_ = (step - spec.warmup) / max(1, spec.steps - spec.warmup)
        return spec.lr * 0.5 * (1 + math.cos(math.pi * progress_))

    order = random.Random(spec.seed)
    tokens_seen, first, loss_value = 0, 0, float("nan")
    if (work / "train-state.pt").is_file():
        saved = torch.load(work / "train-state.pt", weights_only=False)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        order.setstate(saved["order"])
        torch.set_rng_state(saved["torch_rng"])
        first, tokens_seen, loss_value = saved["step"], saved["tokens"], saved["loss"]
        state.update(resumed_from=first, saved_step=first)
    save_every = max(10, spec.steps // 20)
    model.train()
    steps_done, cut_short = first, False
    report(stage="training", step=first, loss=None if first == 0 else loss_value)
    for step in range(first, spec.steps):
        if minutes is not None and time.perf_counter() - began > minutes * 60:
            cut_short = True
            break
        batch = [examples[order.randrange(len(examples))] for _ in range(spec.batch)]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id)  # right padded
        labels = torch.full((len(batch), width), -100)  # loss on the answer only
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, prompt_len) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, prompt_len : len(ids)] = torch.tensor(ids[prompt_len:])
            attention[row, : len(ids)] = 1
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        tokens_seen += int(attention.sum())
        steps_done, loss_value = step + 1, float(loss.detach())
        if steps_done % save_every == 0 and steps_done < spec.steps:
            _save_torch(
                work / "train-state.pt",
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "order": order.getstate(),
                    "torch_rng": torch.get_rng_state(),
                    "step": steps_done,
                    "tokens": tokens_seen,
                    "loss": loss_value,
                },
            )
            state["saved_step"] = steps_done
        report(step=steps_done, loss=loss_value)

    report(stage="saving")
    out = work / "policy"
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    record = {
        "spec": asdict(spec),
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": steps_done,
        "tokens": tokens_seen,
        "final_loss": loss_value,
        "seconds": round(time.perf_counter() - began, 1),
        "cut_short": cut_short,
        "resumed_from": state["resumed_from"],
        "corpus_questions": sorted({p for p, _ in pairs}),
    }
    (out / "seed-build.json").write_text(json.dumps(record))
    (out / "sapo.json").write_text(json.dumps({"name": directory.name, "step": 0}))
    if directory.exists():  # a forced rebuild: the old policy stays in place until the new one is
        old = directory.with_name(directory.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(directory, old)
        os.replace(out, directory)
        shutil.rmtree(old)
    else:
        os.replace(out, directory)
    shutil.rmtree(work)
    report(stage="done")
    progress_path(directory).unlink(missing_ok=True)
    return record


def _model(spec: SeedSpec, tokenizer, positions: int):
    """A freshly initialised model of the spec's architecture (seeded by the caller)."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    shape = {
        "vocab_size": len(tokenizer),
        "hidden_size": spec.hidden,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.heads,
        "intermediate_size": spec.intermediate,
        "max_position_embeddings": positions,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": tokenizer.eos_token_id,
    }
    if spec.arch == "llama":
        return LlamaForCausalLM(LlamaConfig(**shape, tie_word_embeddings=False))
    return Qwen2ForCausalLM(Qwen2Config(**shape, tie_word_embeddings=True))


def pretraining_prompts(directory: Path | str) -> set[str] | None:
    """The prompts a seed policy at `directory` was pretrained on (its build record lists them);
    None for a model that is not a seed policy, whose training data is not known here."""
    record = Path(directory) / "seed-build.json"
    if not record.is_file():
        return None
    return set(json.loads(record.read_text())["corpus_questions"])


def seed_policy_dir(data_root: Path, spec: SeedSpec) -> Path:
    """Returns where the seed policy of `spec` is cached."""
    arch = "" if spec.arch == "qwen2" else f"{spec.arch}-"
    name = f"seed-{arch}{spec.catalog}-{spec.seed}-h{spec.hidden}l{spec.layers}"
    if spec.entries:
        name += "-on-" + "+".join(sorted(spec.entries))
    if spec.steps != spec.recipe_steps:  # a longer (or shorter) pretraining is another policy
        name += f"-s{spec.steps}"
    if spec.tagged != 1.0:
        name += f"-t{spec.tagged:g}"
    if spec.shared_tokenizer:  # a specialist with the generalist's tokenizer
        name += "-shared-tok"
    if spec.heads != spec.recipe.heads:  # the same sizes cut into other attention heads
        name += f"-a{spec.heads}"
    return data_root / "policies" / name


def ensure_seed_policy(
    data_root: Path,
    spec: SeedSpec,
    *,
    force: bool = False,
    minutes: float | None = None,
    progress: Callable[[BuildProgress], None] | None = None,
    poll_s: float = 1.0,
) -> Path:
    """Returns the cached seed policy's directory, building it first if absent (or `force`).

    Processes sharing a cache (a devnet's nodes, a second `sapo policy seed`) build it once: the
    first holds a lock while it builds; the others wait, passing the builder's progress to their
    own `progress` (with `waiting` set) so they can say what they wait for, then find it built.
    A build that was stopped resumes from what it saved (see build_seed_policy).
    """
    import fcntl

    directory = seed_policy_dir(data_root, spec)
    if (directory / "seed-build.json").is_file() and not force:
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process builds it: follow its progress meanwhile
            if force:
                raise SeedBuildBusy(directory) from None
            while True:
                if progress and (seen := read_progress(directory)) is not None:
                    progress(replace(seen, waiting=True))
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(poll_s)
        if force or not (directory / "seed-build.json").is_file():
            build_seed_policy(spec, directory, minutes=minutes, progress=progress)
    return directory


class SeedBuildBusy(RuntimeError):
    """A forced rebuild was asked for while another process builds the same policy."""

    def __init__(self, directory: Path):
        seen = read_progress(directory)
        who = f" (pid {seen.builder_pid}: {seen.describe()})" if seen else ""
        super().__init__(
            f"another process is building {directory.name}{who}; wait for it to finish, "
            "then rebuild with --force"
        )
