"""Typed results of ledger calls: what every other layer receives from the chain."""

from __future__ import annotations

from enum import IntEnum

from pydantic import BaseModel, ConfigDict, Field

from client.chain.hashing import keccak256
from client.units import SCORE_SCALE, round_at  # noqa: F401 - SCORE_SCALE re-exported

BLOCKHASH_WINDOW = 256  # blocks the EVM remembers a hash for (SwarmLedger.BLOCKHASH_WINDOW)


class VoteSide(IntEnum):
    """A voter's side on one committee, as `voteOf` reports it (SwarmLedger's vote record)."""

    NONE = 0
    AGREED = 1
    DISPUTED = 2
    UNAVAILABLE = 3


class ChainModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LedgerParams(ChainModel):
    """The deployment parameters, fixed for the contract's life, and the ledger's clock.

    The round formulas live here once (the ledger's own, named alike, are in
    contracts/ledger/LedgerParams.sol: _submitOpen, _close, _finalAfter, _voteOpen, _appealOpen,
    _isFinal): round r runs from genesis + r * round_length; its batches are accepted until
    round r + submit_rounds and attested until round r + submit_rounds + challenge_rounds (the
    close); a batch not credited by then may be appealed by its producer in the appeal rounds
    after the close but the last, and the appeal's committee votes until close + appeal_rounds;
    after that the round's credit is final, and its votes are judged (settleVotes) for
    challenge_rounds more rounds.
    """

    round_length: int = Field(gt=0)
    min_stake: int
    unbonding_period: int
    challenge_rounds: int = Field(gt=0)
    submit_rounds: int = Field(gt=0)
    reward_per_round: int
    slash_bps: int = Field(ge=0, le=10_000)
    agree_tolerance_bps: int = Field(ge=0, le=10_000)
    catalog_digest: str
    quorum: int = Field(ge=1)
    checkers: int = Field(ge=1)
    genesis: int
    appeal_rounds: int = Field(2, ge=2)
    appeal_checkers: int = Field(40, ge=1)
    families: tuple[str, ...] = ()  # the model families it checks: base content ids, "0x" + hex

    def round_at(self, t: float) -> int:
        """Returns the round at unix time t (currentRound() at a block of that timestamp)."""
        return round_at(t, self.genesis, self.round_length)

    def round_start(self, round_: int) -> float:
        return self.genesis + round_ * self.round_length

    def submit_open(self, round_: int, current: int) -> bool:
        """Whether a batch of `round_` is still accepted in round `current`."""
        return round_ <= current <= round_ + self.submit_rounds

    def close(self, round_: int) -> int:
        """The last round in which the first committee of a batch of `round_` votes."""
        return round_ + self.submit_rounds + self.challenge_rounds

    def final_after(self, round_: int) -> int:
        """The last round in which a batch of `round_` is voted on (its appeal's committee)."""
        return self.close(round_) + self.appeal_rounds

    def first_open(self, current: int) -> int:
        """The oldest round whose first committee still votes in `current` (attest_open's
        inverse; may be negative early on)."""
        return current - self.submit_rounds - self.challenge_rounds

    def first_voted(self, current: int) -> int:
        """The oldest round whose batches some committee (an appeal's) may still vote on in
        `current` (vote_open's inverse, appealed), at least 0."""
        return max(0, self.first_open(current) - self.appeal_rounds)

    def first_judged(self, current: int) -> int:
        """The oldest round whose votes can still be judged (settleVotes) in `current`
        (votes_judged_open's inverse; may be negative early on): nothing of an older round can
        change on chain any more."""
        return current - self.submit_rounds - 2 * self.challenge_rounds - self.appeal_rounds

    def first_kept(self, current: int, retain_rounds: int) -> int:
        """The oldest round whose peers' batches a node still keeps in `current` (its journal's
        rows, its pins: what `[store].retain_rounds` keeps, and at least every round whose votes
        can still be judged); may be negative early on."""
        return min(current - retain_rounds, self.first_judged(current))

    def attest_open(self, round_: int, current: int) -> bool:
        """Whether the first committee of a submission of `round_` can still vote in `current`."""
        return current <= self.close(round_)

    def appeal_open(self, round_: int, current: int) -> bool:
        """Whether a producer may appeal its batch of `round_` in round `current`."""
        return self.close(round_) < current < self.final_after(round_)

    def vote_open(self, round_: int, current: int, appealed: bool) -> bool:
        """Whether the committee voting now on a batch of `round_` (the appeal's once
        `appealed`) can still vote in `current`."""
        return current <= (self.final_after(round_) if appealed else self.close(round_))

    def is_final(self, round_: int, current: int) -> bool:
        """Whether the credit of `round_` is final (settle and claim accept it) in `current`."""
        return current > self.final_after(round_)

    def is_paid(self, round_: int, current: int, book: bool) -> bool:
        """Whether a claim of `round_` is paid in `current`: final, and where a round `book`
        runs, decided by it too (two rounds after its challenge window, round_ + W + 2C + 4:
        both lanes split one reward a round, over the book's standing total)."""
        decided = round_ + self.submit_rounds + 2 * self.challenge_rounds + 4
        return self.is_final(round_, current) and (not book or current >= decided)

    def events_span(self, first: int, last: int) -> tuple[float, float]:
        """The unix times [start, end) within which the ledger emits every event of the rounds
        first..last that the credit depends on (a batch's Submitted, its votes, its
        CreditChanged): from the first round's start to the end of the last one's final round.
        A reader of those rounds reads the blocks of that span, not the chain since the deploy
        (Ledger.block_at turns the times into blocks)."""
        return self.round_start(first), self.round_start(self.final_after(last) + 1)

    def votes_judged_open(self, round_: int, current: int) -> bool:
        """Whether the votes on a batch of `round_` can be judged (settleVotes) in `current`."""
        return self.is_final(round_, current) and current <= (
            self.final_after(round_) + self.challenge_rounds
        )


