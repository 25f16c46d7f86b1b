"""Overview: whose node, its money on the ledger, the round, and the health of its parts."""

from __future__ import annotations

import datetime as dt

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid
from textual.widgets import Static

from client.node.view.snapshot import Health, Snapshot
from tui.format import age, format_ether, format_score

RECENT = 14  # activity lines on the overview
LEVEL_STYLES = {"warning": "yellow", "error": "bold red"}


def _grid(label_width: int) -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="dim", no_wrap=True, min_width=label_width)
    table.add_column(no_wrap=True, overflow="ellipsis")
    return table


def _health(name: str, health: Health, now: float) -> Text:
    if health.ok is None:
        return Text("not tried yet", style="dim")
    if health.ok:
        return Text("reachable", style="green")
    return Text.assemble(
        ("UNREACHABLE", "bold red"),
        f" (last answer {age(health.age(now))} ago)" if health.as_of else " (never answered)",
        ("\n" + health.detail[:160], "dim") if health.detail else "",
    )


class Overview(Grid):
    """Account, round and health cards."""

    def compose(self) -> ComposeResult:
        for key, title in (
            ("account", "Account"),
            ("round", "Round"),
            ("health", "Health"),
            ("latest", "Progress"),
            ("recent", "Recent activity"),
        ):
            card = Static(id=f"{key}-card", classes="card")
            card.border_title = title
            yield card

    def show(self, snap: Snapshot) -> None:
        now = snap.taken_at
        a = snap.account
        account = _grid(12)
        account.add_row("address", snap.address)
        if a is None:
            account.add_row("", Text("waiting for the chain…", style="dim"))
        else:
            stale = "" if snap.chain.ok else f"  (as of {age(snap.chain.age(now))} ago)"
            account.add_row("balance", format_ether(a.balance) + stale)
            account.add_row("active stake", format_ether(a.active_stake))
            if a.unbonding:
                frees = dt.datetime.fromtimestamp(a.unbonding_end).strftime("%H:%M:%S")
                when = "withdrawable now" if a.unbonding_end <= now else f"frees at {frees}"
                account.add_row("unbonding", f"{format_ether(a.unbonding)} ({when})")
            else:
                account.add_row("unbonding", "none")
            rounds = f" ({len(a.claimable_rounds)} final rounds)" if a.claimable_rounds else ""
            account.add_row("claimable", format_ether(a.claimable) + rounds)
            account.add_row("paid so far", format_ether(a.total_paid))
            if a.family:
                account.add_row("model family", f"{a.family[:12]}… ({a.family_nodes} other nodes)")
            for problem in a.family_problems:
                account.add_row("", Text(problem, style="bold yellow"))
            if not a.registered:
                account.add_row("", Text("not registered on this ledger", style="bold red"))
        self.query_one("#account-card", Static).update(account)

        round_ = _grid(12)
        round_.add_row("round", "?" if snap.round is None else str(snap.round))
        if snap.round_length:
            round_.add_row("round length", f"{snap.round_length} s")
        if snap.submit_rounds is not None and snap.challenge_rounds is not None:
            w, c = snap.submit_rounds, snap.challenge_rounds
            round_.add_row("windows", f"submit until r+{w}, attest until r+{w + c}")
        round_.add_row("phase", "paused" if snap.paused else snap.phase)
        round_.add_row("node", "running here" if snap.mode == "live" else "attached (read-only)")
        if snap.reward_pool is not None:
            round_.add_row("reward pool", format_ether(snap.reward_pool))
        peers = sum(1 for p in snap.peers if not p.me)
        round_.add_row("peers", str(peers))
        self.query_one("#round-card", Static).update(round_)

        health = _grid(8)
        health.add_row("chain", _health("chain", snap.chain, now))
        health.add_row("store", _health("store", snap.store, now))
        health.add_row("ledger", snap.ledger or "?")
        health.add_row("data dir", snap.data_dir)
        self.query_one("#health-card", Static).update(health)

        latest = _grid(15)
        confirmed = [p for p in snap.rounds if p.claimed is not None]
        if confirmed:
            last = confirmed[-1]
            agree, dispute, unavailable = last.votes
            votes = f"{agree} agreeing" + "".join(
                f", {n} {what}"
                for n, what in ((dispute, "disputing"), (unavailable, "unavailable"))
                if n
            )
            if last.lane == "root":  # its checkers voted off chain: the verdict root says
                state = "credited" if last.credited else "NOT credited"
                state += " by the root lane's verdict root"
                if last.credited is not None and agree:
                    state += f" ({agree} agreeing, signed off chain)"
            elif last.credited:
                state = f"credited ({votes})"
            elif snap.quorum and agree < snap.quorum:
                state = f"not credited yet: {agree} of {snap.quorum} agreeing checkers" + (
                    f" ({votes})" if dispute or unavailable else ""
                )
            else:
                state = f"NOT credited: outweighed ({votes})"
            latest.add_row(
                "last submission",
                f"round {last.round}: learning signal {format_score(last.claimed or 0)}, {state}",
            )
        else:
            latest.add_row("last submission", "none yet")
        t = snap.training
        if t is not None:
            latest.add_row(
                "last training",
                f"{t.round}.{t.k}, step {t.step}: reward {t.reward_local or 0:.3f}, "
                f"I/J {t.local_items}/{t.external_items}",
            )
        if snap.busy_share is not None:
            latest.add_row(
                "busy",
                f"{snap.busy_share:.0%} learning, {snap.blocked_share or 0:.0%} blocked on I/O",
            )
        if snap.local_rounds_per_round is not None:
            latest.add_row("local rounds", f"{snap.local_rounds_per_round:.1f} per chain round")
        credited = sum(p.credited or 0 for p in snap.rounds)
        latest.add_row("credited signal", f"{format_score(credited)} over {len(confirmed)} rounds")
        self.query_one("#latest-card", Static).update(latest)

        recent = _grid(8)
        for line in snap.activity[-RECENT:]:
            when = dt.datetime.fromtimestamp(line.time).strftime("%H:%M:%S")
            recent.add_row(when, Text(line.text, style=LEVEL_STYLES.get(line.level, "")))
        if not snap.activity:
            recent.add_row("", Text("nothing yet", style="dim"))
        self.query_one("#recent-card", Static).update(recent)
