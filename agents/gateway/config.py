"""The `[gateway]` section of society.toml: backends, policy, budgets, where the ledger is.

    [gateway]
    listen = "127.0.0.1:8090"

    [gateway.policy]                    # one table for every backend (overridable per backend)
    stop = ["<|im_end|>"]
    max_tokens = 4096

    [gateway.budget]                    # every caller's budget, unless [gateway.callers.NICK]
    calls_per_day = 2000
    tokens_per_day = 2000000
    cost_per_day = 5.0                  # needs [gateway.prices]: an unpriced model is refused
    in_flight = 4

    [gateway.prices."qwen"]             # per million tokens, by model name or prefix
    input_per_mtok = 0.10
    output_per_mtok = 0.30

    [gateway.backends.local]
    base_url = "http://127.0.0.1:8000/v1"
    prefixes = ["qwen", "mistral"]

    [gateway.backends.cloud]
    base_url = "https://api.example.com/v1"
    api_key_env = "CLOUD_API_KEY"
    prefixes = ["cloud/"]
    strip_prefix = true
    budget = { calls_per_day = 500 }

The section is parsed here, from the table agents/config.py hands on, so
that module knows nothing of the gateway. Every key is checked
(`extra="forbid"`), and a mistake names the key and docs/gateway.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agents.config import parse_address, parse_section
from agents.home import DEFAULT_GATEWAY_LISTEN
from agents.seats.tables import EnvVarName
from room.errors import ConfigError

if TYPE_CHECKING:
    from agents.home import Home

__all__ = [
    "DEFAULT_MARKERS",
    "BackendConfig",
    "Budget",
    "GatewayConfig",
    "PolicyConfig",
    "Price",
]

# The chat-template markers of the common families (ChatML, Llama 3, Mistral/Llama 2,
# GPT/Qwen base, Gemma): text a model should never write into an answer.
DEFAULT_MARKERS = (
    "<|im_end|>",
    "<|im_start|>",
    "<|eot_id|>",
    "</s>",
    "[INST]",
    "<|endoftext|>",
    "<end_of_turn>",
)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Budget(_Strict):
    """Limits per day (UTC) and at once; None is no limit. Tokens and cost are reserved at a
    call's worst case before it is sent (budgets.py), so calls in flight cannot overrun them."""

    calls_per_day: int | None = Field(default=None, ge=0)
    tokens_per_day: int | None = Field(default=None, ge=0)
    cost_per_day: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    in_flight: int | None = Field(default=None, ge=1)


class Price(_Strict):
    """What a model's tokens cost, per million (any currency: the cost page adds them up)."""

    input_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    output_per_mtok: float = Field(ge=0, allow_inf_nan=False)

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6


class PolicyConfig(_Strict):
    """Request-level policy: stop strings added and enforced, a max_tokens cap, markers cut."""

    stop: list[str] = Field(default_factory=list)
    max_tokens: int | None = Field(default=None, ge=1)
    markers: list[str] = Field(default_factory=lambda: list(DEFAULT_MARKERS))

    @field_validator("stop", "markers")
    @classmethod
    def _no_empty(cls, value: list[str]) -> list[str]:
        if any(not item for item in value):
            raise ValueError("has an empty string, which would cut every answer; remove it")
        return value


class PolicyOverride(_Strict):
    """A backend's changes to the policy: stop strings added, the others replaced."""

    stop: list[str] = Field(default_factory=list)
    max_tokens: int | None = Field(default=None, ge=1)
    markers: list[str] | None = None


