"""A devnet's light nodes (client.devnet.light) without a chain: their families, their roster, the
refusal of too few of them, and how `devnet status` says what they did. The light nodes on a
running devnet are tests/swarm/test_devnet_rootlane.py's."""

from __future__ import annotations

from pathlib import Path

from eth_account import Account

from client.cli.devnet_view import describe_lights
from client.devnet.light import (
    FAMILY_SIZE,
    LightStatus,
    Roster,
    family_sizes,
    light_families,
    light_key,
)
from client.devnet.provision import light_quorum_problem
from client.devnet.state import BOOK_CREDITS as KEPT
from client.devnet.status import keep_credits, kept_credits
from client.node.aggregation.claims import Known


def test_light_nodes_split_into_families_of_at_most_family_size_and_as_even_as_can_be() -> None:
    assert family_sizes(4) == [4] and family_sizes(FAMILY_SIZE) == [FAMILY_SIZE]
    assert family_sizes(250) == [84, 83, 83]
    assert sum(family_sizes(10_000)) == 10_000 and max(family_sizes(10_000)) == FAMILY_SIZE
    ids = light_families(250)
    assert len(set(ids)) == 3 and all(len(f) == 66 and f.startswith("0x") for f in ids)
    assert light_families(FAMILY_SIZE + 1)[:1] == light_families(4)  # the same ids, whatever N


def test_a_roster_is_the_seeds_keys_addresses_and_reads_back_as_written(tmp_path: Path) -> None:
    seed = bytes(range(32))
    roster = Roster.of(seed, 250)
    assert roster == Roster.of(seed, 250) and roster != Roster.of(bytes(32), 250)
    assert len(set(roster.addresses)) == 250
    assert roster.addresses[7] == Account.from_key(light_key(seed, 7)).address
    ids = light_families(250)
    assert [roster.families.count(f) for f in ids] == family_sizes(250)
    roster.save(tmp_path / "lights.json")
    assert Roster.load(tmp_path / "lights.json") == roster
    assert "key" not in (tmp_path / "lights.json").read_text()  # public: addresses only


def test_too_few_light_nodes_for_the_quorum_are_refused_with_what_to_run() -> None:
    problem = light_quorum_problem(2, 2)
    assert problem is not None and "run at least 3 light nodes" in problem
    assert light_quorum_problem(3, 2) is None
    assert light_quorum_problem(FAMILY_SIZE + 1, 3) is None  # families of 51 and 50


def test_devnet_status_says_what_the_light_nodes_did_and_what_the_book_credits_them(
    tmp_path: Path,
) -> None:
    said = LightStatus(count=4, round=9, submitted=30, voted=79, refused=0)
    said.add(submitted=6)  # the submissions' loop and the votes' count alike
    said.add(voted=1, equivocated=1)
    assert (said.count, said.submitted, said.voted, said.refused) == (4, 36, 80, 0)
    assert said.equivocated == 1
    said.save(tmp_path / "status.json")
    assert LightStatus.load(tmp_path / "status.json") == said
    (tmp_path / "broken.json").write_text("{")
    assert LightStatus.load(tmp_path / "broken.json") is None
    view = {
        "count": 4,
        "families": 1,
        "running": True,
        "round": 9,
        "submitted": 36,
        "voted": 80,
        "refused": 0,
        "equivocated": 1,
        "problem": "aggregator 0xab… lists no endpoint yet",
        "credited_in_book": 1_920_000,
        "credited_nodes": 4,
    }
    line = describe_lights(view)
    assert line.startswith("light 4 light nodes in 1 families (running): round 9")
    assert "36 submissions and 80 votes held by the aggregator, 0 refused" in line
    assert "(1 second votes of equivocators kept as evidence)" in line
    assert "4 of them credited in the book, 192.0000 in all" in line  # as the nodes' credit
    assert "the last pass stopped: aggregator 0xab… lists no endpoint yet" in line


def test_devnet_status_keeps_the_standing_rounds_credits_for_its_own_book_only(
    tmp_path: Path,
) -> None:
    path = tmp_path / KEPT
    assert kept_credits(path, "0xbook@1") == Known()  # nothing kept yet
    known = Known(
        final={3: {"0xaa": 5}, 7: {"0xaa": 2, "0xbb": 9}, 9: {}},
        read={10: {"0xbb": 4}},  # read, not standing yet
        # digests: of a list read (not needed again), of one still to read, of a round before
        lists={10: b"\x03" * 32, 11: b"\x02" * 32, 4: b"\x01" * 32},
    )
    keep_credits(path, "0xbook@1", known, first=5)
    # rounds before the day's first are out of every later day: not kept
    assert kept_credits(path, "0xbook@1") == Known(
        final={7: {"0xaa": 2, "0xbb": 9}, 9: {}},
        read={10: {"0xbb": 4}},
        lists={11: b"\x02" * 32},
    )
    # another devnet in the same directory (a new book, or the same address on a new chain)
    assert kept_credits(path, "0xbook@2") == Known()
    assert kept_credits(path, "0xother@1") == Known()
    for broken in (
        "{",
        '{"key": "0xbook@1", "rounds": {"x": {}}}',
        '{"key": "0xbook@1", "rounds": {}, "read": {"5": {"0xaa": "x"}}}',
        "[]",
        '{"key": "0xbook@1", "rounds": {}, "lists": {"4": "0xzz"}}',
        '{"key": "0xbook@1", "rounds": {}, "lists": {"4": "01"}}',  # not a 32-byte digest
    ):
        path.write_text(broken)
        assert kept_credits(path, "0xbook@1") == Known(), broken  # read again, never half
    # a directory it cannot write to (here: gone) only costs the next call the reads
    keep_credits(tmp_path / "gone" / KEPT, "0xbook@1", known, first=0)
    assert not (tmp_path / "gone").exists()
