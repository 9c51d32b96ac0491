"""[seats.<name>] tables: their checks, their defaults, and looking seats up."""

from __future__ import annotations

import pytest

from agents.seats import (
    ROLES,
    CmdSeat,
    LocalSeat,
    OpenAISeat,
    OpenAISeatConfig,
    SeatRegistry,
    build_seats,
)
from room.errors import ConfigError, SeatError

OPENAI = {"kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "qwen"}


class TestBuild:
    def test_no_tables_means_every_role_is_local(self) -> None:
        """With no [seats] at all, each role has a local seat named after it."""
        registry = build_seats({})
        for role in ROLES:
            seat = registry.get(role)
            assert isinstance(seat, LocalSeat)
            assert seat.name == role
            assert seat.fallback is None

    def test_each_kind_builds_its_seat(self) -> None:
        """local, openai and cmd tables become seats of their kind; extra tables are allowed."""
        registry = build_seats(
            {
                "termgen": {"kind": "local"},
                "score": {**OPENAI, "fallback": "big-remote"},
                "big-remote": {**OPENAI, "model": "big", "api_key_env": "BIG_KEY"},
                "bulk": {"kind": "cmd", "command": ["llm", "-m", "mistral"], "timeout_s": 30},
            }
        )
        assert isinstance(registry.get("termgen"), LocalSeat)
        assert isinstance(registry.get("score"), OpenAISeat)
        assert registry.get("score").fallback == "big-remote"
        assert isinstance(registry.get("big-remote"), OpenAISeat)
        assert isinstance(registry.get("bulk"), CmdSeat)
        assert registry.names() == sorted([*ROLES, "big-remote"])

    def test_openai_defaults(self) -> None:
        """An openai table needs only base_url and model; json_mode defaults to auto."""
        config = OpenAISeatConfig.model_validate(OPENAI)
        assert config.json_mode == "auto"
        assert config.timeout_s > 5  # never httpx's 5 s default
        assert config.stop == []
        assert config.api_key_env is None

    def test_typed_tables_are_accepted(self) -> None:
        """A table already in its typed form builds the same seat."""
        seat = build_seats({"score": OpenAISeatConfig.model_validate(OPENAI)}).get("score")
        assert isinstance(seat, OpenAISeat)

    def test_chain_lists_fallbacks_in_order(self) -> None:
        """chain() is the seat, then its fallback, then that one's fallback."""
        registry = build_seats(
            {
                "score": {"kind": "local", "fallback": "mid"},
                "mid": {**OPENAI, "fallback": "big"},
                "big": OPENAI,
            }
        )
        assert [seat.name for seat in registry.chain("score")] == ["score", "mid", "big"]


class TestErrors:
    def test_unknown_kind(self) -> None:
        """A kind that does not exist is named, with the three that do."""
        with pytest.raises(ConfigError, match=r"\[seats.score\] kind: 'ollama' is not a seat kind"):
            build_seats({"score": {"kind": "ollama"}})

    def test_missing_kind(self) -> None:
        """A table without kind says to set one."""
        with pytest.raises(ConfigError, match=r'\[seats.score\] kind: missing; set kind = "local"'):
            build_seats({"score": {"model": "x"}})

    def test_missing_keys(self) -> None:
        """An openai table without base_url and model names both."""
        with pytest.raises(
            ConfigError, match=r"\[seats.score\] base_url, model: missing; a seat of kind 'openai'"
        ):
            build_seats({"score": {"kind": "openai"}})

    def test_missing_command(self) -> None:
        """A cmd table without command names the key."""
        with pytest.raises(ConfigError, match=r"\[seats.bulk\] command: missing"):
            build_seats({"bulk": {"kind": "cmd"}})

    def test_empty_command(self) -> None:
        """A cmd table with an empty command says it must name a program."""
        with pytest.raises(ConfigError, match=r"\[seats.bulk\] command: must name a program"):
            build_seats({"bulk": {"kind": "cmd", "command": []}})

    def test_unknown_key(self) -> None:
        """A misspelt key is named with the keys the kind has."""
        with pytest.raises(
            ConfigError,
            match=r"\[seats.score\] modle: unknown key for a seat of kind 'openai'; its keys",
        ):
            build_seats({"score": {**OPENAI, "modle": "x"}})

    def test_bad_json_mode(self) -> None:
        """json_mode takes true, false or "auto" and nothing else."""
        with pytest.raises(ConfigError, match=r'json_mode: must be true, false or "auto"'):
            build_seats({"score": {**OPENAI, "json_mode": "yes please"}})

    def test_base_url_with_the_endpoint(self) -> None:
        """A base_url that already ends in /chat/completions is refused with the fix."""
        with pytest.raises(ConfigError, match="must stop before /chat/completions"):
            build_seats({"score": {**OPENAI, "base_url": "http://h:8000/v1/chat/completions"}})

    def test_a_pasted_key_is_refused_and_not_echoed(self) -> None:
        """A key pasted into api_key_env is refused without repeating it."""
        secret = "sk-live-0123456789abcdef"
        with pytest.raises(ConfigError, match="NAME of an environment variable") as caught:
            build_seats({"score": {**OPENAI, "api_key_env": secret}})
        assert secret not in str(caught.value)
        assert secret not in repr(caught.value.to_dict())

    def test_unknown_fallback(self) -> None:
        """A fallback naming no table is an error naming the table, key and known seats."""
        with pytest.raises(
            ConfigError,
            match=r"\[seats.score\] fallback: there is no seat table named 'big'; "
            r"the known seats are bulk, score",
        ):
            build_seats({"score": {**OPENAI, "fallback": "big"}})

    def test_fallback_cycle(self) -> None:
        """Fallbacks that loop are an error that draws the loop."""
        with pytest.raises(ConfigError, match=r"cycle \(a → b → a\)"):
            build_seats({"a": {**OPENAI, "fallback": "b"}, "b": {"kind": "local", "fallback": "a"}})

    def test_fallback_to_itself(self) -> None:
        """A seat that falls back to itself is a cycle too."""
        with pytest.raises(ConfigError, match=r"\[seats.score\] fallback: .*cycle \(score → score"):
            build_seats({"score": {"kind": "local", "fallback": "score"}})

    def test_every_bad_table_is_reported(self) -> None:
        """Problems in several tables are reported together."""
        with pytest.raises(ConfigError) as caught:
            build_seats({"score": {"kind": "nope"}, "bulk": {"kind": "cmd"}})
        assert "[seats.score]" in caught.value.message
        assert "[seats.bulk]" in caught.value.message

    def test_a_table_that_is_not_a_table(self) -> None:
        """`seats.x = 3` is refused with the shape it should have."""
        with pytest.raises(ConfigError, match=r"seats.score must be a table"):
            build_seats({"score": 3})  # type: ignore[dict-item]

    def test_unknown_seat_name_lists_the_known_ones(self) -> None:
        """Asking for a seat that does not exist lists every seat that does."""
        registry = build_seats({"big-remote": OPENAI})
        with pytest.raises(SeatError) as caught:
            registry.get("gigantic")
        assert caught.value.message.startswith(
            "there is no seat named 'gigantic'; the known seats are big-remote, bulk, score, "
            "scotoma, synthesis, termgen"
        )

    def test_registry_of_seats_checks_fallbacks_too(self) -> None:
        """A registry built from seat objects refuses a dangling fallback as well."""
        with pytest.raises(ConfigError, match="no seat table named 'elsewhere'"):
            SeatRegistry({"score": LocalSeat("score", fallback="elsewhere")})
