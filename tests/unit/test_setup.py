"""scripts/setup is idempotent: a second run with nothing changed reinstalls nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.harness.processes import REPO

pytestmark = pytest.mark.slow


def test_second_setup_run_installs_nothing() -> None:
    env = os.environ | {"VIRTUAL_ENV": sys.prefix}
    result = subprocess.run(
        ["bash", "scripts/setup"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert "python packages up to date" in result.stdout, result.stdout
    assert "javascript tools up to date" in result.stdout, result.stdout


def test_setup_refuses_an_old_python(tmp_path) -> None:
    fake = tmp_path / "python3"
    fake.write_text(
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Python 3.9.0'; exit 0; fi\nexit 1\n"
    )
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {"PYTHON": str(fake)}
    result = subprocess.run(
        ["bash", "scripts/setup"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "Python 3.11 or newer is required" in result.stderr
