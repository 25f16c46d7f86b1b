"""What `sapo devnet status` shows: a starting devnet's stage (with its seed build's progress), or
each node of a running one: its progress and shares of time from its journal (through
client.node's read model), its credited total from the chain, and a peer outage if it has one.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from client.chain import ChainError, Ledger, connect
from client.chain.audit import Auditor
from client.chain.book import RoundBook
from client.chain.events import EventReader
from client.config import ConfigError, load_config
from client.devnet.control import seed_build_progress
from client.devnet.light import STATUS, LightStatus, Roster
from client.devnet.state import BOOK_CREDITS, DevnetState
from client.node.aggregation.claims import Claimant, Known, NoClaim
from client.node.view.journal import NodeView
from client.pids import pid_alive
from client.store import StoreError, open_store


def starting_view(state: DevnetState) -> dict:
    """Returns what a starting devnet is doing: its stage, and its seed build's progress."""
    view = {
        "status": "starting",
        "stage": state.stage,
        "supervisor_pid": state.supervisor_pid,
        "seconds": round(time.time() - state.started_at),
    }
    if build := seed_build_progress(state):
        view["build"] = {
            "policy": build.policy,
            "stage": build.stage,
            "step": build.step,
            "steps": build.steps,
            "loss": build.loss,
            "eta_s": build.eta_s,
            "builder_pid": build.builder_pid,
            "resumed_from": build.resumed_from,
            "text": build.describe(),
        }
    return view


def kept_credits(path: Path, key: str) -> Known:
    """What `devnet status` kept of the book's rounds (Claimant.credited's `known`), if `path`
    holds it for `key` (the book and the ledger's genesis: a new devnet in the same directory
    starts with nothing). A file that cannot be read: nothing, so the rounds are read again."""
    try:
        data = json.loads(path.read_text())
        if data["key"] != key:
            return Known()

        def credits(rounds: dict) -> dict[int, dict[str, int]]:
            return {
                int(q): {str(a).lower(): int(v) for a, v in credited.items()}
                for q, credited in rounds.items()
            }

        lists = {int(q): bytes.fromhex(d) for q, d in data.get("lists", {}).items()}
        if any(len(d) != 32 for d in lists.values()):
            return Known()
        return Known(credits(data["rounds"]), credits(data.get("read", {})), lists)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return Known()


