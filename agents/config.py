"""society.toml: who runs, where the room is, how to reach the hub, which models answer.

Every section is a pydantic model with `extra="forbid"`, so a misspelt key
is an error that names it rather than a setting silently ignored. A
pipeline's section ([expedition], [backpass], [build]) is handed on as a table and
checked by the pipeline itself, so this module depends on no pipeline.
Paths are relative to the home that holds the file.
"""

from __future__ import annotations

import difflib
import hashlib
import tomllib
import typing
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from room.errors import ConfigError
from room.limits import HubLimits
from room.message import check_nick


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def parse_address(value: str, what: str = "address") -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{what} {value!r} must look like HOST:PORT, e.g. 127.0.0.1:8080")
    return host, int(port)


class RoomConfig(_Strict):
    """Where the room is: the JSONL file (default), or a NATS JetStream stream (docs/scaling.md)."""

    path: str = "room/room.jsonl"
    engine: Literal["jsonl", "jetstream"] = "jsonl"
    # engine = "jetstream" only: the operator's NATS servers and the room's stream on them.
    servers: list[str] = Field(default_factory=lambda: ["nats://127.0.0.1:4222"], min_length=1)
    stream: str = Field(default="BULLPEN", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    subject_prefix: str = Field(default="bullpen", pattern=r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")
    replicas: int = Field(default=3, ge=1, le=5)
    credentials: str | None = Field(default=None, description="a NATS .creds file")

    def engine_options(self, home_path: Any = None) -> dict[str, Any]:
        """What the hub's log engine is built with (HubSettings.engine_options)."""
        if self.engine != "jetstream":
            return {}
        options: dict[str, Any] = {
            "servers": list(self.servers),
            "stream": self.stream,
            "prefix": self.subject_prefix,
            "replicas": self.replicas,
        }
        if self.credentials:
            options["credentials"] = str(
                home_path(self.credentials) if home_path else self.credentials
            )
        return options


class HubConfig(_Strict):
    strict: str = "127.0.0.1:8080"
    relaxed: str | None = "127.0.0.1:8081"
    url: str | None = Field(default=None, description="how clients reach the strict listener")
    relaxed_url: str | None = None
    # The hub signs a checkpoint this long after the room grows, at most once per interval
    # (docs/audit.md): a line is provable about a second after it was posted.
    checkpoint_interval_s: float = Field(default=1.0, gt=0)
    # Witnesses whose cosignatures the hub keeps: verifier keys from `bullpen witness --show-key`.
    witnesses: list[str] = Field(default_factory=list, max_length=16)
    # The origin line of the room's signed tree checkpoints (docs/audit.md); default bullpen/<host>.
    tlog_origin: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._/:-]{1,200}$")
    # Bounds against a flooding client (room/limits.py, docs/room.md "Limits"); 0 turns a rate off.
    head_timeout_s: float = Field(default=HubLimits.head_timeout_s, gt=0)
    body_timeout_s: float = Field(default=HubLimits.body_timeout_s, gt=0)
    idle_timeout_s: float = Field(default=HubLimits.idle_timeout_s, gt=0)
    max_connections: int = Field(default=HubLimits.max_connections, ge=16)
    read_max_bytes: int = Field(default=HubLimits.read_max_bytes, ge=64 * 1024)
    cache_max_bytes: int = Field(default=HubLimits.cache_max_bytes, ge=1024 * 1024)
    unverified_nick_posts_per_s: float = Field(default=HubLimits.unverified_nick_posts_per_s, ge=0)
    unverified_nick_bytes_per_s: float = Field(default=HubLimits.unverified_nick_bytes_per_s, ge=0)
    unverified_total_posts_per_s: float = Field(
        default=HubLimits.unverified_total_posts_per_s, ge=0
    )
    unverified_total_bytes_per_s: float = Field(
        default=HubLimits.unverified_total_bytes_per_s, ge=0
    )
    unverified_burst_s: float = Field(default=HubLimits.unverified_burst_s, gt=0)
    min_free_disk_bytes: int = Field(default=HubLimits.min_free_disk_bytes, ge=0)
    verified_nick_posts_per_s: float = Field(default=HubLimits.verified_nick_posts_per_s, ge=0)
    verified_nick_bytes_per_s: float = Field(default=HubLimits.verified_nick_bytes_per_s, ge=0)
    verified_burst_s: float = Field(default=HubLimits.verified_burst_s, gt=0)
    verified_min_free_disk_bytes: int = Field(default=HubLimits.verified_min_free_disk_bytes, ge=0)

    def limits(self) -> HubLimits:
        """The bounds as the hub takes them."""
        return HubLimits(**{f.name: getattr(self, f.name) for f in fields(HubLimits)})

    @field_validator("witnesses")
    @classmethod
    def _witnesses(cls, value: list[str]) -> list[str]:
        from trust import note

        for key in value:
            try:
                witness = note.parse_verifier(key)
            except note.NoteError as exc:
                raise ValueError(f"witness {key[:80]!r}: {exc}") from None
            if witness.kind != note.COSIGNATURE:
                raise ValueError(
                    f"witness {witness.name}: a witness's key is a cosignature key (type 0x04), "
                    "the line `bullpen witness --show-key` prints, not a log's key"
                )
        return value

    def witness_keys(self) -> tuple[Any, ...]:
        """The configured witnesses as note verifiers."""
        from trust import note

        return tuple(note.parse_verifier(key) for key in self.witnesses)

    @field_validator("strict", "relaxed")
    @classmethod
    def _address(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value == "" and info.field_name == "relaxed":
            return None  # relaxed = "": this hub has no relaxed listener
        if value is not None:
            parse_address(value, "listener")
        return value

    @staticmethod
    def _url_for(address: str) -> str:
        host, port = parse_address(address)
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}"

    def strict_url(self) -> str:
        return self.url or self._url_for(self.strict)

    def relaxed_endpoint(self) -> str | None:
        if self.relaxed_url:
            return self.relaxed_url
        return self._url_for(self.relaxed) if self.relaxed else None


class NickConfig(_Strict):
    """One lurker: what it runs when woken, and how it wakes."""

    handler: str | None = Field(default=None, description="a Python step, 'module:function'")
    command: list[str] | None = Field(default=None, description="an external program")
    mcp_agent: list[str] | None = Field(
        default=None, description="an MCP-speaking agent that replies through room_say"
    )
    wake_replies: bool = False
    timeout_s: float = Field(default=120.0, gt=0)
    concurrency: int = Field(default=1, ge=1, le=64)
    seat: str | None = Field(
        default=None, description="send every model call of this nick to this [seats.X] table"
    )
    read: Literal["auto", "file", "hub"] = "auto"
    relaxed: bool = Field(default=False, description="post through the relaxed listener")
    env: dict[str, str] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict, description="handed to the step")

    @model_validator(mode="after")
    def _one_handler(self) -> NickConfig:
        if sum(kind is not None for kind in (self.handler, self.command, self.mcp_agent)) != 1:
            raise ValueError(
                "set exactly one of handler = 'module:function', command = [...] "
                "or mcp_agent = [...]"
            )
        if self.handler is not None and ":" not in self.handler:
            raise ValueError(f"handler {self.handler!r} must look like 'package.module:function'")
        if self.command is not None and not self.command:
            raise ValueError("command must name a program, like ['python3', 'agent.py']")
        if self.mcp_agent is not None and not self.mcp_agent:
            raise ValueError("mcp_agent must name a program, like ['my-agent', '-p', '{prompt}']")
        return self


