"""Loads a node config: TOML file, then `SAPO_`-prefixed environment overrides, then validation.

Precedence, highest first: keyword overrides (tests, CLI flags) > environment > file > defaults.
An environment override names a nested key with a double underscore, as pydantic-settings does:
`SAPO_CHAIN__RPC_URL=http://127.0.0.1:8545`, `SAPO_SAPO__EXTERNAL_ITEMS=0`.

Relative paths in a file are relative to that file's folder (so a generated `.devnet/devnet.toml`
works from any working directory); relative paths from the environment are relative to the
current directory. Every error names the file or variable, the key and what was expected.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Any, get_args
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, PrivateAttr, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from client.config.models import (
    AggregatorSection,
    ChainSection,
    DevnetSection,
    LedgerSection,
    NodeSection,
    PolicySection,
    RootLaneSection,
    SapoSection,
    StoreSection,
    TasksSection,
    TrainSection,
)

ENV_PREFIX = "SAPO_"
ENV_NESTED = "__"
MAX_CONFIG_BYTES = 1 << 20

_file_values: ContextVar[dict[str, Any]] = ContextVar("_file_values")


class ConfigError(Exception):
    """A config file or override is unusable; `problems` lists every offending key."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"invalid config {source}:\n{lines}")


class _FileSource(PydanticBaseSettingsSource):
    """The already-parsed TOML document of the file being loaded."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return _file_values.get({}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_file_values.get({}))


class NodeConfig(BaseSettings):
    """A node's whole configuration; build it with `load_config`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED,
        extra="forbid",
        frozen=True,
        nested_model_default_partial_update=True,
    )

    node: NodeSection = NodeSection()
    chain: ChainSection = ChainSection()
    store: StoreSection = StoreSection()
    ledger: LedgerSection = LedgerSection()
    sapo: SapoSection = SapoSection()
    policy: PolicySection = PolicySection()
    train: TrainSection = TrainSection()
    tasks: TasksSection = TasksSection()
    devnet: DevnetSection = DevnetSection()
    aggregator: AggregatorSection = AggregatorSection()
    root_lane: RootLaneSection = RootLaneSection()

    # the (section, key) pairs the file, the environment or an override set, as loaded (pydantic
    # merges each section with its defaults, so its fields_set cannot tell them apart)
    _given: frozenset[tuple[str, str]] = PrivateAttr(default=frozenset())

    def given(self, section: str, key: str) -> bool:
        """Returns whether the loaded file, the environment or an override set [section].key
        (a default does not count; a config rebuilt from a dump knows none)."""
        return (section, key) in self._given

    @model_validator(mode="after")
    def _root_lane_has_its_book(self) -> NodeConfig:
        if self.root_lane.submit and self.chain.round_book_address is None:
            raise ValueError(
                "[root_lane].submit is set but [chain].round_book_address is not: set the "
                "round book whose aggregators take the submissions (what `sapo chain deploy "
                "--with-book` printed), or unset [root_lane].submit to submit on the ledger"
            )
        if self.root_lane.challenge_lists and not self.root_lane.submit:
            raise ValueError(
                "[root_lane].challenge_lists is set but [root_lane].submit is not: the node "
                "audits (and challenges) only the lists of rounds its batches are in, which "
                "needs its batches in the root lane; set submit, or unset challenge_lists"
            )
        if self.root_lane.relay_votes and (
            self.chain.round_book_address is None or self.store.backend != "ipfs"
        ):
            raise ValueError(
                "[root_lane].relay_votes is set but the node has no round book "
                '([chain].round_book_address) or no IPFS daemon ([store].backend = "ipfs"): '
                "the votes travel over the daemon's pubsub; set both, or unset relay_votes"
            )
        return self

    @model_validator(mode="after")
    def _node_overrides_are_valid_configs(self) -> NodeConfig:
        for index, sections in self.devnet.node_overrides.items():
            for name, values in sections.items():
                section = getattr(self, name)
                try:
                    type(section).model_validate({**section.model_dump(), **values})
                except ValidationError as exc:
                    problems = "; ".join(
                        f"{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
                        for e in exc.errors()
                    )
                    raise ValueError(
                        f"[devnet].node_overrides.{index}.{name}: {problems}"
                    ) from None
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _FileSource(settings_cls)


def load_config(path: Path | str | None = None, **overrides: Any) -> NodeConfig:
    """Returns the validated config from `path` (or defaults alone), environment and overrides.

    Raises ConfigError naming the file, the key and what was expected.
    """
    source = str(path) if path is not None else "(defaults)"
    document: dict[str, Any] = {}
    if path is not None:
        document = _read_toml(Path(path))
        _resolve_paths(document, NodeConfig, Path(path).resolve().parent)
    token = _file_values.set(document)
    try:
        config = NodeConfig(**overrides)
    except ValidationError as exc:
        problems = [_describe(err) for err in exc.errors()]
    else:
        problems = []
    finally:
        _file_values.reset(token)
    problems += _unknown_env_sections()
    if problems:
        raise ConfigError(source, problems)
    config._given = frozenset(_given_keys(document, overrides))
    return _absolute_paths(config)


