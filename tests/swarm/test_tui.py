"""The operator's TUI, driven with Textual's Pilot.

Against a devnet (a real anvil with a block a second, a registered swarm of two, node-1 running
headless as its own process): `sapo tui --config` runs node-0 in the app and every screen and
action is exercised on it (stake, unstake, withdraw, claim, pause/resume, quit); `--attach`
watches node-1 read-only; a TCP gate cuts the chain from under the watcher. Rendering is
snapshot-tested at 120x40 on a fixed read model (tests/harness/tui_model.py).
"""

from __future__ import annotations

import io
import re
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from eth_account import Account
from rich.console import Console
from test_metrics_alerts import scrape, value
from textual.widgets import DataTable, Static

from client.chain.keystore import keystore_address
from client.config import load_config, with_sections
from client.config.writer import dump_toml
from client.devnet import Anvil
from client.devnet.process import free_loopback_port
from client.devnet.provision import provision
from client.node.assemble import base_policy_path, open_node
from client.node.eventlog import read_events
from client.node.metrics import MetricsServer, serve_metrics
from client.node.view import Watcher
from tests.harness.gate import TcpGate
from tests.harness.policies import cached_seed_test
from tests.harness.processes import REPO, sapo_process, wait_until
from tests.harness.tui_model import ETH, PEERS, FixedWatcher, snapshot
from tui.app import SapoApp
from tui.dialogs import AmountScreen, ChecksScreen, ConfirmScreen, HelpScreen
from tui.live import LiveNode
from tui.widgets.activity import ActivityLog
from tui.widgets.peers import PeersTable

ROUND_S = 8
SIZE = (120, 40)


def text(widget: Static) -> str:
    """What a Static shows, as plain text with runs of spaces made one."""
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(widget.content)
    return re.sub(r" +", " ", console.file.getvalue())


def log_text(log: ActivityLog) -> str:
    return "\n".join(strip.text for strip in log.lines)