class NodeInfo(ChainModel):
    """A node's on-chain record; stakes and payouts in wei. (Submissions and credit: events.)"""

    address: str
    registered: bool
    active_stake: int
    unbonding: int
    unbonding_end: int
    metadata: str
    total_paid: int
    stake_block: int  # the block of the last change to its active stake (committees are drawn
    # from the stake as of a submission's block: SwarmLedger.stakeAt)
    unsettled: int = 0  # its submissions not settled yet
    backing: int = 0  # of those, the ones made before its last unstake request: withdraw waits
    family: str | None = None  # the base it registered with ("0x" + hex); None: not registered


def beacon_from(block_hash: str) -> int:
    """SeatDraw.beaconFrom: a block hash's low 88 bits (1 if they are all 0), what a
    submission's committee is drawn from."""
    return int(block_hash, 16) & ((1 << 88) - 1) or 1


class Beacon(ChainModel):
    """The block hash that draws the checkers of one submission: the hash of the block after
    the submission's (see SwarmLedger.beaconOf)."""

    round: int
    node: str  # the producer
    beacon: int
    block: int
    ready: bool
    drawn: bool = False  # stored on chain (by a vote or drawBeacon): it can no longer lapse

    def lapsed(self, head: int) -> bool:
        """Whether nobody stored it while the EVM knew its block's hash: the submission can no
        longer be checked (the ledger never draws it again)."""
        return not self.drawn and self.block > 0 and head > self.block + BLOCKHASH_WINDOW

    def seats(self, checker: str, stake: int, total_stake: int, checkers: int) -> int:
        """SwarmLedger's draw, recomputed from public data: the seats `checker` holds on this
        submission's committee of `checkers` seats, with `stake` of `total_stake`, the active
        stake of the producer's model family, as of the submission's block (`Ledger.stake_at`,
        `Ledger.family_stake_at`); each seat is held with probability stake / total_stake.
        (Eligibility aside: registered in the producer's family, minStake then and now, not the
        producer; `Ledger.seats_of` asks the ledger for all of it.)"""
        if not self.ready or stake <= 0 or total_stake <= 0:
            return 0
        # abi.encode(beacon, round, node, checker): four 32-byte words, addresses left-padded
        # (packed by hand: a node draws this for every peer's batch of its family each round)
        base = keccak256(
            self.beacon.to_bytes(32, "big")
            + self.round.to_bytes(32, "big")
            + bytes.fromhex(self.node[2:].rjust(64, "0"))
            + bytes.fromhex(checker[2:].rjust(64, "0"))
        )
        scaled = stake << 128
        return sum(
            (int.from_bytes(keccak256(base + j.to_bytes(32, "big"))) >> 128) * total_stake < scaled
            for j in range(checkers)
        )


