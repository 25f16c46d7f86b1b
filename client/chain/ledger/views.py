"""What a node reads from the SwarmLedger: deployment parameters, rounds, nodes, submissions and
their votes and appeals, stake snapshots, beacons and the pool. Reads work without a key, in
JSON-RPC batches where a caller asks for many."""

from __future__ import annotations

from typing import Any

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_utils import function_abi_to_4byte_selector
from web3 import Web3
from web3.exceptions import BlockNotFound

from client.chain.errors import WrongChain
from client.chain.ledger.connection import CONTRACT, Deployed, _address, bytes32
from client.chain.models import (
    Appeal,
    Beacon,
    LedgerParams,
    NodeInfo,
    RoundInfo,
    SubmissionInfo,
)


def _canonical(arg: dict[str, Any]) -> str:
    """An ABI argument's canonical type, a struct as its tuple of component types."""
    kind = arg["type"]
    if kind.startswith("tuple"):
        return "(" + ",".join(_canonical(c) for c in arg["components"]) + ")" + kind[5:]
    return kind


class LedgerViews(Deployed):
    """One deployed SwarmLedger's reads: its views, blocks and balances (`Ledger` adds the
    transactions)."""

    NAME = CONTRACT

    def __init__(self, w3: Web3, address: str, **sending: Any):
        super().__init__(w3, address, **sending)
        self._params: LedgerParams | None = None
        self._layouts: dict[str, tuple[bytes, list[str], list[str]]] = {}

    @property
    def account_address(self) -> str:
        """The signing account's address (raises NoSigner when read-only)."""
        return self.tx.address

    # ----------------------------------------------------------------------------- plumbing
    def check(self, expected_chain_id: int | None = None) -> LedgerParams:
        """Returns the deployment parameters after checking chain id and code at the address.

        Raises WrongChain when the endpoint serves another chain or no ledger is deployed there.
        """
        chain_id = self.tx.rpc(lambda: self.w3.eth.chain_id, "eth_chainId")
        if expected_chain_id is not None and chain_id != expected_chain_id:
            raise WrongChain(
                f"the RPC serves chain {chain_id} but the config names chain {expected_chain_id}"
            )
        self._check_code(f"on chain {chain_id}")
        self.chain_id = chain_id  # as checked: the task seeds of this ledger's batches use it
        return self.params()

    # --------------------------------------------------------------------------------- views

    def params(self) -> LedgerParams:
        """Returns the deployment parameters (cached: they never change)."""
        if self._params is None:
            self._params = LedgerParams(
                round_length=self._view("roundLength"),
                min_stake=self._view("minStake"),
                unbonding_period=self._view("unbondingPeriod"),
                challenge_rounds=self._view("challengeRounds"),
                submit_rounds=self._view("submitRounds"),
                reward_per_round=self._view("rewardPerRound"),
                slash_bps=self._view("slashBps"),
                agree_tolerance_bps=self._view("agreeToleranceBps"),
                catalog_digest="0x" + self._view("catalogDigest").hex(),
                quorum=self._view("quorum"),
                checkers=self._view("checkers"),
                genesis=self._view("genesis"),
                appeal_rounds=self._view("appealRounds"),
                appeal_checkers=self._view("appealCheckers"),
                families=tuple("0x" + bytes(f).hex() for f in self._view("families")),
            )
        return self._params

    def book(self) -> str | None:
        """The round book that alone may escalate batches into this ledger, fixed at its
        deployment; None when it names none (its root lane cannot run)."""
        named = self._view("book")
        return None if int(named, 16) == 0 else named

    def current_round(self) -> int:
        return self._view("currentRound")

    def block_hash(self, number: int) -> str | None:
        """The hash (0x hex) of the chain's block `number`, or None when the chain has no such
        block yet."""

        def fetch() -> str | None:
            try:
                return "0x" + bytes(self.w3.eth.get_block(number)["hash"]).hex()
            except BlockNotFound:
                return None

        return self.tx.rpc(fetch, "eth_getBlockByNumber")

    def block_hashes(self, numbers: list[int], batch: int = 200) -> dict[int, str]:
        """The hashes (0x hex) of the chain's blocks `numbers`, all mined, in JSON-RPC batches
        of `batch`."""
        found: dict[int, str] = {}
        for start in range(0, len(numbers), batch):
            chunk = numbers[start : start + batch]

            def call(chunk=chunk):
                with self.w3.batch_requests() as requests:
                    for number in chunk:
                        requests.add(self.w3.eth.get_block(number))
                    return requests.execute()

            for number, block in zip(
                chunk, self.tx.rpc(call, "eth_getBlockByNumber batch"), strict=True
            ):
                found[number] = "0x" + bytes(block["hash"]).hex()
        return found

    def task_seed(self, round_: int, node: str) -> bytes:
        return bytes(self._view("taskSeed", round_, _address(node)))

    def node_info(self, node: str) -> NodeInfo:
        return self._node_info(node, self._view("nodeInfo", _address(node)))

    def node_infos(self, nodes: list[str], batch: int = 200) -> list[NodeInfo]:
        """Returns nodeInfo for many nodes, in JSON-RPC batches of `batch`."""
        values = self._batched("nodeInfo", [(_address(n),) for n in nodes], batch)
        return [self._node_info(n, v) for n, v in zip(nodes, values, strict=True)]

    @staticmethod
    def _node_info(node: str, v: Any) -> NodeInfo:
        return NodeInfo(
            address=_address(node),
            registered=v[0],
            active_stake=v[1],
            unbonding=v[2],
            unbonding_end=v[3],
            metadata=v[4],
            total_paid=v[5],
            stake_block=v[6],
            unsettled=v[7],
            backing=v[8],
            family="0x" + bytes(v[9]).hex() if v[0] else None,
        )

    def submission(self, round_: int, node: str) -> SubmissionInfo:
        """submissionOf, with its appeal (appealOf) when it was appealed."""
        return self.submissions([(round_, node)])[0]

    def submissions(self, keys: list[tuple[int, str]], batch: int = 200) -> list[SubmissionInfo]:
        """Returns submissionOf for many (round, node) pairs, in JSON-RPC batches of `batch`,
        each with its appeal (appealOf, asked only for the appealed ones)."""
        values = self._batched("submissionOf", [(r, _address(n)) for r, n in keys], batch)
        subs = [self._submission(r, n, v) for (r, n), v in zip(keys, values, strict=True)]
        appealed = [i for i, s in enumerate(subs) if s.appealed]
        if appealed:
            calls = [(subs[i].round, subs[i].node) for i in appealed]
            for i, v in zip(appealed, self._batched("appealOf", calls, batch), strict=True):
                subs[i] = subs[i].model_copy(
                    update={"appeal": self._appeal(subs[i].round, subs[i].node, v)}
                )
        return subs

    def appeal_of(self, round_: int, node: str) -> Appeal | None:
        """The appeal of `node`'s submission of `round_` (None when not appealed)."""
        v = self._view("appealOf", round_, _address(node))
        return self._appeal(round_, node, v) if v[0] else None

    def _appeal(self, round_: int, node: str, v: Any) -> Appeal:
        agree, dispute, unavailable, agrees = v[5], v[6], v[7], v[8]
        wins = agrees >= self.params().quorum and agree >= dispute + unavailable
        return Appeal(
            decided=dispute > agree or wins,
            round=round_,
            node=_address(node),
            appeal_block=v[0],
            beacon=v[1],
            block=v[2],
            ready=v[3],
            drawn=v[4],
            agree_seats=v[5],
            dispute_seats=v[6],
            unavailable_seats=v[7],
            agrees=v[8],
            disputes=v[9],
            unavailable=v[10],
        )

    def _batched(self, name: str, calls: list[tuple], batch: int) -> list[Any]:
        """Returns the answers of view `name` for each argument tuple, `batch` per request. The
        calls are encoded and their answers decoded with the view's ABI types directly (as web3
        decodes them): web3's contract calls look the function up and validate the ABI again
        for each call (~3 ms of CPU a call, 3 s for an aggregator's 1,000 voters)."""
        selector, inputs, outputs = self._layout(name)
        found: list[Any] = []
        for start in range(0, len(calls), batch):
            chunk = calls[start : start + batch]

            def call(chunk=chunk):
                with self.w3.batch_requests() as requests:
                    for args in chunk:
                        data = selector + abi_encode(inputs, list(args))
                        requests.add(self.w3.eth.call({"to": self.address, "data": data}))
                    return requests.execute()

            for raw in self.tx.rpc(call, f"{name}() batch"):
                values = abi_decode(outputs, bytes(raw))
                found.append(values[0] if len(outputs) == 1 else list(values))
        return found

    def _layout(self, name: str) -> tuple[bytes, list[str], list[str]]:
        """View `name`'s selector and its input and output types, read once from the ABI."""
        cached = self._layouts.get(name)
        if cached is None:
            fn = next(
                f for f in self.contract.abi if f.get("type") == "function" and f["name"] == name
            )
            cached = (
                function_abi_to_4byte_selector(fn),
                [_canonical(i) for i in fn["inputs"]],
                [_canonical(o) for o in fn["outputs"]],
            )
            self._layouts[name] = cached
        return cached

    @staticmethod
    def _submission(round_: int, node: str, v: Any) -> SubmissionInfo:
        return SubmissionInfo(
            round=round_,
            node=_address(node),
            digest="0x" + bytes(v[0]).hex(),
            rollouts=v[1],
            score=v[2],
            signal=v[3],
            agree_seats=v[4],
            dispute_seats=v[5],
            unavailable_seats=v[6],
            agrees=v[7],
            disputes=v[8],
            unavailable=v[9],
            credited=v[10],
            settled=v[11],
            paid=v[12],
            snapshot_block=v[13],
            appeal_block=v[14],
        )

    def round_info(self, round_: int) -> RoundInfo:
        total, final = self._view("roundInfo", round_)
        return RoundInfo(round=round_, total_credited=total, final=final)

    def has_attested(self, attester: str, round_: int, node: str) -> bool:
        """Whether `attester` voted on the submission (attested or reported it unavailable), on
        the committee voting now (the appeal's once appealed)."""
        return self._view("hasAttested", _address(attester), round_, _address(node))

    def vote_of(self, voter: str, round_: int, node: str) -> tuple[int, int, bool]:
        """`voter`'s vote on each committee (0 none, 1 agreed, 2 disputed, 3 unavailable) and
        whether it was judged (settleVotes)."""
        first, appealed, settled = self._view("voteOf", _address(voter), round_, _address(node))
        return first, appealed, settled

    def votes_of(self, voters: list[str], round_: int, node: str) -> list[tuple[int, int, bool]]:
        """vote_of for many voters of one submission, in one JSON-RPC batch."""
        calls = [(_address(v), round_, _address(node)) for v in voters]
        return [tuple(v) for v in self._batched("voteOf", calls, 200)]

    def is_checker(self, round_: int, node: str, checker: str) -> bool:
        """Whether `checker` is drawn to check `node`'s submission of `round_` (False while the
        submission's beacon is not ready)."""
        return self._view("isChecker", round_, _address(node), _address(checker))

    def seats_of(self, round_: int, node: str, checker: str, appeal: bool = False) -> int:
        """The seats `checker` holds on the committee of `node`'s submission of `round_` (its
        appeal's with `appeal`): its vote counts that many times (0: not drawn, or the beacon is
        not ready)."""
        name = "appealSeatsOf" if appeal else "seatsOf"
        return self._view(name, round_, _address(node), _address(checker))

    def stake_at(self, node: str, block: int) -> int:
        """`node`'s active stake at the end of `block` (what that block's submissions draw on)."""
        return self._view("stakeAt", _address(node), block)

    def stakes_at(self, nodes: list[str], block: int, batch: int = 200) -> list[int]:
        """stake_at for many nodes, in JSON-RPC batches of `batch`."""
        return self._batched("stakeAt", [(_address(n), block) for n in nodes], batch)

    def snapshots(
        self, node: str, family: str, blocks: list[int], batch: int = 100
    ) -> dict[int, tuple[int, int]]:
        """Per block: `node`'s active stake and `family`'s at its end (stakeAt, familyStakeAt),
        in JSON-RPC batches: what a draw of that block's submissions by `node` reads."""
        node = _address(node)
        stakes = self._batched("stakeAt", [(node, b) for b in blocks], batch)
        totals = self._batched("familyStakeAt", [(bytes32(family), b) for b in blocks], batch)
        return dict(zip(blocks, zip(stakes, totals, strict=True), strict=True))

    def total_stake_at(self, block: int) -> int:
        """All active stake at the end of `block`."""
        return self._view("totalStakeAt", block)

    def family_stake_at(self, family: str, block: int) -> int:
        """The active stake of `family`'s nodes at the end of `block`: what a draw of that
        block's submissions by the family's nodes divides by (0 for a family it does not check)."""
        return self._view("familyStakeAt", bytes32(family), block)

    def beacon(self, round_: int, node: str) -> Beacon:
        """The beacon that draws the checkers of `node`'s submission of `round_`."""
        node = _address(node)
        beacon, block, ready, drawn = self._view("beaconOf", round_, node)
        return Beacon(round=round_, node=node, beacon=beacon, block=block, ready=ready, drawn=drawn)

    def node_count(self) -> int:
        return self._view("nodeCount")

    def nodes(self, page_size: int = 500) -> list[str]:
        """Returns every registered node's address, in registration order."""
        total, found = self.node_count(), []
        while len(found) < total:
            page = self._view("nodesPage", len(found), page_size)
            if not page:
                break
            found.extend(page)
        return found

    def reward_pool(self) -> int:
        return self._view("rewardPool")

    def total_staked(self) -> int:
        return self._view("totalStaked")

    def totals(self) -> dict[str, int]:
        """Returns the ledger's money totals (wei): stake, pool, funded, slashed, paid out (by
        claims), and paid to settlers (their cut of the slashes they sent)."""
        active, unbonding = self._view("stakeTotals")
        return {
            "active": active,
            "unbonding": unbonding,
            "reward_pool": self.reward_pool(),
            "funded": self._view("totalFunded"),
            "slashed": self._view("totalSlashed"),
            "paid_out": self._view("totalPaidOut"),
            "settler_paid": self._view("totalSettlerPaid"),
        }

    def claimable(self, node: str, rounds: list[int]) -> int:
        return self._view("claimable", _address(node), list(rounds))

    def balance(self, address: str) -> int:
        return self.tx.rpc(lambda: self.w3.eth.get_balance(_address(address)), "eth_getBalance")

    def block_time(self, number: int) -> int:
        """Returns the timestamp of block `number`."""
        block = self.tx.rpc(lambda: self.w3.eth.get_block(number), "eth_getBlockByNumber")
        return int(block["timestamp"])

    def block_at(self, t: float, low: int = 0, high: int | None = None) -> int:
        """Returns the first block in low..high (high: the head) whose timestamp is at least `t`,
        or high + 1 when none is yet, so a reader can start at a round's first block instead of
        the deploy block. Block timestamps never decrease; the search guesses where `t` falls
        from the timestamps at its ends (a chain's blocks come at a steady pace: a few header
        reads) and halves the range instead whenever a guess did not halve it (at most about
        2 x log2(high - low) reads on an irregular chain)."""
        if high is None:
            high = self.head()
        if low > high:
            return high + 1
        t_high = self.block_time(high)
        if t_high < t:
            return high + 1
        t_low = self.block_time(low)
        if t_low >= t:
            return low
        guessing = True
        while high - low > 1:  # time(low) < t <= time(high)
            if guessing:
                probe = low + int((t - t_low) * (high - low) / (t_high - t_low))
                probe = min(max(probe, low + 1), high - 1)
            else:
                probe = (low + high) // 2
            width = high - low
            t_probe = self.block_time(probe)
            if t_probe < t:
                low, t_low = probe, t_probe
            else:
                high, t_high = probe, t_probe
            guessing = 2 * (high - low) <= width  # a guess that did not halve it: bisect next
        return high
