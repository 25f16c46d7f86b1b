"""Every `sapo ... --help` says what its source says: a config section written `[chain]` in a help
string or docstring reaches the screen as `[chain]` (Rich reads an unescaped one as a style tag
and drops it), and `sapo devnet up --help` names every adversary strategy the config accepts."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from client.cli.main import COMMANDS, app
from client.config.roles import CHOICES

Command = Any  # a command of the click that typer vendors

# a config section or key as help texts name it: [chain], [chain].rpc_url, [devnet.node_overrides]
SECTION = re.compile(r"\\?\[([a-z_][a-z0-9_.]*)\]")


def commands() -> Iterator[tuple[list[str], Command]]:
    """(argv prefix, command) of every command and group under `sapo`, imported as they run."""
    root = typer.main.get_command(app)
    ctx = root.context_class(root)
    for name in COMMANDS:
        yield from _walk([name], root.get_command(ctx, name))


def _walk(path: list[str], command: Command | None) -> Iterator[tuple[list[str], Command]]:
    assert command is not None, path
    yield path, command
    if hasattr(command, "list_commands"):  # a group (typer's own copy of click's)
        ctx = command.context_class(command)
        for name in command.list_commands(ctx):
            yield from _walk([*path, name], command.get_command(ctx, name))


def written_sections(command: Command) -> list[str]:
    """The `[section]` names its help texts hold, as written in the source (escaped or not)."""
    texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
    return [f"[{m}]" for text in texts for m in SECTION.findall(text)]


COMMAND_LIST = list(commands())


def test_the_walk_finds_every_command() -> None:
    names = {" ".join(path) for path, _ in COMMAND_LIST}
    assert {"chain deploy", "devnet up", "audit verify", "wallet new", "doctor"} <= names


@pytest.mark.parametrize(
    "path", [path for path, cmd in COMMAND_LIST if written_sections(cmd)], ids=" ".join
)
def test_help_keeps_every_section_name(cli: CliRunner, path: list[str]) -> None:
    command = dict((tuple(p), c) for p, c in COMMAND_LIST)[tuple(path)]
    result = cli.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    shown = re.sub(r"\s+", " ", result.output)
    for name in sorted(set(written_sections(command))):
        expected = written_sections(command).count(name)
        assert shown.count(name) >= expected, (
            f"`sapo {' '.join(path)} --help` shows {name} {shown.count(name)} time(s), its "
            f"source {expected}: escape it as \\\\{name} (Rich reads [x] as markup)\n"
            + result.output
        )


def test_devnet_up_names_every_adversary_strategy(cli: CliRunner) -> None:
    result = cli.invoke(app, ["devnet", "up", "--help"])
    assert result.exit_code == 0, result.output
    shown = re.sub(r"\s+", " ", result.output.replace("│", " "))
    missing = [c for c in CHOICES if not re.search(rf"(?<![\w-]){re.escape(c)}(?![\w-])", shown)]
    assert not missing, f"`sapo devnet up --help` does not name {missing}:\n{result.output}"
