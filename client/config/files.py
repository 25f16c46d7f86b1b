"""TOML files read into pydantic models (task catalogs, experiments): one way to say what is
wrong with a file, by its path and the keys that failed."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def load_toml_model(
    path: Path, model: type[M], error: type[Exception], *, missing: str, whole: str
) -> M:
    """Reads `path` into `model`. Raises `error` with `missing` when there is no such file, and
    with the path and every failing key otherwise (`whole` stands for a problem of the whole
    document)."""
    try:
        document = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise error(missing) from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}") from None
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or whole}: {e['msg']}" for e in exc.errors()
        )
        raise error(f"{path}: {problems}") from None