async def until(pilot, predicate, timeout_s: float, what: str) -> None:
    """Lets the app run until predicate() holds; fails naming `what` otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.25)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


# ------------------------------------------------------------------------------ the devnet


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, seed_test: Path):
    root = tmp_path_factory.mktemp("tui")
    cached_seed_test(seed_test, root / "policies")
    anvil = Anvil(root, block_time_s=1).start()
    base = with_sections(
        load_config(REPO / "configs" / "devnet.toml"),
        ledger={
            "round_length_s": ROUND_S,
            "challenge_rounds": 1,
            "submit_rounds": 1,
            "unbonding_period_s": 6 * ROUND_S,  # (W + 2C + A + 1) rounds
            "quorum": 1,  # two nodes: each batch has one checker, the other node
        },
        policy={"model": "seed-test", "cache_dir": root / "policies", "max_new_tokens": 12},
        sapo={"local_items": 2, "external_items": 2, "completions": 4, "max_local_rounds": 3},
        chain={"request_timeout_s": 3.0, "receipt_timeout_s": 20.0},
        store={"backend": "local", "store_dir": root / "blocks"},
        train={"checkpoint_every": 2, "rounds_per_update": 1},
    )
    base_policy_path(base)
    swarm = provision(
        base, root / "swarm", rpc_url=anvil.url, chain_id=31_337, ipfs_api=None, nodes=2
    )
    configs = swarm.node_configs
    log = (root / "node-1.out").open("w")
    peer = sapo_process(
        "node", "run", "--config", str(configs[1]), stdout=log, stderr=subprocess.STDOUT
    )
    yield {"anvil": anvil, "configs": configs, "peer": peer}
    peer.terminate()
    try:
        peer.wait(timeout=30)
    except subprocess.TimeoutExpired:
        peer.kill()
    log.close()
    anvil.stop()


def live_app(world) -> tuple[SapoApp, MetricsServer]:
    """The app and metrics server `sapo tui --config` starts, [node].metrics_addr set."""
    cfg = load_config(world["configs"][0])
    cfg = with_sections(cfg, node={"metrics_addr": f"127.0.0.1:{free_loopback_port()}"})
    node = open_node(cfg)
    live = LiveNode(node)
    metrics = serve_metrics(cfg, node.address, running=lambda: live.running)
    assert metrics is not None
    return SapoApp(Watcher(cfg, node.address, mode="live"), live, interval_s=0.5), metrics


def attached_app(
    world, rpc_port: int | None = None, ipfs_port: int | None = None, preflight: bool = False
) -> SapoApp:
    cfg = load_config(world["configs"][1])
    if rpc_port is not None:
        cfg = with_sections(cfg, chain={"rpc_url": f"http://127.0.0.1:{rpc_port}"})
    if ipfs_port is not None:  # the watcher's store check goes to a real IPFS daemon
        cfg = with_sections(
            cfg, store={"backend": "ipfs", "ipfs_api": f"/ip4/127.0.0.1/tcp/{ipfs_port}/http"}
        )
    address = keystore_address(Path(cfg.chain.keystore))
    return SapoApp(Watcher(cfg, address, mode="attached"), interval_s=0.5, preflight=preflight)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.asyncio
async def test_live_node_screens_and_actions(world) -> None:
    """Every screen and action on a node the TUI runs; its /metrics (served as `sapo tui
    --config` serves it) follows the node and the stake the actions move."""
    app, metrics = live_app(world)
    node = app.live.node
    url = metrics.url

    def metric(name: str, **labels: str) -> float | None:
        return value(scrape(url), name, **labels)

    async def until_metric(name: str, wanted: float, timeout_s: float) -> None:
        await until(pilot, lambda: metric(name) == wanted, timeout_s, f"{name} {wanted}")

    async with app.run_test(size=SIZE) as pilot:
        # --- the screens fill in from the running node, the journal and the chain
        await until(
            pilot,
            lambda: app.snap and any(p.credited for p in app.snap.rounds) and app.snap.training,
            90,
            "a confirmed and trained round of node-0",
        )
        await until(
            pilot,
            lambda: any(p.address == PEERS[0] and p.submissions for p in app.snap.peers),
            60,
            "node-1's submission in the peers table",
        )
        status = text(app.query_one("#chain-badge", Static)) + text(
            app.query_one("#store-badge", Static)
        )
        assert "chain ● up" in status and "store ● up" in status, status
        account = text(app.query_one("#account-card", Static))
        assert node.address in account and "active stake 2 ETH" in account, account
        # two nodes of one family: the other holds half its stake, which the card says
        assert "model family 0x" in account and "(1 other nodes)" in account, account
        assert "holds 50% of model family" in account, account
        assert "round" in text(app.query_one("#round-label", Static))

        await pilot.press("2")
        table = app.query_one(PeersTable)
        assert table.row_count == 2, "the peers table lists both registered nodes"
        assert app.query_one("#tabs").active == "peers"
        before = table.sort_column
        await pilot.press("s")
        assert table.sort_column != before, "`s` cycles the sort column"
        await pilot.click("#peers-table", offset=(4, 1))  # the "node" header
        assert table.sort_column == "node"

        await pilot.press("3")
        assert app.query_one("#tabs").active == "rewards"
        assert app.query_one("RewardCharts")._drawn, "the reward charts were drawn with data"

        await pilot.press("4")
        await pilot.pause(0.5)
        log = log_text(app.query_one(ActivityLog))
        assert "submitted" in log and "· confirmed" in log, log[-2000:]

        await pilot.press("5")
        training = text(app.query_one("#training-card", Static))
        assert "optimizer step" in training and "I/J used" in training, training
        assert app.query_one("#training-history", DataTable).row_count >= 1

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("1")

        # --- add stake: cancelled first (nothing sent), then 0.5 ETH confirmed
        await pilot.press("a")
        assert isinstance(app.screen, AmountScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, AmountScreen)
        await pilot.press("a")
        await pilot.press(*"abc", "enter")
        assert isinstance(app.screen, AmountScreen), "a bad amount keeps the prompt open"
        assert "expected an amount" in str(app.screen.query_one("#amount-error").content)
        for _ in range(3):
            await pilot.press("backspace")
        await pilot.press(*"0.5", "enter")
        assert isinstance(app.screen, ConfirmScreen)
        body = text(app.screen.query_one("#dialog-body", Static))
        assert "active stake: 2 ETH → 2.5 ETH" in body, body
        await pilot.press("y")
        await until(
            pilot,
            lambda: app.snap.account.active_stake == 5 * ETH // 2,
            30,
            "active stake 2.5 ETH on chain",
        )

        # --- request unstake 0.25, withdraw refused while unbonding
        await pilot.press("u")
        await pilot.press(*"0.25", "enter")
        body = text(app.screen.query_one("#dialog-body", Static))
        assert "unbonding: 0 ETH → 0.25 ETH" in body, body
        await pilot.press("y")
        await until(pilot, lambda: app.snap.account.unbonding == ETH // 4, 30, "0.25 ETH unbonding")
        # /metrics: the node runs and works; its ledger state follows within half a round
        first = scrape(url)
        assert value(first, "sapo_node_running") == 1 and value(first, "sapo_chain_up") == 1
        assert value(first, "sapo_local_rounds_total") >= 1
        info = [dict(labels) for name, labels in first if name == "sapo_build_info"]
        assert [i["model"] for i in info] == ["seed-test"], info
        await until_metric("sapo_stake_unbonding_ether", 0.25, ROUND_S)
        assert metric("sapo_stake_active_ether") == 2.25
        await pilot.press("w")
        assert not isinstance(app.screen, ConfirmScreen)
        assert "still unbonding" in app.notices[-1]

        # --- claim once a round is final
        await until(pilot, lambda: app.snap.account.claimable > 0, 60, "a claimable round")
        claimable = app.snap.account.claimable
        await pilot.press("c")
        body = text(app.screen.query_one("#dialog-body", Static))
        assert "Claim " in body and "final rounds" in body, body
        await pilot.press("y")
        await until(pilot, lambda: app.snap.account.total_paid >= claimable, 30, "the claim paid")
        await until(
            pilot, lambda: "claimed" in log_text(app.query_one(ActivityLog)), 10, "a claim line"
        )

        # --- pause after the current round, resume
        await pilot.press("p")
        assert "Pause the node" in text(app.screen.query_one("#dialog-body", Static))
        await pilot.press("y")
        await until(pilot, lambda: app.snap.phase == "paused", 3 * ROUND_S, "the node paused")
        await pilot.press("p", "y")
        await until(pilot, lambda: app.snap.phase != "paused", 10, "the node resumed")

        # --- withdraw once the unbonding period has run
        end = app.snap.account.unbonding_end  # up to unbonding_period_s away, on a fast run
        left = max(0.0, end - time.time())
        await until(pilot, lambda: time.time() > end + 1, left + 2 * ROUND_S, "unbonding to end")
        await pilot.press("w")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await until(pilot, lambda: app.snap.account.unbonding == 0, 30, "the withdrawal")

        # --- quit: confirm, the node stops gracefully, the app exits
        await pilot.press("q")
        assert "Stop the node and quit" in text(app.screen.query_one("#dialog-body", Static))
        await pilot.press("y")
        await until(pilot, lambda: not app.live.running, 60, "the node to stop")
    assert not app.is_running
    assert metric("sapo_stake_unbonding_ether") == 0  # withdrawn
    assert metric("sapo_node_running") == 0, "the endpoint outlives the node's loop"
    metrics.close()
    stop_events = read_events(node.data_dir.events)
    kinds = [e["kind"] for e in stop_events]
    assert kinds[-1] == "node.stopped", kinds[-5:]
    # a graceful quit sent everything that could go at the time it stopped: no "kept for the next
    # start" line (asked after the stop, `sendable()` would also count a settlement or appeal whose
    # round became due in the seconds since)
    assert "node.pending" not in kinds[-4:], [e["message"] for e in stop_events[-5:]]


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.asyncio
async def test_attach_watches_a_headless_node_read_only(world) -> None:
    app = attached_app(world, preflight=True)
    async with app.run_test(size=SIZE) as pilot:
        # the checks of `sapo doctor` run on start; d shows them with their fixes
        await until(pilot, lambda: app.checks is not None, 60, "the preflight's checks")
        names = {c.name: c.ok for c in app.checks}
        assert names["rpc"] and names["ledger"] and names["keystore"] and names["stake"], names
        assert any(n.startswith("preflight: ") for n in app.notices), app.notices
        await pilot.press("d")
        assert isinstance(app.screen, ChecksScreen)
        await pilot.press("escape")
        await until(
            pilot,
            lambda: app.snap and app.snap.account and app.snap.phase != "starting",
            3 * ROUND_S,
            "node-1's phase from its event log and its account from the chain",
        )
        assert app.snap.address == PEERS[0]
        await until(pilot, lambda: app.snap.training is not None, 3 * ROUND_S, "a trained round")
        assert "attached (read-only)" in text(app.query_one("#round-card", Static))
        for key in ("a", "u", "w", "c", "p"):
            await pilot.press(key)
            assert app.screen is app.screen_stack[0], f"`{key}` opened a dialog when read-only"
            assert "read-only" in app.notices[-1], app.notices[-1]
        await pilot.press("q")
    assert not app.is_running


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.asyncio
async def test_chain_unreachable_keeps_last_values_with_their_age(world) -> None:
    gate = TcpGate(world["anvil"].port)
    app = attached_app(world, rpc_port=gate.port)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snap and app.snap.account, 20, "the account")
        balance = app.snap.account.balance
        gate.close()
        await until(pilot, lambda: app.snap.chain.ok is False, 20, "the chain badge to go red")
        await pilot.pause(1.5)
        assert "chain ● DOWN" in text(app.query_one("#chain-badge", Static))
        account = text(app.query_one("#account-card", Static))
        assert "ETH" in account and "(as of" in account, account
        assert app.snap.account.balance == balance, "the last known balance stays on screen"
        assert "UNREACHABLE" in text(app.query_one("#health-card", Static))
        for key in ("2", "3", "4", "5", "1"):
            await pilot.press(key)  # every screen renders with the chain gone
        gate.open()
        await until(pilot, lambda: app.snap.chain.ok, 20, "the chain badge to turn green again")
        await pilot.press("q")
    gate.close()


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.asyncio
async def test_ipfs_unreachable_turns_its_badge_red(world, daemon) -> None:
    gate = TcpGate(daemon.api_port)
    app = attached_app(world, ipfs_port=gate.port)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snap and app.snap.store.ok, 20, "the IPFS badge green")
        gate.close()
        await until(pilot, lambda: app.snap.store.ok is False, 20, "the IPFS badge to go red")
        await pilot.pause(1.5)
        assert "IPFS ● DOWN" in text(app.query_one("#store-badge", Static))
        assert "chain ● up" in text(app.query_one("#chain-badge", Static))
        assert "not reachable" in app.snap.store.detail, app.snap.store.detail
        gate.open()
        await until(pilot, lambda: app.snap.store.ok, 20, "the IPFS badge green again")
        await pilot.press("q")
    gate.close()


# ------------------------------------------------------------------ rendering (fixed model)


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch):
    """Activity times are local times: render them in UTC so the pictures match anywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def shown(pilot) -> None:
    """Waits for the first snapshot to reach the widgets (it comes from a worker thread)."""
    await until(pilot, lambda: pilot.app.snap is not None, 10, "the first snapshot")