def _given_keys(document: dict[str, Any], overrides: dict[str, Any]) -> set[tuple[str, str]]:
    """Returns the (section, key) pairs that the file, SAPO_<SECTION>__<KEY> variables or the
    keyword overrides set."""
    given = {
        (section, key)
        for source in (document, overrides)
        for section, values in source.items()
        if isinstance(values, dict)
        for key in values
    }
    for name in os.environ:
        if name.startswith(ENV_PREFIX) and ENV_NESTED in name[len(ENV_PREFIX) :]:
            section, key = name[len(ENV_PREFIX) :].lower().split(ENV_NESTED, 1)
            given.add((section, key.split(ENV_NESTED, 1)[0]))
    return given


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(str(path), ["no such file; pass --config with a path to a TOML file"])
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(str(path), [f"larger than {MAX_CONFIG_BYTES} bytes; not a config file"])
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            str(path), [f"not UTF-8 text ({exc.reason} at byte {exc.start})"]
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), [f"not valid TOML: {exc}"]) from None


def _path_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    return {
        name: info
        for name, info in model.model_fields.items()
        if info.annotation is Path or Path in get_args(info.annotation)
    }


def _resolve_paths(document: dict[str, Any], model: type[BaseModel], base: Path) -> None:
    for name, info in model.model_fields.items():
        value = document.get(name)
        sub = info.annotation
        if isinstance(value, dict) and isinstance(sub, type) and issubclass(sub, BaseModel):
            _resolve_paths(value, sub, base)
        elif name in _path_fields(model) and isinstance(value, str) and value:
            expanded = Path(value).expanduser()
            document[name] = os.path.normpath(
                expanded if expanded.is_absolute() else base / expanded
            )


def _absolute_paths(config: NodeConfig) -> NodeConfig:
    updates: dict[str, BaseModel] = {}
    for section_name in NodeConfig.model_fields:
        section: BaseModel = getattr(config, section_name)
        fixed = {
            name: Path(os.path.normpath(Path(value).expanduser().absolute()))
            for name in _path_fields(type(section))
            if isinstance(value := getattr(section, name), Path) and not value.is_absolute()
        }
        if fixed:
            updates[section_name] = section.model_copy(update=fixed)
    return config.model_copy(update=updates) if updates else config


def _env_name(loc: tuple[Any, ...]) -> str:
    return ENV_PREFIX + ENV_NESTED.join(str(part) for part in loc).upper()


def _describe(err: dict[str, Any]) -> str:
    loc = tuple(err["loc"])
    if not loc:  # a rule across sections (e.g. [devnet].node_overrides against the others)
        return err["msg"].removeprefix("Value error, ")
    env = _env_name(loc[:2])
    origin = f"environment variable {env}: " if env in os.environ else ""
    key = f"[{loc[0]}].{'.'.join(map(str, loc[1:]))}" if len(loc) > 1 else f"[{loc[0]}]"
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        hint = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        where = "section" if len(loc) == 1 else "key"
        suggestion = f"did you mean {hint[0]!r}? " if hint else ""
        shown = f"[{loc[0]}]" if len(loc) == 1 else key
        return f"{origin}{shown}: unknown {where}; {suggestion}allowed: {', '.join(allowed)}"
    message = err["msg"].removeprefix("Value error, ")
    got = err.get("input")
    shown_input = "" if isinstance(got, dict) else f" (got {json.dumps(got, default=str)})"
    return f"{origin}{key}: {message}{shown_input}"


def _unknown_env_sections() -> list[str]:
    """Returns a problem for each SAPO_<SECTION>__<KEY> variable whose section does not exist.

    pydantic-settings ignores unknown top-level names (SAPO_KEYSTORE_PASSWORD and SAPO_ANVIL are
    not config keys), but a nested name is unmistakably meant as an override: a typo there must
    not be silently dropped.
    """
    sections = set(NodeConfig.model_fields)
    problems = []
    for name in sorted(os.environ):
        if name.startswith(ENV_PREFIX) and ENV_NESTED in name[len(ENV_PREFIX) :]:
            section = name[len(ENV_PREFIX) :].split(ENV_NESTED, 1)[0].lower()
            if section not in sections:
                hint = difflib.get_close_matches(section, sections, n=1)
                suggestion = f"did you mean SAPO_{hint[0].upper()}__...? " if hint else ""
                problems.append(
                    f"environment variable {name}: unknown section {section!r}; {suggestion}"
                    f"sections: {', '.join(NodeConfig.model_fields)}"
                )
    return problems


def _allowed_keys(parent: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = NodeConfig
    for part in parent:
        annotation = model.model_fields[str(part)].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


def masked_rpc_url(url: str | None) -> str | None:
    """Returns the URL with credentials hidden: userinfo, API-key path segments, query values."""
    if url is None:
        return None
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    segments = ["***" if _looks_secret(seg) else seg for seg in parts.path.split("/")]
    query = "&".join(
        f"{pair.split('=', 1)[0]}=***" if "=" in pair else "***"
        for pair in parts.query.split("&")
        if pair
    )
    return urlunsplit((parts.scheme, netloc, "/".join(segments), query, ""))


def _looks_secret(segment: str) -> bool:
    # Infura, Alchemy, QuickNode... put the API key in the path as one long token.
    return len(segment) >= 16 and any(c.isdigit() for c in segment)


def public_view(config: NodeConfig) -> dict[str, Any]:
    """Returns the config as plain JSON-able data with secrets masked, for display."""
    data = config.model_dump(mode="json")
    data["chain"]["rpc_url"] = masked_rpc_url(config.chain.rpc_url)
    return data


def with_sections(cfg: NodeConfig, **sections: dict) -> NodeConfig:
    """Returns a copy of cfg with keys of some sections replaced (validated again)."""
    data = cfg.model_dump()
    for name, values in sections.items():
        data[name] = {**data[name], **values}
    return NodeConfig.model_validate(data)
