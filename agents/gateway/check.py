"""`bullpen gateway check [BACKEND]`: failure mode D, diagnosed (seed 002, §5 D).

An agent that stops mid-chain with `<|im_end|>` in its text has one of two
problems, and they need different fixes:

* a **template mismatch** (configuration): the server prompts the model in
  a family it was not trained on — a Mistral GGUF (bos `<s>`, eos `</s>`)
  carrying a ChatML template. Read from llama.cpp's `GET /props`
  (`chat_template`, `bos_token`, `eos_token`). Fix: --chat-template-file.
  A server started with one of llama.cpp's built-in templates
  (`--chat-template llama2`) reports only the bare name there, so the
  check knows those names and the family each belongs to.
* a **generation artifact** (model behaviour): the marker is not a special
  token in this vocabulary (llama.cpp's `POST /tokenize` with
  `with_pieces` gives six pieces, `<` `|` `im` `_end` `|` `>`), so the
  model spelt it out. Fix: stop strings at the gateway, which it enforces.

Two more ways a server prompts a model wrongly, told apart the same way:

* a **base model** (no chat template at all): a GGUF that carries no
  template makes llama-server fall back to its own ChatML template, so
  `/props` shows a ChatML text that came from the server, not the model.
  Gemma 3 270M (the base model, not `-it`) is one. A model that was never
  tuned to chat has no business in a chat seat, whatever template is set.
* a **template that drops the conversation**: with `--jinja`, llama-server
  reads `--chat-template NAME` as the template's literal text, so
  `--chat-template gemma` renders every prompt as the five letters `gemma`.
  `/props` shows only the name, so the check renders a probe message with
  `POST /apply-template` and looks for it in the result.

A server with neither endpoint (vLLM, Ollama, a cloud API) gets a verdict
saying what could not be checked and what to look at instead. Exit 0 when
nothing is wrong, 1 with the verdicts otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from agents.gateway.config import BackendConfig, PolicyConfig
from agents.gateway.routing import Route
from agents.gateway.upstream import backend_key
from room.errors import BullpenError
from room.httpverify import verify_tls

__all__ = [
    "Verdict",
    "builtin_name",
    "check_backend",
    "fallback_template",
    "template_family",
    "token_family",
]

OK, NOTE, PROBLEM, UNCHECKED = "ok", "note", "PROBLEM", "unchecked"

# What a template's text and a vocabulary's bos/eos say about the family.
_TEMPLATE_SIGNS = (
    ("ChatML", ("<|im_start|>",)),
    ("Llama 3", ("<|start_header_id|>", "<|eot_id|>")),
    ("Gemma", ("<start_of_turn>",)),
    ("Mistral", ("[INST]",)),
)
_FAMILY_MARKERS = {
    "ChatML": ("<|im_start|>", "<|im_end|>"),
    "Llama 3": ("<|eot_id|>",),
    "Gemma": ("<end_of_turn>",),
    "Mistral": ("[INST]", "</s>"),
}
# llama.cpp's built-in chat templates (src/llama-chat.cpp, LLM_CHAT_TEMPLATES, as vendored
# by llama-cpp-python 0.3.36): `--chat-template NAME` makes GET /props report the bare NAME.
# Llama 2's and Mistral's templates share the [INST] markers and the <s> </s> tokens, so
# they are one family here, named Mistral as above.
_BUILTIN_FAMILIES = {
    "chatml": "ChatML",
    "llama3": "Llama 3",
    "gemma": "Gemma",
    **dict.fromkeys(
        (
            "llama2",
            "llama2-sys",
            "llama2-sys-bos",
            "llama2-sys-strip",
            "mistral-v1",
            "mistral-v3",
            "mistral-v3-tekken",
            "mistral-v7",
            "mistral-v7-tekken",
        ),
        "Mistral",
    ),
}
# The other built-in names: known to be templates, of families this check does not compare.
_BUILTIN_OTHERS = frozenset(
    [
        "phi3",
        "phi4",
        "falcon3",
        "zephyr",
        "monarch",
        "orion",
        "openchat",
        "vicuna",
        "vicuna-orca",
        "deepseek",
        "deepseek2",
        "deepseek3",
        "deepseek-ocr",
        "command-r",
        "chatglm3",
        "chatglm4",
        "glmedge",
        "minicpm",
        "exaone3",
        "exaone4",
        "exaone-moe",
        "rwkv-world",
        "granite",
        "granite-4.0",
        "granite-4.1",
        "gigachat",
        "megrez",
        "yandex",
        "bailing",
        "bailing-think",
        "bailing2",
        "llama4",
        "smolvlm",
        "hunyuan-moe",
        "gpt-oss",
        "hunyuan-dense",
        "hunyuan-vl",
        "kimi-k2",
        "seed_oss",
        "grok-2",
        "pangu-embedded",
        "solar-open",
    ]
)
# The template llama-server falls back to when the GGUF carries none (llama.cpp's
# common/chat.cpp, CHATML_TEMPLATE_SRC, as vendored by llama-cpp-python 0.3.36): /props
# reports this text for a model that brought no template of its own.
FALLBACK_CHATML = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}"
)
BASE_MODEL = "base model, no chat template: not for chat seats"
# What /apply-template is asked to render: a message whose words must come back in the prompt.
PROBE = "Reply with the word bullpen."
# Families whose template may fairly sit on another's tokens (Qwen: ChatML on its own bos/eos).
_COMPATIBLE = {("ChatML", "Qwen")}


def builtin_name(template: str) -> str | None:
    """The llama.cpp built-in template `template` names, when it is a bare name, not a text."""
    name = template.strip()
    return name if name in _BUILTIN_FAMILIES or name in _BUILTIN_OTHERS else None


def fallback_template(template: str) -> bool:
    """Whether `template` is llama-server's own ChatML fallback (the model brought none)."""
    return " ".join(template.split()) == " ".join(FALLBACK_CHATML.split())