@pytest.mark.parametrize(
    "keys",
    [[], ["2"], ["3"], ["4"], ["5"], ["question_mark"]],
    ids=["overview", "peers", "rewards", "activity", "training", "help"],
)
def test_screen_snapshots(snap_compare, utc, keys: list[str]) -> None:
    app = SapoApp(FixedWatcher(snapshot()))
    assert snap_compare(app, press=keys, run_before=shown, terminal_size=SIZE)


def test_chain_down_snapshot(snap_compare, utc) -> None:
    app = SapoApp(FixedWatcher(snapshot(chain_ok=False)))
    assert snap_compare(app, run_before=shown, terminal_size=SIZE)


@pytest.mark.asyncio
async def test_a_round_of_the_root_lane_says_its_verdict_root_and_the_votes_signed_off_chain():
    """In the root lane the last submission's state is the verdict root's, with the agreeing
    votes its credit carries (signed off chain: the ledger has none)."""
    base = snapshot()
    last = replace(base.rounds[-1], lane="root", votes=(2, 0, 0))
    app = SapoApp(FixedWatcher(replace(base, rounds=(*base.rounds[:-1], last))), interval_s=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot)
        shows = text(app.query_one("#latest-card", Static))
    assert "credited by the root lane's verdict root (2 agreeing, signed off chain)" in shows