def keep_credits(path: Path, key: str, known: Known, first: int) -> None:
    """Writes what `known` holds of the rounds from `first` on (older ones are out of every
    later day; Known.since) whole, by rename; a directory it cannot write to only costs the next
    call the reads."""
    kept = known.since(first)
    data = {
        "key": key,
        "rounds": {str(q): c for q, c in sorted(kept.final.items())},
        "read": {str(q): c for q, c in sorted(kept.read.items())},
        "lists": {str(q): d.hex() for q, d in sorted(kept.lists.items())},
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def book_credited(
    cfg,
    ledger: Ledger,
    rounds: tuple[int, int],
    unreadable: list[int],
    kept: Path | None = None,
) -> dict[str, int]:
    """What the round book's verdict roots of `rounds` credit each node (lower-case address):
    the verdict lists fetched through the swarm's store (Claimant.credited); the rounds whose
    list cannot be read are skipped and put in `unreadable`. With `kept` (a file), what was
    read is kept there and read from there next time (claims.Known): each list is fetched
    once, not a day of them at every call; a round that does not stand yet costs a `roundOf`
    (whether it stands now, or was voided), and the event walk starts at the newest rounds (a
    list that could not be read is fetched again at each call, by its kept digest)."""
    book = RoundBook(ledger.w3, str(cfg.chain.round_book_address))
    claimant = Claimant.of(cfg, ledger, book, open_store(cfg.store))
    if kept is None:
        return claimant.credited(*rounds, unreadable)
    key = f"{book.address.lower()}@{claimant.params.genesis}"
    known = kept_credits(kept, key)
    credited = claimant.credited(*rounds, unreadable, known)
    keep_credits(kept, key, known, rounds[0])
    return credited


def node_rows(
    state: DevnetState, unreadable: list[int] | None = None, in_book: dict[str, int] | None = None
) -> list[dict]:
    """Returns each node of a running devnet: its progress and shares of time (its journal,
    through the read model), its credited total over the last day of rounds from the chain (the
    blocks of those rounds only: Auditor.leaderboard; in the root lane, with what the round
    book's verdict roots of those rounds credit, `credited_in_book`; 0 while the chain does not
    answer, or answers for another chain id, or has no SwarmLedger of this client at the
    address: Ledger.check, as a node starts), and a peer outage (`peer_outage`, with its `text`)
    when it has one. The book's rounds whose verdict list could not be read go in
    `unreadable`. What the book credits every node (the light nodes too) goes in `in_book`."""
    credited: dict[str, int] = {}
    book: dict[str, int] | None = None  # in the root lane: what the book's verdicts credit
    genesis = round_length = None
    with contextlib.suppress(ChainError, ConfigError, OSError):
        cfg = load_config(state.config)
        ledger = Ledger(
            connect(str(cfg.chain.rpc_url), cfg.chain.request_timeout_s),
            str(cfg.chain.ledger_address),
        )
        params = ledger.check(cfg.chain.chain_id)  # WrongChain is a ChainError
        genesis, round_length = params.genesis, params.round_length
        reader = EventReader(
            ledger,
            chunk_blocks=cfg.chain.log_chunk_blocks,
            start_block=cfg.chain.ledger_deploy_block,
        )
        auditor = Auditor(ledger, reader)
        day = auditor.day_of_rounds()
        board = auditor.leaderboard(*day)
        credited = {row.node.lower(): row.credited for row in board}
        if cfg.chain.round_book_address is not None:  # a devnet in the root lane
            book = {}
            with contextlib.suppress(NoClaim, StoreError):
                book = book_credited(
                    cfg,
                    ledger,
                    day,
                    [] if unreadable is None else unreadable,
                    kept=state.data_dir / BOOK_CREDITS,
                )
            if in_book is not None:
                in_book.update(book)
    rows = []
    for node in state.nodes:
        view = NodeView(node.data_dir)
        summary = view.summary(genesis, round_length, time.time()) if genesis is not None else None
        view.close()
        key = node.address.lower()
        row = {
            "address": node.address,
            "role": str(node.role),  # honest, or its adversary strategy
            "pid": node.pid,
            "running": pid_alive(node.pid),
            "credited": credited.get(key, 0) + (book or {}).get(key, 0),
            **({"credited_in_book": book.get(key, 0)} if book is not None else {}),
            **(asdict(summary) if summary else {}),
        }
        if summary is not None and summary.peer_outage is not None:
            row["peer_outage"]["text"] = summary.peer_outage.describe()
        if node.metrics:
            row["metrics"] = node.metrics
        rows.append(row)
    return rows


def book_proofs(state: DevnetState) -> dict[str, list[dict]]:
    """What was proven on the round book over the last day of rounds (the blocks of those rounds
    only, as the credit is read): the aggregator's lies (LieProven: the round, what, who proved
    it, what it was paid; and its draw's UnpostedProven, a receipted round it posted nothing
    for) and the double votes and submissions slashed (EquivocationProven: a voter that is the
    batch's producer submitted twice). Empty while the chain does not
    answer."""
    found: dict[str, list[dict]] = {"lies_proven": [], "equivocations_proven": []}
    with contextlib.suppress(ChainError, ConfigError, OSError):
        cfg = load_config(state.config)
        if cfg.chain.round_book_address is None:
            return found
        ledger = Ledger(
            connect(str(cfg.chain.rpc_url), cfg.chain.request_timeout_s),
            str(cfg.chain.ledger_address),
        )
        params = ledger.check(cfg.chain.chain_id)
        first, _ = Auditor(ledger, EventReader(ledger)).day_of_rounds()
        start = cfg.chain.round_book_deploy_block
        book = RoundBook(ledger.w3, str(cfg.chain.round_book_address))
        reader = EventReader(book, chunk_blocks=cfg.chain.log_chunk_blocks, start_block=start)  # type: ignore[arg-type]
        since = ledger.block_at(params.round_start(first), start)
        for event in reader.read(["LieProven", "EquivocationProven"], from_block=since):
            a = event.args
            if event.name == "LieProven":
                found["lies_proven"].append(
                    {
                        "round": int(a["round"]),
                        "what": str(a["what"]),
                        "prover": str(a["prover"]),
                        "paid": int(a["paid"]),
                    }
                )
            else:
                found["equivocations_proven"].append(
                    {
                        "round": int(a["round"]),
                        "producer": str(a["producer"]),
                        "signer": str(a["voter"]),
                        "what": "submitted twice"
                        if str(a["voter"]).lower() == str(a["producer"]).lower()
                        else "voted twice",
                        "prover": str(a["prover"]),
                        "slashed": int(a["slashed"]),
                    }
                )
        # a drawn aggregator that receipted and posted nothing (the roster's AggregatorDraw)
        unposted = book.aggregators().events.UnpostedProven().get_logs(from_block=since)
        for event in unposted:
            a = event.args
            found["lies_proven"].append(
                {
                    "round": int(a["round"]),
                    "what": "a receipted round left unposted",
                    "prover": str(a["prover"]),
                    "paid": int(a["paid"]),
                }
            )
    return found


def describe_proofs(proofs: dict[str, list[dict]], names: dict[str, str]) -> list[str]:
    """`devnet status`'s lines of what was proven on the book (`book_proofs`); `names`: a
    node's name (node-0, …) by lower-case address."""

    def name(address: str) -> str:
        return names.get(address.lower(), address)

    lies = proofs["lies_proven"]
    lines = [
        "its lies proven in the last day: "
        + "; ".join(f"round {p['round']}: {p['what']} (by {name(p['prover'])})" for p in lies)
        if lies
        else "no lie of its proven in the last day"
    ]
    doubles = proofs["equivocations_proven"]
    if doubles:
        lines.append(
            "slashed for signing twice in the last day: "
            + "; ".join(
                f"round {p['round']}: {name(p['signer'])} {p['what']}"
                + ("" if p["what"] == "submitted twice" else f" on {name(p['producer'])}'s batch")
                for p in doubles
            )
        )
    return lines


def light_view(state: DevnetState, in_book: dict[str, int]) -> dict | None:
    """The light nodes of a running devnet ([devnet].light): their process, what it says it did
    (client.devnet.light's status.json) and what the book's verdict roots credit them (from
    `in_book`, node_rows's), or None without light nodes."""
    light = state.light
    if light is None:
        return None
    view: dict = {
        "count": light.count,
        "families": light.families,
        "pid": light.pid,
        "running": pid_alive(light.pid),
    }
    with contextlib.suppress(OSError, ValueError, KeyError):
        addresses = {a.lower() for a in Roster.load(light.roster).addresses}
        credits = [in_book.get(a, 0) for a in addresses]
        view["credited_in_book"] = sum(credits)
        view["credited_nodes"] = sum(1 for c in credits if c)
    said = LightStatus.load(light.config.parent / STATUS)
    if said is not None:
        view |= {
            "round": said.round,
            "submitted": said.submitted,
            "voted": said.voted,
            "refused": said.refused,
            "equivocated": said.equivocated,
            "problem": said.problem,
        }
    return view
