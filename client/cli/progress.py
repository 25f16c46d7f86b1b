"""Progress of long work, where the user looks: a live bar on a terminal, lines in a log.

On a terminal the bar redraws in place. Anywhere else (`sapo policy seed > log`, a detached
devnet's devnet.log, CI) a bar draws nothing useful, so a line is printed at the start, at each
change of stage, every `every_s` seconds and at the end. Lines go to stdout, or to stderr when
stdout carries the command's JSON.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


class ProgressOutput:
    """One long task: `update(done, total, detail, stage)` as often as you like; `close()`."""

    def __init__(self, title: str, *, json_mode: bool = False, every_s: float = 10.0):
        self.title = title
        self.every_s = every_s
        self._stream: TextIO = sys.stderr if json_mode else sys.stdout
        self._bar: Progress | None = None
        self._task = None
        self._last_line = 0.0
        self._last_key: tuple[str, str] | None = None
        self._last_text = ""
        self._tty = self._stream.isatty()
        self._json_mode = json_mode

    def update(
        self,
        done: float,
        total: float | None,
        detail: str = "",
        *,
        stage: str = "",
        title: str | None = None,
    ) -> None:
        """Shows how far the task is; `title` may change (e.g. to say whose build we wait for)."""
        if title is not None:
            self.title = title
        if self._tty and self._bar is None:  # drawn from the first update on, not before
            from rich.console import Console

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                console=Console(file=self._stream),
                transient=self._json_mode,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.title, total=None, detail="")
        if self._bar is not None:
            self._bar.update(
                self._task, description=self.title, completed=done, total=total, detail=detail
            )
            return
        now = time.monotonic()
        finished = total is not None and done >= total
        text = f"{self.title}: {detail}" if detail else self.title
        key = (stage, self.title)
        if (
            key != self._last_key
            or now - self._last_line >= self.every_s
            or (finished and text != self._last_text)
        ):
            print(text, file=self._stream, flush=True)
            self._last_line, self._last_key, self._last_text = now, key, text

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> ProgressOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def seed_progress(output: ProgressOutput):
    """Returns a callback for ensure_seed_policy that shows a build (ours or one we wait for)."""

    def show(p) -> None:  # p: client.policy.seed.BuildProgress
        title = (
            f"waiting for the build of seed policy {p.policy} by pid {p.builder_pid}"
            if p.waiting
            else f"building seed policy {p.policy}"
        )
        output.update(p.step, p.steps, p.describe(), stage=p.stage, title=title)

    return show
