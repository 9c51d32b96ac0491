#!/usr/bin/env python3
"""An OpenAI-compatible server whose model is a `cmd` fake: each prompt piped to a program.

    python tests/fakes/openai_bridge.py --port 0 -- python tests/fakes/expedition_model.py

prints its port as the first line of stdout, then serves on 127.0.0.1:

    POST /v1/chat/completions   the last user message on the program's stdin, its stdout
                                as the answer; usage counted at four characters a token
    GET  /v1/models             one model, "fake-bridge"

So a pipeline's seats can go through the real gateway (every call a ledger
line with real usage) to a fake that answers each step sensibly. Stdlib
only; one program run per request, as the `cmd` seat runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def handler(command: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": "fake-bridge"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            users = [m for m in body.get("messages", []) if m.get("role") == "user"]
            prompt = str(users[-1].get("content", "")) if users else ""
            done = subprocess.run(command, input=prompt, capture_output=True, text=True)
            if done.returncode != 0:
                self._send(500, {"error": {"message": done.stderr[-500:]}})
                return
            answer = done.stdout.strip()
            self._send(
                200,
                {
                    "id": "chatcmpl-bridge",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "fake-bridge"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": answer},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": _tokens(prompt),
                        "completion_tokens": _tokens(answer),
                        "total_tokens": _tokens(prompt) + _tokens(answer),
                    },
                },
            )

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("command", nargs="+", help="the program a prompt is piped to")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(args.command))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever(poll_interval=0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
