"""The gateway's pieces on their own: the stream scanner, routing, the seat table, the config."""

from __future__ import annotations

import pytest

from agents.gateway.config import BackendConfig, GatewayConfig
from agents.gateway.policy import STOP_ENFORCED, TEMPLATE_LEAK, Policy, Scanner
from agents.gateway.routing import Router, UnknownModel
from agents.seats import build_seats
from room.errors import ConfigError


def _feed(scanner: Scanner, pieces: list[str]) -> str:
    return "".join(scanner.feed(piece) for piece in pieces) + scanner.finish()


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 100])
def test_scanner_cuts_a_marker_split_at_any_boundary(size: int) -> None:
    """However the text is chunked, the output stops right before <|im_end|> and is flagged."""
    text = "answer<|im_end|>junk"
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    scanner = Scanner((), ("<|im_end|>",))
    assert _feed(scanner, pieces) == "answer"
    assert scanner.flags == [TEMPLATE_LEAK]


def test_scanner_holds_back_only_a_possible_start() -> None:
    """Text that cannot begin a pattern is passed on at once; a partial `<|im` waits, then flows."""
    scanner = Scanner(("STOP",), ("<|im_end|>",))
    assert scanner.feed("hello ") == "hello "
    assert scanner.feed("a <|im") == "a "
    assert scanner.feed("agine") == "<|imagine"
    assert scanner.feed(" ST") == " "
    assert scanner.feed("OP and more") == ""
    assert scanner.flags == [STOP_ENFORCED]
    assert scanner.finish() == ""


def test_policy_adds_stops_and_caps_max_tokens() -> None:
    """The caller's stop strings are kept, the policy's added, and max_tokens capped or set."""
    policy = Policy(stop=("<|im_end|>",), max_tokens=50)
    body = {"stop": "END", "max_tokens": 500}
    assert policy.apply(body) == ("END", "<|im_end|>")
    assert body == {"stop": ["END", "<|im_end|>"], "max_tokens": 50}
    bare: dict[str, object] = {}
    policy.apply(bare)
    assert bare["max_tokens"] == 50


def test_router_longest_prefix_regardless_of_order() -> None:
    """The longer prefix wins even when its backend is listed first or last."""
    backends = {
        "a": BackendConfig(base_url="http://a/v1", prefixes=["q"]),
        "b": BackendConfig(base_url="http://b/v1", prefixes=["qwen2"]),
    }
    assert Router(backends).route("qwen2-7b").backend == "b"
    assert Router(dict(reversed(backends.items()))).route("qwen2-7b").backend == "b"
    with pytest.raises(UnknownModel, match="the known prefixes are q, qwen2"):
        Router(backends).route("llama")


def test_a_prefix_served_twice_is_refused() -> None:
    """Two backends claiming one prefix is a configuration error naming both."""
    with pytest.raises(ValueError, match="served by both a and b"):
        GatewayConfig.model_validate(
            {
                "backends": {
                    "a": {"base_url": "http://a/v1", "prefixes": ["q"]},
                    "b": {"base_url": "http://b/v1", "prefixes": ["q"]},
                }
            }
        )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"kind": "openai", "model": "m"}, "set either base_url"),
        (
            {"kind": "openai", "model": "m", "via": "gateway", "base_url": "http://x/v1"},
            "not both or neither",
        ),
        (
            {"kind": "openai", "model": "m", "via": "gateway", "api_key_env": "KEY"},
            "remove api_key_env",
        ),
        ({"kind": "openai", "model": "m", "via": "proxy"}, "via"),
    ],
)
def test_seat_table_via_gateway_rules(table: dict[str, str], message: str) -> None:
    """An openai seat has base_url or via = "gateway", never both, and no key of its own via it."""
    with pytest.raises(ConfigError, match=message):
        build_seats({"score": table})
    assert "score" in build_seats({"score": {"kind": "openai", "model": "m", "via": "gateway"}})