class LurkerDefaults(_Strict):
    safety_reread_s: float = Field(default=30.0, gt=0)
    overdue_check_s: float = Field(default=5.0, gt=0)
    # A post the hub refuses (401/403): retried with backoff, reported after this many tries.
    refused_retries: int = Field(default=8, ge=1)
    refused_backoff_s: float = Field(default=1.0, gt=0)
    refused_backoff_max_s: float = Field(default=60.0, gt=0)


# Each [roots] key, and the folder of the home it is when society.toml does not declare it.
ROOT_DEFAULTS: dict[str, str] = {
    "kb": "kb",  # the expedition's knowledge bases
    "blaze": "kb",  # blaze files (the sample's lies in kb/)
    "briefs": "briefs",  # where briefs are written
    "traces": "traces",  # the backpass's session transcripts
    "memory": "memory",  # the memory repositories, public and private
    "runs": "runs",  # per-run artifacts and worktrees
    "state": "state",  # the backpass state file
    "prompts": "prompts",  # prompt templates
    "build": "build",  # the build pipeline's REPO
}


class RootsConfig(_Strict):
    """[roots]: the only folders a pipeline reads or writes, one or more per purpose.

    A key left out is its default folder of the home (ROOT_DEFAULTS) plus any
    path the pipeline's own section configures outside it, so a home laid down
    before [roots] existed keeps working; agents/roots.py enforces them."""

    kb: str | list[str] | None = None
    blaze: str | list[str] | None = None
    briefs: str | list[str] | None = None
    traces: str | list[str] | None = None
    memory: str | list[str] | None = None
    runs: str | list[str] | None = None
    state: str | list[str] | None = None
    prompts: str | list[str] | None = None
    build: str | list[str] | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> RootsConfig:
        for key in ROOT_DEFAULTS:
            value = getattr(self, key)
            values = [value] if isinstance(value, str) else value or []
            if value is not None and (not values or any(not v.strip() for v in values)):
                raise ValueError(
                    f"[roots] {key} names no folder; give one (a path, relative to the home) "
                    "or leave the key out for the default"
                )
        return self

    def declared(self, purpose: str) -> list[str] | None:
        """The folders society.toml names for `purpose`, or None when it names none."""
        value = getattr(self, purpose)
        return [value] if isinstance(value, str) else value