def template_family(template: str) -> str | None:
    builtin = builtin_name(template)
    if builtin is not None:
        return _BUILTIN_FAMILIES.get(builtin)
    for family, signs in _TEMPLATE_SIGNS:
        if any(sign in template for sign in signs):
            return family
    return None


def token_family(bos: str | None, eos: str | None) -> str | None:
    pair = (bos or "", eos or "")
    if pair == ("<s>", "</s>"):
        return "Mistral"
    if pair[0] == "<|begin_of_text|>" or pair[1] == "<|eot_id|>":
        return "Llama 3"
    if pair[1] in ("<|im_end|>",) or pair[0] == "<|im_start|>":
        return "ChatML"
    if pair[1] == "<|endoftext|>":
        return "Qwen"
    if pair[0] == "<bos>" or pair[1] in ("<eos>", "<end_of_turn>"):
        return "Gemma"
    return None


@dataclass
class Verdict:
    backend: str
    url: str
    lines: list[tuple[str, str]] = field(default_factory=list)

    def add(self, level: str, text: str) -> None:
        self.lines.append((level, text))

    @property
    def wrong(self) -> bool:
        return any(level == PROBLEM for level, _ in self.lines)

    def render(self) -> str:
        head = f"backend {self.backend} ({self.url})"
        return "\n".join([head, *(f"  {level:<9} {text}" for level, text in self.lines)])


async def _get_json(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], body: Any = None
) -> tuple[int, Any]:
    if body is None:
        response = await client.get(url, headers=headers)
    else:
        response = await client.post(url, json=body, headers=headers)
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, None


async def check_backend(
    name: str, config: BackendConfig, policy: PolicyConfig, timeout_s: float = 10.0
) -> Verdict:
    """The verdict on one backend's template and markers."""
    verdict = Verdict(name, config.base_url)
    headers: dict[str, str] = {}
    try:
        key = backend_key(Route(name, config, ""))
    except BullpenError as exc:
        verdict.add(PROBLEM, exc.message)
        return verdict
    if key:
        headers["Authorization"] = f"Bearer {key}"
    root = config.root_url
    async with httpx.AsyncClient(timeout=timeout_s, verify=verify_tls(root)) as client:
        try:
            props_status, props = await _get_json(client, root + "/props", headers)
        except httpx.HTTPError as exc:
            verdict.add(
                PROBLEM,
                f"cannot reach {root} ({type(exc).__name__}); is the model server running?",
            )
            return verdict
        family = _read_props(verdict, props_status, props)
        tokenize_ok = await _check_markers(verdict, client, root, headers, policy, family)
        if tokenize_ok:
            await _check_rendering(verdict, client, root, headers)
    if props_status != 200 and not tokenize_ok:
        verdict.lines = [
            (
                UNCHECKED,
                f"{root} offers neither GET /props nor POST /tokenize (not llama.cpp's server: "
                "vLLM, Ollama or a cloud API?), so its chat template and markers cannot be "
                "checked here. Look at the model card's chat template and the server's "
                "template setting instead; the gateway's stop strings and marker cuts protect "
                "every caller either way",
            )
        ]
    return verdict


def _read_props(verdict: Verdict, status: int, props: Any) -> str | None:
    if status != 200 or not isinstance(props, dict):
        verdict.add(UNCHECKED, f"GET /props answered HTTP {status}: the chat template is unknown")
        return None
    template = props.get("chat_template")
    if not isinstance(template, str) or not template:
        verdict.add(UNCHECKED, "GET /props gives no chat_template: the template is unknown")
        return None
    family = template_family(template)
    builtin = builtin_name(template)
    bos, eos = props.get("bos_token"), props.get("eos_token")
    tokens = token_family(
        bos if isinstance(bos, str) else None, eos if isinstance(eos, str) else None
    )
    shown = f"bos/eos {bos} {eos}" if isinstance(bos, str) and isinstance(eos, str) else "bos/eos"
    which = f"a {family} template" + (f" (llama.cpp's built-in {builtin!r})" if builtin else "")
    if fallback_template(template):  # the markers are then checked against no family
        _no_template(verdict, tokens, shown)
        return None
    if family is None:
        said = f"llama.cpp's built-in {builtin!r} template" if builtin else "the chat template"
        verdict.add(NOTE, f"{said} is of no family this check knows ({shown})")
    elif tokens is None:
        verdict.add(NOTE, f"{which}; {shown} name no family this check knows, so not compared")
    elif family == tokens or (family, tokens) in _COMPATIBLE:
        verdict.add(OK, f"{which} with {shown}: they match")
    else:
        fix = (
            f"start the server without --chat-template {builtin}, or give it this model's "
            "own template with --chat-template-file"
            if builtin
            else "supply the right template with --chat-template-file (do not trust a GGUF's "
            "embedded template)"
        )
        verdict.add(PROBLEM, f"template mismatch: {tokens} {shown} with {which} — {fix}")
    return family


