"""The import rules of ../shared/ARCHITECTURE.md hold on the whole tree: every module of
`client/` and `tui/` sits in a layer and imports only from the layers below it, and no two modules
of one package import each other, even through others (imports inside functions and under
TYPE_CHECKING count). The contracts live in pyproject.toml ([tool.importlinter]); this runs
import-linter's own checker on them, as `lint-imports` does."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from tests.harness.processes import REPO


def test_no_import_runs_against_the_layers_or_in_a_circle() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command as lint; "
            "sys.exit(lint())",
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "2 kept, 0 broken" in result.stdout, result.stdout[-2000:]


def test_every_package_of_client_and_tui_has_a_layer() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    packages = {"tui"} | {
        f"client.{p.stem}"
        for p in (REPO / "client").iterdir()
        if (p.is_dir() and (p / "__init__.py").is_file())
        or (p.suffix == ".py" and p.stem != "__init__")
    }
    assert packages == named, f"without a layer: {packages - named}; gone: {named - packages}"
