"""`[seats.<name>]` tables: their typed form, their checks, and the registry built from them.

    [seats.score]                     # a role's seat: termgen, score, scotoma, bulk, synthesis
    kind = "openai"
    base_url = "http://127.0.0.1:8000/v1"
    model = "qwen2.5-7b-instruct"
    fallback = "big-remote"           # any other table, e.g. [seats.big-remote]

Each kind is a pydantic model with `extra="forbid"`, discriminated by
`kind`, so a misspelt key is an error naming the table and the key. A role
with no table gets a local seat, which is what makes every pipeline run
with no model server. Fallbacks must name a table and must not loop.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from agents.seats.base import Seat
from agents.seats.cmd import CmdSeat
from agents.seats.local import LocalSeat
from agents.seats.openai import OpenAISeat
from agents.seats.tables import CmdSeatConfig, GatewayAccess, LocalSeatConfig, OpenAISeatConfig
from room.errors import ConfigError, SeatError

__all__ = [
    "ROLES",
    "CmdSeatConfig",
    "GatewayAccess",
    "LocalSeatConfig",
    "OpenAISeatConfig",
    "SeatConfig",
    "SeatRegistry",
    "build_seats",
    "parse_seat_table",
]

ROLES = ("termgen", "score", "scotoma", "bulk", "synthesis")
KINDS = ("local", "openai", "cmd")

_TABLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


SeatConfig = Annotated[
    LocalSeatConfig | OpenAISeatConfig | CmdSeatConfig, Field(discriminator="kind")
]
"""The typed form of one [seats.<name>] table; SocietyConfig.seats maps names to it."""

_ADAPTER: TypeAdapter[LocalSeatConfig | OpenAISeatConfig | CmdSeatConfig] = TypeAdapter(SeatConfig)

_KEYS = {
    "local": "kind, fallback, step_timeout_s, slots",
    "openai": "kind, base_url or via, model, api_key_env, timeout_s, stop, temperature, max_tokens, "
    "json_mode, fallback, step_timeout_s, slots",
    "cmd": "kind, command, timeout_s, env, fallback, step_timeout_s, slots",
}
_REQUIRED = {"openai": 'base_url (or via = "gateway") and model', "cmd": "command"}
_KIND_CHOICE = 'set kind = "local", "openai" or "cmd"'


def _explain(name: str, raw: Mapping[str, Any], exc: ValidationError) -> list[str]:
    kind = raw.get("kind")
    problems: list[str] = []
    missing: list[str] = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        if loc and loc[0] in KINDS:  # the union tag pydantic puts first
            loc = loc[1:]
        where = f"[seats.{name}] {'.'.join(loc) or 'kind'}"
        kind_of = error["type"]
        if kind_of == "union_tag_not_found":
            problems.append(f"[seats.{name}] kind: missing; {_KIND_CHOICE}")
        elif kind_of == "union_tag_invalid":
            problems.append(
                f"[seats.{name}] kind: {kind!r} is not a seat kind; {_KIND_CHOICE} "
                '(llama.cpp, vLLM, Ollama and LiteLLM servers are all kind = "openai")'
            )
        elif kind_of == "missing":
            missing.append(".".join(loc))
        elif kind_of == "extra_forbidden":
            problems.append(
                f"{where}: unknown key for a seat of kind {kind!r}; its keys are "
                f"{_KEYS.get(str(kind))}"
            )
        else:
            problems.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
    if missing and kind == "openai" and not {"base_url", "via"} & set(raw):
        missing.insert(0, "base_url")  # one of the two is required (checked after the fields)
    if missing:
        problems.insert(
            0,
            f"[seats.{name}] {', '.join(missing)}: missing; a seat of kind {kind!r} needs "
            f"{_REQUIRED.get(str(kind), 'them')} (see `bullpen docs seats`)",
        )
    return problems


def parse_seat_table(name: str, raw: Mapping[str, Any] | BaseModel) -> SeatConfig:
    """One table in its typed form, or ConfigError naming the table and the key."""
    if isinstance(raw, LocalSeatConfig | OpenAISeatConfig | CmdSeatConfig):
        return raw
    if not _TABLE_NAME.fullmatch(name):
        raise ConfigError(
            f"[seats.{name}] is not a usable seat name; use letters, digits, '-' and '_'"
        )
    if not isinstance(raw, Mapping):
        raise ConfigError(f"seats.{name} must be a table, like [seats.{name}] with kind = ...")
    try:
        return _ADAPTER.validate_python(dict(raw))
    except ValidationError as exc:
        raise ConfigError("; ".join(_explain(name, raw, exc))) from None


def _make_seat(name: str, config: SeatConfig, gateway: GatewayAccess | None = None) -> Seat:
    if isinstance(config, OpenAISeatConfig):
        return OpenAISeat(name, config, gateway)
    if isinstance(config, CmdSeatConfig):
        return CmdSeat(name, config)
    return LocalSeat(name, fallback=config.fallback)


class SeatRegistry:
    """Every seat by table name; the roles without a table answer locally."""

    def __init__(self, seats: Mapping[str, Seat] | None = None) -> None:
        self._seats = dict(seats or {})
        for name in ROLES:
            self._seats.setdefault(name, LocalSeat(name))
        self._check_fallbacks()

    def names(self) -> list[str]:
        return sorted(self._seats)

    def __contains__(self, name: object) -> bool:
        return name in self._seats

    def get(self, name: str) -> Seat:
        """The seat of table `name`, or SeatError listing the known ones."""
        try:
            return self._seats[name]
        except KeyError:
            raise SeatError(
                f"there is no seat named {name!r}; the known seats are "
                f"{', '.join(self.names())} — add a [seats.{name}] table to society.toml "
                "or use one of those",
                seat=name,
            ) from None

    def chain(self, name: str) -> list[Seat]:
        """The seat and then each fallback in turn, as the judge asks them."""
        seats = [self.get(name)]
        while seats[-1].fallback is not None:
            seats.append(self._seats[seats[-1].fallback])
        return seats

    def _check_fallbacks(self) -> None:
        for name, seat in sorted(self._seats.items()):
            if seat.fallback is not None and seat.fallback not in self._seats:
                raise ConfigError(
                    f"[seats.{name}] fallback: there is no seat table named {seat.fallback!r}; "
                    f"the known seats are {', '.join(self.names())} — add "
                    f"[seats.{seat.fallback}] or fix the name"
                )
        for name in sorted(self._seats):
            path = [name]
            current = self._seats[name].fallback
            while current is not None:
                if current in path:
                    loop = " → ".join([*path[path.index(current) :], current])
                    raise ConfigError(
                        f"[seats.{name}] fallback: the fallbacks form a cycle ({loop}); "
                        "end the chain at a seat without a fallback"
                    )
                path.append(current)
                current = self._seats[current].fallback


def build_seats(
    tables: Mapping[str, Mapping[str, Any] | BaseModel] | None = None,
    gateway: GatewayAccess | None = None,
) -> SeatRegistry:
    """The registry for society.toml's `seats`, or ConfigError naming the table and key.

    `gateway` is how this nick's `via = "gateway"` seats reach the gateway."""
    problems: list[str] = []
    seats: dict[str, Seat] = {}
    for name, raw in (tables or {}).items():
        try:
            seats[name] = _make_seat(name, parse_seat_table(name, raw), gateway)
        except ConfigError as exc:
            problems.append(exc.message)
    if problems:
        raise ConfigError("; ".join(problems))
    return SeatRegistry(seats)