class LogsConfig(_Strict):
    """How `bullpen up` keeps each child's log: rotated at max_bytes, `keep` old files kept."""

    max_bytes: int = Field(default=10 * 1024 * 1024, ge=4096)
    keep: int = Field(default=5, ge=1, le=100)


class WebConfig(_Strict):
    """[web]: `bullpen web`, the browser view (docs/web.md); `bullpen up` starts it when set."""

    listen: str = "127.0.0.1:8070"
    url: str | None = Field(default=None, description="how a browser reaches it, if not listen")

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        parse_address(value, "[web] listen")
        return value

    def base_url(self) -> str:
        return (self.url or HubConfig._url_for(self.listen)).rstrip("/")


class ObjectsConfig(_Strict):
    """[objects]: what one step hands another across hosts, by SHA-256 (docs/build.md)."""

    max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, le=4 * 1024**3)
    # The NATS Object Store bucket of a JetStream room (the JSONL hub keeps <home>/objects).
    bucket: str = Field(default="bullpen-objects", pattern=r"^[A-Za-z0-9_-]{1,64}$")


class SocietyConfig(_Strict):
    operator: str = "operator"
    room: RoomConfig = Field(default_factory=RoomConfig)
    hub: HubConfig = Field(default_factory=HubConfig)
    lurker: LurkerDefaults = Field(default_factory=LurkerDefaults)
    logs: LogsConfig = Field(default_factory=LogsConfig)
    nicks: dict[str, NickConfig] = Field(default_factory=dict)
    seats: dict[str, dict[str, Any]] = Field(default_factory=dict)
    roots: RootsConfig = Field(default_factory=RootsConfig)
    objects: ObjectsConfig = Field(default_factory=ObjectsConfig)
    # A pipeline's own section is its table, parsed and checked by the pipeline
    # (agents/expedition/config.py, agents/backpass/config.py): this file knows no pipeline.
    expedition: dict[str, Any] = Field(default_factory=dict)
    backpass: dict[str, Any] = Field(default_factory=dict)
    # Shared memory's section ([memory.namespaces]), parsed by agents/memory/namespaces.py.
    memory: dict[str, Any] = Field(default_factory=dict)
    # The build pipeline's section ([build]), parsed by agents/build/config.py.
    build: dict[str, Any] = Field(default_factory=dict)
    # The model gateway's section, parsed by agents/gateway/config.py; empty = no gateway.
    gateway: dict[str, Any] = Field(default_factory=dict)
    # Per-run budgets by run kind, parsed by agents/gateway/runbudgets.py.
    budgets: dict[str, Any] = Field(default_factory=dict)
    # Traces over OTLP ([telemetry] otlp_endpoint), parsed by agents/telemetry/config.py.
    telemetry: dict[str, Any] = Field(default_factory=dict)
    # The web view (agents/web); None: not configured, so `bullpen up` does not start it.
    web: WebConfig | None = None
    pipelines: dict[str, str] = Field(
        default_factory=dict, description="an operator's own pipelines: NAME = 'module:Class'"
    )

    @field_validator("pipelines")
    @classmethod
    def _pipelines(cls, value: dict[str, str]) -> dict[str, str]:
        for name, target in value.items():
            module, sep, attr = target.partition(":")
            if not sep or not module or not attr:
                raise ValueError(
                    f"{name} = {target!r} must look like 'package.module:Class', "
                    "the class of a pipeline (`bullpen docs how-it-works`)"
                )
        return value

    @model_validator(mode="after")
    def _seats(self) -> SocietyConfig:
        """Check the seat tables now (kinds, keys, fallbacks), not at the first model call."""
        from agents.seats import build_seats

        registry = build_seats(self.seats)
        for nick, config in self.nicks.items():
            if config.seat is not None and config.seat not in registry:
                raise ValueError(
                    f"[nicks.{nick}] seat = {config.seat!r}, but there is no [seats.{config.seat}]"
                    f" table; the seats are {', '.join(registry.names())}"
                )
        return self

    @field_validator("operator")
    @classmethod
    def _operator(cls, value: str) -> str:
        return check_nick(value, "operator")

    @field_validator("nicks")
    @classmethod
    def _nicks(cls, value: dict[str, NickConfig]) -> dict[str, NickConfig]:
        for nick in value:
            check_nick(nick, "[nicks] table name")
        return value


