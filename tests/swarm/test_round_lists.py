"""A round's published lists through real IPFS daemons (client/node/aggregation/lists.py): the
aggregator pins a list larger than a block on its daemon, a node fetches it over bitswap through
its own daemon, checks it against the posted root and then serves it on; a CID that names
nothing, another round's list, or an index that lies about its size is refused with the reason,
before more than the index is read."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from eth_account import Account

from client.chain.messages import Domain, Signed, Submission
from client.chain.roots import (
    SUBMISSION_BYTES,
    SubmissionRoot,
    open_submission_list,
    submission_list,
)
from client.devnet import IpfsDaemon, start_daemons
from client.node.aggregation.lists import ListIndex, ListUnavailable, fetch_list, publish_list
from client.store import IpfsStore, digest_to_cid
from client.store.peers import ipfs_addresses
from client.store.weights import CHUNK
from client.units import SCORE_SCALE

pytestmark = pytest.mark.slow

DOMAIN = Domain(chain_id=31337, contract="0x5FbDB2315678afecb367f032d93F642f64180aa3")
ROUND = 9
COUNT = 2_800  # 1,075,200 bytes: two blocks of CHUNK


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    root = tmp_path_factory.mktemp("lists")
    a, b = (IpfsDaemon(root / n, host=f"127.0.0.{i + 2}", swarm=True) for i, n in enumerate("ab"))
    start_daemons([a, b])
    try:
        stores = [
            IpfsStore(d.api, index_dir=root / f"index-{i}", timeout_s=4)
            for i, d in enumerate((a, b))
        ]
        dialled, failures = stores[1].connect(
            list(ipfs_addresses(stores[0].peer(), allow_private=True).dialable)
        )
        assert dialled is not None, failures
        yield stores
    finally:
        a.stop()
        b.stop()


def signed_submissions(n: int) -> list[Signed]:
    out = []
    for i in range(n):
        key = Account.from_key(hashlib.sha256(b"list node %d" % i).digest())
        message = Submission(
            round=ROUND,
            digest="0x" + hashlib.sha256(b"batch %d" % i).hexdigest(),
            rollouts=8,
            score=4 * SCORE_SCALE,
            signal=SCORE_SCALE,
        )
        out.append(Signed.sign(message, DOMAIN, key.key))
    return out


def test_a_list_larger_than_a_block_goes_from_the_aggregator_to_a_node_and_on(two) -> None:
    aggregator, node = two
    root = SubmissionRoot(signed_submissions(COUNT))
    data = submission_list(root.signed)
    assert len(data) == COUNT * SUBMISSION_BYTES > CHUNK
    cid = publish_list(aggregator, "submissions", ROUND, data, keep_round=ROUND + 6)
    assert publish_list(aggregator, "submissions", ROUND, data, keep_round=ROUND + 6) == cid
    fetched = fetch_list(node, cid, "submissions", ROUND, COUNT, keep_round=ROUND + 6)
    assert fetched == data
    entries, _ = open_submission_list(fetched, root.root, COUNT)
    assert len(entries) == COUNT
    # the node pinned the index and both chunks: it serves the list through the window
    assert len(node.pins.all()) == 3 and set(node.pins.all().values()) == {ROUND + 6}


def test_a_list_cid_that_names_nothing_usable_is_refused_with_the_reason(two) -> None:
    aggregator, node = two
    data = submission_list(signed_submissions(3))
    cid = publish_list(aggregator, "submissions", ROUND, data, keep_round=ROUND + 6)
    with pytest.raises(ListUnavailable, match=f"not the verdicts list of round {ROUND}"):
        fetch_list(node, cid, "verdicts", ROUND, 3, keep_round=None)
    with pytest.raises(ListUnavailable, match=f"not the submissions list of round {ROUND + 1}"):
        fetch_list(node, cid, "submissions", ROUND + 1, 3, keep_round=None)
    # an index that claims more than the posted count can hold: refused before any chunk is read
    with pytest.raises(ListUnavailable, match="a submissions list of 2 entries holds at most 768"):
        fetch_list(node, cid, "submissions", ROUND, 2, keep_round=None)
    for bad in ["not a cid", "Qm" + "a" * 44]:
        with pytest.raises(ListUnavailable, match="not a raw CIDv1"):
            fetch_list(node, bad, "submissions", ROUND, 3, keep_round=None)
    # a block that is not an index, and an index whose chunk nobody serves
    stray = aggregator.put(b'{"schema": "sapo.list/1"}', ROUND)
    with pytest.raises(ListUnavailable, match=r"is not a sapo\.list/1 index"):
        fetch_list(node, stray, "submissions", ROUND, 3, keep_round=None)
    missing = "0x" + hashlib.sha256(b"withheld").hexdigest()
    index = ListIndex(kind="submissions", round=ROUND, bytes=SUBMISSION_BYTES, chunks=[missing])
    withheld = aggregator.put(index.encode(), ROUND)
    with pytest.raises(ListUnavailable, match=f"chunk 0 .*{digest_to_cid(missing)}.*timed out"):
        fetch_list(node, withheld, "submissions", ROUND, 1, keep_round=None)


def test_a_list_is_published_only_whole(tmp_path: Path) -> None:
    from client.store import LocalStore

    store = LocalStore(tmp_path, max_bytes=1 << 20)
    with pytest.raises(ValueError, match="one of"):
        publish_list(store, "votes", ROUND, b"x", keep_round=ROUND)
    with pytest.raises(ValueError, match="empty list"):
        publish_list(store, "submissions", ROUND, b"", keep_round=ROUND)
