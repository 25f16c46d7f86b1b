"""`sapo audit`: anyone's view of the record, from contract queries and events alone."""

from __future__ import annotations

from typing import Annotated

import typer
from eth_utils import is_address
from rich.markup import escape
from rich.table import Table

from client.chain.audit import Auditor
from client.cli.audit_view import submission_json, submissions_table
from client.cli.chain_ctx import (
    FROM_CONFIG,
    ChainOpts,
    chain_errors,
    chain_options,
    open_book,
)
from client.cli.console import Exit, JsonOption, fail, out, print_json
from client.config.models import format_ether as ether
from client.config.models import format_score
from client.config.models import format_score as score
from client.credit import describe_findings
from client.store.cid import digest_to_cid
from client.text import printable

app = typer.Typer(no_args_is_help=True)  # help: client.cli.main.COMMANDS

AddressArg = Annotated[str, typer.Argument(help="Node address (0x…).")]
RoundArg = Annotated[int, typer.Argument(min=0, help="Round number.")]


_VOTE_TEXT = {
    "agree": "agrees",
    "dispute": "[red]DISPUTES[/]",
    "unavailable": "[yellow]unavailable[/]",
}


def _auditor(chain) -> Auditor:
    _, bound, reader = chain.open()
    return Auditor(bound, reader)


