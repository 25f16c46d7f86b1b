"""Tasks: catalogs of reasoning-gym datasets, the seeded draw, prompts and verifiers."""

from client.tasks.catalog import Catalog, CatalogError, Entry, check_against_ledger, load_catalog
from client.tasks.draw import Task, draw, draw_refs, local_round_seed, regenerate
from client.tasks.verify import (
    SCORE_SCALE,
    extract_answer,
    reference_answer,
    render_prompt,
    reward,
    to_units,
)

__all__ = [
    "SCORE_SCALE",
    "Catalog",
    "CatalogError",
    "Entry",
    "Task",
    "check_against_ledger",
    "draw",
    "draw_refs",
    "extract_answer",
    "load_catalog",
    "local_round_seed",
    "reference_answer",
    "regenerate",
    "render_prompt",
    "reward",
    "to_units",
]
