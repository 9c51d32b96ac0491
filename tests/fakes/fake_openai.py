#!/usr/bin/env python3
"""A fake OpenAI-compatible chat-completions server with scripted answers.

    python tests/fakes/fake_openai.py --port 0 --script FILE [--reject-response-format [TYPES]]

prints the port it listens on as the first line of stdout, then serves
`POST <anything>/chat/completions` on 127.0.0.1 until killed. In-process:

    with FakeOpenAI({"score": ['{"scores": []}']}) as server:
        base_url = server.base_url          # http://127.0.0.1:PORT/v1
        ...
        server.requests                     # what it received

The step is the first line of the last user message, `step: X`. The script
maps step names (or "*") to a list of answers used in order (running out is
answered with HTTP 500 saying so), or to one answer used every time. An
answer is a string (the completion's content) or an object with any of:

    "content": "text"       the completion's content
    "json": {...}           the completion's content, as JSON text
    "delay": 5              seconds to wait before answering
    "status": 500           answer with this HTTP status and "body"
    "body": "text" | {...}  the body sent with "status"
    "raw": "text"           a 200 whose body is this text (a malformed body)
    "response": {...}       a 200 whose body is this JSON (e.g. without choices)

With --reject-response-format (or reject_response_format=True), a request
carrying response_format is answered 400 without using an answer, like a
server that does not support JSON mode; given comma-separated types
(`json_schema`), only a response_format of those types is refused, like a
server with JSON mode but no schemas. Every request is recorded (method,
path, lower-cased headers, parsed body) and served at GET /_fake/requests.
Stdlib only, so it starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ANSWER_KEYS = {"content", "json", "delay", "status", "body", "raw", "response"}


class FakeOpenAI:
    """The server; `start()` runs it on a daemon thread, `stop()` ends it."""

    def __init__(
        self,
        script: dict[str, Any],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        reject_response_format: bool | str = False,
    ) -> None:
        self.script = script
        self.reject_response_format = reject_response_format
        self.requests: list[dict[str, Any]] = []
        self._used: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.05)

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def wait(self, seconds: float) -> None:
        """Sleep, but wake at once when the server stops."""
        self._stopping.wait(seconds)

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(entry)

    def next_answer(self, step: str) -> Any:
        key = step if step in self.script else "*"
        if key not in self.script:
            return {"status": 500, "body": f"fake_openai: the script has no answer for {step!r}"}
        answers = self.script[key]
        if not isinstance(answers, list):
            return answers
        with self._lock:
            used = self._used.get(step, 0)
            self._used[step] = used + 1
        if used >= len(answers):
            return {"status": 500, "body": f"fake_openai: no scripted answer left for {step!r}"}
        return answers[used]


def _completion(model: str, content: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-fake-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _step_of(body: Any) -> str | None:
    try:
        users = [m for m in body["messages"] if m.get("role") == "user"]
        first = str(users[-1]["content"]).split("\n", 1)[0].strip()
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return first[6:].strip() if first.startswith("step: ") else None


def _handler_for(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: Any, content_type: str | None = None) -> None:
            if isinstance(body, str):
                data = body.encode("utf-8")
                looks_json = body.lstrip().startswith(("{", "["))
                content_type = content_type or (
                    "application/json" if looks_json else "text/plain; charset=utf-8"
                )
            else:
                data = json.dumps(body).encode("utf-8")
                content_type = content_type or "application/json"
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (a timeout test): fine

        def do_GET(self) -> None:
            if self.path == "/_fake/requests":
                with server._lock:
                    self._send(200, list(server.requests))
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8", "replace")
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw
            server.record(
                {
                    "method": "POST",
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                }
            )
            if not self.path.endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            if not isinstance(body, dict):
                self._send(400, {"error": {"message": "the body is not a JSON object"}})
                return
            if _refuses(server.reject_response_format, body.get("response_format")):
                self._send(
                    400,
                    {
                        "error": {
                            "message": "response_format is not supported by this server",
                            "type": "invalid_request_error",
                        }
                    },
                )
                return
            step = _step_of(body)
            if step is None:
                self._send(400, {"error": {"message": "no 'step: X' first line in the prompt"}})
                return
            answer = server.next_answer(step)
            if isinstance(answer, str):
                answer = {"content": answer}
            if not isinstance(answer, dict) or set(answer) - ANSWER_KEYS:
                self._send(500, {"error": {"message": f"bad scripted answer: {answer!r}"}})
                return
            if answer.get("delay"):
                server.wait(float(answer["delay"]))
                if server.stopping:
                    self.close_connection = True
                    return
            if "status" in answer:
                self._send(int(answer["status"]), answer.get("body", ""))
            elif "raw" in answer:
                self._send(200, str(answer["raw"]), content_type="application/json")
            elif "response" in answer:
                self._send(200, answer["response"])
            else:
                content = answer.get("content", "")
                if "json" in answer:
                    content = json.dumps(answer["json"])
                self._send(200, _completion(str(body.get("model", "")), content))

    return Handler


def _refuses(rejected: bool | str, response_format: Any) -> bool:
    if not rejected or response_format is None:
        return False
    if rejected is True or rejected == "*":
        return True
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    return kind in str(rejected).split(",")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--reject-response-format", nargs="?", const="*", default="")
    args = parser.parse_args(argv)
    script = json.loads(args.script.read_text(encoding="utf-8"))
    server = FakeOpenAI(
        script,
        host=args.host,
        port=args.port,
        reject_response_format=args.reject_response_format,
    )
    print(server.port, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
