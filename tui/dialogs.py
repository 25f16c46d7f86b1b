"""Modal screens: a confirmation that shows what will happen, an amount prompt, the key help,
the preflight's checks."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from client.config.models import parse_wei


class ConfirmScreen(ModalScreen[bool]):
    """Returns True when the operator confirms (`y` / Enter on Confirm), False otherwise."""

    BINDINGS = [
        Binding("y", "answer(True)", "confirm"),
        Binding("n,escape", "answer(False)", "cancel"),
    ]

    def __init__(self, title: str, lines: list[str], confirm: str = "Confirm"):
        super().__init__()
        self.title_text, self.lines, self.confirm = title, lines, confirm

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = self.title_text
            yield Static("\n".join(self.lines), id="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.confirm} (y)", variant="primary", id="confirm")
                yield Button("Cancel (n)", id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class AmountScreen(ModalScreen[int | None]):
    """Asks for an amount ('0.5', '0.5 ether', '1000 gwei'); returns wei, or None on cancel."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str, hint: str, most: int | None = None):
        super().__init__()
        self.title_text, self.hint, self.most = title, hint, most

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as box:
            box.border_title = self.title_text
            yield Static(self.hint)
            yield Input(placeholder="amount in ETH, e.g. 0.5", id="amount")
            yield Label("", id="amount-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        try:
            # a bare number is ether here (an operator types 0.5, not 500000000000000000)
            wei = parse_wei(text if not _bare_number(text) else f"{text} ether")
            if wei == 0:
                raise ValueError("the amount must be above zero")
            if self.most is not None and wei > self.most:
                raise ValueError(f"at most {self.most / 10**18:g} ETH")
        except ValueError as exc:
            self.query_one("#amount-error", Label).update(f"[red]{exc}[/]")
            return
        self.dismiss(wei)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _bare_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class HelpScreen(ModalScreen[None]):
    """The keys, and what the screens show."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "close")]

    def __init__(self, keys: list[tuple[str, str]], read_only: bool):
        super().__init__()
        self.keys, self.read_only = keys, read_only

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 3))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, what in self.keys:
            table.add_row(key, what)
        with Vertical(classes="dialog", id="help") as box:
            box.border_title = "keys"
            yield Static(table)
            if self.read_only:
                yield Static(
                    "\nAttached read-only: stake, claim and pause act on the node's own "
                    "process (`sapo stake …`, `sapo rewards claim`).",
                    classes="dim",
                )
            yield Static("\nEscape or ? closes this help.", classes="dim")

    def action_close(self) -> None:
        self.dismiss(None)


class ChecksScreen(ModalScreen[None]):
    """The preflight's checks (`sapo doctor`, client.node.doctor): each with its fix."""

    BINDINGS = [Binding("escape,d,q", "close", "close")]

    def __init__(self, checks: list):
        super().__init__()
        self.checks = checks

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column()
        marks = {True: "[green]ok[/]", False: "[red]FAIL[/]", None: "[dim]skip[/]"}
        for check in self.checks:
            text = escape(check.detail)
            if check.fix and check.ok is False:
                text += f"\n[cyan]fix:[/] {escape(check.fix)}"
            table.add_row(check.name, marks[check.ok], text)
        with Vertical(classes="dialog", id="checks") as box:
            box.border_title = "preflight (sapo doctor)"
            yield Static(table)
            yield Static("\nEscape or d closes this.", classes="dim")

    def action_close(self) -> None:
        self.dismiss(None)
