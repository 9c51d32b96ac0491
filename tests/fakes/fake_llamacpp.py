#!/usr/bin/env python3
"""A fake llama.cpp-style server with switchable behaviours, for the gateway's tests.

    python tests/fakes/fake_llamacpp.py --port 0 [--behave JSON]

prints its port as the first line of stdout, then serves on 127.0.0.1:

    POST /v1/chat/completions   an answer, or with "stream": true server-sent events
    GET  /v1/models             one model, its "model" name
    GET  /props                 chat_template, bos_token, eos_token (llama.cpp's shape)
    POST /tokenize              {"content", "with_pieces"} → {"tokens": [{"id", "piece"}...]}
    POST /apply-template        {"messages"} → {"prompt"}: the messages rendered by the template
    POST /_fake/behave          merge a JSON object into the behaviour below
    GET  /_fake/requests        every chat request received (path, headers, body)

The behaviour (defaults first):

    answer: "hello world"       the completion's text
    chunk: 4                    characters per streamed chunk
    template: "chatml"          chatml | mistral | llama3 | fallback (llama-server's own ChatML,
                                for a GGUF with no template) | any other text: a built-in
                                name (`--chat-template gemma`), reported bare
    jinja: false                true: a bare name renders as its own literal text, as
                                llama-server's --jinja does with `--chat-template NAME`
    apply_template: true        false: POST /apply-template answers 404 (an older server)
    bos, eos: "<s>", "</s>"     what /props reports (Mistral's: with chatml, a mismatch)
    special: []                 markers tokenized as one piece; others split (<|im_end|> → 6)
    props, tokenize: true       false: the endpoint answers 404 (vLLM, Ollama, a cloud API)
    honour_stop: true           false: the stop strings in a request are ignored
    usage: true                 false: no usage in answers (the gateway must estimate)
    delay: 0                    seconds before answering
    fail: 0, fail_status: 503   the next `fail` chat requests get this status
    status: null                every chat request gets this status (a dead backend)
    echo_auth: false            true: a failure's body quotes the Authorization header
    quote_key: false            true: the answer itself ends by quoting the caller's key
    usage_value: null           an object sent as `usage` instead of the real counts
    forever: false              true: a stream never ends (a chunk every 20 ms)
    answers: null               with n > 1: each choice's text (else `answer` for all)
    raw: null                   a 200 whose body is this text (a malformed answer)
    model: "fake-model"
    honour_max_tokens: false    true: each choice cut at max_tokens (4 characters a token),
                                finish_reason "length", usage summed over the choices

A stream ends as llama-server's does: the usage rides on the last chunk,
or, when the request asks `stream_options.include_usage`, comes after it in
a chunk of its own with no choices. With `n` > 1 the choices' chunks are
interleaved (choice 0, 1, 0, 1...), as vLLM sends them.

Stdlib only, so it starts fast; threads, HTTP/1.1 keep-alive.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TEMPLATES = {
    "chatml": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{% endfor %}<|im_start|>assistant\n",
    "mistral": "{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}",
    "llama3": "<|begin_of_text|>{% for m in messages %}<|start_header_id|>{{ m.role }}"
    "<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% endfor %}",
}
DEFAULTS: dict[str, Any] = {
    "answer": "hello world",
    "chunk": 4,
    "template": "chatml",
    "jinja": False,
    "apply_template": True,
    "bos": "<s>",
    "eos": "</s>",
    "special": [],
    "props": True,
    "tokenize": True,
    "honour_stop": True,
    "usage": True,
    "delay": 0,
    "fail": 0,
    "fail_status": 503,
    "status": None,
    "echo_auth": False,
    "quote_key": False,
    "usage_value": None,
    "forever": False,
    "answers": None,
    "raw": None,
    "model": "fake-model",
    "honour_max_tokens": False,
}
# llama-server's own template for a GGUF that carries none, as its /props shows it.
TEMPLATES["fallback"] = (
    "{%- for message in messages -%}\n  {{- '<|im_start|>' + message.role + '\n' + "
    "message.content + '<|im_end|>\n' -}}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n{%- endif -%}"
)
_PIECES = re.compile(r"[A-Za-z]+|_[A-Za-z]+|.", re.S)


class State:
    def __init__(self, behave: dict[str, Any]) -> None:
        self.behave = {**DEFAULTS, **behave}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()


def tokenize(text: str, special: list[str]) -> list[dict[str, Any]]:
    tokens: list[dict[str, Any]] = []
    at = 0
    while at < len(text):
        for marker in special:
            if text.startswith(marker, at):
                tokens.append({"id": 32000 + special.index(marker), "piece": marker})
                at += len(marker)
                break
        else:
            piece = _PIECES.match(text, at)
            assert piece is not None
            tokens.append({"id": 100 + len(tokens), "piece": piece.group(0)})
            at = piece.end()
    return tokens


def render(behave: dict[str, Any], messages: list[Any]) -> str:
    """The prompt the template makes of `messages`: a bare name under jinja is its own text."""
    name = behave["template"]
    if name not in TEMPLATES and behave["jinja"]:
        return str(name)
    turns = [m for m in messages if isinstance(m, dict)]
    if name == "mistral":
        return behave["bos"] + "".join(f"[INST] {m.get('content')} [/INST]" for m in turns)
    if name == "llama3":
        return "<|begin_of_text|>" + "".join(
            f"<|start_header_id|>{m.get('role')}<|end_header_id|>\n\n{m.get('content')}<|eot_id|>"
            for m in turns
        )
    said = "".join(f"<|im_start|>{m.get('role')}\n{m.get('content')}<|im_end|>\n" for m in turns)
    return said + "<|im_start|>assistant\n"


def _handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw) if raw else {}
            except ValueError:
                return None

        def do_GET(self) -> None:
            behave = state.behave
            if self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": behave["model"]}]})
            elif self.path == "/props" and behave["props"]:
                self._send(
                    200,
                    {
                        "default_generation_settings": {"n_ctx": 4096},
                        "total_slots": 1,
                        "model_path": "/models/fake.gguf",
                        "chat_template": TEMPLATES.get(behave["template"], behave["template"]),
                        "bos_token": behave["bos"],
                        "eos_token": behave["eos"],
                        "build_info": "fake",
                    },
                )
            elif self.path == "/_fake/requests":
                with state.lock:
                    self._send(200, list(state.requests))
            elif self.path == "/health":
                self._send(200, {"status": "ok"})
            else:
                self._send(404, {"error": {"code": 404, "message": "File Not Found"}})

        def do_POST(self) -> None:
            body = self._body()
            if self.path == "/_fake/behave":
                state.behave.update(body or {})
                self._send(200, state.behave)
            elif self.path == "/tokenize" and state.behave["tokenize"]:
                tokens = tokenize(str((body or {}).get("content", "")), state.behave["special"])
                if not (body or {}).get("with_pieces"):
                    tokens = [t["id"] for t in tokens]
                self._send(200, {"tokens": tokens})
            elif self.path == "/apply-template" and state.behave["apply_template"]:
                messages = (body or {}).get("messages") or []
                self._send(200, {"prompt": render(state.behave, messages)})
            elif self.path.endswith("/chat/completions"):
                self._chat(body if isinstance(body, dict) else {})
            else:
                self._send(404, {"error": {"code": 404, "message": "File Not Found"}})

        def _chat(self, body: dict[str, Any]) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            with state.lock:
                state.requests.append({"path": self.path, "headers": headers, "body": body})
                behave = dict(state.behave)
                failing = behave["fail"] > 0
                if failing:
                    state.behave["fail"] -= 1
            if behave["delay"]:
                time.sleep(float(behave["delay"]))
            if behave["status"] is not None or failing:
                status = behave["status"] or behave["fail_status"]
                message = "fake failure"
                if behave["echo_auth"]:
                    message += f" for {headers.get('authorization', '')}"
                self._send(int(status), {"error": {"code": status, "message": message}})
                return
            if behave["raw"] is not None:
                self._send(200, str(behave["raw"]).encode())
                return
            n = body.get("n") if isinstance(body.get("n"), int) else 1
            texts = [str(t) for t in behave["answers"] or [behave["answer"]] * n][: max(1, n)]
            if behave["quote_key"]:
                key = headers.get("authorization", "").removeprefix("Bearer ")
                texts = [f"{t} (your key is {key})" for t in texts]
            stops = body.get("stop") or []
            if behave["honour_stop"]:
                for i, text in enumerate(texts):
                    for stop in [stops] if isinstance(stops, str) else stops:
                        if stop in text:
                            text = text[: text.index(stop)]
                    texts[i] = text
            text = texts[0]
            usage: Any = {"prompt_tokens": 7, "completion_tokens": max(1, len(text) // 4)}
            finish = ["stop"] * len(texts)
            bound = body.get("max_tokens")
            if behave["honour_max_tokens"]:
                if isinstance(bound, int) and bound > 0:
                    finish = ["length" if len(t) > bound * 4 else "stop" for t in texts]
                    texts = [t[: bound * 4] for t in texts]
                spent = sum(max(1, -(-len(t) // 4)) for t in texts)
                usage = {"prompt_tokens": 7, "completion_tokens": spent}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            if behave["usage_value"] is not None:
                usage = behave["usage_value"]
            model = body.get("model", behave["model"])
            if body.get("stream"):
                options = body.get("stream_options") or {}
                self._stream(
                    texts,
                    model,
                    usage if behave["usage"] else None,
                    int(behave["chunk"]),
                    own_chunk=isinstance(options, dict) and options.get("include_usage") is True,
                    forever=bool(behave["forever"]),
                )
                return
            answer: dict[str, Any] = {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": index,
                        "message": {"role": "assistant", "content": choice},
                        "finish_reason": finish[index],
                    }
                    for index, choice in enumerate(texts)
                ],
            }
            if behave["usage"]:
                answer["usage"] = usage
            self._send(200, answer)

        def _stream(
            self,
            texts: list[str],
            model: str,
            usage: Any,
            size: int,
            own_chunk: bool,
            forever: bool,
        ) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            size = max(1, size)
            split = [[t[i : i + size] for i in range(0, len(t), size)] or [""] for t in texts]
            base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model}

            def send(chunk: dict[str, Any]) -> None:
                self.wfile.write(b"data: " + json.dumps({**base, **chunk}).encode() + b"\n\n")
                self.wfile.flush()

            try:
                if forever:
                    while True:
                        send({"choices": [{"index": 0, "delta": {"content": "more "}}]})
                        time.sleep(0.02)
                rounds = max(len(pieces) for pieces in split)
                for at in range(rounds):
                    for index, pieces in enumerate(split):  # interleaved, choice by choice
                        if at >= len(pieces):
                            continue
                        last = at == len(pieces) - 1
                        chunk: dict[str, Any] = {
                            "choices": [
                                {
                                    "index": index,
                                    "delta": {"content": pieces[at]},
                                    "finish_reason": "stop" if last else None,
                                }
                            ]
                        }
                        if last and usage and not own_chunk and index == len(split) - 1:
                            chunk["usage"] = usage
                        send(chunk)
                if usage and own_chunk:
                    send({"choices": [], "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    return Handler


def serve(port: int, behave: dict[str, Any]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(State(behave)))
    server.daemon_threads = True
    return server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--behave", default="{}", help="a JSON object of behaviours")
    args = parser.parse_args()
    server = serve(args.port, json.loads(args.behave))
    print(server.server_address[1], flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever(poll_interval=0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