SectionT = TypeVar("SectionT", bound=BaseModel)


def parse_section(model: type[SectionT], table: Any, name: str, society_file: Path) -> SectionT:
    """A subsystem's own society.toml section (`[expedition]`, `[backpass]`, `[gateway]`) as
    its typed settings; a ConfigError names the file, the key (and the near one it may mean)
    and `bullpen docs <name>`."""
    try:
        return model.model_validate(table)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join((name, *(str(part) for part in first["loc"])))
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = unknown_key(model, first["loc"], name)
        raise ConfigError(f"{society_file}: {where}: {message}") from None


def _keys_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys the table at `loc` (a pydantic error's location, less its last part) allows."""
    current: Any = model
    parts = list(loc)
    while parts:
        field = current.model_fields.get(str(parts.pop(0)))
        if field is None:
            return []
        annotation = field.annotation
        if typing.get_origin(annotation) is dict:  # a table of tables: skip its own name
            annotation = typing.get_args(annotation)[1]
            if parts:
                parts.pop(0)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        current = annotation
    return list(current.model_fields)


def unknown_key(model: type[BaseModel], loc: tuple[Any, ...], doc: str) -> str:
    """`unknown key; did you mean 'strict'?` — the near key by difflib — and where keys are."""
    key = str(loc[-1]) if loc else ""
    near = difflib.get_close_matches(key, _keys_at(model, tuple(loc[:-1])), n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f"unknown key; {hint}check its spelling against `bullpen docs {doc}`"


def _explain(exc: ValidationError, path: Path) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        section = str(first["loc"][0]) if first["loc"] else ""
        doc = {
            "backpass": "backpass",
            "expedition": "expedition",
            "gateway": "gateway",
            "memory": "memory",
            "seats": "seats",
            "web": "web",
        }.get(section, "operating")
        message = unknown_key(SocietyConfig, tuple(first["loc"]), doc)
    return f"{path}: {where}: {message}" if where else f"{path}: {message}"


class ConfigWarning(UserWarning):
    """society.toml parses, but a key in it most likely does not mean what its writer meant."""


def stray_top_level_keys(raw: dict[str, Any], path: Path) -> list[str]:
    """Warnings for a top-level setting (`operator = "ada"`) that TOML put inside a table.

    TOML has no way back to the top level once a table is open, so a line appended at the
    end of the file joins the last table: under [memory.namespaces] it silently becomes a
    namespace, under [seats.X] a seat option. Said here, since no schema can refuse it."""
    top = [name for name, f in SocietyConfig.model_fields.items() if f.annotation is str]
    found: list[str] = []

    def walk(table: dict[str, Any], loc: tuple[str, ...]) -> None:
        for key, value in table.items():
            if isinstance(value, dict):
                walk(value, (*loc, key))
            elif loc and key in top and key not in _keys_at(SocietyConfig, (*loc, key)):
                where = ".".join(loc)
                found.append(
                    f"{path}: {key} = {value!r} sits in the table [{where}], which does not take "
                    f"it: a top-level setting must come before the first [table] in the file. "
                    f"Move the line up to the top of {path.name}"
                )

    walk(raw, ())
    return found


def load(path: Path) -> SocietyConfig:
    return load_stamped(path)[0]


def load_stamped(path: Path) -> tuple[SocietyConfig, str]:
    """The config and the SHA-256 of the very bytes it was parsed from: what a lurker's pong
    names, so an edit made since it started shows (agents/runtime/ping.py, pong_identity)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"{path} does not exist; create a home with `bullpen init DIR` and pass "
            "--home DIR or set BULLPEN_HOME"
        ) from None
    return _parse(data, path), hashlib.sha256(data).hexdigest()


def _parse(data: bytes, path: Path) -> SocietyConfig:
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    try:
        config = SocietyConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, path)) from None
    except ConfigError as exc:  # the seat tables' own checks (agents.seats)
        raise ConfigError(f"{path}: {exc.message}") from None
    for message in stray_top_level_keys(raw, path):
        warnings.warn(message, ConfigWarning, stacklevel=2)  # once per process and message
    return config