class Tally(ChainModel):
    """One committee's votes: seats (a vote counts once per seat its checker holds) and
    distinct checkers on each side."""

    agree_seats: int
    dispute_seats: int
    unavailable_seats: int
    agrees: int
    disputes: int
    unavailable: int

    def wins(self, quorum: int) -> bool:
        """The ledger's verdict for credit (SwarmLedger._wins): `quorum` checkers agreed and
        their seats are at least those that disputed plus those that found nothing to fetch
        (true of a batch that claims no signal too, which is credited 0)."""
        return self.agrees >= quorum and self.agree_seats >= (
            self.dispute_seats + self.unavailable_seats
        )


class Appeal(Beacon, Tally):
    """A producer's appeal of its submission: its block, the beacon that draws the appeal's
    committee (a Beacon: the hash of the block after the appeal's; stored by the first vote or
    drawBeacon, it lapses like the first one, and `seats` with appeal_checkers trials recomputes
    the committee) and that committee's votes, which decide the submission's credit."""

    appeal_block: int
    decided: bool = False  # its committee reached a verdict (credited or disputed): it decides;
    # else the first committee's verdict stands (SwarmLedger._disputed)


class Claim(ChainModel):
    """What a submission claims, as its `Submitted` event records it: a node's batch of a round
    (its sha256 digest), its rollouts, score and learning signal."""

    round: int
    node: str
    digest: str
    rollouts: int
    score: int
    signal: int


class SubmissionInfo(Tally, Claim):
    """One submission: its claim, its first committee's votes (the tally fields: a checker's
    vote counts once per seat it holds on the committee), its appeal's, and the outcome.
    `credited` is the signal it earns (0 until the deciding committee's quorum agreed)."""

    credited: int
    settled: bool
    paid: int
    snapshot_block: int  # its block: the committee is drawn from the stakes as of it
    appeal_block: int = 0  # the block of its producer's appeal (0: not appealed)
    appeal: Appeal | None = None  # the appeal's committee and votes, once appealed

    @property
    def exists(self) -> bool:
        return self.rollouts > 0

    @property
    def appealed(self) -> bool:
        return self.appeal_block > 0

    @property
    def attestations(self) -> int:
        """Checkers who fetched it and voted on its content (agreeing or disputing)."""
        return self.agrees + self.disputes

    @property
    def votes(self) -> int:
        """Every checker's vote, unavailable ones included."""
        return self.agrees + self.disputes + self.unavailable

    @property
    def deciding(self) -> Tally:
        """The votes that decide its verdict: the appeal committee's once it reached one, else
        the first committee's (an appeal nobody voted on leaves the first dispute standing)."""
        if self.appeal is not None and self.appeal.decided:
            return self.appeal
        return self

    @property
    def disputed(self) -> bool:
        """More of the deciding committee's seats disputed it than agreed (slashed at settle)."""
        return self.deciding.dispute_seats > self.deciding.agree_seats

    def why_not_credited(self, quorum: int) -> str | None:
        """Why the submission earns nothing now, in words (None when it earns)."""
        if self.credited:
            return None
        if self.signal == 0:
            return "no learning signal claimed (every group all-correct or all-wrong)"
        # once appealed, only the appeal's committee can credit it
        t: Tally = self.appeal if self.appeal is not None else self
        problems = []
        where = " on appeal" if self.appeal is not None else ""
        if t.agrees < quorum:
            problems.append(f"{t.agrees} of {quorum} agreeing checkers{where}")
        against = t.dispute_seats + t.unavailable_seats
        if t.agree_seats < against:
            problems.append(
                f"{t.agree_seats} agreeing seats below {against} disputing + unavailable{where}"
            )
        return "; ".join(problems) or "not credited"


class RoundInfo(ChainModel):
    """A round's credited total, and whether the credit is final (its submissions: the
    Submitted events)."""

    round: int
    total_credited: int
    final: bool


class TxResult(ChainModel):
    """A mined transaction."""

    tx_hash: str
    block_number: int
    gas_used: int
    effective_gas_price: int
    contract_address: str | None = None
