"""Config files and SAPO_* overrides: good files load, bad ones fail naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.config import ConfigError, load_config, masked_rpc_url, public_view
from client.config.models import parse_wei

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("SAPO_"):
            monkeypatch.delenv(name)


def write(tmp_path: Path, text: str, name: str = "node.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["devnet.toml", "testnet.example.toml"])
def test_shipped_configs_load(name: str) -> None:
    config = load_config(REPO / "configs" / name)
    assert config.sapo.completions == 8
    assert config.train.eps_low == 0.2 and config.train.eps_high == 0.28


def test_devnet_config_is_the_papers_best_split() -> None:
    config = load_config(REPO / "configs" / "devnet.toml")
    assert (config.sapo.local_items, config.sapo.external_items) == (4, 4)
    assert config.devnet.nodes == 3
    assert config.ledger.min_stake == 10**18


def test_defaults_without_a_file() -> None:
    config = load_config()
    assert config.store.backend == "ipfs"
    assert config.node.data_dir.is_absolute()


def test_relative_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    sub = tmp_path / "conf"
    sub.mkdir()
    path = write(sub, '[node]\ndata_dir = "../data/n0"\n[chain]\nkeystore = "key.json"\n')
    config = load_config(path)
    assert config.node.data_dir == tmp_path / "data" / "n0"
    assert config.chain.keystore == sub / "key.json"


def test_unknown_key_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, "[sapo]\nexternal_itemz = 2\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "[sapo].external_itemz: unknown key" in message
    assert "did you mean 'external_items'" in message


def test_unknown_section_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[trainer\]: unknown section"):
        load_config(write(tmp_path, "[trainer]\nlearning_rate = 1\n"))


def test_negative_round_length_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "[ledger]\nround_length_s = -5\n"))
    assert "[ledger].round_length_s" in str(info.value)
    assert "greater than 0" in str(info.value)
    assert "(got -5)" in str(info.value)


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, '[sapo]\ncompletions = 1\n[store]\nbackend = "s3"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert len(info.value.problems) == 2
    assert any("[sapo].completions" in p for p in info.value.problems)
    assert any("[store].backend" in p and "'ipfs' or 'local'" in p for p in info.value.problems)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('[chain]\nrpc_url = "ftp://example.org"\n', "[chain].rpc_url"),
        ('[chain]\nledger_address = "0x1234"\n', "[chain].ledger_address"),
        # a mixed-case address with a broken EIP-55 checksum is a typo
        (
            '[chain]\nledger_address = "0x5FbDB2315678afecb367f032d93F642f64180aA3"\n',
            "[chain].ledger_address",
        ),
        ("[chain]\nchain_id = 0\n", "[chain].chain_id"),
        ("[chain]\nmax_fee_gwei = 1\npriority_fee_gwei = 2\n", "priority_fee_gwei"),
        ('[store]\nipfs_api = "localhost:5001"\n', "[store].ipfs_api"),
        ("[store]\nmax_batch_bytes = 2000000\n", "[store].max_batch_bytes"),
        ("[store]\nmin_rate_kib_s = 0\n", "[store].min_rate_kib_s"),
        ("[ledger]\nslash_bps = 10001\n", "[ledger].slash_bps"),
        ('[ledger]\nmin_stake = "1 dogecoin"\n', "[ledger].min_stake"),
        ('[ledger]\nmin_stake = "-1 ether"\n', "[ledger].min_stake"),
        ("[sapo]\nlocal_items = 0\n", "[sapo].local_items"),
        ("[policy]\ntop_p = 1.5\n", "[policy].top_p"),
        ("[policy]\ncpu_threads = -1\n", "[policy].cpu_threads"),
        ('[train]\nloss_agg = "sum"\n', "[train].loss_agg"),
        ("[devnet]\nnodes = 12\naccounts = 10\n", "accounts (10) must be at least nodes + 1"),
        (
            '[devnet]\nnodes = 4\nadversaries = ["all"]\n',
            "accounts (10) must be at least nodes + adversary nodes + 1 (24)",
        ),
        (
            "[devnet]\nnodes = 9\nroot_lane = true\n",
            "accounts (10) must be at least nodes + 2 (the deployer, the aggregator) (11)",
        ),
        ("[devnet]\nlight = 4\n", "light nodes send their messages to the root lane's"),
        ("[devnet]\nlight = 10001\nroot_lane = true\n", "[devnet].light"),
        (
            "[devnet]\nlight = 4\nroot_lane = true\nlight_equivocators = 5\n",
            "light_equivocators = 5: more than the 4 light nodes",
        ),
        ('[devnet]\nadversaries = ["sybil"]\n', "unknown adversary 'sybil'"),
        ('[devnet]\naggregator_lies = ["censor", "censor"]\n', "censor is named twice"),
        ('[devnet]\naggregator_lies = ["lie-about-everything"]\n', "[devnet].aggregator_lies"),
        ("[node]\nlog_level = 3\n", "[node].log_level"),
        ('[node]\nmetrics_addr = "9464"\n', "'9464' is not HOST:PORT"),
        ('[node]\nmetrics_addr = "prometheus.example:9464"\n', "is not an IP address"),
        ('[node]\nmetrics_addr = "127.0.0.1:70000"\n', "port 70000 is not in 1-65535"),
        ('[node]\nmetrics_addr = "0.0.0.0:9464"\n', "set [node].metrics_public = true"),
        ('[node]\nmetrics_addr = "[::]:9464"\n', "is not a loopback address"),
        ('[aggregator]\nlisten = "0.0.0.0:7700"\n', "set [aggregator].public = true"),
        ('[aggregator]\nlisten = "7700"\n', "'7700' is not HOST:PORT"),
        ('[aggregator]\nurl = "http://10.0.0.1:7700/api/v0"\n', "is not an http(s) origin"),
        ('[aggregator]\nurl = "ftp://10.0.0.1:7700"\n', "is not an http(s) origin"),
        ('[chain]\nround_book_address = "0x12"\n', "[chain].round_book_address"),
        ("[root_lane]\nsubmit = true\n", "but [chain].round_book_address is not"),
        (f'[root_lane]\naggregator = "0x{"ab" * 20}"\n', "write `submit = true` instead"),
        ("[root_lane]\nchallenge_lists = true\n", "but [root_lane].submit is not"),
        ('[root_lane]\nchallenge_lists = "maybe"\n', "[root_lane].challenge_lists"),
        ("[root_lane]\nrelay_votes = true\n", "relay_votes is set but the node has no round book"),
        (
            f'[chain]\nround_book_address = "0x{"ab" * 20}"\n[store]\nbackend = "local"\n'
            "[root_lane]\nrelay_votes = true\n",
            "no IPFS daemon ([store].backend",
        ),
        ('[ledger]\nfamilies = ["qwen2.5-0.5b"]\n', "is not a base's content id"),
        (f'[ledger]\nfamilies = ["0x{"0" * 64}"]\n', "is not a base's content id"),
        (f'[ledger]\nfamilies = ["0x{"ab" * 32}", "0x{"AB" * 32}"]\n', "is listed twice"),
    ],
)
def test_bad_values_name_the_field(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert field in str(info.value)


def test_metrics_listen_on_loopback_unless_the_operator_says_otherwise(tmp_path: Path) -> None:
    for addr in ("127.0.0.1:9464", "[::1]:9464", "localhost:9464", "127.0.0.2:9000"):
        assert load_config(write(tmp_path, f'[node]\nmetrics_addr = "{addr}"\n')).node.metrics_addr
    public = '[node]\nmetrics_addr = "0.0.0.0:9464"\nmetrics_public = true\n'
    assert load_config(write(tmp_path, public)).node.metrics_addr == "0.0.0.0:9464"
    assert load_config(write(tmp_path, "")).node.metrics_addr is None  # off by default


def test_the_aggregator_lists_its_listen_origin_unless_given_one(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "")).aggregator.listed() == "http://127.0.0.1:7700"
    public = '[aggregator]\nlisten = "0.0.0.0:7700"\npublic = true\nurl = "https://agg.example/"\n'
    assert load_config(write(tmp_path, public)).aggregator.listed() == "https://agg.example"


def test_malformed_toml_says_where(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not valid TOML: .*line 2"):
        load_config(write(tmp_path, "[sapo]\nlocal_items = = 3\n"))


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bin.toml"
    path.write_bytes(b'[node]\nlog_level = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.toml")


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "[sapo]\nlocal_items = 6\nexternal_items = 2\n")
    monkeypatch.setenv("SAPO_SAPO__EXTERNAL_ITEMS", "0")
    config = load_config(path)
    assert (config.sapo.local_items, config.sapo.external_items) == (6, 0)


def test_bad_environment_value_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAPO_TRAIN__EPS_LOW", "abc")
    with pytest.raises(ConfigError, match="environment variable SAPO_TRAIN__EPS_LOW"):
        load_config(write(tmp_path, ""))


def test_misspelt_environment_override_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAPO_SAPO__EXTERNAL_ITEMZ", "0")
    monkeypatch.setenv("SAPO_SAPPO__LOCAL_ITEMS", "1")
    with pytest.raises(ConfigError) as info:
        load_config()
    text = str(info.value)
    assert "SAPO_SAPO__EXTERNAL_ITEMZ" in text
    assert "SAPO_SAPPO__LOCAL_ITEMS: unknown section 'sappo'; did you mean SAPO_SAPO__" in text


def test_non_config_sapo_variables_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # read by other parts (keystore password, anvil binary), never config keys
    monkeypatch.setenv("SAPO_KEYSTORE_PASSWORD", "hunter2")
    monkeypatch.setenv("SAPO_ANVIL", "/nonexistent")
    assert load_config().sapo.local_items == 4


@pytest.mark.parametrize(
    ("text", "wei"),
    [
        (0, 0),
        (12, 12),
        ("1 ether", 10**18),
        ("0.5ether", 5 * 10**17),
        ("20 gwei", 20 * 10**9),
        ("1_000 wei", 1000),
        ("3", 3),
    ],
)
def test_amounts(text: object, wei: int) -> None:
    assert parse_wei(text) == wei


@pytest.mark.parametrize("text", ["1.5 wei", "x ether", True, -1, 1.5])
def test_bad_amounts(text: object) -> None:
    with pytest.raises(ValueError):
        parse_wei(text)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:8545", "http://127.0.0.1:8545"),
        (
            "https://eth-sepolia.g.alchemy.com/v2/abcdEFGH12345678xyz",
            "https://eth-sepolia.g.alchemy.com/v2/***",
        ),
        ("https://user:pa55word@rpc.example.org/", "https://***@rpc.example.org/"),
        ("https://rpc.example.org/?apikey=s3cr3t", "https://rpc.example.org/?apikey=***"),
    ],
)
def test_rpc_credentials_are_masked(url: str, shown: str) -> None:
    assert masked_rpc_url(url) == shown


def test_public_view_masks_the_rpc_url(tmp_path: Path) -> None:
    key = "0123456789abcdef0123456789abcdef"
    path = write(tmp_path, f'[chain]\nrpc_url = "https://mainnet.infura.io/v3/{key}"\n')
    view = public_view(load_config(path))
    assert key not in str(view)


def test_the_backend_is_transformers_or_vllm_and_nothing_else(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, '[policy]\nbackend = "vllm"\n')).policy.backend == "vllm"
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, '[policy]\nbackend = "sglang"\n'))
    message = str(caught.value)
    assert "[policy].backend" in message and "'transformers' or 'vllm'" in message


def test_half_precision_is_refused_because_peers_prove_draws_in_float32(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "[policy]\n")).policy.dtype == "auto"
    path = write(tmp_path, '[policy]\ndtype = "float32"\n')
    assert load_config(path).policy.dtype == "float32"
    for half in ("bfloat16", "float16"):
        with pytest.raises(ConfigError) as caught:
            load_config(write(tmp_path, f'[policy]\ndtype = "{half}"\n'))
        message = str(caught.value)
        assert "[policy].dtype" in message and "re-drawing them in float32" in message
        assert 'set dtype = "float32"' in message


def test_devnet_node_overrides_are_checked_like_the_sections_they_change(tmp_path: Path) -> None:
    good = write(
        tmp_path, "[devnet]\nnodes = 3\n[devnet.node_overrides.2.sapo]\ncompletions = 24\n"
    )
    assert load_config(good).devnet.node_overrides == {2: {"sapo": {"completions": 24}}}
    from client.config.writer import dump_toml  # as `sapo devnet up` writes devnet.toml

    again = write(tmp_path, dump_toml(load_config(good)), "written.toml")
    assert load_config(again).devnet.node_overrides == {2: {"sapo": {"completions": 24}}}
    farmer = write(  # an adversary of another family: node 3, after the three honest ones
        tmp_path,
        '[devnet]\nadversaries = ["answer-farmer"]\n'
        '[devnet.node_overrides.3.policy]\nmodel = "seed-llama-test"\n',
        "farmer.toml",
    )
    assert load_config(farmer).devnet.node_overrides == {
        3: {"policy": {"model": "seed-llama-test"}}
    }
    for text, needle in [
        (
            "[devnet.node_overrides.2.sapo]\ncompletions = 99\n",
            "node_overrides.2.sapo: completions",
        ),
        ("[devnet.node_overrides.7.sapo]\ncompletions = 8\n", "the devnet has nodes 0..2"),
        (  # adversaries follow the honest nodes: 3 honest and 1 farmer are nodes 0..3
            '[devnet]\nadversaries = ["answer-farmer"]\n[devnet.node_overrides.4.sapo]\n'
            "completions = 8\n",
            "the devnet has nodes 0..3",
        ),
        ("[devnet.node_overrides.1.chain]\nrpc_url = 'http://x'\n", "cannot differ between"),
    ]:
        with pytest.raises(ConfigError) as caught:
            load_config(write(tmp_path, text, "bad.toml"))
        assert needle in str(caught.value), str(caught.value)


def test_devnet_up_fits_quorum_and_checkers_to_its_nodes() -> None:
    from client.devnet.control import DevnetOptionError, apply_options, seats_for_every_node

    devnet = load_config(Path(__file__).resolve().parents[2] / "configs" / "devnet.toml")
    # two nodes: each batch has one possible checker, so a quorum of 2 could never be met
    small, notes = apply_options(devnet, 2, None, None)
    assert small.ledger.quorum == 1
    # 3 honest + 19 adversary nodes with K = 64: a node holds no seat on a batch with chance
    # (21/22)^64 = 5%, and an honest batch could seat too few honest checkers, so K is raised
    # until every node holds a seat but once in a million, at most to the ledger's 255 trials
    # ((21/22)^255 = 7.0e-6 here); accounts for all of them
    attacked, more = apply_options(devnet, None, None, None, ["all"])
    assert (attacked.ledger.checkers, attacked.ledger.quorum) == (255, 2)
    assert (21 / 22) ** 255 < 8e-6
    assert attacked.devnet.accounts >= 23 and attacked.devnet.adversary_roles()[-1] == "baiter"
    assert any("[ledger].quorum 2 lowered to 1" in n for n in notes), notes
    assert any("[ledger].checkers 64 raised to 255" in n for n in more), more
    # ... and each node's votes a round, so that it can vote on every batch it is drawn for (at
    # 16, beside 26 other nodes, no honest node voted on a sybil's free claim of round 7)
    assert attacked.sapo.attest_budget == 42
    assert any("[sapo].attest_budget 16 raised to 42" in n for n in more), more
    # the default devnet (3 nodes, K = 64) is left as it is: (2/3)^64 = 5e-12
    assert apply_options(devnet, None, None, None)[0].ledger.checkers == 64
    # in the root lane the aggregator takes an account and is drawn like a node (it never
    # votes): 9 nodes and it need 11 accounts, and K for 10 candidates, (9/10)^132 < 1e-6
    lane, _ = apply_options(devnet, 9, None, None, root_lane=True)
    assert lane.devnet.root_lane and lane.devnet.accounts == 11
    assert lane.ledger.checkers == 132 == seats_for_every_node(10)
    assert apply_options(devnet, 9, None, None)[0].ledger.checkers == seats_for_every_node(9)
    # light nodes send to the root lane's aggregator: --light alone turns the root lane on
    light, said = apply_options(devnet, 3, None, None, light=4)
    assert light.devnet.root_lane and light.devnet.light == 4 and light.devnet.accounts >= 5
    assert any("--light 4: the devnet runs the root lane" in n for n in said), said
    # light equivocators are some of the light nodes the devnet runs: --light may bring them
    equivocating = devnet.model_copy(
        update={"devnet": devnet.devnet.model_copy(update={"light_equivocators": 2})}
    )
    assert apply_options(equivocating, 3, None, None, light=4)[0].devnet.light_equivocators == 2
    with pytest.raises(DevnetOptionError, match="more than the 1 light nodes"):
        apply_options(equivocating, 3, None, None, light=1)
    with pytest.raises(DevnetOptionError, match="more than the 0 light nodes"):
        apply_options(equivocating, 3, None, None)
    # the aggregator that lies is the root lane's
    lying = devnet.model_copy(
        update={"devnet": devnet.devnet.model_copy(update={"aggregator_lies": ["censor"]})}
    )
    assert apply_options(lying, 3, None, None, root_lane=True)[0].devnet.aggregator_lies
    with pytest.raises(DevnetOptionError, match="lies only where the devnet runs one"):
        apply_options(lying, 3, None, None)


def test_an_adapter_setting_that_cannot_work_is_refused_with_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, '[policy]\nadapter = "lora"\nbackend = "vllm"\n'))
    assert 'backend = "transformers"' in str(info.value) and 'adapter = "none"' in str(info.value)
    with pytest.raises(ConfigError, match="names a module twice"):
        load_config(
            write(tmp_path, '[policy]\nadapter = "lora"\nlora_targets = ["q_proj", "q_proj"]\n')
        )
    with pytest.raises(ConfigError, match=r"lora_targets"):
        load_config(write(tmp_path, '[policy]\nadapter = "lora"\nlora_targets = ["a.b"]\n'))
    with pytest.raises(ConfigError, match=r"adapter"):
        load_config(write(tmp_path, '[policy]\nadapter = "qlora"\n'))


def test_a_base_bundle_id_that_is_not_one_is_refused(tmp_path: Path) -> None:
    ok = "0x" + "0a" * 32
    assert load_config(write(tmp_path, f'[policy]\nbase = "{ok}"\n')).policy.base == ok
    for bad in ("0x" + "0A" * 32, "0x1234", "Qwen/Qwen2.5-0.5B", "bafkreiabc"):
        with pytest.raises(ConfigError, match=r"policy.base|\[policy\]\.base|base"):
            load_config(write(tmp_path, f'[policy]\nbase = "{bad}"\n'))
