"""`bullpen gateway check`: failure mode D told apart, against fake llama.cpp servers."""

from __future__ import annotations

from collections.abc import Callable

from tests.gateway.helpers import FakeBackend, GatewayHome
from tests.support import run_cli

StartFake = Callable[..., FakeBackend]


def test_mistral_tokens_with_a_chatml_template_is_a_mismatch(
    gw: GatewayHome, fake: StartFake
) -> None:
    """A ChatML template on Mistral bos/eos is named a mismatch, <|im_end|> is six tokens, exit 1."""
    wrong = fake(template="chatml", bos="<s>", eos="</s>", special=["<s>", "</s>"])
    gw.configure({"mistral": {"base_url": wrong.base_url, "prefixes": ["mistral"]}})
    done = run_cli(gw.society.root, "gateway", "check")
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "template mismatch: Mistral bos/eos <s> </s> with a ChatML template" in out
    assert "--chat-template-file" in out
    assert "<|im_end|> is 6 tokens here ('<' '|' 'im' '_end' '|' '>')" in out
    assert "stop strings at the gateway are the fix" in out
    assert "</s> is one special token here" in out


def test_a_matching_template_with_special_markers_passes(gw: GatewayHome, fake: StartFake) -> None:
    """A ChatML template whose markers are special tokens of the vocabulary checks clean, exit 0."""
    right = fake(
        template="chatml",
        bos="<|im_start|>",
        eos="<|im_end|>",
        special=["<|im_end|>", "<|im_start|>"],
    )
    gw.configure({"qwen": {"base_url": right.base_url, "prefixes": ["qwen"]}})
    done = run_cli(gw.society.root, "gateway", "check", "qwen")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "a ChatML template with bos/eos <|im_start|> <|im_end|>: they match" in done.stdout
    assert "<|im_end|> is one special token here" in done.stdout
    assert "PROBLEM" not in done.stdout


def test_a_server_without_props_or_tokenize_says_what_was_not_checked(
    gw: GatewayHome, fake: StartFake
) -> None:
    """A server with neither endpoint (vLLM, Ollama, a cloud API) is unchecked, says where to look."""
    other = fake(props=False, tokenize=False)
    gw.configure({"vllm": {"base_url": other.base_url, "prefixes": ["v"]}})
    done = run_cli(gw.society.root, "gateway", "check")
    assert done.returncode == 0
    assert "unchecked" in done.stdout
    assert "offers neither GET /props nor POST /tokenize" in done.stdout
    assert "model card" in done.stdout


def test_unreachable_backend_and_unknown_name(gw: GatewayHome) -> None:
    """A backend nobody answers for is a problem (exit 1); a backend name not configured is exit 2."""
    gw.configure({"gone": {"base_url": "http://127.0.0.1:9/v1", "prefixes": ["g"]}})
    done = run_cli(gw.society.root, "gateway", "check")
    assert done.returncode == 1
    assert "cannot reach http://127.0.0.1:9" in done.stdout
    unknown = run_cli(gw.society.root, "gateway", "check", "nope")
    assert unknown.returncode == 2
    assert "there is no [gateway.backends.nope]; the backends are gone" in unknown.stderr


def test_the_gateway_checks_a_new_backend_at_start(gw: GatewayHome, fake: StartFake) -> None:
    """At its first start the gateway checks each backend and logs the mismatch; later starts do not."""
    wrong = fake(template="chatml", bos="<s>", eos="</s>")
    gw.configure({"mistral": {"base_url": wrong.base_url, "prefixes": ["mistral"]}})
    gw.token("operator")
    proc = gw.start()
    from tests.support import wait_for

    wait_for(lambda: "template mismatch" in proc.output(), 20, "the start-up check's verdict")
    assert (gw.society.root / "gateway" / "checked.json").exists()


