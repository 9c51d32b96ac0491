"""`bullpen gateway check` against llama-server running SmolLM2-135M-Instruct for real.

SmolLM2 is a ChatML model: its vocabulary has `<|im_start|>` and `<|im_end|>`
as special tokens and its GGUF carries a ChatML template. Served as it is,
the check finds nothing wrong; served with a Mistral `[INST]` template —
from a Jinja file, or llama.cpp's built-in `llama2` named on the command
line, which `/props` reports as the bare name — it is a template mismatch.
"""

from __future__ import annotations

from pathlib import Path

from tests.gateway.helpers import GatewayHome
from tests.realmodel.server import LlamaServer, start_llama
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
    server = start_llama(tmp_path / "llama", "--chat-template-file", str(template))
    try:
        assert "[INST]" in server.props()["chat_template"]
        code, out = check(gw, server)
    finally:
        server.stop()
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
    server = start_llama(tmp_path / "llama", "--chat-template", "llama2")
    try:
        assert server.props()["chat_template"] == "llama2"
        code, out = check(gw, server)
    finally:
        server.stop()
    assert code == 1, out
    assert (
        "template mismatch: ChatML bos/eos <|im_start|> <|im_end|> with a Mistral template "
        "(llama.cpp's built-in 'llama2')"
    ) in out
    assert "start the server without --chat-template llama2" in out
