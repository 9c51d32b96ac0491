"""The webgame smoke runner: load an HTML canvas page in a real headless browser, report TAP.

    python -I agents/build/webgame.py SPEC.test.html      run it; exit 0 when every check passes
    python -I agents/build/webgame.py --check SPEC.html   exit 0 when the page can be run at all

A single-file HTML canvas game cannot be tested by `node --test`: whether it
runs is whether a browser runs it. This runner serves the folder it runs in
(the grind's clone) over a loopback HTTP server of its own, the spec page with
a small harness injected first thing in it, loads the page in headless
Chromium driven over its DevTools pipe (`--remote-debugging-pipe`, a few JSON
messages: no driver, no port), and lets it run in real time (a game draws on
animation frames, which a virtual-time budget starves).

The page is served, never opened as a file: a page from file:// with
`--allow-file-access-from-files` could read any file the fence leaves visible.
From http://127.0.0.1 the page's script reaches no file:// URL, and the server
answers only for regular files inside the served folder (a link out of it, a
`..` or anything else is 404), so the game's JS reads its own folder and
nothing else.

The game is model-written, so hostile: script errors are taken from the
browser itself (the protocol's uncaught exceptions) and from the harness's
listeners, registered before any of the page's code, so neither `onerror`
returning true nor a swallowed rejection hides one; the harness's globals
cannot be replaced; and the canvases are read from an isolated world, which
the page's code cannot reach. It needs no test-only package and no network:
the browser runs with every background fetch off, and the fence around it
(agents/build/fence.py) shares no network anyway.

The checks, one TAP line each:
  - each canvas of the page draws something (not blank: not all one colour)
    and no script error (an uncaught error or an unhandled rejection) happened;
  - each `smoke("name", () => condition)` the spec page declares holds;
  - a page with no canvas at all fails one check saying so.

Run by path with `python -I`, stdlib only: the clone's own files (model-written)
can neither shadow it nor the modules it imports.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import mimetypes
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

BROWSERS = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "chromium", "chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",  # the fence is the sandbox; Chromium's own needs namespaces it lacks there
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
)
CRASHED = ("Inspector.targetCrashed", "Target.targetCrashed")
SETTLE_MS = 1000  # after the load event, before the checks run (then two frames more)
TIMEOUT_S = 60.0
SHORT_PATH = 48
HARNESS = """<script>/* bullpen webgame smoke harness: runs before any of the page's code */
(function () {
  var failed = [], checks = [], ready = false;
  var push = Array.prototype.push, json = JSON.stringify, text = String;
  var define = Object.defineProperty;
  /* first of all listeners, so the page cannot swallow an error before it is seen */
  addEventListener("error", function (e) {
    if (e.target && e.target !== window && e.target.src) {
      push.call(failed, "failed to load " + text(e.target.src).split("/").pop());
    } else if (e.message) {
      var at = e.filename ? " (" + text(e.filename).split("/").pop() + ":" + e.lineno + ")" : "";
      push.call(failed, text(e.message) + at);
    }
  }, true);
  addEventListener("unhandledrejection", function (e) {
    push.call(failed, "Uncaught (in promise) " + text(e.reason));
  }, true);
  define(window, "smoke", {value: function (name, fn) { push.call(checks, [text(name), fn]); },
                           writable: false, configurable: false});
  define(window, "__bullpenSmoke", {writable: false, configurable: false, value: function () {
    if (!ready) return null;
    var out = [];
    for (var j = 0; j < checks.length; j++) {
      var why = null;
      try { if (!checks[j][1]()) why = "it was false"; } catch (e) { why = "it threw " + e; }
      push.call(out, [checks[j][0], why]);
    }
    return json({failed: failed, checks: out});
  }});
  addEventListener("load", function () {  /* then a while, then two frames: a game has drawn */
    setTimeout(function () {
      requestAnimationFrame(function () { requestAnimationFrame(function () { ready = true; }); });
    }, SETTLE_MS);
  });
})();
</script>
"""
# Run in an isolated world: the page's own code cannot reach or replace anything it uses.
CANVASES = """JSON.stringify(Array.from(document.querySelectorAll("canvas"), function (c, i) {
  var name = "canvas " + (c.id ? "#" + c.id : i + 1), why = null;
  try {
    if (!c.width || !c.height) { why = "it has no size"; }
    else {
      var t = document.createElement("canvas"); t.width = c.width; t.height = c.height;
      var x = t.getContext("2d"); x.drawImage(c, 0, 0);
      var d = x.getImageData(0, 0, t.width, t.height).data, same = true;
      for (var k = 4; k < d.length && same; k += 4) {
        same = d[k] === d[0] && d[k + 1] === d[1] && d[k + 2] === d[2] && d[k + 3] === d[3];
      }
      if (same) why = "it is blank (every pixel the same colour)";
    }
  } catch (e) { why = "cannot read it: " + e; }
  return [name, why];
}))"""
_HEAD = re.compile(r"<head\b[^>]*>", re.I)
_WHERE = re.compile(r" \([^()]*:\d+\)$")
_DOCTYPE = re.compile(r"^\s*<!doctype[^>]*>", re.I)


def harnessed(page: str) -> str:
    """The page with the harness as its first script, before any of its own."""
    script = HARNESS.replace("SETTLE_MS", str(SETTLE_MS))
    head = _HEAD.search(page)
    if head:
        return page[: head.end()] + script + page[head.end() :]
    doctype = _DOCTYPE.match(page)
    at = doctype.end() if doctype else 0
    return page[:at] + script + page[at:]


class _Folder(http.server.BaseHTTPRequestHandler):
    """GET of a regular file inside the served folder (links resolved, none out), or 404;
    the spec page answered with its harness in."""

    root: Path
    page: str  # the spec's path in the folder, as a URL path
    text: bytes  # the harnessed page

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        if path == self.page:
            self._send(200, self.text, "text/html; charset=utf-8")
            return
        target = Path(os.path.realpath(self.root / path.lstrip("/")))
        if not target.is_relative_to(self.root) or not target.is_file():
            self._send(404, b"not in the game's folder", "text/plain")
            return
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        try:
            body = target.read_bytes()
        except OSError:
            self._send(404, b"unreadable", "text/plain")
            return
        self._send(200, body, kind)

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(root: Path, spec: Path, text: str) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A loopback server of `root` (the clone), the spec page harnessed: (it, the page's URL)."""
    real = Path(os.path.realpath(root))
    page = "/" + quote(Path(os.path.realpath(spec)).relative_to(real).as_posix())
    handler = type("Served", (_Folder,), {"root": real, "page": unquote(page),
                                          "text": harnessed(text).encode()})  # fmt: skip
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}{page}"