@app.command("round")
@chain_options(keystore=False)
def round_(
    number: RoundArg,
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Every submission of a round with its votes (agreeing, disputing, unavailable) and credit."""
    auditor = _auditor(chain)
    with chain_errors():
        report = auditor.round(number)
    if as_json:
        print_json(
            {
                "round": report.round,
                "final": report.final,
                "total_credited": report.total_credited,
                "submissions": [submission_json(s) for s in report.submissions],
            }
        )
        return
    state = "final" if report.final else "open to attestations"
    out.print(submissions_table(f"round {number} ({state})", report.submissions))
    out.print(f"total credited: {score(report.total_credited)}")


@app.command("submission")
@chain_options(keystore=False)
def submission(
    number: RoundArg,
    address: AddressArg,
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """One submission: digest/CID, claims, votes, outcome and why; who was drawn to check it."""
    auditor = _auditor(chain)
    with chain_errors():
        report = auditor.submission(number, address)
    if as_json:
        print_json(
            {
                **submission_json(report.submission),
                "final": report.final,
                "quorum": report.quorum,
                "checkers": report.checkers,
                "seats": report.seats,
                "appeal_seats": report.appeal_seats,
                "beacon_ready": report.beacon_ready,
                "why_not_credited": report.why_not_credited,
                "attestation_list": [
                    {**a.model_dump(), "findings_text": describe_findings(a.findings)}
                    for a in report.attestations
                ],
            }
        )
        return
    if not report.submission.exists:
        out.print(f"no submission of {address} in round {number}")
        return
    out.print(submissions_table(f"round {number}", [report.submission]))
    voted = {a.attester.lower() for a in report.attestations if a.committee == "first"}
    appealed = report.submission.appeal_block > 0
    table = Table(title=f"votes (quorum {report.quorum} agreeing)")
    columns = ("checker", "committee", "vote", "score", "signal", "findings", "block", "tx")
    for column in columns if appealed else (c for c in columns if c != "committee"):
        table.add_column(column)
    for a in report.attestations:
        table.add_row(
            a.attester,
            *([a.committee] if appealed else []),
            {"agree": "agrees", "dispute": "[red]DISPUTES[/]"}.get(
                a.vote, "[yellow]unavailable[/]"
            ),
            score(a.score) if a.vote != "unavailable" else "-",
            score(a.signal) if a.vote != "unavailable" else "-",
            describe_findings(a.findings) or "-",
            str(a.block_number),
            a.tx_hash,
        )
    out.print(table)
    if not report.beacon_ready:
        out.print(
            "checkers: not drawn yet (the submission's beacon block is not mined, or went stale)"
        )
    else:
        silent = [c for c in report.checkers if c.lower() not in voted]
        out.print(
            f"checkers drawn: {len(report.checkers)} holding {sum(report.seats.values())} "
            f"of {report.seats_total} seats; voted: {len(voted)}"
            + (f"; not voted yet: {', '.join(silent)}" if silent else "")
        )
    if appealed:
        appeal = report.submission.appeal
        on_appeal = {a.attester.lower() for a in report.attestations if a.committee == "appeal"}
        out.print(
            f"appealed in block {report.submission.appeal_block}: its committee decides"
            + (
                f"; drawn: {len(report.appeal_seats)} holding "
                f"{sum(report.appeal_seats.values())} of {report.appeal_seats_total} seats; "
                f"voted: {len(on_appeal)} ({appeal.agree_seats} agreeing seats, "
                f"{appeal.dispute_seats} disputing, {appeal.unavailable_seats} unavailable)"
                if appeal is not None and appeal.ready
                else " (its beacon is not known yet)"
            )
        )
    if report.why_not_credited:
        state = "earns nothing" if report.final else "earns nothing yet"
        out.print(f"[yellow]{state}:[/] {report.why_not_credited}")
    else:
        out.print(f"credited: learning signal {score(report.submission.credited)}")


@app.command("node")
@chain_options(keystore=False)
def node(
    address: AddressArg,
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """A node's stake, submissions (claimed vs credited), attestations and payouts."""
    auditor = _auditor(chain)
    with chain_errors():
        report = auditor.node(address)
    if as_json:
        data = report.model_dump()
        data["submissions"] = [submission_json(s) for s in report.submissions]
        print_json(data)
        return
    info = report.info
    out.print(
        f"node {info.address}: "
        + (f"registered in model family {info.family}" if info.registered else "not registered")
    )
    out.print(
        f"  stake {ether(info.active_stake)} active, {ether(info.unbonding)} unbonding; "
        f"paid {ether(info.total_paid)}; metadata {escape(printable(info.metadata)) or '-'}"
    )
    out.print(
        f"  {len(report.submissions)} submissions: score {score(report.total_score)}, "
        f"learning signal claimed {score(report.total_signal)}, credited "
        f"{score(report.total_credited)}"
    )
    out.print(submissions_table("submissions", report.submissions, first="round"))
    received = [a.vote for a in report.attestations_received]
    out.print(
        f"  votes received: {len(received)} ({received.count('agree')} agreeing, "
        f"{received.count('dispute')} disputing, {received.count('unavailable')} unavailable); "
        f"given: {len(report.attestations_given)}; payouts: {len(report.payouts)}"
    )


@app.command("leaderboard")
@chain_options(keystore=False)
def leaderboard(
    first: Annotated[
        int | None,
        typer.Option("--from", min=0, help="First round [default: a day of rounds before --to]."),
    ] = None,
    last: Annotated[
        int | None, typer.Option("--to", min=0, help="Last round [default: the current one].")
    ] = None,
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Nodes ranked by credited learning signal over a range of rounds (the last day's by
    default), with what each was paid over all rounds. It reads only the blocks of those
    rounds: --from 0 reads every block since the deploy."""
    auditor = _auditor(chain)
    with chain_errors():
        if first is None:
            first, last = auditor.day_of_rounds(last)
        elif last is None:
            last = auditor.ledger.current_round()
        rows = auditor.leaderboard(first, last)
    if as_json:
        print_json({"from": first, "to": last, "nodes": [r.model_dump() for r in rows]})
        return
    table = Table(title=f"leaderboard, rounds {first}-{last}")
    columns = (
        "#",
        "node",
        "submissions",
        "signal claimed",
        "credited",
        "uncredited",
        "paid, all rounds",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "node" else "right")
    for rank, r in enumerate(rows, 1):
        table.add_row(
            str(rank),
            r.node,
            str(r.submissions),
            score(r.claimed),
            score(r.credited),
            str(r.uncredited),
            ether(r.paid),
        )
    out.print(table)
    if not rows:
        out.print(f"  no submissions in rounds {first}-{last}")


@app.command("verify")
@chain_options(keystore=False)
def verify(
    round_: RoundArg,
    address: AddressArg,
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Re-verify a submission: fetch its batch by the on-chain digest, regenerate every task
    from the seed, re-score every completion; exit 1 on any mismatch."""
    # lazily: re-verifying loads the task generators (reasoning-gym) and the store, which the
    # other audit commands do without
    from client.chain.events import EventReader
    from client.node.rollouts import task_seed, verify_batch
    from client.store import StoreError, fetch_from_peers, open_store
    from client.store.exchange import Sources
    from client.store.peers import peer_addresses
    from client.tasks import CatalogError, check_against_ledger, load_catalog

    cfg, bound, _ = chain.open()
    private = cfg.store.allow_private_peers
    with chain_errors():
        sub = bound.submission(round_, address)
        chain_id = bound.w3.eth.chain_id
    if not sub.exists:
        fail(
            f"{address} has no submission in round {round_} (who submitted: sapo audit round "
            f"{round_})",
            Exit.CHECK_FAILED,
        )
    try:
        catalog = load_catalog(cfg.tasks.catalog)
        check_against_ledger(catalog, bound.params().catalog_digest)
    except CatalogError as exc:
        fail(str(exc))
    try:
        # from the producer's IPFS node, else from a peer who agreed with it (it fetched and
        # pins it): a batch whose producer left can still be re-scored
        def attesters() -> list:
            with chain_errors():
                agreed = [
                    e.args["attester"]
                    for e in EventReader(
                        bound,
                        chunk_blocks=cfg.chain.log_chunk_blocks,
                        start_block=cfg.chain.ledger_deploy_block,
                    ).read(["Attested"], round=round_, node=address)
                    if e.args["agrees"]
                ]
                return [
                    (n, peer_addresses(bound.node_info(n).metadata, allow_private=private))
                    for n in agreed[:3]
                ]

        with chain_errors():
            producer = peer_addresses(bound.node_info(address).metadata, allow_private=private)
        sources = Sources([(address, producer)], attesters)
        batch, source = fetch_from_peers(
            open_store(cfg.store),
            sub.digest,
            sources,
            connect_timeout_s=cfg.store.connect_timeout_s,
            chain_id=chain_id,
            ledger=bound.address,
            round_=round_,
            node=address,
        )
    except StoreError as exc:
        fail(f"batch {digest_to_cid(sub.digest)} cannot be verified: {exc}", Exit.CHECK_FAILED)
    check = verify_batch(batch, catalog, task_seed(chain_id, bound.address, round_, address))
    mismatch = (
        not check.valid
        or check.recomputed != sub.score
        or batch.score != sub.score
        or check.recomputed_signal != sub.signal
        or batch.signal != sub.signal
    )
    if as_json:
        print_json(
            {
                "round": round_,
                "node": address,
                "cid": digest_to_cid(sub.digest),
                "source": source,
                "claimed_on_chain": sub.score,
                "claimed_in_batch": check.claimed,
                "recomputed": check.recomputed,
                "signal_on_chain": sub.signal,
                "signal_in_batch": check.claimed_signal,
                "signal_recomputed": check.recomputed_signal,
                "findings": describe_findings(check.findings),
                "valid": check.valid,
                "reason": check.reason,
                "ok": not mismatch,
                "items": [
                    {
                        "index": c.index,
                        "entry": c.entry,
                        "claimed": c.claimed,
                        "recomputed": c.recomputed,
                        "problem": c.problem,
                    }
                    for c in check.items
                ],
            }
        )
    else:
        table = Table(title=f"round {round_}  node {address}  batch {digest_to_cid(sub.digest)}")
        for column in ("item", "task", "claimed", "recomputed", ""):
            table.add_column(
                column, justify="right" if column in ("claimed", "recomputed") else "left"
            )
        for c in check.items:
            flag = c.problem or ("" if c.claimed == c.recomputed else "[red]differs[/]")
            table.add_row(str(c.index), c.entry, score(c.claimed), score(c.recomputed), flag)
        table.add_row(
            "total",
            "",
            score(sub.score),
            score(check.recomputed),
            "" if not mismatch else "[red]MISMATCH[/]",
            end_section=True,
        )
        table.add_row(
            "learning signal",
            "",
            score(sub.signal),
            score(check.recomputed_signal),
            "" if check.recomputed_signal == sub.signal else "[red]MISMATCH[/]",
        )
        out.print(table)
        if source.lower() != address.lower():
            out.print(f"fetched from {source}, who agreed with it (its producer did not give it)")
        if check.reason:
            out.print(f"[red]invalid batch:[/] {escape(printable(check.reason))}", markup=True)
        out.print(
            "verified: the claim holds" if not mismatch else "[red]the claim does not hold[/]"
        )
    if mismatch:
        raise typer.Exit(int(Exit.CHECK_FAILED))


@app.command("book")
@chain_options(keystore=True)
def book(
    round_: RoundArg,
    prove: Annotated[
        bool,
        typer.Option("--prove", help="Send the call that proves the lie found (a keystore's)."),
    ] = False,
    challenge: Annotated[
        bool,
        typer.Option(
            "--challenge",
            help="With --prove: also ask on chain for a list that cannot be fetched (bonds the "
            "book's challenge bond; a list may be slow to come: try again first).",
        ),
    ] = False,
    earnings: Annotated[
        bool,
        typer.Option(
            "--earnings",
            help="Also check every credit's earnings (what a claim from it pays for the rounds "
            "before): folds every credit of the standing rounds --since..ROUND - lag, each list "
            "fetched (a credit anchored before --since is not judged).",
        ),
    ] = False,
    since: Annotated[
        int | None,
        typer.Option(
            "--since",
            min=0,
            metavar="ROUND",
            help="With --earnings: the first round folded (default: the 4 lag rounds up to "
            "ROUND - lag, the last one settled for ROUND).",
        ),
    ] = None,
    escalate: Annotated[
        str | None,
        typer.Option(
            "--escalate",
            metavar="PRODUCER",
            help="Take PRODUCER's batch of the round to the ledger with this checker's vote (a "
            "checker drawn on its committee that disputes it: --score and --signal, what it "
            "recomputed; or cannot fetch it: --unavailable). Needs the keystore.",
        ),
    ] = None,
    score: Annotated[
        int | None, typer.Option("--score", min=0, help="With --escalate: the score recomputed.")
    ] = None,
    signal: Annotated[
        int | None,
        typer.Option("--signal", min=0, help="With --escalate: the learning signal recomputed."),
    ] = None,
    findings: Annotated[
        int,
        typer.Option("--findings", min=0, max=65535, help="With --escalate: the findings bits."),
    ] = 0,
    unavailable: Annotated[
        bool,
        typer.Option("--unavailable", help="With --escalate: the batch could not be fetched."),
    ] = False,
    chain: ChainOpts = FROM_CONFIG,
    as_json: JsonOption = False,
) -> None:
    """Audit a round of the root lane's round book: fetch its two lists by their posted digests,
    check every rule the book proves, and name the first lie (exit 1), or send its proof; or, with
    --escalate, take a batch its committee disputes to the ledger."""
    # lazily: the root lane's code and the store load only for this command
    from client.chain.events import EventReader
    from client.chain.messages import Domain
    from client.node.aggregation.auditor import Auditor, v4_producers
    from client.node.aggregation.lists import ListUnavailable, fetch_list
    from client.store import IpfsStore, StoreError, open_store
    from client.store.peers import peer_addresses

    if escalate is not None and not is_address(escalate):
        fail(f"--escalate: {escalate!r} is not an address (0x and 40 hex digits)")
    if since is not None and not earnings:
        fail("--since goes with --earnings")
    vote = _escalation_vote(escalate, score, signal, findings, unavailable)
    cfg, ledger, reader = chain.open(signer=prove or escalate is not None)
    with chain_errors():
        rb = open_book(cfg, ledger, why="to audit")
        posted = rb.round_of(round_)
        if not posted.posted:
            fail(f"round {round_}: no submission root is posted in {rb.address}", Exit.CHECK_FAILED)
        params = ledger.params()
        book_events = EventReader(
            rb,  # type: ignore[arg-type]
            chunk_blocks=cfg.chain.log_chunk_blocks,
            start_block=cfg.chain.round_book_deploy_block,
        )
        digests = {
            e.name: bytes.fromhex(e.args["list"][2:])
            for e in book_events.read(["SubmissionsPosted", "VerdictsPosted"], round=round_)
        }
        metadata = ledger.node_info(posted.aggregator).metadata
        chain_id = ledger.w3.eth.chain_id
    try:
        store = open_store(cfg.store)
        if isinstance(store, IpfsStore):  # dial the aggregator's daemon, as a producer's
            found = peer_addresses(metadata, allow_private=cfg.store.allow_private_peers)
            if found.dialable:
                store.connect(list(found.dialable))
    except StoreError as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    fetched: dict[str, str] = {}

    def listed(kind: str, event: str, entries: int) -> bytes | None:
        digest = digests.get(event)
        if digest is None or digest == bytes(32):
            fetched[kind] = "none posted"
            return None
        try:
            data = fetch_list(store, digest_to_cid(digest), kind, round_, entries, keep_round=None)
        except ListUnavailable as exc:
            fetched[kind] = f"not fetched: {exc}"
            return None
        fetched[kind] = f"{len(data):,} bytes"
        return data

    auditor = Auditor.of(Domain(chain_id=chain_id, contract=rb.address), ledger, params)
    with chain_errors():
        entries, finding = auditor.submissions(
            posted, listed("submissions", "SubmissionsPosted", posted.count)
        )
    if escalate is not None:
        assert vote is not None  # checked with --escalate above
        _escalate(rb, ledger, auditor, posted, entries, finding, escalate, vote, fetched, as_json)
        return
    folded: tuple[int, int] | None = None  # the rounds whose credits --earnings folded
    unchecked: str | None = None  # why --earnings could not fold them
    with chain_errors():
        earned = None
        if finding is None and earnings and posted.verdicts_posted and posted.credits:
            from client.chain.book import Windows
            from client.node.aggregation.claims import Claimant, NoClaim

            lag = Windows.of(params).lag
            last = round_ - lag
            first = max(0, last - 4 * lag + 1) if since is None else since
            if last < max(first, 0):
                fail(
                    f"--earnings: no round is settled for round {round_} from round {first} on "
                    f"(its earnings count rounds up to {last}, lag {lag}): give an earlier "
                    "--since, or a later round"
                )
            claimant = Claimant.of(cfg, ledger, rb, store)
            try:
                earned = claimant.earnings_book(first, last)
                folded = (first, last)
            except NoClaim as exc:  # the round's own rules are still checked below
                unchecked = str(exc)
        if finding is None and posted.verdicts_posted and posted.credits:
            data = listed("verdicts", "VerdictsPosted", posted.credits)
            finding = auditor.verdicts(
                posted, entries, data, earned, v4=v4_producers(ledger, reader, round_)
            )
    state = "void" if posted.void else ("released" if posted.released else "open")
    sent = None
    if finding is not None and prove and (challenge or not finding.challenge):
        with chain_errors():
            bond = rb.bonds()[1] if finding.challenge else 0
            sent = rb.call(finding.function, finding.args, value=bond)
    if as_json:
        print_json(
            {
                "round": round_,
                "book": rb.address,
                "aggregator": posted.aggregator,
                "submissions": posted.count,
                "credits": posted.credits,
                "total": posted.total,
                "state": state,
                "lists": fetched,
                "earnings_folded": folded,
                "earnings_unchecked": unchecked,
                "finding": None
                if finding is None
                else {
                    "what": finding.what,
                    "function": finding.function,
                    "challenge": finding.challenge,
                },
                "tx_hash": None if sent is None else sent.tx_hash,
            }
        )
    else:
        out.print(
            f"round {round_} of round book {rb.address}: aggregator {posted.aggregator}, "
            f"{posted.count} submissions, {posted.credits} credits, "
            f"total {format_score(posted.total)}, {state}"
        )
        for kind, how in fetched.items():
            out.print(f"  {kind} list: {escape(how)}")
        if finding is None and unchecked is not None:
            out.print(
                "  every rule the book proves holds but the earnings, which --earnings could not "
                f"check: {escape(unchecked)}"
            )
        elif finding is None and folded is not None:
            out.print(
                "  every rule the book proves holds (earnings checked against every credit of "
                f"rounds {folded[0]}..{folded[1]})"
            )
        elif finding is None:
            out.print(
                "  every rule the book proves holds (earnings not checked: --earnings folds "
                "the rounds before)"
            )
        elif finding.challenge:
            out.print(f"  [yellow]data to ask for[/]: {escape(finding.what)} ({finding.function})")
        else:
            out.print(f"  [red]LIE[/]: {escape(finding.what)} ({finding.function} proves it)")
        if sent is not None:
            out.print(f"  sent {finding.function} in {sent.tx_hash}")
        elif finding is not None and prove and finding.challenge:
            out.print("  not asked for: pass --challenge to bond a data challenge")
    if (finding is not None and sent is None) or unchecked is not None:
        raise typer.Exit(Exit.CHECK_FAILED)


@app.command("watch")
@chain_options(keystore=True)
def watch(
    since: Annotated[
        int | None,
        typer.Option(
            "--since",
            min=0,
            metavar="ROUND",
            help="The first round folded into earnings (default: the oldest round whose "
            "challenge window is still open, less twice the lag rounds a credit's earnings "
            "name); a credit's earnings are judged once the lag rounds up to its anchor are "
            "folded.",
        ),
    ] = None,
    prove: Annotated[
        bool,
        typer.Option("--prove", help="Send the proof of each lie found (a keystore's)."),
    ] = False,
    chain: ChainOpts = FROM_CONFIG,
) -> None:
    """Watch the root lane's round book until Ctrl-C / SIGTERM: audit every verdict root as it
    is posted (every credit's votes, seats and amount, and its earnings against every round
    folded since --since, which a training node does not check of others' credits) and name each
    lie, or, with --prove, send its proof; a list missing by the last rounds of its window is
    named (`sapo audit book ROUND --prove --challenge` asks for it). Reads every list of every
    round."""
    from client.cli.console import serve_until_signalled

    cfg, ledger, _ = chain.open(signer=prove)
    stop = serve_until_signalled(cfg.node.log_level, "sapo.watch", "stopping after this pass…")
    # lazily: the root lane's code and the store load only for this command
    from client.chain import ChainError
    from client.chain.book import Windows
    from client.chain.messages import Domain
    from client.node.aggregation.auditor import Auditor as BookAuditor
    from client.node.aggregation.service import POLL_S
    from client.node.aggregation.watch import Watcher
    from client.store import StoreError, open_store

    with chain_errors():
        rb = open_book(cfg, ledger, why="to watch")
        params = ledger.params()
        windows = Windows.of(params)
        if since is None:
            oldest = ledger.current_round() - windows.challenge_end(0)
            since = max(0, oldest - 2 * windows.lag + 1)
        domain = Domain(chain_id=ledger.w3.eth.chain_id, contract=rb.address)
    try:
        store = open_store(cfg.store)
    except StoreError as exc:
        fail(str(exc), Exit.CHECK_FAILED)
    with chain_errors():
        watcher = Watcher(
            ledger,
            rb,
            store,
            BookAuditor.of(domain, ledger, params),
            since=since,
            prove=prove,
            allow_private_peers=cfg.store.allow_private_peers,
            start_block=cfg.chain.round_book_deploy_block,
            chunk_blocks=cfg.chain.log_chunk_blocks,
        )
    out.print(f"watching round book {rb.address} from round {since} (Ctrl-C stops)")
    while not stop.is_set():
        try:
            for audited in watcher.tick():
                style = None if audited.finding is None else "red"
                out.print(audited.describe(), style=style, markup=False)
        except (ChainError, StoreError) as exc:  # the chain or the store did not answer
            out.print(f"this pass stopped: {exc}; again in {POLL_S:.0f} s", markup=False)
        stop.wait(POLL_S)


def _escalation_vote(escalate, score, signal, findings: int, unavailable: bool):
    """The vote --escalate carries (None without --escalate); exits 2 on flags that do not make
    one: a dispute needs both values recomputed, unavailable none."""
    from client.chain.book import EscalationVote

    dispute = score is not None or signal is not None or findings != 0
    if escalate is None:
        if dispute or unavailable:
            fail("--score, --signal, --findings and --unavailable go with --escalate")
        return None
    if unavailable == dispute:
        fail(
            "--escalate needs the checker's vote: --unavailable (it could not fetch the batch), "
            "or --score and --signal (what it recomputed, disputing the claim)"
        )
    if unavailable:
        return EscalationVote(unavailable=True)
    if score is None or signal is None:
        fail("a dispute needs both --score and --signal: the values this checker recomputed")
    return EscalationVote(unavailable=False, score=score, signal=signal, findings=findings)


def _escalate(
    rb, ledger, auditor, posted, entries, finding, producer: str, vote, fetched, as_json
) -> None:
    """Sends RoundBook.escalate for `producer`'s batch of the round, with `vote`, from the
    checked list."""
    from client.chain.book import Windows

    if not fetched.get("submissions", "").endswith("bytes"):
        fail(
            f"round {posted.round}: the submission list could not be fetched "
            f"({fetched.get('submissions')}); try again, or challenge it (--prove --challenge)",
            Exit.CHECK_FAILED,
        )
    if finding is not None:  # a lie in the list: prove it (the batches fall with the root)
        fail(
            f"round {posted.round}: the submission list is not the root's ({finding.what}): "
            "prove it (--prove) instead of escalating from it",
            Exit.CHECK_FAILED,
        )
    windows = Windows.of(ledger.params())
    with chain_errors():
        current = ledger.current_round()
    if not windows.escalation_open(posted.round, current):
        fail(
            f"round {posted.round}: a batch escalates in rounds {windows.post_round(posted.round)}"
            f"..{windows.vote_close(posted.round) - 1} (while the ledger's committee can still "
            f"vote), not in round {current}",
            Exit.CHECK_FAILED,
        )
    args = auditor.escalation(posted, entries, producer)
    if args is None:
        fail(f"round {posted.round}: the submission list holds no batch of {producer}")
    with chain_errors():
        sent = rb.escalate(*args, vote)
    said = "unavailable" if vote.unavailable else "dispute"
    if as_json:
        print_json(
            {
                "round": posted.round,
                "producer": producer,
                "index": args[1],
                "vote": said,
                "tx_hash": sent.tx_hash,
            }
        )
        return
    out.print(
        f"escalated {producer}'s batch of round {posted.round} (place {args[1]} of the list) "
        f"to the ledger with this checker's {said} vote in {sent.tx_hash}: its committee, the "
        "one the book drew, votes on it there"
    )