def test_llamacpps_builtin_template_names_are_known_by_family() -> None:
    """A bare built-in name from /props (`--chat-template NAME`) is read as its family; a
    built-in of a family the check does not compare is known as a name, not as a template."""
    from agents.gateway.check import builtin_name, template_family

    assert template_family("llama2") == template_family("mistral-v7") == "Mistral"
    assert template_family("chatml") == "ChatML" and template_family("llama3") == "Llama 3"
    assert builtin_name(" phi3\n") == "phi3" and template_family("phi3") is None
    assert builtin_name("{% for m in messages %}llama2{% endfor %}") is None
    assert template_family("<|im_start|>{{ m }}") == "ChatML"


def test_a_model_with_no_chat_template_is_named_a_base_model(
    gw: GatewayHome, fake: StartFake
) -> None:
    """A GGUF with no template: /props shows llama-server's own ChatML fallback on Gemma's
    bos/eos. The verdict names a base model, not a mismatch of an embedded template; exit 1."""
    base = fake(template="fallback", bos="<bos>", eos="<eos>", special=["<bos>", "<eos>"])
    gw.configure({"gemma": {"base_url": base.base_url, "prefixes": ["gemma"]}})
    done = run_cli(gw.society.root, "gateway", "check", "gemma")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "PROBLEM   base model, no chat template: not for chat seats" in out
    assert "the GGUF carries no chat template" in out and "Gemma bos/eos <bos> <eos>" in out
    assert "template mismatch" not in out and "embedded" not in out
    assert out.count("PROBLEM") == 1, out  # the fallback's markers are not blamed on the model


def test_a_chatml_model_with_no_template_is_a_note_not_a_problem(
    gw: GatewayHome, fake: StartFake
) -> None:
    """The fallback on ChatML tokens prompts the model in its own markers: a note, exit 0."""
    chatml = fake(template="fallback", bos="<|im_start|>", eos="<|im_end|>",
                  special=["<|im_start|>", "<|im_end|>"])  # fmt: skip
    gw.configure({"qwen": {"base_url": chatml.base_url, "prefixes": ["qwen"]}})
    done = run_cli(gw.society.root, "gateway", "check", "qwen")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the model carries no chat template: llama-server's ChatML fallback" in done.stdout
    assert "PROBLEM" not in done.stdout


def test_a_builtin_name_read_as_a_literal_template_drops_the_conversation(
    gw: GatewayHome, fake: StartFake
) -> None:
    """`--jinja --chat-template gemma`: /props says "gemma" on Gemma tokens (a match by name),
    but a message renders as the bare word; the rendering probe catches it, exit 1. Without
    --jinja the same name renders the message and checks clean."""
    literal = fake(template="gemma", jinja=True, bos="<bos>", eos="<eos>",
                   special=["<bos>", "<eos>", "<end_of_turn>"])  # fmt: skip
    gw.configure({"gemma": {"base_url": literal.base_url, "prefixes": ["gemma"]}})
    done = run_cli(gw.society.root, "gateway", "check", "gemma")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the chat template drops the conversation: a message renders as 'gemma' (1 token)" in (
        done.stdout
    )
    assert "--chat-template NAME as the template's own text" in done.stdout
    literal.behave(jinja=False)
    done = run_cli(gw.society.root, "gateway", "check", "gemma")
    assert done.returncode == 0, done.stdout
    assert "a message renders through the template" in done.stdout


def test_a_server_without_apply_template_says_the_rendering_was_not_checked(
    gw: GatewayHome, fake: StartFake
) -> None:
    """An older llama-server with no /apply-template: the rest is checked, the rendering is
    named unchecked, and nothing is called wrong for it."""
    old = fake(template="chatml", bos="<|im_start|>", eos="<|im_end|>",
               special=["<|im_end|>", "<|im_start|>"], apply_template=False)  # fmt: skip
    gw.configure({"old": {"base_url": old.base_url, "prefixes": ["old"]}})
    done = run_cli(gw.society.root, "gateway", "check", "old")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "POST /apply-template answered HTTP 404: how a message is rendered was not checked" in (
        done.stdout
    )
