"""The seed policy: a tiny Qwen2 model pretrained locally on a task catalog's tasks (the node's
[tasks].catalog, by default `tiny`), no download; or its Llama-architecture sibling with a
tokenizer of its own (`arch="llama"`: another model family, for swarms of mixed families).

CPU swarms start from it. It is built once per seed and cached:
- `spec`: what determines a policy (`SeedSpec`);
- `pretraining`: the corpus of catalog questions, the tokenizer trained on it, the examples;
- `build`: the deterministic, resumable build of one policy;
- `progress`: where a build stands, in a file beside the policy;
- `cache`: where policies are cached, each built once by processes sharing the cache.
"""

from client.policy.seed.build import build_seed_policy
from client.policy.seed.cache import SeedBuildBusy, ensure_seed_policy, seed_policy_dir
from client.policy.seed.pretraining import SPECIAL, corpus, pretraining_prompts, train_tokenizer
from client.policy.seed.progress import BuildProgress, progress_path, read_progress
from client.policy.seed.spec import ARCHITECTURES, LLAMA_VOCAB_SHARE, SeedSpec

__all__ = [
    "ARCHITECTURES",
    "LLAMA_VOCAB_SHARE",
    "SPECIAL",
    "BuildProgress",
    "SeedBuildBusy",
    "SeedSpec",
    "build_seed_policy",
    "corpus",
    "ensure_seed_policy",
    "pretraining_prompts",
    "progress_path",
    "read_progress",
    "seed_policy_dir",
    "train_tokenizer",
]
