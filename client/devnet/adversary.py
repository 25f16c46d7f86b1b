"""Adversaries as devnet nodes: each runs one strategy for farming credit on the real path,
registered and staked like any node, with its own store, real transactions and real pins, so that
anyone can re-run the attack table (`scripts/attack-table`) and read in `sapo audit` and the TUI
what the honest nodes did about it.

  free-claim     each round, submits the digest of nothing with a maximal claim; pins nothing
  answer-farmer  pins batches of its own rounds' questions (drawn from the public task seed, as an
                 honest node draws them) answered with their reference answers: no sampling,
                 every group all correct
  mixed-farmer   the same, but half of each group's completions are wrong on purpose, so that
                 every group has mixed outcomes: the most learning signal a batch can claim
  withholder     the mixed farmer's batches, naming a checkpoint it never publishes: the batch can
                 be fetched, the checkpoints its beacon opens cannot (the attack on proof of
                 generation that costs nothing if a missing opening is only "unavailable")
  copycat        fetches the batch of a peer's submission, re-encodes it under its own address
                 and submits it, with the peer's claims, while the round's window is open
  colluder       free claims like free-claim, and an "agree" attestation of its partner's claim
                 (another colluder's) whenever the beacon draws it to check it
                 (`--adversary colluders` adds a pair)
  cartel         a colluder whose partners are all the other cartel members (`--adversary
                 cartel` adds roles.CARTEL = 3): each free claim can gather the devnet's quorum
                 of agreeing votes, so only the honest checkers' unavailable votes stop it
  griefer        submits nothing; disputes (attests score 0 and a signal off the claim, finding
                 "generation") every peer submission the beacon draws it to check, without
                 fetching it, and again on its appeal's committee when drawn there: the attack
                 on honest nodes' credit that staking alone allows
  whale          a griefer registered with `[devnet].whale_share` of all stake (issue 40's one
                 address with a tenth of stake): its seats, not its stake, count, and the
                 appeals that honest producers file overturn what it wins by a draw's luck
  sybil          one of a set of identities (`--adversary sybils`: roles.SYBILS, 3) holding
                 `[devnet].whale_share` of all stake together, split 4:2:1: each free-claims,
                 vouches for the others' claims (a cartel that meets the quorum of distinct
                 addresses by itself) and disputes every honest batch it is drawn for
  stake-mover    a griefer that, as soon as it sees a peer's batch on chain, adds enough stake
                 to hold `[devnet].whale_share` of all stake, and requests it unstaked once it
                 has read its seats: under ledger v3's draw from live stake it would take seats
                 and un-draw honest checkers (issue 40); it journals the seats it holds beside
                 those its stake of the moment would give it
  padder         samples honestly from the seed checkpoint it names (its completions are the
                 seeded draws: proof of generation passes), PADDED local rounds of them (mostly
                 zero-signal groups), and claims its signal plus ledger v3's agreement tolerance
                 (agree_tolerance_bps of the batch's maximal score, which padding widens): v3
                 credited the claim (150 for a recomputed 100 at 10,000 rollouts, issue 40)
  logprob-liar   samples one local round honestly from the seed checkpoint it names (its draws
                 pass the proof), claims its true signal, and writes every token's log-prob
                 as LIAR_LOGPROB nats: to a learner that weighs peers' tokens by its own
                 probability against the producer's ([sapo].external_correction), each of its
                 tokens looks e^20 times likelier under the learner than it was drawn, and is
                 weighed up to the cap (the attack on off-policy learning a batch's log-probs
                 open)
  nan-weights    the mixed farmer's batches, naming and pinning the seed's weights with one value
                 set to NaN: every gap and log-prob difference a checker computes from them is
                 NaN, and a comparison written `gap > eps` passes a NaN (issue 57: every made-up
                 completion passed the proof)
  poison-token   the mixed farmer's batches, each completion's token ids led by an id past the
                 vocabulary: decoding drops it, so the text check passes, and the teacher-forced
                 pass over it raised (issue 57: the checker's intake stopped, and again after a
                 restart; a learner that trained on the ids stopped the same way)
  baiter         one of a bait set (`--adversary baiters`: roles.BAITERS, 2): each samples and
                 submits honest batches (every check passes) and never appeals; in the last round
                 of the first committee's window on a partner's batch, it disputes it when the
                 set's seats outnumber the seats that agreed, so the batch ends disputed and the
                 honest agreers' votes would be judged lost (issue 57: at a third of stake about
                 9% of bait batches fired); an honest agreer's client appeals such a verdict
                 (`appealVote`) and the appeal's committee judges the set's disputes
  concentrator   samples CONCENTRATED one-item local rounds honestly and adds one local round
                 of FORGED_GROUPS farmed groups at full signal; it submits without serving and,
                 once its beacon is known, withholds the whole batch when a forged group is
                 opened (checkers vote "unavailable": no credit, no slash), serves it otherwise
                 (issue 57: when the beacon opened 2 local rounds alike, the forged round
                 escaped 99.6% of the time at 512 local rounds; opened by signal, it is caught)
  splitter       samples local rounds honestly until SPLIT_MIXED groups have learning signal
                 (at most LIAR_ROUNDS), and forges one row (a completion
                 of the other outcome, so that a group with no signal claims some); once its
                 beacon is known it serves unless the forged row is re-drawn (issue 57: each
                 checker re-drew rows of its own, and the producer served exactly when the
                 drawn checkers would split, the honest side that lost being slashed; every
                 checker now re-draws the same groups, so they catch it all or none)

Farmers fill their batches as an honest node's full batch is filled (the batch limits and
`[sapo].local_items` questions a local round, `[sapo].completions` each), and make them look
generated as well as they can without sampling: they declare the swarm's seed model, name its
weights as every local round's checkpoint and pin them (so checkers can fetch every opening), and
write each completion's token ids as the seed tokenizer encodes its text. None of them samples.
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import struct
import threading
import time

from client.chain import ChainError, Ledger
from client.chain.events import EventCursor, EventReader
from client.chain.ledger_events import Appealed, Submitted
from client.config import NodeConfig
from client.config.roles import STRATEGIES
from client.credit import GENERATION, batch_signal, group_signal
from client.node.assemble import data_dir_deployment
from client.node.datadir import DataDir
from client.node.deployment import bind_data_dir
from client.node.eventlog import Event, EventLog
from client.node.rollouts import make_batch, task_seed
from client.store import (
    Item,
    LocalRound,
    Sampling,
    StoreError,
    TaskRef,
    fetch_from_peers,
    open_store,
)
from client.store.batch import BatchLimits
from client.store.peers import peer_addresses
from client.store.weights import put_weights, weights_id
from client.tasks import (
    check_against_ledger,
    draw,
    load_catalog,
    local_round_seed,
    reference_answer,
    reward,
    to_units,
)
from client.units import SCORE_SCALE, to_logprob_units

log = logging.getLogger("sapo.adversary")

POLL_S = 1.0
PADDED = 4  # local rounds a padder samples a chain round (an honest node plays 2 at 20-s rounds)
LIAR_LOGPROB = -20  # nats: what a logprob-liar claims of every token it sampled
LIAR_ROUNDS = 16  # local rounds a logprob-liar samples at most, until one has learning signal
WRONG = "<answer>not the answer</answer>"
CONCENTRATED = 16  # one-item honest local rounds a concentrator samples beside its forged one
FORGED_GROUPS = 256  # farmed groups in a concentrator's forged local round (as the batch allows)
# a splitter samples local rounds until SPLIT_MIXED of its groups have learning signal (at most
# LIAR_ROUNDS), then forges one row, so that the forged share of its signal is small
SPLIT_MIXED = 3


def max_claim(rollouts: int, completions: int) -> tuple[int, int]:
    """The (score, signal) a claim of `rollouts` completions in groups of `completions` can
    carry at most while still looking like a batch: half of each group correct."""
    groups = max(1, rollouts // completions)
    half = [SCORE_SCALE] * (completions // 2) + [0] * (completions - completions // 2)
    return sum(half) * groups, group_signal(half) * groups


class Adversary:
    """One adversary node: its strategy, its ledger account and its store."""

    def __init__(
        self,
        cfg: NodeConfig,
        ledger: Ledger,
        strategy: str,
        *,
        partners: list[str] | None = None,
    ):
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}: expected one of {STRATEGIES}")
        if (strategy in ("colluder", "cartel", "sybil", "baiter")) != bool(partners):
            raise ValueError(
                "a colluder, cartel, sybil or bait member needs partners, and only they have any"
            )
        self.cfg = cfg
        self.ledger = ledger
        self.strategy = strategy
        self.partners = [p.lower() for p in partners or []]
        self.params = ledger.check(cfg.chain.chain_id)
        deployment = data_dir_deployment(cfg, ledger)  # before anything is written there
        self.catalog = load_catalog(cfg.tasks.catalog)
        check_against_ledger(self.catalog, self.params.catalog_digest)
        self.store = open_store(cfg.store)
        self.address = ledger.account_address
        self.chain_id = ledger.w3.eth.chain_id
        self.events = EventLog(DataDir(cfg.node.data_dir).events)
        bind_data_dir(DataDir(cfg.node.data_dir), deployment)
        self.reader = EventReader(
            ledger,
            chunk_blocks=cfg.chain.log_chunk_blocks,
            start_block=cfg.chain.ledger_deploy_block,
        )
        self.limits = BatchLimits(max_bytes=cfg.store.max_batch_bytes)
        self.submitted: set[int] = set()  # rounds we submitted (or gave up on)
        self.vouched: set[tuple[int, str]] = set()  # (round, partner) claims we looked at
        self.griefed: set[tuple[int, str, bool]] = set()  # (round, node, appeal) looked at
        self.appealed: set[tuple[int, str]] = set()  # others' appealed submissions
        self.copied: set[str] = set()  # digests we copied (or tried to)
        self.moved: set[tuple[int, str]] = set()  # (round, node) a stake mover's seats read
        self.baited: set[tuple[int, str, bool]] = set()  # (round, partner, appeal) looked at
        self.lent = 0  # wei a stake mover added and has not requested unstaked yet
        # round -> (batch, its bytes, its forged groups): submitted, not served yet (`serve`)
        self.held: dict[int, tuple] = {}
        self.outcomes: dict[int, str] = {}  # round -> "served" or "withheld", once decided
        self.cursor = EventCursor(next_block=cfg.chain.ledger_deploy_block)
        self.seen: dict[int, list[tuple[int, str]]] = {}  # round -> others' submissions
        self._seed = None  # the seed policy's descriptor, tokenizer and weights (farmers)
        self._seed_policy = None  # the seed policy itself, and a backend on it (a padder)
        self._backend = None
        self.model = {"name": f"none ({strategy})", "parameters": 0, "tokenizer": "none"}

    # ------------------------------------------------------------------------------ the loop

    def run(self, stop: threading.Event) -> None:
        self.events.emit(
            Event.NODE_STARTED,
            f"adversary {self.strategy} {self.address} started at round "
            f"{self.ledger.current_round()}",
            address=self.address,
            adversary=self.strategy,
            partners=self.partners,
        )
        while not stop.is_set():
            try:
                self.step(self.ledger.current_round())
            except (ChainError, StoreError) as exc:  # an outage: try again next poll
                self.events.emit(
                    Event.NODE_ERROR, f"{self.strategy}: {exc}", logging.WARNING, error=str(exc)
                )
            stop.wait(POLL_S)
        self.events.emit(Event.NODE_STOPPED, f"adversary {self.strategy} stopped")

    def step(self, current: int) -> None:
        if self.strategy == "copycat":
            self.copy(current)
        elif self.strategy in ("griefer", "whale", "stake-mover"):
            if self.strategy == "stake-mover":
                self.move_stake(current)
            self.grief(current)
        elif current not in self.submitted:
            self.submitted.add(current)
            if self.strategy in ("free-claim", "colluder", "cartel", "sybil"):
                self.free_claim(current)
            elif self.strategy == "padder":
                self.pad(current)
            elif self.strategy == "logprob-liar":
                self.pad(current, local_rounds=LIAR_ROUNDS, lie=True)
            elif self.strategy == "baiter":
                self.pad(current, local_rounds=LIAR_ROUNDS, honest=True)
            elif self.strategy == "concentrator":
                self.concentrate(current)
            elif self.strategy == "splitter":
                self.split(current)
            else:
                withhold = self.strategy == "withholder"
                self.farm(
                    current,
                    mixed=self.strategy != "answer-farmer",
                    withhold=withhold,
                    nan=self.strategy == "nan-weights",
                    poison=self.strategy == "poison-token",
                )
        if self.held:
            self.serve(current)
        if self.strategy == "baiter":
            self.bait(current)
        elif self.partners:
            self.vouch(current)
        if self.strategy == "sybil":
            self.grief(current)

    # --------------------------------------------------------------------------- strategies

    def free_claim(self, round_: int) -> None:
        """Submits the digest of nothing (random bytes nobody has) with a maximal claim."""
        # as many rollouts as an honest node's fullest batch holds
        rollouts = self.limits.max_items * self.cfg.sapo.completions
        score, signal = max_claim(rollouts, self.cfg.sapo.completions)
        self._submit(round_, "0x" + secrets.token_hex(32), rollouts, score, signal, pinned=False)

    def farm(
        self,
        round_: int,
        *,
        mixed: bool,
        withhold: bool = False,
        nan: bool = False,
        poison: bool = False,
    ) -> None:
        """Pins and submits a batch of the round's own questions answered without a model;
        `withhold`: naming a checkpoint that nobody has (never published); `nan`: naming and
        pinning one with a NaN value; `poison`: every completion's ids led by one past the
        vocabulary (its text is still their decoding)."""
        seed = task_seed(self.chain_id, self.ledger.address, round_, self.address)
        items = self.cfg.sapo.local_items
        weights, encode = self._weights(round_, withhold=withhold, nan=nan)
        if poison:
            past = self._seed_policy.model.get_input_embeddings().num_embeddings + 1

            def tokenizer(text: str) -> list[int]:
                return [past, *encode(text)][: self.cfg.policy.max_new_tokens]
        else:
            tokenizer = encode
        # a batch as full as an honest node's fullest; a NaN or poisoned one needs one local
        # round to show what it does to a checker
        fill = min(self.limits.max_local_rounds, self.limits.max_items // items)
        parts = [
            LocalRound(k=k, weights=weights, items=self._farmed(seed, k, items, tokenizer, mixed))
            for k in range(1 if nan or poison else fill)
        ]
        self._seal(round_, parts)

    def concentrate(self, round_: int) -> None:
        """Samples CONCENTRATED one-item local rounds honestly from the seed checkpoint, adds one
        local round of FORGED_GROUPS farmed groups (half right, half wrong: every one at full
        signal) and submits the batch without serving it: once its beacon is known, it serves it
        only if no forged group is opened (`serve`)."""
        seed = task_seed(self.chain_id, self.ledger.address, round_, self.address)
        weights, encode = self._weights(round_)
        parts = [self._sample(round_, k, 1, weights) for k in range(CONCENTRATED)]
        k = len(parts)
        groups = min(FORGED_GROUPS, self.limits.max_items - k)
        parts.append(LocalRound(k=k, weights=weights, items=self._farmed(seed, k, groups, encode)))
        self._hold(round_, parts, {(k, i) for i in range(groups)})

    def split(self, round_: int) -> None:
        """Samples local rounds honestly from the seed checkpoint until SPLIT_MIXED groups have
        learning signal, and forges one row of one group: in the first group whose completions
        all scored alike (no signal), one completion is replaced by a hand-written answer of the
        other outcome, so the group claims signal it never sampled. It submits without serving,
        and once the beacon is known serves unless the forged row is among the rows the drawn
        checkers re-draw (`serve`): when each checker re-drew rows of its own, it served exactly
        when the committee would split, and the honest side that lost was slashed."""
        seed = task_seed(self.chain_id, self.ledger.address, round_, self.address)
        weights, encode = self._weights(round_)
        items = self.cfg.sapo.local_items
        parts: list[LocalRound] = []
        while len(parts) < min(LIAR_ROUNDS, self.limits.max_local_rounds) and (
            sum(len(set(item.rewards)) > 1 for part in parts for item in part.items) < SPLIT_MIXED
        ):
            parts.append(self._sample(round_, len(parts), items, weights))
        for part in parts:
            tasks = draw(local_round_seed(seed, part.k), items, self.catalog)
            for i, (task, item) in enumerate(zip(tasks, part.items, strict=True)):
                if len(set(item.rewards)) > 1:
                    continue  # mixed already: forging a row here adds no signal
                right = item.rewards[0] == 0  # all wrong: forge a right answer, else a wrong one
                text = f"<answer>{reference_answer(task)}</answer>" if right else WRONG
                ids = encode(text)
                forged = item.model_copy(
                    update={
                        "completions": [text, *item.completions[1:]],
                        "token_ids": [ids, *item.token_ids[1:]],
                        "rewards": [to_units(reward(task, text)), *item.rewards[1:]],
                        "logprobs": [[0] * len(ids), *item.logprobs[1:]],
                    }
                )
                if len(set(forged.rewards)) == 1:
                    continue  # the verifier scored the forged answer like the others
                items_now = [*part.items[:i], forged, *part.items[i + 1 :]]
                parts[part.k] = part.model_copy(update={"items": items_now})
                self._hold(round_, parts, {(part.k, i)})
                return
        self.events.emit(
            Event.ADVERSARY_MOVE,
            f"{self.strategy}: round {round_}: no group to forge a row in; nothing submitted",
            round=round_,
            move="skip",
        )

    def pad(
        self, round_: int, *, local_rounds: int = PADDED, lie: bool = False, honest: bool = False
    ) -> None:
        """Pins and submits a batch it sampled honestly from the seed checkpoint, PADDED local
        rounds long (as many as fit), claiming its learning signal plus the tolerance v3
        allowed: agree_tolerance_bps of the batch's maximal score. `lie` (a logprob-liar): local
        rounds until one has learning signal (a batch that claims none earns nothing, whatever
        its checkers find), its true signal claimed, every token's log-prob LIAR_LOGPROB.
        `honest` (a baiter): the same rounds, and nothing false: the batch every check passes."""
        weights, _ = self._weights(round_)
        parts = []
        for k in range(min(local_rounds, self.limits.max_local_rounds)):
            parts.append(self._sample(round_, k, self.cfg.sapo.local_items, weights))
            if (lie or honest) and batch_signal(item.rewards for item in parts[-1].items) > 0:
                break
        if lie:
            parts = [
                part.model_copy(
                    update={
                        "items": [
                            item.model_copy(
                                update={
                                    "logprobs": [
                                        [to_logprob_units(LIAR_LOGPROB)] * len(ids)
                                        for ids in item.token_ids
                                    ]
                                }
                            )
                            for item in part.items
                        ]
                    }
                )
                for part in parts
            ]
        self._seal(round_, parts, padded=not (lie or honest))

    def copy(self, current: int) -> None:
        """Re-encodes a peer's batch of a past round still open to submissions under our
        address and submits it with the peer's claims. It copies what a checker already agreed
        with (so it can be fetched and re-verifies), credited first, then the largest signal."""
        self._watch(max(0, current - self.params.submit_rounds))
        for round_, keys in sorted(self.seen.items()):
            if round_ >= current or round_ in self.submitted:
                continue
            subs = [
                s for s in self.ledger.submissions(keys) if s.agrees and s.digest not in self.copied
            ]
            for sub in sorted(subs, key=lambda s: (s.credited > 0, s.signal), reverse=True):
                if self._copy(sub):  # one that could not be fetched is tried again next step
                    self.copied.add(sub.digest)
                    break

    def _copy(self, sub) -> bool:
        metadata = self.ledger.node_info(sub.node).metadata
        allow = self.cfg.store.allow_private_peers
        try:
            batch, _ = fetch_from_peers(
                self.store,
                sub.digest,
                [(sub.node, peer_addresses(metadata, allow_private=allow))],
                connect_timeout_s=self.cfg.store.connect_timeout_s,
                chain_id=self.chain_id,
                ledger=self.ledger.address,
                round_=sub.round,
                node=sub.node,
            )
        except StoreError as exc:
            log.info("copycat: could not fetch %s: %s", sub.digest, exc)
            return False
        ours = batch.model_copy(update={"node": self.address.lower()})
        if not self.params.submit_open(sub.round, self.ledger.current_round()):
            return False  # the fetch took the rest of the window
        cid = self.store.put(ours.encode(), sub.round)
        self.submitted.add(sub.round)
        self._submit(
            sub.round,
            "0x" + ours.digest().hex(),
            ours.rollouts,
            ours.score,
            ours.signal,
            cid=cid,
            copied_from=sub.node,
        )
        return True

    def vouch(self, current: int) -> None:
        """Attests "agree" with each partner's claims in every open round where we are drawn."""
        last = current - self.params.submit_rounds - self.params.challenge_rounds
        for round_ in range(max(0, last), current + 1):
            for partner in self.partners:
                if (round_, partner) in self.vouched:
                    continue
                sub = self.ledger.submission(round_, partner)
                if not sub.exists or not self.ledger.beacon(round_, partner).ready:
                    continue
                self.vouched.add((round_, partner))
                if not self.ledger.is_checker(round_, partner, self.address):
                    self.events.emit(
                        Event.ADVERSARY_MOVE,
                        f"{self.strategy}: not drawn to check {partner}'s claim of round {round_}",
                        round=round_,
                        move="not-drawn",
                    )
                    continue
                tx = self.ledger.attest(round_, partner, sub.score, sub.signal, 0)
                self.events.emit(
                    Event.ADVERSARY_MOVE,
                    f"{self.strategy}: attested {partner}'s free claim of round {round_} as "
                    "agreeing",
                    round=round_,
                    move="vouch",
                    gas=tx.gas_used,
                )

    def bait(self, current: int) -> None:
        """In the last round of the first committee's window on a partner's (honest) batch,
        disputes it when the bait set's seats on that committee, with the disputes cast already,
        outnumber the seats that agreed: the batch is then disputed, and every honest checker
        that agreed with it would lose slashBps at settleVotes (the producer does not appeal).
        Only a voter's appeal (`appealVote`) by an honest agreer overturns it. Also disputes the
        partner's appeal when drawn on its committee."""
        rounds = range(
            max(0, current - self.params.submit_rounds - self.params.challenge_rounds - 2),
            current + 1,
        )
        for round_ in rounds:
            last = self.params.close(round_) == current
            for partner in self.partners:
                sub = self.ledger.submission(round_, partner)
                if (round_, partner, sub.appealed) in self.baited:
                    continue
                if not sub.exists or not self.ledger.beacon(round_, partner).ready:
                    continue
                if sub.appealed:  # on the appeal's committee, once its beacon is known
                    appeal = self.ledger.appeal_of(round_, partner)
                    if appeal is None or not appeal.ready:
                        continue
                    self.baited.add((round_, partner, sub.appealed))
                    if self.ledger.seats_of(round_, partner, self.address, True):
                        self._dispute(round_, partner, sub, "its appeal")
                    continue
                if not last:
                    continue
                mine = self.ledger.seats_of(round_, partner, self.address)
                allies = sum(  # the set's other seats not cast yet (cast ones are disputes)
                    self.ledger.seats_of(round_, partner, a)
                    for a in self.partners
                    if a != partner and self.ledger.vote_of(a, round_, partner)[0] == 0
                )
                self.baited.add((round_, partner, sub.appealed))
                if not mine or sub.agrees == 0:
                    continue
                if mine + allies + sub.dispute_seats > sub.agree_seats:
                    self._dispute(round_, partner, sub, "bait")
                else:
                    self.events.emit(
                        Event.ADVERSARY_MOVE,
                        f"{self.strategy}: {partner}'s batch of round {round_}: "
                        f"{sub.agree_seats} agreeing seats, ours {mine + allies}: not baited",
                        round=round_,
                        move="no-bait",
                    )

    def _dispute(self, round_: int, node: str, sub, why: str) -> None:
        signal = sub.signal + 1 if sub.signal < sub.rollouts * SCORE_SCALE // 2 else 0
        try:
            tx = self.ledger.attest(round_, node, 0, signal, GENERATION)
        except ChainError as exc:  # e.g. the window closed meanwhile
            log.info("%s: could not dispute %s's round %s: %s", self.strategy, node, round_, exc)
            return
        self.events.emit(
            Event.ADVERSARY_MOVE,
            f"{self.strategy}: disputed {node}'s honest batch of round {round_} ({why})",
            round=round_,
            move="dispute",
            node=node,
            gas=tx.gas_used,
        )

    def grief(self, current: int) -> None:
        """Disputes every peer submission still open to attestation that the beacon draws us
        to check: attests score 0, a signal one unit off the claim and the generation finding,
        fetching nothing; and once more on an appealed one's committee, when drawn there."""
        self._watch(
            max(
                0,
                current
                - self.params.submit_rounds
                - self.params.challenge_rounds
                - self.params.appeal_rounds,
            )
        )
        for round_, node in [key for keys in self.seen.values() for key in keys]:
            if node in self.partners:
                continue  # a sybil disputes the honest batches, not its own set's
            appeal = (round_, node) in self.appealed
            if (round_, node, appeal) in self.griefed:
                continue
            if appeal:
                found = self.ledger.appeal_of(round_, node)
                if found is None or not found.ready:
                    continue
            elif not self.ledger.beacon(round_, node).ready:
                continue
            self.griefed.add((round_, node, appeal))
            if not self.ledger.seats_of(round_, node, self.address, appeal):
                continue
            claim = self.ledger.submission(round_, node)
            # a signal off the claim by one unit: a dispute whatever was claimed (zeros would
            # agree with a batch that claims nothing)
            signal = claim.signal + 1 if claim.signal < claim.rollouts * SCORE_SCALE // 2 else 0
            try:
                tx = self.ledger.attest(round_, node, 0, signal, GENERATION)
            except ChainError as exc:  # e.g. the window closed meanwhile
                log.info("griefer: could not dispute %s's round %s: %s", node, round_, exc)
                continue
            self.events.emit(
                Event.ADVERSARY_MOVE,
                f"{self.strategy}: disputed {node}'s batch of round {round_} without fetching "
                "it" + (" (its appeal)" if appeal else ""),
                round=round_,
                move="dispute",
                node=node,
                gas=tx.gas_used,
            )

    def move_stake(self, current: int) -> None:
        """Moves stake around the draws of the batches it sees: once a batch is on chain (its
        committee's snapshot taken), adds enough stake to hold `[devnet].whale_share` of all
        active stake with it; the poll after, reads the seats the ledger gives it on each such
        batch (its stake as of the batch's block) beside the seats the stake it holds now would
        give (ledger v3 drew from live stake whenever a checker asked), journals both, and
        requests the added stake unstaked. Its disputes (grief) go by the ledger's seats."""
        self._watch(max(0, current - self.params.final_after(0)))  # as grief() keeps them
        me = self.address
        fresh = []
        for round_, node in [key for keys in self.seen.values() for key in keys]:
            if (round_, node) in self.moved or not self.params.attest_open(round_, current):
                continue
            beacon = self.ledger.beacon(round_, node)
            if beacon.ready:
                fresh.append((round_, node, beacon))
        if fresh and not self.lent:
            share = self.cfg.devnet.whale_share  # m = share * (active + m)
            self.lent = math.ceil(share * self.ledger.totals()["active"] / (1 - share))
            tx = self.ledger.add_stake(self.lent)
            self.events.emit(
                Event.ADVERSARY_MOVE,
                f"{self.strategy}: added {self.lent / 1e18:g} ETH of stake after "
                f"{len(fresh)} batch(es) went on chain",
                round=current,
                move="stake-added",
                gas=tx.gas_used,
            )
            return
        if not self.lent:
            return
        stake, total = self.ledger.node_info(me).active_stake, self.ledger.totals()["active"]
        for round_, node, beacon in fresh:
            self.moved.add((round_, node))
            held = self.ledger.seats_of(round_, node, me)
            live = beacon.seats(me, stake, total, self.params.checkers)
            self.events.emit(
                Event.ADVERSARY_MOVE,
                f"{self.strategy}: {held} seat(s) on {node}'s batch of round {round_}; the stake "
                f"it holds now would give {live}",
                round=round_,
                move="seats",
                node=node,
                held=held,
                live=live,
            )
        tx = self.ledger.request_unstake(self.lent)
        self.events.emit(
            Event.ADVERSARY_MOVE,
            f"{self.strategy}: requested {self.lent / 1e18:g} ETH unstaked",
            round=current,
            move="stake-removed",
            gas=tx.gas_used,
        )
        self.lent = 0

    def serve(self, current: int) -> None:
        """For each batch submitted and not served yet, once its beacon is known: withholds it
        for good when the beacon opens a forged group (its checkers vote "unavailable", which
        slashes nobody), and pins it otherwise. Every drawn checker re-draws the same groups
        (`client.node.proving.openings`), so a forged row is caught by all of them or by none."""
        from client.node.proving import openings

        for round_, (batch, data, forged) in list(self.held.items()):
            beacon = self.ledger.beacon(round_, self.address)
            if not beacon.ready:
                continue
            del self.held[round_]
            opened = openings(beacon.beacon, batch)
            caught = sorted(set(opened) & forged)
            share = sum(
                group_signal(batch.local_rounds[k].items[i].rewards) for k, i in forged
            ) / max(1, batch.signal)
            self.outcomes[round_] = "withheld" if caught else "served"
            if not caught:
                self.store.put(data, round_)
            self.events.emit(
                Event.ADVERSARY_MOVE,
                f"{self.strategy}: round {round_}: the beacon opens group(s) {opened}; forged "
                f"{sorted(forged)[:3]}{'…' if len(forged) > 3 else ''} ({share:.1%} of the "
                "signal): " + ("caught, the batch withheld" if caught else "not opened, served"),
                round=round_,
                move="withheld" if caught else "served",
                opened=[list(g) for g in opened],
                forged_share=round(share, 4),
            )

    # ------------------------------------------------------------------------------ helpers

    def _sample(self, round_: int, k: int, items: int, weights: str) -> LocalRound:
        """Local round k of `round_`, `items` questions sampled honestly from the seed policy,
        as a node samples them from the checkpoint `weights` names."""
        from client.node.rollouts import generate_local_round
        from client.policy.generate import make_backend

        if self._backend is None:
            if self.cfg.policy.cpu_threads:  # it shares the machine with the devnet's nodes
                import torch

                torch.set_num_threads(self.cfg.policy.cpu_threads)
            self._backend = make_backend("transformers", self._seed_policy)
        return generate_local_round(
            self._seed_policy,
            self._backend,
            self.catalog,
            seed=task_seed(self.chain_id, self.ledger.address, round_, self.address),
            round_=round_,
            node=self.address,
            k=k,
            items=items,
            completions=self.cfg.sapo.completions,
            sampling=Sampling.of(
                self.cfg.policy.temperature, self.cfg.policy.top_p, self.cfg.policy.max_new_tokens
            ),
            weights=weights,
        ).part

    def _farmed(self, seed: bytes, k: int, items: int, tokenizer, mixed: bool = True) -> list[Item]:
        """Local round k's `items` questions answered without a model: each completion the
        reference answer, or with `mixed` every other one WRONG (full learning signal)."""
        completions = self.cfg.sapo.completions
        found = []
        for task in draw(local_round_seed(seed, k), items, self.catalog):
            right = f"<answer>{reference_answer(task)}</answer>"
            texts = [WRONG if mixed and i % 2 else right for i in range(completions)]
            found.append(
                Item(
                    task=TaskRef(entry=task.entry, seed=task.seed, index=task.index),
                    question=task.question,
                    completions=texts,
                    token_ids=(ids := [tokenizer(t) for t in texts]),
                    rewards=[to_units(reward(task, t)) for t in texts],
                    # no distribution drew them: it claims the seed model was sure of each
                    logprobs=[[0] * len(row) for row in ids],
                )
            )
        return found

    def _hold(self, round_: int, parts: list[LocalRound], forged: set[tuple[int, int]]) -> None:
        """Submits the batch of `parts` (claiming its signal) without pinning it, and keeps it
        for `serve`; `forged` are its hand-written groups (k, i). While the batch is too large,
        the last local round loses its last group (or the round itself, when it has one)."""
        while len(data := (batch := self._batch(round_, parts)).encode()) > self.limits.max_bytes:
            last = parts[-1]
            if len(last.items) > 1:
                forged.discard((last.k, len(last.items) - 1))
                parts[-1] = last.model_copy(update={"items": last.items[:-1]})
            else:
                forged = {g for g in forged if g[0] != last.k}
                parts.pop()
        self.held[round_] = (batch, data, forged)
        self._submit(
            round_,
            "0x" + batch.digest().hex(),
            batch.rollouts,
            batch.score,
            batch.signal,
            pinned=False,
            forged=len(forged),
        )

    def _watch(self, first: int) -> None:
        """Adds the others' new `Submitted` events to `seen` and forgets rounds before `first`."""
        mine = self.address.lower()
        for event in self.reader.poll(self.cursor, ["Submitted", "Appealed"]):  # new ones only
            match event.typed():
                case Appealed(round=round_, node=node) if node != mine:
                    self.appealed.add((round_, node))
                case Submitted(round=round_, node=node) if node != mine:
                    self.seen.setdefault(round_, []).append((round_, node))
        self.seen = {r: keys for r, keys in self.seen.items() if r >= first}

    def _weights(self, round_: int, *, withhold: bool = False, nan: bool = False):
        """Pins the seed policy's weights for `round_` (every opening a beacon may ask for; with
        `[policy].adapter`, a fresh adapter's over it, as a node of its family commits);
        returns their id and a text -> token ids function of the seed tokenizer. `withhold`:
        the id of weights of its own (the seed's, 8 parameters appended) that it never puts
        anywhere, so that no node can give them. `nan`: the seed's weights with their last
        value set to NaN, pinned."""
        if self._seed is None:
            # lazily: only this strategy needs a model (torch); the others run without one
            from client.node.assemble import adapter_spec, base_policy_path
            from client.policy import adapt, load_policy
            from client.policy.weights import weights_bytes

            policy = load_policy(base_policy_path(self.cfg), device="cpu", dtype="float32")
            if (spec := adapter_spec(self.cfg)) is not None:
                # as a fresh node of its family: an untrained adapter over the config's base (its
                # committed weights are the adapter's, as its family's checkers expect)
                policy = adapt(policy, spec)
            self._seed = (policy.descriptor(), policy.tokenizer, weights_bytes(policy.model))
            self._seed_policy = policy  # a padder samples from it
        descriptor, tokenizer, data = self._seed
        self.model = descriptor
        if nan:
            data = data[:-4] + struct.pack("<f", math.nan)
        if withhold:  # 8 more float32 parameters, from its address and the round: unique
            salt = hashlib.sha256(f"withheld {self.address} {round_}".encode()).digest()[:8]
            ident = weights_id(data + struct.pack("<8f", *salt))
        else:
            ident = put_weights(self.store, data, round_)
        return ident, lambda text: tokenizer.encode(text, add_special_tokens=False)

    def _seal(self, round_: int, parts: list[LocalRound], *, padded: bool = False) -> None:
        """Pins and submits the batch of `parts`, as the publisher seals (the last local rounds
        go while it is too large), claiming its signal, or with `padded` its signal plus v3's
        tolerance (agree_tolerance_bps of the batch's maximal score)."""
        while len(data := (batch := self._batch(round_, parts)).encode()) > self.limits.max_bytes:
            parts.pop()
        cid = self.store.put(data, round_)
        signal = batch.signal
        if padded:
            top = batch.rollouts * SCORE_SCALE
            signal = min(top // 2, signal + max(1, top * self.params.agree_tolerance_bps // 10_000))
        self._submit(
            round_, "0x" + batch.digest().hex(), batch.rollouts, batch.score, signal, cid=cid
        )

    def _batch(self, round_: int, parts: list[LocalRound]):
        return make_batch(
            chain_id=self.chain_id,
            ledger=self.ledger.address,
            round_=round_,
            node=self.address,
            catalog=self.catalog,
            model=self.model,
            sampling=Sampling.of(
                self.cfg.policy.temperature, self.cfg.policy.top_p, self.cfg.policy.max_new_tokens
            ),
            local_rounds=parts,
        )

    def _submit(
        self, round_: int, digest: str, rollouts: int, score: int, signal: int, **fields
    ) -> None:
        started = time.monotonic()
        try:
            tx = self.ledger.submit(round_, digest, rollouts, score, signal)
        except ChainError as exc:  # e.g. stake slashed below the minimum: it goes on trying
            self.events.emit(
                Event.NODE_ERROR,
                f"{self.strategy}: round {round_}: submit failed: {exc}",
                logging.WARNING,
                round=round_,
            )
            return
        self.events.emit(
            Event.ADVERSARY_MOVE,
            f"{self.strategy}: round {round_}: submitted {digest[:12]}… claiming signal "
            f"{signal / SCORE_SCALE:.2f} ({rollouts} rollouts)",
            round=round_,
            move="submit",
            digest=digest,
            rollouts=rollouts,
            score=score,
            signal=signal,
            gas=tx.gas_used,
            seconds=round(time.monotonic() - started, 3),
            **fields,
        )
