"""Rewards: verifier reward per round (local items, external items used), and the ledger's
cumulative credited learning signal and payouts."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual_plotext import PlotextPlot

from client.node.view.snapshot import Snapshot


class RewardCharts(Vertical):
    """Two charts, redrawn when their data changed."""

    def compose(self) -> ComposeResult:
        per_round = PlotextPlot(id="reward-per-round")
        per_round.border_title = "mean verifier reward per round"
        yield per_round
        cumulative = PlotextPlot(id="reward-cumulative")
        cumulative.border_title = "cumulative credited signal (left) and payouts, ETH (right)"
        yield cumulative
        self._drawn: tuple = ()

    def show(self, snap: Snapshot) -> None:
        key = (snap.rounds, snap.payouts)
        if key == self._drawn:
            return
        self._drawn = key
        self._per_round(snap)
        self._cumulative(snap)

    def _per_round(self, snap: Snapshot) -> None:
        plot = self.query_one("#reward-per-round", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        local = [(p.round, p.reward_local) for p in snap.rounds if p.reward_local is not None]
        external = [
            (p.round, p.reward_external) for p in snap.rounds if p.reward_external is not None
        ]
        if local:
            plt.plot(*zip(*local, strict=True), label="local items", marker="braille")
        if external:
            plt.plot(*zip(*external, strict=True), label="external items used", marker="braille")
        plt.ylim(0, 1)
        plt.xlabel("round")
        if not local:
            plt.title("no trained round yet")
        plot.refresh()

    def _cumulative(self, snap: Snapshot) -> None:
        plot = self.query_one("#reward-cumulative", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        credited = [p for p in snap.rounds if p.credited is not None]
        if credited:
            total, xs, ys = 0, [], []
            for p in credited:
                total += p.credited or 0
                xs.append(p.round)
                ys.append(total / 10_000)
            plt.plot(xs, ys, label="credited signal", marker="braille")
        if snap.payouts:
            paid, xs, ys = 0, [], []
            for p in sorted(snap.payouts, key=lambda p: p.round):
                paid += p.amount
                xs.append(p.round)
                ys.append(paid / 10**18)
            plt.plot(xs, ys, label="paid (ETH)", marker="braille", yside="right")
        plt.xlabel("round")
        if not credited:
            plt.title("no submission on chain yet")
        plot.refresh()