def browser() -> str | None:
    for name in BROWSERS:
        found = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
        if found:
            return found
    return None


class _Pipe:
    """The DevTools protocol over the browser's --remote-debugging-pipe: JSON messages ended
    by a NUL byte, commands on its fd 3, answers and events on its fd 4."""

    def __init__(self, send: int, receive: int) -> None:
        self.send, self.receive = send, receive
        self.buffer = b""
        self.next_id = 0
        self.exceptions: list[str] = []  # every uncaught exception the page threw

    def call(
        self, method: str, params: dict[str, Any], session: str | None, deadline: float
    ) -> Any:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.send, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read(deadline)
            if answer.get("method") == "Runtime.exceptionThrown":
                self.exceptions.append(_exception(answer.get("params", {})))
            if answer.get("method") in CRASHED:  # its renderer is gone: nothing will answer
                raise RuntimeError(
                    "the page's renderer crashed (killed: at the run's memory bound, if the "
                    "run's result says it hit it)"
                )
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error'].get('message')}")
                return answer.get("result", {})

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.receive], [], [], left)[0]:
                raise TimeoutError("the browser did not answer in time")
            chunk = os.read(self.receive, 1 << 16)
            if not chunk:
                raise RuntimeError("the browser closed its DevTools pipe (it exited)")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return dict(json.loads(raw))


def _exception(params: dict[str, Any]) -> str:
    """One uncaught exception as a line: its message and where it was thrown."""
    details = params.get("exceptionDetails") or {}
    described = str((details.get("exception") or {}).get("description") or "").split("\n")[0]
    said = " ".join(part for part in (details.get("text"), described) if part) or "an error"
    frames = (details.get("stackTrace") or {}).get("callFrames") or [{}]
    url = str(details.get("url") or frames[0].get("url") or "")
    line = int(details.get("lineNumber", frames[0].get("lineNumber", 0)) or 0) + 1
    return f"{said} ({url.rsplit('/', 1)[-1]}:{line})" if url else said


def _value(pipe: _Pipe, session: str, expression: str, deadline: float, **where: Any) -> Any:
    params = {"expression": expression, "returnByValue": True, **where}
    done = pipe.call("Runtime.evaluate", params, session, deadline)
    return done.get("result", {}).get("value")


def _drive(pipe: _Pipe, url: str, deadline: float) -> str | None:
    """Open `url` in a new page, wait for the harness, check it: the TAP text, or None."""
    target = pipe.call("Target.createTarget", {"url": "about:blank"}, None, deadline)["targetId"]
    attached = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True}, None,
                         deadline)  # fmt: skip
    session = attached["sessionId"]
    pipe.call("Inspector.enable", {}, session, deadline)  # a crash is said, not waited out
    pipe.call("Runtime.enable", {}, session, deadline)
    pipe.call("Page.enable", {}, session, deadline)
    pipe.call("Page.navigate", {"url": url}, session, deadline)
    probe = "typeof __bullpenSmoke === 'function' ? __bullpenSmoke() : null"
    found = None
    while time.monotonic() < deadline and not isinstance(found, str):
        found = _value(pipe, session, probe, deadline)
        if not isinstance(found, str):
            time.sleep(0.2)
    if not isinstance(found, str):
        return None
    page = json.loads(found)
    frame = pipe.call("Page.getFrameTree", {}, session, deadline)["frameTree"]["frame"]["id"]
    world = pipe.call("Page.createIsolatedWorld", {"frameId": frame, "worldName": "bullpen"},
                      session, deadline)["executionContextId"]  # fmt: skip
    canvases = json.loads(_value(pipe, session, CANVASES, deadline, contextId=world) or "[]")
    return _tap(canvases, list(page.get("checks") or []),
                [*pipe.exceptions, *[str(f) for f in page.get("failed") or []]])  # fmt: skip


