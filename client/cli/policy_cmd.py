"""`sapo policy`: build the CPU seed policy, evaluate any policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from client.cli.console import ConfigOption, Exit, JsonOption, fail, out, print_json
from client.cli.progress import ProgressOutput, seed_progress

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS

DataDirOption = Annotated[
    Path, typer.Option("--data-dir", help="Where built policies are cached (policies/ below).")
]


@app.command("seed")
def seed(
    seed_: Annotated[int, typer.Option("--seed", min=0, help="Seed: corpus, init, order.")] = 0,
    minutes: Annotated[
        float | None, typer.Option("--minutes", min=0.1, help="Stop early after this long.")
    ] = None,
    data_dir: DataDirOption = Path(".sapo"),
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if cached.")] = False,
    size: Annotated[
        Literal["small", "test"],
        typer.Option("--size", help="small: the swarm's default; test: seconds, for tests."),
    ] = "small",
    catalog: Annotated[
        str, typer.Option("--catalog", help="Pretrain on this catalog (configs/tasks/<name>.toml).")
    ] = "tiny",
    steps: Annotated[
        int,
        typer.Option(
            "--steps",
            min=0,
            max=100_000,
            help="Pretraining steps (0: the size's recipe); more steps, larger corpus.",
        ),
    ] = 0,
    tagged: Annotated[
        float,
        typer.Option(
            "--tagged",
            min=0.01,
            max=1.0,
            help="Share of pretraining answers in the <answer></answer> format the verifiers "
            "read (the rest: 'Answer: A', scored 0).",
        ),
    ] = 1.0,
    heads: Annotated[
        int,
        typer.Option(
            "--heads",
            min=0,
            max=64,
            help="Attention heads (0: the size's recipe); vLLM's CPU attention needs head size "
            "32, 64, 80, ... (small: --heads 3).",
        ),
    ] = 0,
    arch: Annotated[
        Literal["qwen2", "llama"],
        typer.Option(
            "--arch",
            help="qwen2: the swarm's default; llama: a Llama-architecture sibling with a "
            "tokenizer of its own (another model family; \\[policy].model = 'seed-llama').",
        ),
    ] = "qwen2",
    as_json: JsonOption = False,
) -> None:
    """Build (once, then cached) the tiny Qwen2 (or, --arch llama, Llama) seed policy on a task
    catalog; no download.

    A stopped build resumes where it last saved; a second caller waits for a build under way
    and shows its progress."""
    # lazily: the training stack (torch, transformers) loads only for the command that uses it
    from client.policy import SeedSpec, ensure_seed_policy, seed_policy_dir
    from client.policy.seed import SeedBuildBusy
    from client.tasks import CatalogError, load_catalog

    if "/" in catalog or catalog.endswith(".toml"):
        fail(f"--catalog {catalog}: give a catalog's name (configs/tasks/<name>.toml), not a path")
    try:
        load_catalog(catalog)
    except CatalogError as exc:
        fail(str(exc))
    try:
        spec = SeedSpec.of(size, seed_, catalog, steps=steps, tagged=tagged, heads=heads, arch=arch)
    except ValueError as exc:
        fail(f"--heads {heads}: {exc}")
    directory = seed_policy_dir(data_dir.absolute(), spec)
    cached = (directory / "seed-build.json").is_file() and not force
    if not cached:
        try:
            title = f"building seed policy {directory.name}"
            with ProgressOutput(title, json_mode=as_json) as shown:
                ensure_seed_policy(
                    data_dir.absolute(),
                    spec,
                    force=force,
                    minutes=minutes,
                    progress=seed_progress(shown),
                )
        except SeedBuildBusy as exc:
            fail(str(exc), Exit.CHECK_FAILED)
    record = json.loads((directory / "seed-build.json").read_text())
    summary = {k: v for k, v in record.items() if k != "corpus_questions"}
    summary |= {"path": str(directory), "cached": cached}
    if as_json:
        print_json(summary)
        return
    state = "cached" if cached else "built"
    out.print(f"seed policy {state}: {directory}")
    out.print(
        f"  {summary['parameters']:,} parameters, {summary['steps']} steps, "
        f"{summary['tokens']:,} tokens, final loss {summary['final_loss']:.3f}, "
        f"{summary['seconds']} s"
        + (" (cut short by --minutes)" if summary["cut_short"] else "")
        + (f" (resumed at step {r})" if (r := summary.get("resumed_from")) else "")
    )


@app.command("eval")
def eval_(
    policy: Annotated[str, typer.Option("--policy", help="Policy directory or HF name.")],
    catalog: Annotated[str, typer.Option("--catalog", help="Catalog name or path.")] = "tiny",
    questions: Annotated[int, typer.Option("--questions", min=1, max=4096)] = 100,
    seed_: Annotated[int, typer.Option("--seed", min=0, help="Evaluation set.")] = 0,
    device: Annotated[str, typer.Option("--device")] = "auto",
    as_json: JsonOption = False,
) -> None:
    """Mean verifier reward per dataset and overall, greedy and sampled, on fresh questions."""
    # lazily: the training stack (torch, transformers) loads only for the command that uses it
    from client.policy import PolicyError, evaluate, load_policy
    from client.tasks import CatalogError, load_catalog

    try:
        cat = load_catalog(catalog)
        loaded = load_policy(policy, device=device)
    except (CatalogError, PolicyError, RuntimeError) as exc:
        fail(str(exc))
    try:
        report = evaluate(loaded, cat, questions=questions, seed=seed_)
    except Exception as exc:
        fail(f"evaluation failed: {type(exc).__name__}: {exc}", Exit.CHECK_FAILED)
    if as_json:
        print_json({"policy": policy, "catalog": cat.name, **report})
        return
    table = Table(title=f"{policy} on {cat.name} ({questions} fresh questions, seed {seed_})")
    for column in ("dataset", "questions", "greedy", "sampled"):
        table.add_column(column, justify="left" if column == "dataset" else "right")
    for name, row in report["per_dataset"].items():
        table.add_row(name, str(row["questions"]), f"{row['greedy']:.3f}", f"{row['sampled']:.3f}")
    table.add_row("overall", str(questions), f"{report['greedy']:.3f}", f"{report['sampled']:.3f}")
    out.print(table)
    if report["unseen"] is not None:
        unseen = report["unseen"]
        out.print(
            f"{report['seen_in_pretraining']} of {questions} questions were in the seed "
            f"policy's pretraining corpus; on the {unseen['questions']} others: greedy "
            f"{unseen['greedy']:.3f}, sampled {unseen['sampled']:.3f}"
        )


@app.command("id")
def id_(
    policy: Annotated[
        str | None,
        typer.Argument(help="Model directory or HF name (cached; nothing is downloaded)."),
    ] = None,
    config: ConfigOption = None,
    adapter: Annotated[
        Literal["lora", "none"] | None,
        typer.Option("--adapter", help="lora: the base's id; none: the architecture's id."),
    ] = None,
    bundle: Annotated[
        bool,
        typer.Option(
            "--bundle",
            help="Print the base's bundle id instead: what \\[policy].base names for a node that "
            "may fetch the base over IPFS.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Print the model family a node of this model registers in: a base's content id (when it
    trains an adapter) or its architecture's (full fine-tuning). Ledgers list theirs at
    deployment (\\[ledger].families, `sapo chain deploy --family`).

    With no POLICY, the model and adapter of the config's \\[policy] (a seed policy is built
    first if absent)."""
    from client.cli.config_cmd import load_or_exit

    # lazily: the training stack (torch, transformers) loads only for the command that uses it
    from client.node.assemble import NodeConfigError, base_policy_path
    from client.policy import PolicyError, load_policy
    from client.policy.base import bundle_of
    from client.policy.family import family_id
    from client.store.base import BaseError

    try:
        if policy is None:
            cfg = load_or_exit(config)
            name, kind = cfg.policy.model, adapter or cfg.policy.adapter
            source = base_policy_path(cfg)
        else:
            name, kind, source = policy, adapter or "lora", policy
        loaded = load_policy(source, device="cpu", dtype="float32")
        family = family_id(loaded.model, loaded.tokenizer, kind == "lora")
        ident = bundle_of(loaded).id() if bundle else None
    except (NodeConfigError, PolicyError, BaseError, OSError) as exc:
        fail(str(exc))
    if as_json:
        print_json(
            {"model": name, "adapter": kind, "family": family}
            | ({"bundle": ident} if bundle else {})
        )
    else:
        out.print(ident if bundle else family)