class BackendConfig(_Strict):
    """One model server the gateway sends requests to."""

    base_url: str = Field(description="up to and including /v1, e.g. http://127.0.0.1:8000/v1")
    prefixes: list[str] = Field(min_length=1, description="the model names it serves, by prefix")
    strip_prefix: bool = False
    api_key_env: EnvVarName | None = None
    timeout_s: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    policy: PolicyOverride = Field(default_factory=PolicyOverride)
    budget: Budget = Field(default_factory=Budget)
    check: bool = Field(default=True, description="run `gateway check` on it at first start")

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://, e.g. http://127.0.0.1:8000/v1")
        return value.rstrip("/")

    @field_validator("prefixes")
    @classmethod
    def _prefixes(cls, value: list[str]) -> list[str]:
        if any(not prefix for prefix in value):
            raise ValueError('has an empty prefix; name the models it serves, e.g. ["qwen"]')
        return value

    @property
    def root_url(self) -> str:
        """The server's own root (llama.cpp's /props and /tokenize live there, not under /v1)."""
        return self.base_url.removesuffix("/v1")


class GatewayConfig(_Strict):
    """The whole `[gateway]` section."""

    listen: str = DEFAULT_GATEWAY_LISTEN
    url: str | None = Field(default=None, description="how callers reach it, when not `listen`")
    ledger: str = Field(default="gateway/ledger.jsonl", description="relative to the home")
    deadline_s: float = Field(
        default=300.0, gt=0, allow_inf_nan=False, description="a request's whole time, retries in"
    )
    retries: int = Field(default=2, ge=0, le=10)
    backoff_s: float = Field(default=0.2, ge=0, allow_inf_nan=False)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    budget: Budget = Field(default_factory=Budget)
    callers: dict[str, Budget] = Field(default_factory=dict)
    backends: dict[str, BackendConfig] = Field(default_factory=dict)
    record: bool = Field(  # strict: `record = "yes"` is refused, not read as true
        default=False,
        strict=True,
        description="keep each answer by request digest, for `replay --offline`",
    )
    # [gateway.prices."MODEL"]: a model name (as callers send it) or a prefix of one; none by
    # default, so no cost is shown and a cost budget refuses every unpriced model.
    prices: dict[str, Price] = Field(default_factory=dict)

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        parse_address(value, "listen")
        return value

    @field_validator("backends")
    @classmethod
    def _backends(cls, value: dict[str, BackendConfig]) -> dict[str, BackendConfig]:
        owners: dict[str, str] = {}
        for name, backend in value.items():
            if not _NAME.fullmatch(name):
                raise ValueError(
                    f"{name!r} is not a usable backend name; use letters, digits, -, _"
                )
            for prefix in backend.prefixes:
                if prefix in owners:
                    raise ValueError(
                        f"the prefix {prefix!r} is served by both {owners[prefix]} and {name}; "
                        "give it to one of them"
                    )
                owners[prefix] = name
        return value

    @classmethod
    def of(cls, home: Home) -> GatewayConfig:
        """The home's `[gateway]` section as typed settings; a ConfigError says what to fix."""
        return parse_section(cls, home.society.gateway, "gateway", home.society_file)

    @classmethod
    def required(cls, home: Home) -> GatewayConfig:
        """The section, for serving: it must exist and name at least one backend."""
        config = cls.of(home)
        if not config.backends:
            raise ConfigError(
                f"{home.society_file}: [gateway] has no backends; add one, e.g. "
                '[gateway.backends.local] base_url = "http://127.0.0.1:8000/v1", '
                'prefixes = ["qwen"] (`bullpen docs gateway`)'
            )
        return config

    def ledger_path(self, home: Home) -> Path:
        return home.path(self.ledger)

    def price(self, model: str) -> Price | None:
        """The model's price: its own entry, else the longest prefix with one, else None."""
        if model in self.prices:
            return self.prices[model]
        best = max((p for p in self.prices if model.startswith(p)), key=len, default=None)
        return self.prices[best] if best is not None else None

    def caller_budget(self, nick: str) -> Budget:
        return self.callers.get(nick, self.budget)

    def policy_for(self, backend: str) -> PolicyConfig:
        """The policy table with the backend's override applied."""
        override = self.backends[backend].policy
        stop = list(dict.fromkeys([*self.policy.stop, *override.stop]))
        return PolicyConfig(
            stop=stop,
            max_tokens=override.max_tokens or self.policy.max_tokens,
            markers=self.policy.markers if override.markers is None else override.markers,
        )