def _no_template(verdict: Verdict, tokens: str | None, shown: str) -> None:
    """The model brought no chat template; llama-server prompts it in its ChatML fallback."""
    if tokens == "ChatML":
        verdict.add(
            NOTE,
            f"the model carries no chat template: llama-server's ChatML fallback, on ChatML "
            f"tokens ({shown}); a model shipped without a template is often a base model — "
            "check its model card before giving it a chat seat",
        )
        return
    said = f"{tokens} {shown}" if tokens else shown
    verdict.add(
        PROBLEM,
        f"{BASE_MODEL} — the GGUF carries no chat template, so llama-server prompts it in "
        f"its own ChatML fallback, which this vocabulary ({said}) was never tuned to; serve "
        "the instruct model's GGUF (named -it or -Instruct) for a seat, or keep this one for "
        "plain completion",
    )


async def _check_rendering(
    verdict: Verdict, client: httpx.AsyncClient, root: str, headers: dict[str, str]
) -> None:
    """Render a probe message through the server's template (`POST /apply-template`): a
    template that drops the message (a bare name taken as text under --jinja) is a PROBLEM."""
    body = {"messages": [{"role": "user", "content": PROBE}]}
    try:
        status, answer = await _get_json(client, root + "/apply-template", headers, body)
    except httpx.HTTPError as exc:
        verdict.add(UNCHECKED, f"POST /apply-template failed ({type(exc).__name__})")
        return
    prompt = answer.get("prompt") if isinstance(answer, dict) else None
    if status != 200 or not isinstance(prompt, str):
        verdict.add(
            UNCHECKED,
            f"POST /apply-template answered HTTP {status}: how a message is rendered was not "
            "checked",
        )
        return
    count = await _token_count(client, root, headers, prompt)
    size = f"{len(prompt)} characters"
    if count is not None:
        size = f"{count} token" + ("" if count == 1 else "s")
    if PROBE in prompt:
        verdict.add(OK, f"a message renders through the template ({size} for a one-line message)")
        return
    shown = prompt if len(prompt) <= 60 else prompt[:60] + "…"
    verdict.add(
        PROBLEM,
        f"the chat template drops the conversation: a message renders as {shown!r} ({size}), "
        "without its words, so every prompt is the same. With --jinja, llama-server reads "
        "--chat-template NAME as the template's own text: drop --jinja to use the built-in "
        "NAME, or give the model's template with --chat-template-file",
    )


async def _token_count(
    client: httpx.AsyncClient, root: str, headers: dict[str, str], text: str
) -> int | None:
    body = {"content": text, "add_special": False, "parse_special": True}
    try:
        status, answer = await _get_json(client, root + "/tokenize", headers, body)
    except httpx.HTTPError:
        return None
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    return len(tokens) if status == 200 and isinstance(tokens, list) else None


async def _check_markers(
    verdict: Verdict,
    client: httpx.AsyncClient,
    root: str,
    headers: dict[str, str],
    policy: PolicyConfig,
    family: str | None,
) -> bool:
    ours = set(_FAMILY_MARKERS.get(family or "", ()))
    for marker in policy.markers:
        body = {"content": marker, "add_special": False, "parse_special": True, "with_pieces": True}
        try:
            status, answer = await _get_json(client, root + "/tokenize", headers, body)
        except httpx.HTTPError as exc:
            verdict.add(UNCHECKED, f"POST /tokenize failed ({type(exc).__name__})")
            return False
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if status != 200 or not isinstance(tokens, list) or not tokens:
            verdict.add(UNCHECKED, f"POST /tokenize answered HTTP {status}: markers not checked")
            return False
        if len(tokens) == 1:
            verdict.add(OK, f"{marker} is one special token here")
            continue
        pieces = " ".join(_piece(token) for token in tokens)
        text = (
            f"{marker} is {len(tokens)} tokens here ({pieces}): a model writing it is a "
            "generation artifact — stop strings at the gateway are the fix"
        )
        if marker in ours:
            verdict.add(
                PROBLEM,
                text + f"; and the {family} template writes it, so the template does not "
                "belong to this vocabulary",
            )
        else:
            verdict.add(NOTE, text)
    return True


def _piece(token: Any) -> str:
    if isinstance(token, dict):
        piece = token.get("piece")
        if isinstance(piece, str):
            return repr(piece)
        if isinstance(piece, list):  # llama.cpp gives bytes when a piece is not UTF-8
            return repr(bytes(b for b in piece if isinstance(b, int) and 0 <= b < 256))
        return str(token.get("id"))
    return str(token)