@pytest.mark.asyncio
async def test_peers_table_with_1000_nodes_sorts_pages_and_responds() -> None:
    """The whole swarm is sorted; the table holds a page of it (200 rows), `]` and `[` turn;
    the title says since which round the view counts the peers' records."""
    shown = replace(snapshot(peers=1000), peers_since=1_234)
    app = SapoApp(FixedWatcher(shown), interval_s=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        table = app.query_one(PeersTable)
        await until(pilot, lambda: len(table._all) == 1003, 10, "1,003 nodes")
        assert table.row_count == PeersTable.PAGE
        assert table.border_title.startswith("1,003 nodes · rows 1–200"), table.border_title
        assert table.border_title.endswith("counted since round 1,234"), table.border_title
        table.sort_by("stake")
        top = table.get_row_at(0)
        assert "3 ETH" in str(top[2]), "sorted by stake, the 3 ETH node comes first"
        table.sort_by("stake")  # again: ascending
        assert "1.001 ETH" in str(table.get_row_at(0)[2])
        table.focus()
        await pilot.press("down", "down", "down")
        assert table.cursor_row == 3
        for _ in range(6):  # past the last page: it stays there
            await pilot.press("right_square_bracket")
        assert table.page == 5 and table.row_count == 3, (table.page, table.row_count)
        assert "rows 1,001–1,003" in table.border_title, table.border_title
        assert "3 ETH" in str(table.get_row_at(2)[2]), "the last page ends with the largest"
        await pilot.press("left_square_bracket")
        assert table.page == 4 and table.row_count == PeersTable.PAGE
        assert "rows 801–1,000" in table.border_title, table.border_title
        await pilot.press("1")  # still answering keys after 1,000-row refreshes
        assert app.query_one("#tabs").active == "overview"


@pytest.mark.e2e
@pytest.mark.slow
def test_watching_an_unregistered_address_says_so(world) -> None:
    cfg = load_config(world["configs"][1])
    stranger = Account.create().address
    watcher = Watcher(cfg, stranger, mode="attached")
    snap = watcher.snapshot()
    assert snap.chain.ok, snap.chain.detail
    assert snap.account is not None and not snap.account.registered
    assert all(p.address != stranger for p in snap.peers), "an unregistered address is no peer"
    watcher.close()


@pytest.mark.e2e
@pytest.mark.slow
def test_attach_shows_a_first_start_building_its_policy(world, tmp_path: Path) -> None:
    """A node started on a fresh machine builds the seed policy before its first round: the
    TUI attached to it shows that build as the node's phase, with its progress."""
    config = tmp_path / "node.toml"
    cfg = with_sections(
        load_config(world["configs"][0]),
        node={"data_dir": tmp_path / "node"},
        policy={"cache_dir": tmp_path / "fresh-cache"},
    )
    config.write_text(dump_toml(cfg, "a fresh machine's node"))
    node = sapo_process("node", "run", "--config", str(config), stderr=subprocess.STDOUT)
    watcher = Watcher(cfg, keystore_address(Path(cfg.chain.keystore)), mode="attached")
    try:
        seen: list[str] = []

        def building() -> bool:
            seen.append(watcher.snapshot().phase)
            return seen[-1].startswith("building the seed policy: step ")

        wait_until(building, timeout_s=120, what="the attached TUI's phase to show the build")
        assert "/150" in seen[-1], seen[-1]
    finally:
        node.kill()
        node.wait(timeout=30)
        watcher.close()
