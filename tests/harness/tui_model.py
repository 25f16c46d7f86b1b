"""A fixed read model for the TUI's rendering tests (snapshots, a 1,000-peer table).

Not a fake chain or node: the widgets render `client.node.view.snapshot.Snapshot` values and nothing
else, so rendering is tested on a fixed one (numbers of the kind a devnet shows, addresses of
anvil's dev accounts) to get the same picture on every run. What feeds snapshots from the real
journal, event log and ledger is tested against a devnet in test_tui.py.
"""

from __future__ import annotations

from client.node.view.snapshot import (
    Account,
    Activity,
    Health,
    Payout,
    PeerRow,
    RoundPoint,
    Snapshot,
    Training,
)

ETH = 10**18
T0 = 1_795_000_000.0  # a fixed "now"
GENESIS = int(T0) - 12 * 10 - 4  # round 12, 4 s into its 10 s
ME = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
PEERS = [
    "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
    "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
]


def training(round_: int) -> Training:
    return Training(
        round=round_,
        k=round_ % 4,
        step=round_,
        loss=0.01 * ((round_ % 5) - 2),
        clip_fraction=0.02 * (round_ % 3),
        grad_norm=0.5 + 0.1 * (round_ % 4),
        reward_local=0.05 + 0.01 * round_,
        reward_external=0.1 + 0.008 * round_ if round_ > 2 else None,
        local_items=4 - round_ % 2,
        external_items=4 if round_ > 2 else 0,
        external_eligible=6 if round_ > 2 else 0,
        external_shortfall=0 if round_ > 2 else 4,
        tokens=900 + 10 * round_,
        train_seconds=1.5,
    )


class FixedWatcher:
    """Gives the same snapshot every time (the app's `watcher` interface)."""

    def __init__(self, snap: Snapshot):
        self.snap = snap
        self.address = snap.address
        self.store_name = "IPFS"
        self.noted: list[Activity] = []

    def snapshot(self, **_) -> Snapshot:
        return self.snap

    def note(self, activity: Activity) -> None:
        self.noted.append(activity)

    def close(self) -> None:
        pass


def snapshot(peers: int = 0, chain_ok: bool = True) -> Snapshot:
    """A node at round 12 of a 3-node swarm (plus `peers` extra registered nodes)."""
    history = tuple(training(r) for r in range(1, 12))
    rows = [
        PeerRow(ME, "seed", 2 * ETH, 11, 11, 81_500, 0, 0, 0, 0, 0, me=True),
        PeerRow(PEERS[0], "seed", 2 * ETH, 11, 10, 95_200, 22, 9, 0, 0, 1),
        PeerRow(PEERS[1], "Qwen/Qwen2.5-0.5B", 3 * ETH, 10, 9, 40_000, 6, 5, 1, 1, 0),
    ]
    rows += [
        PeerRow(
            f"0x{i:040x}", f"model-{i % 7}", ETH + i * 10**15, i % 12, i % 12, i * 37, 0, 0, 0, 0, 0
        )
        for i in range(1, peers + 1)
    ]
    activity = (
        Activity(T0 - 30, "submission", "round 11: pinned bafkreiexample11 · pending", 11),
        Activity(
            T0 - 29,
            "submission",
            "round 11: submitted bafkreiexample11 · tx 0x5c1e9a77b2…91fd · confirmed",
            11,
        ),
        Activity(
            T0 - 27,
            "attestation",
            "round 11: we attested 0x3c44cddd…93bc's batch 2.5000 · tx 0x8d2e44f01a…02ab",
            11,
        ),
        Activity(
            T0 - 25, "received", "round 10: 0x3C44CdDd…93BC attested our batch 3.1000 — agrees", 10
        ),
        Activity(
            T0 - 20,
            "dispute",
            "round 10: we dispute 0x90F79bf6…b906's claim (our score 1.2500)",
            10,
            "warning",
        ),
        Activity(
            T0 - 12,
            "claim",
            "claimed 4.5 ETH for rounds 1, 2, 3, 4, 5, 6, 7, 8 (tx 0x77aa01c3e2…)",
            11,
        ),
        Activity(T0 - 5, "chain", "chain unreachable: eth_call: connection refused", 12, "error"),
    )
    return Snapshot(
        taken_at=T0,
        mode="live",
        address=ME,
        data_dir="/srv/sapo/node-0",
        ledger="0x5FbDB2315678afecb367f032d93F642f64180aa3",
        round_length=10,
        genesis=GENESIS,
        challenge_rounds=3,
        submit_rounds=2,
        unbonding_period=600,
        min_stake=ETH,
        quorum=2,
        phase="training",
        chain=Health(True, T0) if chain_ok else Health(False, T0 - 42, "eth_call: refused"),
        store=Health(True, T0),
        account=Account(
            ME,
            True,
            9_996 * ETH + 123 * 10**15,
            2 * ETH,
            ETH // 2,
            int(T0) + 300,
            4_500_000_000_000_000_000,
            2 * ETH // 3,
            (9,),
        ),
        reward_pool=95 * ETH,
        peers=tuple(rows),
        rounds=tuple(
            RoundPoint(
                r,
                t.reward_local,
                t.reward_external,
                7_000 + 100 * r,
                0 if r == 7 else 7_000 + 100 * r,
                local_rounds=3 + r % 2,
                votes=(1, 0, 1) if r == 11 else (2, 0, 0),  # round 11: one could not fetch it
            )
            for r, t in zip(range(1, 12), history, strict=True)
        ),
        payouts=(Payout(10, 4_500_000_000_000_000_000),),
        activity=activity,
        activity_total=len(activity),
        training=history[-1],
        history=history,
        busy_share=0.96,
        blocked_share=0.0,
        local_rounds_per_round=3.5,
    )
