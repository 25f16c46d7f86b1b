"""The adversaries' batches: farmed, forged, padded, copied or sampled on the seed, each
built the way its strategy lies (the strategies: client.devnet.adversary)."""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import struct

from client.credit import batch_signal, group_signal
from client.node.eventlog import Event
from client.node.rollouts import task_seed
from client.store import (
    Item,
    LocalRound,
    Sampling,
    StoreError,
    TaskRef,
    fetch_from_peers,
)
from client.store.peers import peer_addresses
from client.store.weights import put_weights, weights_id
from client.tasks import (
    draw,
    local_round_seed,
    reference_answer,
    reward,
    to_units,
)
from client.units import SCORE_SCALE, to_logprob_units

log = logging.getLogger("sapo.adversary")


PADDED = 4  # local rounds a padder samples a chain round (an honest node plays 2 at 20-s rounds)
LIAR_LOGPROB = -20  # nats: what a logprob-liar claims of every token it sampled
LIAR_ROUNDS = 16  # local rounds a logprob-liar samples at most, until one has learning signal
WRONG = "<answer>not the answer</answer>"
CONCENTRATED = 16  # one-item honest local rounds a concentrator samples beside its forged one
FORGED_GROUPS = 256  # farmed groups in a concentrator's forged local round (as the batch allows)
# a splitter samples local rounds (at most LIAR_ROUNDS) until it has forged one row and
# SPLIT_MIXED other groups have learning signal, so that the forged share of its signal is small
SPLIT_MIXED = 3


def max_claim(rollouts: int, completions: int) -> tuple[int, int]:
    """The (score, signal) a claim of `rollouts` completions in groups of `completions` can
    carry at most while still looking like a batch: half of each group correct."""
    groups = max(1, rollouts // completions)
    half = [SCORE_SCALE] * (completions // 2) + [0] * (completions - completions // 2)
    return sum(half) * groups, group_signal(half) * groups


class Batches:
    """The batch-making strategies of `Adversary` (client.devnet.adversary.node)."""

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
        """Samples local rounds honestly from the seed checkpoint and forges one row of one
        group: in a group whose completions all scored alike (no signal), one completion is
        replaced by a hand-written answer of the other outcome, so the group claims signal it
        never sampled. It samples on (at most LIAR_ROUNDS local rounds) until it has forged a
        row and SPLIT_MIXED other groups have learning signal, submits without serving, and
        once the beacon is known serves unless the forged row is among the rows the drawn
        checkers re-draw (`serve`): when each checker re-drew rows of its own, it served exactly
        when the committee would split, and the honest side that lost was slashed."""
        seed = task_seed(self.chain_id, self.ledger.address, round_, self.address)
        weights, encode = self._weights(round_)
        items = self.cfg.sapo.local_items
        parts: list[LocalRound] = []
        forged: tuple[int, int] | None = None
        mixed = 0  # honest groups with learning signal
        while len(parts) < min(LIAR_ROUNDS, self.limits.max_local_rounds) and (
            forged is None or mixed < SPLIT_MIXED
        ):
            part = self._sample(round_, len(parts), items, weights)
            mixed += sum(len(set(item.rewards)) > 1 for item in part.items)
            if forged is None:
                tasks = draw(local_round_seed(seed, part.k), items, self.catalog)
                for i, (task, item) in enumerate(zip(tasks, part.items, strict=True)):
                    if len(set(item.rewards)) > 1:
                        continue  # mixed already: forging a row here adds no signal
                    row = self._forge_row(task, item, encode)
                    if row is not None:  # else the verifier scored the forgery like the others
                        items_now = [*part.items[:i], row, *part.items[i + 1 :]]
                        part = part.model_copy(update={"items": items_now})
                        forged = (part.k, i)
                        break
            parts.append(part)
        if forged is not None:
            self._hold(round_, parts, {forged})
            return
        self.events.emit(
            Event.ADVERSARY_MOVE,
            f"{self.strategy}: round {round_}: no group to forge a row in; nothing submitted",
            round=round_,
            move="skip",
        )

    @staticmethod
    def _forge_row(task, item: Item, encode) -> Item | None:
        """`item` with its first completion replaced by a hand-written answer of the other
        outcome (a right answer in a group all wrong, else a wrong one), or None when the
        verifier scores that answer like the rest (the group would still have no signal)."""
        right = item.rewards[0] == 0
        text = f"<answer>{reference_answer(task)}</answer>" if right else WRONG
        ids = encode(text)
        row = item.model_copy(
            update={
                "completions": [text, *item.completions[1:]],
                "token_ids": [ids, *item.token_ids[1:]],
                "rewards": [to_units(reward(task, text)), *item.rewards[1:]],
                "logprobs": [[0] * len(ids), *item.logprobs[1:]],
            }
        )
        return None if len(set(row.rewards)) == 1 else row

    def pad(
        self, round_: int, *, local_rounds: int = PADDED, lie: bool = False, honest: bool = False
    ) -> None:
        """Pins and submits a batch it sampled honestly from the seed checkpoint, PADDED local
        rounds long (as many as fit), claiming its learning signal plus an agreement tolerance
        (agree_tolerance_bps of the batch's maximal score). `lie` (a logprob-liar): local
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
