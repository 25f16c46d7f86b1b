"""Adversaries as devnet nodes: each runs one strategy for farming credit on the real path,
registered and staked like any node, with its own store, real transactions and real pins, so that
anyone can re-run the attack table (`python -m scripts.run_attacks`) and read in `sapo audit` and
the TUI what the honest nodes did about it.

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
  whale          a griefer registered with `[devnet].whale_share` of all stake: its seats, not
                 its stake, count, and the appeals that honest producers file overturn what it
                 wins by a draw's luck
  sybil          one of a set of identities (`--adversary sybils`: roles.SYBILS, 3) holding
                 `[devnet].whale_share` of all stake together, split 4:2:1: each free-claims,
                 vouches for the others' claims (a cartel that meets the quorum of distinct
                 addresses by itself) and disputes every honest batch it is drawn for
  stake-mover    a griefer that, as soon as it sees a peer's batch on chain, adds enough stake
                 to hold `[devnet].whale_share` of all stake, and requests it unstaked once it
                 has read its seats: a draw from live stake would give it seats and un-draw
                 honest checkers; it journals the seats it holds beside those its stake of the
                 moment would give it
  padder         samples honestly from the seed checkpoint it names (its completions are the
                 seeded draws: proof of generation passes), PADDED local rounds of them (mostly
                 zero-signal groups), and claims its signal plus an agreement tolerance of the
                 batch's maximal score, which padding widens
  logprob-liar   samples one local round honestly from the seed checkpoint it names (its draws
                 pass the proof), claims its true signal, and writes every token's log-prob
                 as LIAR_LOGPROB nats: to a learner that weighs peers' tokens by its own
                 probability against the producer's ([sapo].external_correction), each of its
                 tokens looks e^20 times likelier under the learner than it was drawn, and is
                 weighed up to the cap (the attack on off-policy learning a batch's log-probs
                 open)
  nan-weights    the mixed farmer's batches, naming and pinning the seed's weights with one value
                 set to NaN: every gap and log-prob difference a checker computes from them is
                 NaN, and a comparison written `gap > eps` would pass a NaN
  poison-token   the mixed farmer's batches, each completion's token ids led by an id past the
                 vocabulary: decoding drops it, so the text check passes, and a teacher-forced
                 pass over it would raise in the checker and in a learner
  baiter         one of a bait set (`--adversary baiters`: roles.BAITERS, 2): each samples and
                 submits honest batches (every check passes) and never appeals; in the last round
                 of the first committee's window on a partner's batch, it disputes it when the
                 set's seats outnumber the seats that agreed, so the batch ends disputed and the
                 honest agreers' votes would be judged lost; an honest agreer's client appeals
                 such a verdict (`appealVote`) and the appeal's committee judges the set's
                 disputes
  concentrator   samples CONCENTRATED one-item local rounds honestly and adds one local round
                 of FORGED_GROUPS farmed groups at full signal; it submits without serving and,
                 once its beacon is known, withholds the whole batch when a forged group is
                 opened (checkers vote "unavailable": no credit, no slash), serves it otherwise
  splitter       samples local rounds honestly (at most LIAR_ROUNDS) until it has forged one
                 row (a completion of the other outcome, so that a group with no signal claims
                 some) and SPLIT_MIXED other groups have learning signal; once its beacon is
                 known it serves unless the forged row is re-drawn: a producer that could
                 serve exactly the checkers who would not re-draw it would split them

What each met when last run, and why: docs/credit.md (the attack table) and docs/results/.

Farmers fill their batches as an honest node's full batch is filled (the batch limits and
`[sapo].local_items` questions a local round, `[sapo].completions` each), and make them look
generated as well as they can without sampling: they declare the swarm's seed model, name its
weights as every local round's checkpoint and pin them (so checkers can fetch every opening), and
write each completion's token ids as the seed tokenizer encodes its text. None of them samples.
"""

from client.devnet.adversary.batches import max_claim
from client.devnet.adversary.node import Adversary

__all__ = ["Adversary", "max_claim"]
