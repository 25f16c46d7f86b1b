"""The operator's TUI: watch a node (and run it, when it runs in this process).

A thread worker asks the watcher for a snapshot every second and hands it to the widgets on the
UI thread; transactions the operator confirms are sent from thread workers too, so a slow RPC
never freezes the screen, and a failed one is a notification and an activity line, not a crash.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header, TabbedContent, TabPane
from textual.worker import get_current_worker

from client.chain import ChainError, Ledger
from client.chain.models import TxResult
from client.node.doctor import preflight
from client.node.view import Watcher
from client.node.view.snapshot import Activity, Snapshot
from tui.dialogs import AmountScreen, ChecksScreen, ConfirmScreen, HelpScreen
from tui.format import format_ether, short
from tui.live import LiveNode
from tui.widgets.activity import ActivityLog
from tui.widgets.badges import StatusBar
from tui.widgets.overview import Overview
from tui.widgets.peers import PeersTable
from tui.widgets.rewards import RewardCharts
from tui.widgets.training import TrainingPanel

TABS = ("overview", "peers", "rewards", "activity", "training")


class SapoApp(App):
    """`sapo tui`: Overview, Peers, Rewards, Activity and Training of one node."""

    CSS_PATH = "sapo.tcss"
    TITLE = "sapo-swarm"
    BINDINGS = [
        *(
            Binding(str(i + 1), f"show_tab('{tab}')", tab.capitalize(), show=False)
            for i, tab in enumerate(TABS)
        ),
        Binding("a", "add_stake", "Stake"),
        Binding("u", "unstake", "Unstake"),
        Binding("w", "withdraw", "Withdraw"),
        Binding("c", "claim", "Claim"),
        Binding("p", "pause", "Pause/resume"),
        Binding("s", "sort_peers", "Sort peers", show=False),
        Binding("right_square_bracket", "peers_page(1)", "Next page of peers", show=False),
        Binding("left_square_bracket", "peers_page(-1)", "Previous page of peers", show=False),
        Binding("d", "checks", "Checks"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]
    KEYS = [
        ("1 … 5", "Overview, Peers, Rewards, Activity, Training"),
        ("a", "add stake (asks the amount, then confirms)"),
        ("u", "request unstake (the amount unbonds for the ledger's unbonding period)"),
        ("w", "withdraw stake whose unbonding period has run"),
        ("c", "claim the rewards of final rounds"),
        ("p", "pause the node after its current round / resume it"),
        ("s", "cycle the peers table's sort column (or click a header)"),
        ("] [", "the next / previous page of the peers table (200 nodes a page)"),
        ("d", "the preflight's checks (as `sapo doctor`), each failure with its fix"),
        ("?", "this help"),
        ("q", "quit (a node running here stops gracefully: checkpoint, flush)"),
    ]

    def __init__(
        self,
        watcher: Watcher,
        live: LiveNode | None = None,
        *,
        interval_s: float = 1.0,
        preflight: bool = False,
    ):
        super().__init__()
        self.preflight = preflight  # run the checks of `sapo doctor` on start
        self.checks: list | None = None
        self.watcher = watcher
        self.live = live
        self.interval_s = interval_s
        self.snap: Snapshot | None = None
        self.stopping = False
        self.notices: list[str] = []  # every notification shown, oldest first
        self.sub_title = f"node {short(watcher.address)} · " + (
            "running here" if live else "attached, read-only"
        )

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield StatusBar(id="status")
        with TabbedContent(id="tabs", initial="overview"):
            with TabPane("Overview", id="overview"):
                yield Overview(id="overview-panel")
            with TabPane("Peers", id="peers"):
                yield PeersTable(id="peers-table")
            with TabPane("Rewards", id="rewards"):
                yield RewardCharts(id="reward-charts")
            with TabPane("Activity", id="activity"):
                yield ActivityLog(id="activity-log")
            with TabPane("Training", id="training"):
                yield TrainingPanel(id="training-panel")
        yield Footer()

    def on_mount(self) -> None:
        if self.live is not None and not self.live.running:
            self.live.start()
        self.watch_node()
        if self.preflight:
            self.run_checks()

    @work(thread=True, group="checks")
    def run_checks(self) -> None:
        """The checks of `sapo doctor` (not the model: a running node loaded it, and an
        attached watcher is not the node), summed up in a notification; `d` shows them."""
        checks = preflight(self.watcher.cfg, load_model=False)
        failed = [c.name for c in checks if c.ok is False]
        self.checks = checks
        if failed:
            text = (
                f"preflight: {len(failed)} check(s) failed ({', '.join(failed)}): d shows the fixes"
            )
            self.call_from_thread(self.notify, text, severity="error", timeout=20)
        else:
            passed = sum(1 for c in checks if c.ok)
            self.call_from_thread(self.notify, f"preflight: {passed} checks passed", timeout=5)

    def action_checks(self) -> None:
        if self.checks is None:
            self.notify(
                "the preflight's checks are still running"
                if self.preflight
                else "no preflight in this view (sapo doctor)"
            )
            return
        self.push_screen(ChecksScreen(self.checks))

    # ---------------------------------------------------------------------------- data flow

    @work(thread=True, exclusive=True, group="watch")
    def watch_node(self) -> None:
        worker = get_current_worker()
        failed = False
        while not worker.is_cancelled:
            try:
                live = self.live
                snap = self.watcher.snapshot(
                    phase=live.phase if live else None,
                    paused=live.paused if live else False,
                    running=live.running if live else False,
                )
                failed = False
            except Exception as exc:  # a bug in a reader must not take the screen down
                if not failed:
                    self.call_from_thread(
                        self.notify, f"refresh failed: {exc}", severity="error", timeout=8
                    )
                failed = True
            else:
                self.call_from_thread(self.show_snapshot, snap)
            time.sleep(self.interval_s)

    def show_snapshot(self, snap: Snapshot) -> None:
        """Hands a snapshot to every panel (on the UI thread)."""
        if not self.is_running:
            # the app is closing (its screens are being taken down) while the watcher's last
            # refresh was on its way: nothing to show it on
            return
        self.snap = snap
        self.query_one(StatusBar).show(snap, self.watcher.store_name)
        self.query_one(Overview).show(snap)
        self.query_one(PeersTable).show(snap.peers, snap.peers_since)
        self.query_one(RewardCharts).show(snap)
        self.query_one(ActivityLog).show(snap)
        self.query_one(TrainingPanel).show(snap)

    def notify(self, message: str, **kwargs) -> None:
        self.notices.append(message)
        super().notify(message, **kwargs)

    # ------------------------------------------------------------------------------- actions

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_sort_peers(self) -> None:
        self.query_one(PeersTable).cycle_sort()

    def action_peers_page(self, pages: int) -> None:
        self.query_one(PeersTable).turn(pages)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.KEYS, read_only=self.live is None))

    def _signer(self, what: str) -> Ledger | None:
        """The node's signing ledger, or None (with a notification saying why)."""
        if self.live is None:
            self.notify(
                f"attached read-only: {what} from the node's own config (`sapo stake …`, "
                "`sapo rewards claim`)",
                severity="warning",
            )
            return None
        if self.snap is None or self.snap.account is None:
            self.notify(f"cannot {what} yet: no answer from the chain", severity="warning")
            return None
        return self.live.ledger

    def action_add_stake(self) -> None:
        if (ledger := self._signer("add stake")) is None:
            return
        a = self.snap.account

        def confirm(wei: int | None) -> None:
            if wei is None:
                return
            self._confirm_tx(
                "Add stake",
                [
                    f"Send {format_ether(wei)} from {a.address}",
                    f"to the ledger {self.snap.ledger} as stake.",
                    "",
                    f"active stake: {format_ether(a.active_stake)} → "
                    f"{format_ether(a.active_stake + wei)}",
                    f"balance:      {format_ether(a.balance)} → about "
                    f"{format_ether(a.balance - wei)} (plus gas)",
                ],
                "add stake",
                lambda: ledger.add_stake(wei),
            )

        self.push_screen(
            AmountScreen(
                "Add stake",
                f"balance {format_ether(a.balance)}, active stake {format_ether(a.active_stake)}",
                most=a.balance,
            ),
            confirm,
        )

    def action_unstake(self) -> None:
        if (ledger := self._signer("request unstake")) is None:
            return
        a, snap = self.snap.account, self.snap
        if not a.active_stake:
            self.notify("no active stake to unstake", severity="warning")
            return

        def confirm(wei: int | None) -> None:
            if wei is None:
                return
            period = snap.unbonding_period or 0
            frees = dt.datetime.fromtimestamp(time.time() + period).strftime("%H:%M:%S")
            after = a.active_stake - wei
            lines = [
                f"Move {format_ether(wei)} of {a.address}'s active stake to unbonding.",
                "",
                f"active stake: {format_ether(a.active_stake)} → {format_ether(after)}",
                f"unbonding:    {format_ether(a.unbonding)} → {format_ether(a.unbonding + wei)}, "
                f"all of it withdrawable after {period} s (about {frees})",
                "Unbonding stake can still be slashed for a disputed submission.",
            ]
            if snap.min_stake is not None and after < snap.min_stake:
                lines.append(
                    f"Below the minimum stake ({format_ether(snap.min_stake)}): this node can no "
                    "longer submit rollouts until it stakes again."
                )
            self._confirm_tx(
                "Request unstake", lines, "request unstake", lambda: ledger.request_unstake(wei)
            )

        self.push_screen(
            AmountScreen(
                "Request unstake",
                f"active stake {format_ether(a.active_stake)}",
                most=a.active_stake,
            ),
            confirm,
        )

    def action_withdraw(self) -> None:
        if (ledger := self._signer("withdraw")) is None:
            return
        a = self.snap.account
        if not a.unbonding:
            self.notify("nothing is unbonding: request an unstake first (u)", severity="warning")
            return
        if a.unbonding_end > time.time():
            frees = dt.datetime.fromtimestamp(a.unbonding_end).strftime("%H:%M:%S")
            self.notify(
                f"{format_ether(a.unbonding)} is still unbonding: withdrawable at {frees}",
                severity="warning",
            )
            return
        self._confirm_tx(
            "Withdraw",
            [
                f"Pay {format_ether(a.unbonding)} of unbonded stake back to {a.address}.",
                f"balance: {format_ether(a.balance)} → about "
                f"{format_ether(a.balance + a.unbonding)} (less gas)",
            ],
            "withdraw",
            ledger.withdraw,
        )

    def action_claim(self) -> None:
        if (ledger := self._signer("claim")) is None:
            return
        a = self.snap.account
        if not a.claimable:
            self.notify("nothing to claim: no final, credited, unpaid round", severity="warning")
            return
        rounds = list(a.claimable_rounds)
        listed = ", ".join(map(str, rounds[:12])) + (" …" if len(rounds) > 12 else "")
        self._confirm_tx(
            "Claim rewards",
            [
                f"Claim {format_ether(a.claimable)} for {len(rounds)} final rounds: {listed}.",
                f"paid to {a.address}; reward pool {format_ether(self.snap.reward_pool or 0)}.",
            ],
            "claim",
            lambda: ledger.claim(rounds),
        )

    def action_pause(self) -> None:
        if self.live is None:
            self.notify("attached read-only: pause the node where it runs", severity="warning")
            return
        live = self.live
        if live.paused:
            lines = ["Resume the node: it plays the next round that opens."]
            self._confirm("Resume node", lines, lambda: self._set_paused(False))
        else:
            lines = [
                "Pause the node: it finishes the round it is in, then plays no rounds",
                "(no rollouts, no submissions, no attestations, no training) until resumed.",
                "Rounds it sits out earn nothing; its stake stays active.",
            ]
            self._confirm("Pause node", lines, lambda: self._set_paused(True))

    def _set_paused(self, paused: bool) -> None:
        assert self.live is not None
        if paused:
            self.live.pause()
        else:
            self.live.resume()
        text = "paused the node (after its current round)" if paused else "resumed the node"
        self.watcher.note(Activity(time.time(), "action", text))
        self.notify(text)

    def _confirm(self, title: str, lines: list[str], then: Callable[[], None]) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                then()

        self.push_screen(ConfirmScreen(title, lines), answered)

    def _confirm_tx(
        self, title: str, lines: list[str], label: str, send: Callable[[], TxResult]
    ) -> None:
        self._confirm(title, lines, lambda: self._transact(label, send))

    @work(thread=True, group="tx")
    def _transact(self, label: str, send: Callable[[], TxResult]) -> None:
        self.call_from_thread(self.notify, f"{label}: sending…", timeout=3)
        try:
            tx = send()
        except Exception as exc:  # shown, never raised into the UI
            # the chain's own errors name the contract error and what to do; others, their type
            reason = str(exc) if isinstance(exc, ChainError) else repr(exc)
            line = Activity(time.time(), "action", f"{label} failed: {reason}", level="error")
            self.watcher.note(line)
            self.call_from_thread(self.notify, line.text, severity="error", timeout=10)
            return
        text = f"{label}: mined in block {tx.block_number} · tx {tx.tx_hash}"
        self.watcher.note(Activity(time.time(), "action", text))
        self.call_from_thread(self.notify, text, timeout=6)

    async def action_quit(self) -> None:
        if self.live is None or not self.live.running:
            self.exit()
            return
        if self.stopping:
            self.notify("still stopping the node… (checkpoint and outbox flush)")
            return
        self._confirm(
            "Quit",
            [
                "Stop the node and quit: it finishes its current step, writes a checkpoint",
                "and flushes its outbox (up to ~10 s); nothing it generated is lost.",
            ],
            self._stop_and_exit,
        )

    def _stop_and_exit(self) -> None:
        self.stopping = True
        self.notify("stopping the node…", timeout=30)
        self._stop_worker()

    @work(thread=True, group="stop")
    def _stop_worker(self) -> None:
        assert self.live is not None
        self.live.stop()
        self.call_from_thread(self.exit)

    def on_unmount(self) -> None:
        self.watcher.close()
