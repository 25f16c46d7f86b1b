"""The node's clock: what time it is, and waiting for a time, so that tests move time instead of
sleeping through it.

Rounds come from the ledger's parameters (LedgerParams.round_at: genesis + round * length, the
contract's own formula); the clock only says what "now" is. A node takes a clock when it is
built: `SystemClock` for production, where the chain's block time follows the wall clock, and
`WarpClock` for tests, which jump forward together with the chain (anvil's evm_increaseTime) so
that node and ledger keep agreeing on the round.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Returns unix time, as the ledger's block timestamps count it."""

    def wait_until(self, moment: float, stop: threading.Event, *, at_most: float = 1.0) -> bool:
        """Waits until `moment`, `stop` or `at_most` seconds; returns whether `stop` is set."""


class SystemClock:
    """Wall-clock time."""

    def now(self) -> float:
        return time.time()

    def wait_until(self, moment: float, stop: threading.Event, *, at_most: float = 1.0) -> bool:
        return stop.wait(max(0.0, min(at_most, moment - time.time())))


class WarpClock:
    """Wall-clock time plus an offset that `warp` moves forward; waits wake up when it moves.

    Pair it with the chain: `anvil.warp(s)` (evm_increaseTime) and `clock.warp(s)` together."""

    def __init__(self, offset: float = 0.0):
        self.offset = offset
        self._moved = threading.Condition()

    def now(self) -> float:
        return time.time() + self.offset

    def warp(self, seconds: float) -> None:
        with self._moved:
            self.offset += seconds
            self._moved.notify_all()

    def wait_until(self, moment: float, stop: threading.Event, *, at_most: float = 1.0) -> bool:
        # a short slice, so that `stop` is seen soon; a warp wakes the wait at once
        with self._moved:
            self._moved.wait(max(0.0, min(at_most, 0.1, moment - self.now())))
        return stop.is_set()
