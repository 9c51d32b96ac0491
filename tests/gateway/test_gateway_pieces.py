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


@pytest.mark.parametrize("size", [1, 2, 3, 7, 100])
def test_stream_mask_catches_a_key_split_at_any_boundary(size: int) -> None:
    """However a quoted key is chunked, it comes out as ***, and plain text is not held back."""
    from agents.gateway.masking import StreamMask

    key = "sk-abcdefghijklmnop"
    text = f"the key is {key}, and s then sk- alone"
    mask = StreamMask((key,))
    out = "".join(mask.feed(text[i : i + size]) for i in range(0, len(text), size))
    assert out + mask.finish() == "the key is ***, and s then sk- alone"
    assert StreamMask((key,)).feed("hello ") == "hello "


def test_mask_body_finds_a_key_spelt_with_json_escapes() -> None:
    """A backend's JSON error quoting its key as \\u escapes is masked after parsing."""
    from agents.gateway.masking import mask_body

    raw = b'{"error": {"message": "bad key \\u0073k-abcdefghijklmnop"}}'
    assert b"abcdefghijklmnop" not in mask_body(raw, ("sk-abcdefghijklmnop",))
    assert mask_body(b"plain sk-abcdefghijklmnop", ("sk-abcdefghijklmnop",)) == b"plain ***"


def test_charge_is_one_rule_for_live_and_restore() -> None:
    """Refusals and 502s count as no call; negative or odd token counts count as 0."""
    from agents.gateway.budgets import charge

    assert charge({"status": 429, "flags": ["OVER_BUDGET"], "tokens_in": 9}) is None
    assert charge({"status": 400, "flags": ["SECRET_REFUSED"]}) is None
    assert charge({"status": 502, "flags": [], "tokens_in": 50}) is None
    assert charge({"status": 200, "tokens_in": -(10**9), "tokens_out": 5}) == 5
    assert charge({"status": 200, "tokens_in": "7", "tokens_out": True}) == 0
    assert charge({"status": 504, "flags": ["DEADLINE"], "tokens_in": 3, "tokens_out": 4}) == 7


def test_listed_ids_route_exactly_and_case_sensitively() -> None:
    """An id a backend listed goes to it as listed, unless another backend's prefix claims it;
    another case of it is unknown."""
    backends = {
        "llama": BackendConfig(base_url="http://a/v1", prefixes=["smol"]),
        "vllm": BackendConfig(base_url="http://b/v1", prefixes=["Org/"]),
        "zeta": BackendConfig(base_url="http://c/v1", prefixes=["zeta"]),
    }
    router = Router(backends)
    kept = router.learn(
        {
            "llama": {"models/x.gguf": "models/x.gguf", "Org/stolen": "Org/stolen"},
            "zeta": {"models/x.gguf": "models/x.gguf", "zeta-1": "zeta-1"},
        }
    )
    assert kept == {"llama": ["models/x.gguf"], "zeta": ["zeta-1"]}
    route = router.route("models/x.gguf")
    assert (route.backend, route.model) == ("llama", "models/x.gguf")
    assert router.route("Org/stolen").backend == "vllm"  # the operator's prefix wins
    router.learn({"zeta": {}})  # one backend's new list leaves the others' as they were
    assert router.route("models/x.gguf").backend == "llama"
    with pytest.raises(UnknownModel, match="case-sensitive"):
        router.route("SMOL-7b")
    with pytest.raises(UnknownModel):
        router.route("MODELS/X.GGUF")
