"""Where a seed policy's build stands: the builder writes it to a file beside the policy, so that a
process waiting for another's build, and `sapo devnet status`, can show it too."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BuildProgress:
    """Where a seed policy's build stands, as the builder last reported it.

    The builder writes it to a file beside the policy (`progress_path`), so that a caller that
    waits for another process's build, and `sapo devnet status`, can show it too."""

    policy: str  # the policy's directory name
    stage: str  # corpus, tokenizer, training, saving, done
    step: int
    steps: int
    loss: float | None
    elapsed_s: float  # since this build process started
    builder_pid: int
    resumed_from: int = 0  # the step a resumed build started from (0: from scratch)
    saved_step: int = 0  # the last step a resumable state was written for
    waiting: bool = False  # set for a caller that waits for this build: not its own

    @property
    def eta_s(self) -> float | None:
        """Seconds left, from this process's pace (None before training has a pace)."""
        done = self.step - self.resumed_from
        if self.stage != "training" or done <= 0:
            return None
        return self.elapsed_s / done * (self.steps - self.step)

    def describe(self) -> str:
        """Returns one line for people: stage, step, loss and time left."""
        if self.stage != "training":
            text = {
                "corpus": "drawing the corpus",
                "tokenizer": "training the tokenizer",
                "saving": "saving",
                "done": "done",
            }.get(self.stage, self.stage)
        else:
            text = f"step {self.step}/{self.steps}"
            if self.loss is not None:
                text += f", loss {self.loss:.3f}"
            if (eta := self.eta_s) is not None and self.step < self.steps:
                text += f", ~{_duration(eta)} left"
        if self.resumed_from:
            text += f" (resumed at step {self.resumed_from})"
        return text


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def progress_path(directory: Path) -> Path:
    """Returns the file where the build of `directory` reports its progress."""
    return directory.with_name(f".{directory.name}.progress.json")


def read_progress(directory: Path) -> BuildProgress | None:
    """Returns the last progress the build of `directory` reported (None: none reported)."""
    try:
        return BuildProgress(**json.loads(progress_path(directory).read_text()))
    except (OSError, ValueError, TypeError):
        return None
