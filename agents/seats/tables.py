"""The typed form of each seat kind's `[seats.<name>]` table.

Each kind is a pydantic model with `extra="forbid"`, discriminated by
`kind`, so a misspelt key is an error naming the table and the key. The
seat classes take these as their configuration; the registry
(agents/seats/registry.py) parses tables into them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "CmdSeatConfig",
    "GatewayAccess",
    "LocalSeatConfig",
    "OpenAISeatConfig",
]

DEFAULT_TIMEOUT_S = 300.0

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_var_name(value: str) -> str:
    """The NAME of the environment variable that holds a key, never the key itself."""
    # Never echo the value: someone may have pasted the key itself here.
    if not _ENV_NAME.fullmatch(value):
        raise ValueError(
            "must be the NAME of an environment variable (like OPENAI_API_KEY), not the key itself"
        )
    return value


EnvVarName = Annotated[str, AfterValidator(env_var_name)]
"""An `api_key_env` setting: a seat's or a gateway backend's."""


class _SeatTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    fallback: str | None = Field(
        default=None, description="another [seats.<name>] table to ask when this one fails"
    )
    # How long a step whose calls go to this seat may take, and how many requests its server
    # answers at once: each raises those steps' time budgets (agents/runtime/budget.py).
    step_timeout_s: float | None = Field(default=None, gt=0, le=86400)
    slots: int | None = Field(default=None, ge=1, le=64)


class LocalSeatConfig(_SeatTable):
    """Built in, deterministic, offline."""

    kind: Literal["local"] = "local"


@dataclass(frozen=True)
class GatewayAccess:
    """How a nick's `via = "gateway"` seats reach the model gateway (given by the lurker,
    from agents/home.py: the seats never import the gateway)."""

    url: str  # up to and including /v1
    token_file: Path  # the nick's caller token, 0600


class OpenAISeatConfig(_SeatTable):
    """Any OpenAI-compatible chat-completions server, directly or through the gateway."""

    kind: Literal["openai"]
    base_url: str | None = Field(
        default=None, description="up to and including /v1, e.g. http://127.0.0.1:8000/v1"
    )
    via: Literal["gateway"] | None = Field(
        default=None, description='"gateway": through the model gateway, with the nick\'s token'
    )
    model: str = Field(min_length=1)
    api_key_env: EnvVarName | None = Field(
        default=None, description="the NAME of the environment variable holding the key"
    )
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    stop: list[str] = Field(default_factory=list)
    temperature: float | None = Field(default=None, ge=0, le=2)
    # OpenAI's penalties on tokens already written: a small model decoding greedily writes one
    # term twelve times without them (docs/seats.md); any OpenAI-compatible server takes both.
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    json_mode: bool | Literal["auto"] = "auto"

    @model_validator(mode="after")
    def _one_way(self) -> OpenAISeatConfig:
        if (self.base_url is None) == (self.via is None):
            raise ValueError(
                'set either base_url (a model server, directly) or via = "gateway" (through '
                "the model gateway, `bullpen docs gateway`), not both or neither"
            )
        if self.via is not None and self.api_key_env is not None:
            raise ValueError(
                'via = "gateway" carries the nick\'s caller token, not a key: remove '
                "api_key_env (the gateway holds the backend's key)"
            )
        return self

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://, e.g. http://127.0.0.1:8000/v1")
        value = value.rstrip("/")
        if value.endswith("/chat/completions"):
            raise ValueError(
                "must stop before /chat/completions (the seat adds it), e.g. http://HOST:8000/v1"
            )
        return value

    @field_validator("json_mode", mode="before")
    @classmethod
    def _json_mode(cls, value: Any) -> Any:
        if not (value is True or value is False or value == "auto"):
            raise ValueError('must be true, false or "auto"')
        return value


class CmdSeatConfig(_SeatTable):
    """An external program: the prompt on stdin, the completion on stdout."""

    kind: Literal["cmd"]
    command: list[str] = Field(description="argv, like ['llm', '-m', 'mistral']")
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    env: dict[str, str] = Field(default_factory=dict, description="added to the environment")
    writable: list[str] = Field(
        default_factory=list,
        description="code seats under [build] seat_fence = 'strict' only (`bullpen docs "
        "build`): more paths the fenced seat may write, like '~/.claude'; a judging seat is "
        "not fenced and ignores it",
    )

    @field_validator("writable")
    @classmethod
    def _writable(cls, value: list[str]) -> list[str]:
        # The shape only: where a path may lie is checked where the home is known
        # (agents/build/codeseat.py), when a grind checks its ladder.
        for path in value:
            if not path.startswith(("/", "~")) or "\0" in path:
                raise ValueError(
                    f"{path!r} must be an absolute path or start with ~, like '~/.claude'"
                )
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        if not value or not value[0]:
            raise ValueError("must name a program first, like ['python3', 'model.py']")
        return value
