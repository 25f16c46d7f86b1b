"""What determines a seed policy (`SeedSpec`): its recipe's sizes, its seed, the catalog and entries
it is pretrained on, its architecture. Two builds of one spec give the same weights."""

from __future__ import annotations

from dataclasses import dataclass, replace

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
