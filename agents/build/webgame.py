"""The webgame smoke runner: load an HTML canvas page in a real headless browser, report TAP.

    python -I agents/build/webgame.py SPEC.test.html      run it; exit 0 when every check passes
    python -I agents/build/webgame.py --check SPEC.html   exit 0 when the page can be run at all

A single-file HTML canvas game cannot be tested by `node --test`: whether it
runs is whether a browser runs it. This runner copies the spec page into
its TMPDIR with a small harness injected first thing in the page (and a
`<base>` so the page's own relative URLs still resolve), loads it in
headless Chromium driven over its DevTools pipe (`--remote-debugging-pipe`,
a few JSON messages: no driver, no port), lets it run in real time (a game
draws on animation frames, which a virtual-time budget starves), and reads
the harness's results from the page. It needs no test-only package and no network:
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
import html
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
    "--allow-file-access-from-files",  # a page's own images do not taint its canvas
)
SETTLE_MS = 1000  # after the load event, before the checks run (then two frames more)
TIMEOUT_S = 60.0
SHORT_PATH = 48
RESULT_ID = "bullpen-smoke-result"
HARNESS = """<script>/* bullpen webgame smoke harness */
(function () {
  var errors = [], checks = [];
  window.addEventListener("error", function (e) {
    var where = e.filename ? " (" + e.filename.split("/").pop() + ":" + e.lineno + ")" : "";
    errors.push(String(e.message || (e.target && e.target.src ? "failed to load " +
      e.target.src.split("/").pop() : "an error")) + where);
  }, true);
  window.addEventListener("unhandledrejection", function (e) {
    errors.push("unhandled rejection: " + String(e.reason));
  });
  window.smoke = function (name, fn) { checks.push([String(name), fn]); };
  function blank(c) {
    if (!c.width || !c.height) return "it has no size";
    var t = document.createElement("canvas");
    t.width = c.width; t.height = c.height;
    var x = t.getContext("2d");
    x.drawImage(c, 0, 0);
    var d = x.getImageData(0, 0, t.width, t.height).data;
    for (var i = 4; i < d.length; i += 4) {
      if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2] || d[i + 3] !== d[3]) {
        return null;
      }
    }
    return "it is blank (every pixel the same colour)";
  }
  function report() {
    var lines = [], n = 0, pass = 0;
    function say(ok, name, why) {
      n += 1; if (ok) pass += 1;
      lines.push((ok ? "ok " : "not ok ") + n + " - " + name + (ok ? "" : ": " + why));
    }
    var failed = errors.length ? "script error: " + errors.join(" | ") : null;
    var canvases = document.querySelectorAll("canvas");
    if (!canvases.length) say(false, "the page has a canvas", "there is no <canvas>");
    for (var i = 0; i < canvases.length; i++) {
      var c = canvases[i], why = failed;
      if (!why) { try { why = blank(c); } catch (e) { why = "cannot read it: " + e; } }
      say(!why, "canvas " + (c.id ? "#" + c.id : i + 1) + " draws", why);
    }
    for (var j = 0; j < checks.length; j++) {
      var ok = false, because = failed;
      if (!because) {
        try { ok = !!checks[j][1](); because = ok ? null : "it was false"; }
        catch (e) { because = "it threw " + e; }
      }
      say(!because, checks[j][0], because);
    }
    lines.push("# tests " + n, "# pass " + pass);
    var pre = document.createElement("pre");
    pre.id = "RESULT_ID";
    pre.textContent = lines.join("\\n");
    document.documentElement.appendChild(pre);
  }
  window.addEventListener("load", function () {
    setTimeout(function () {  /* then two frames, so a game drawing per frame has drawn */
      requestAnimationFrame(function () { requestAnimationFrame(report); });
    }, SETTLE_MS);
  });
})();
</script>
"""
_HEAD = re.compile(r"<head\b[^>]*>", re.I)
_DOCTYPE = re.compile(r"^\s*<!doctype[^>]*>", re.I)


def harnessed(page: str, folder: Path) -> str:
    """The page with the harness as its first script, before any of its own, and its
    relative URLs resolved against `folder` (the spec's own), wherever the copy lies."""
    base = f'<base href="{html.escape(folder.resolve().as_uri(), quote=True)}/">'
    script = base + HARNESS.replace("RESULT_ID", RESULT_ID).replace("SETTLE_MS", str(SETTLE_MS))
    head = _HEAD.search(page)
    if head:
        return page[: head.end()] + script + page[head.end() :]
    doctype = _DOCTYPE.match(page)
    at = doctype.end() if doctype else 0
    return page[:at] + script + page[at:]


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


def _drive(pipe: _Pipe, url: str, deadline: float) -> str | None:
    """Open `url` in a new page and wait for the harness's report; its text, or None."""
    target = pipe.call("Target.createTarget", {"url": url}, None, deadline)["targetId"]
    attached = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True}, None,
                         deadline)  # fmt: skip
    session = attached["sessionId"]
    expression = f"(document.getElementById({RESULT_ID!r}) || {{}}).textContent || null"
    while time.monotonic() < deadline:
        done = pipe.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                         session, deadline)  # fmt: skip
        value = done.get("result", {}).get("value")
        if isinstance(value, str):
            return value
        time.sleep(0.2)
    return None


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
    profile = tempfile.mkdtemp(prefix="webgame-", dir=_scratch())  # never in the clone
    page = Path(profile) / "smoke.html"
    text = spec.read_text(encoding="utf-8", errors="replace")
    page.write_text(harnessed(text, spec.parent), "utf-8")
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
        tap = _drive(_Pipe(commands[1], answers[0]), page.resolve().as_uri(), deadline)
        problem = None if tap is not None else f"no report within {TIMEOUT_S:g} s"
    except (TimeoutError, RuntimeError, OSError, ValueError, KeyError) as exc:
        tap, problem = None, str(exc)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(browser_process.pid, signal.SIGKILL)
        browser_process.wait(10)
        os.close(commands[1])
        os.close(answers[0])
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