def _tap(canvases: list[list[Any]], checks: list[list[Any]], errors: list[str]) -> str:
    """The checks as TAP: each canvas draws, each smoke check holds, no script error."""
    seen: dict[str, str] = {}  # the browser's report and the harness's of one error: once
    for error in errors:
        seen.setdefault(_WHERE.sub("", error), error)
    failed = "script error: " + " | ".join(seen.values()) if errors else None
    results = [(f"{name} draws", failed or why) for name, why in canvases]
    if not canvases:
        results.append(("the page has a canvas", "there is no <canvas>"))
    results += [(str(name), failed or why) for name, why in checks]
    lines = [
        f"ok {n} - {name}" if why is None else f"not ok {n} - {name}: {why}"
        for n, (name, why) in enumerate(results, 1)
    ]
    passing = sum(1 for _, why in results if why is None)
    return "\n".join([*lines, f"# tests {len(results)}", f"# pass {passing}"])


def _scratch() -> str:
    """A writable folder with a short path: Chromium puts a socket under its TMPDIR, and a
    socket's path holds at most 107 bytes (a grind's cache path can be longer)."""
    for place in (os.environ.get("TMPDIR", ""), "/dev/shm", "/tmp"):
        if (
            place
            and len(place) <= SHORT_PATH
            and os.path.isdir(place)
            and os.access(place, os.W_OK)
        ):
            return place
    return tempfile.gettempdir()


def run(spec: Path) -> int:
    chromium = browser()
    if chromium is None:
        print(f"# no headless browser: none of {', '.join(BROWSERS)} is installed", flush=True)
        return 2
    root = Path.cwd()  # the grind runs the spec from its clone: the folder served
    if not Path(os.path.realpath(spec)).is_relative_to(os.path.realpath(root)):
        print(f"# the spec {spec} is not inside the folder it runs in ({root})", flush=True)
        return 2
    profile = tempfile.mkdtemp(prefix="webgame-", dir=_scratch())  # never in the clone
    text = spec.read_text(encoding="utf-8", errors="replace")
    server, url = serve(root, spec, text)
    commands, answers = os.pipe(), os.pipe()

    def fds() -> None:  # the browser reads commands on fd 3 and answers on fd 4
        read, write = os.dup(commands[0]), os.dup(answers[1])  # above 4, whatever they were
        os.dup2(read, 3)  # dup2 makes them inheritable: kept across exec
        os.dup2(write, 4)

    log = Path(profile) / "browser.log"
    deadline = time.monotonic() + TIMEOUT_S
    with open(log, "wb") as output:
        browser_process = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={profile}/profile", "--remote-debugging-pipe",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=output, stderr=output, preexec_fn=fds,
            env={**os.environ, "TMPDIR": profile},
            close_fds=False, start_new_session=True,  # its group: every child killed with it
        )  # fmt: skip
    os.close(commands[0])
    os.close(answers[1])
    try:
        tap = _drive(_Pipe(commands[1], answers[0]), url, deadline)
        problem = None if tap is not None else f"no report within {TIMEOUT_S:g} s"
    except (TimeoutError, RuntimeError, OSError, ValueError, KeyError) as exc:
        tap, problem = None, str(exc)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(browser_process.pid, signal.SIGKILL)
        browser_process.wait(10)
        os.close(commands[1])
        os.close(answers[0])
        server.shutdown()
        server.server_close()
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        shutil.rmtree(profile, ignore_errors=True)
    if tap is None:
        print(f"# the page never reported ({problem}): it did not load, or the browser failed")
        print("\n".join(f"# {line}" for line in tail), flush=True)
        return 1
    print("TAP version 13\n" + tap, flush=True)
    failing = re.search(r"^not ok ", tap, re.M) or re.search(r"^# tests 0$", tap, re.M)
    return 1 if failing else 0


def check(spec: Path) -> int:
    """Whether the spec can be run: a readable HTML page."""
    try:
        text = spec.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"cannot read {spec} as UTF-8 text: {exc}")
        return 1
    if not re.search(r"<(?:html|body|canvas|script)\b", text, re.I):
        print(f"{spec} is not an HTML page (no <html>, <body>, <canvas> or <script>)")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Smoke-test an HTML canvas page in a browser.")
    parser.add_argument("--check", action="store_true", help="only check the page can be run")
    parser.add_argument("spec", type=Path)
    args = parser.parse_args(argv)
    return check(args.spec) if args.check else run(args.spec)


if __name__ == "__main__":
    sys.exit(main())
