#!/usr/bin/env python3
"""A fake coding model behind the OpenAI chat-completions protocol: it fixes only what it sees.

    python tests/fakes/fake_code_model.py --func total --wrong "price - discount" \
        --right "price * (1 - discount)" [--log FILE] [--lesson WORDS]

prints its port on the first line of stdout, then serves `POST …/chat/completions`
on 127.0.0.1 until killed. Like a real model it has no access to the repository:
everything it answers comes from the prompt. The request's `model` picks how it acts:

  fix      find `def FUNC` in a file the prompt shows under FILES (`--- path` … `--- end of
           path`, each line after its number and '| '), name that function's lines, copy
           them exactly as the OLD of one edit and answer them with WRONG replaced by RIGHT.
           A prompt without the file's current text gets a guess instead: the whole file
           written from memory, which the grind refuses.
  sloppy   the first time, the same edit with its OLD re-indented (so it is not what those
           lines say); once the prompt says the last answer was not applied, the exact one.
  lesson   like fix, but only when the prompt carries the lesson text --lesson; otherwise
           an edit that changes nothing useful (a comment).

A focused prompt (agents/build/focus.py: the function alone in a ```python block, no FILES)
is answered as a model talks, the corrected function in a code block after a line of
prose; `sloppy` first answers it with a comment added and the bug left (the spec stays as
red, so the grind rolls it back), then, told its answer was not kept, the fix.

Every request is logged as one JSON line (model, prompt, whether a response_format was
sent, temperature, seed and stop when sent) to --log.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FILE_BLOCK = re.compile(r"^--- (?P<path>\S+)\n(?P<text>.*?)\n--- end of (?P=path)$", re.M | re.S)
NUMBERED = re.compile(r"^ *(\d+)\| ?(.*)$")


def unnumbered(text: str) -> list[str]:
    """A file's lines as the prompt numbers them (1, 2, …), without their numbers."""
    lines = []
    for line in text.split("\n"):
        found = NUMBERED.match(line)
        lines.append(found.group(2) if found else line)
    return lines


def function_in(lines: list[str], func: str) -> tuple[int, int] | None:
    """The line numbers (first, last) of `def func` up to the next top-level line."""
    for start, line in enumerate(lines):
        if line.startswith(f"def {func}("):
            end = start + 1
            while end < len(lines) and (not lines[end].strip() or lines[end][:1] in " \t"):
                end += 1
            while end > start + 1 and not lines[end - 1].strip():
                end -= 1
            return start + 1, end
    return None


def focused(prompt: str, model: str, args: argparse.Namespace) -> str | None:
    """The answer to a focused prompt that shows `def FUNC` with the bug, or None."""
    found = re.search(rf"```python\n(def {re.escape(args.func)}\(.*?)\n```", prompt, re.S)
    if found is None or args.wrong not in found[1]:
        return None
    body = found[1]
    fixed = (
        body + "\n    # checked"
        if model == "sloppy" and "not kept" not in prompt
        else (body.replace(args.wrong, args.right))
    )
    return f"Here is the corrected function:\n\n```python\n{fixed}\n```\n"


def answer(prompt: str, model: str, args: argparse.Namespace) -> dict[str, Any] | str:
    said = focused(prompt, model, args)
    if said is not None:
        return said
    for found in FILE_BLOCK.finditer(prompt):
        lines = unnumbered(found["text"])
        where = function_in(lines, args.func)
        if where is None:
            continue
        body = "\n".join(lines[where[0] - 1 : where[1]])
        if args.wrong not in body:
            continue
        edit = {"path": found["path"], "start": where[0], "end": where[1], "old": body}
        if model == "sloppy" and "WAS NOT APPLIED" not in prompt:
            return {
                "edits": [{**edit, "old": "  " + body, "new": body.replace(args.wrong, args.right)}]
            }
        if model == "lesson" and args.lesson not in prompt:
            return {"edits": [{**edit, "new": "# ?\n" + body}]}
        return {"edits": [{**edit, "new": body.replace(args.wrong, args.right)}]}
    guess = f"def {args.func}(*args):\n    return {args.right}\n"  # from memory: blind
    return {"files": [{"path": args.guess_path, "content": guess}]}


def handler(args: argparse.Namespace) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *rest: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            prompt = str(body["messages"][-1]["content"])
            model = str(body.get("model", "fix"))
            if args.log:
                with open(args.log, "a", encoding="utf-8") as log:
                    said = {"model": model, "prompt": prompt, "format": "response_format" in body}
                    sampling = {k: body[k] for k in ("temperature", "seed", "stop") if k in body}
                    log.write(json.dumps({**said, **sampling}) + "\n")
            said = answer(prompt, model, args)
            content = said if isinstance(said, str) else json.dumps(said)
            reply = {
                "id": "fake",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--func", required=True)
    parser.add_argument("--wrong", required=True)
    parser.add_argument("--right", required=True)
    parser.add_argument("--guess-path", default="fixed.py")
    parser.add_argument("--lesson", default="")
    parser.add_argument("--log")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(args))
    print(server.server_address[1], flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
