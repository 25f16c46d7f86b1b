"""Where the CLI writes, and what its exit codes mean (as `cast` and `btcli` users expect)."""

from __future__ import annotations

import json
from enum import IntEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class Exit(IntEnum):
    OK = 0
    CHECK_FAILED = 1  # the command ran and found something wrong (a mismatch, a dead part)
    USAGE = 2  # bad arguments or config: nothing was done


def fail(message: str, code: Exit = Exit.USAGE) -> NoReturn:
    """Prints `error: message` on stderr (one line unless the message has several) and exits."""
    err.print(f"[bold red]error:[/] {escape(message)}", markup=True)
    raise typer.Exit(int(code))


def fail_validation(exc: Any, flags: dict[str, str] | None = None) -> NoReturn:
    """Exits 2 naming each invalid field (as its CLI flag when `flags` maps it) and why."""
    flags = flags or {}
    problems = []
    for e in exc.errors():
        field = str(e["loc"][0]) if e["loc"] else "value"
        message = e["msg"].removeprefix("Value error, ")
        problems.append(f"{flags.get(field, field)}: {message}")
    fail("; ".join(problems))


def print_json(data: Any) -> None:
    """Prints data as JSON on stdout, nothing else, for scripts."""
    print(json.dumps(data, indent=2, sort_keys=False, default=str))


ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Node config (TOML). Env: SAPO_CONFIG. Keys can be overridden with "
        "SAPO_<SECTION>__<KEY> variables.",
        envvar="SAPO_CONFIG",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def serve_until_signalled(log_level: str, logger: str, stopping: str):
    """For a command that runs until stopped (`sapo node run`, `sapo aggregate run`): logs at
    `log_level` on stderr, one line an event, and returns the event SIGINT, SIGTERM or SIGHUP
    sets (the first logs `stopping` on `logger`)."""
    import logging
    import signal
    import threading

    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)-7s %(message)s",
        datefmt="%H:%M:%S",
    )
    stop = threading.Event()

    def request_stop(signum, frame) -> None:
        if not stop.is_set():
            logging.getLogger(logger).info(stopping)
            stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, request_stop)
    return stop
