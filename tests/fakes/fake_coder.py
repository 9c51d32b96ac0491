"""A fake code seat: a real program a `kind = "cmd"` seat runs in the grind's clone.

It reads the prompt on stdin and acts by FAKE_CODER_MODE:
  copy         copy every file under FAKE_CODER_SOLUTION into the working directory
  nothing      change nothing (a seat that stalls)
  hang         sleep far past any timeout
  escape       write FAKE_CODER_ESCAPE (a path outside the clone)
  look         write look.json in the working directory: its environment, what it could read
               of the file whose path the file FAKE_CODER_READ holds (a program that knows
               where a secret lies), whether $TMPDIR is writable; print what it read (and
               log it, with FAKE_CODER_LOG); then, with FAKE_CODER_SOLUTION, act as `copy`
  connect      connect to 127.0.0.1:FAKE_CODER_PORT and write what it answers to reply.txt
  delete-spec  delete $BULLPEN_SPEC
  bench        write calc.py with the first 2 * BULLPEN_ITERATION functions f0, f1, ...
  answer       print {"files": [{"path": FAKE_ANSWER_PATH, "content": FAKE_ANSWER_FILE's text}]}
               (a seat the judge asks for JSON: the testdesign seat)
FAKE_CODER_SLEEP delays the act; FAKE_CODER_LOG gets one JSON line per call (the BULLPEN_*
variables, the working directory, whether the prompt holds the spec path, the prompt).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    prompt = sys.stdin.read()
    mode = os.environ.get("FAKE_CODER_MODE", "copy")
    if os.environ.get("FAKE_CODER_LOG"):
        record = {
            "mode": mode,
            "cwd": os.getcwd(),
            "spec": os.environ.get("BULLPEN_SPEC"),
            "tier": os.environ.get("BULLPEN_TIER"),
            "iteration": os.environ.get("BULLPEN_ITERATION"),
            "prompt_has_spec": bool(os.environ.get("BULLPEN_SPEC"))
            and Path(os.environ["BULLPEN_SPEC"]).name in prompt,
            "first_line": prompt.splitlines()[0] if prompt else "",
            "prompt": prompt,
        }
        with open(os.environ["FAKE_CODER_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")
    time.sleep(float(os.environ.get("FAKE_CODER_SLEEP", "0")))
    if mode == "copy":
        copy_solution()
    elif mode == "hang":
        time.sleep(3600)
    elif mode == "escape":
        Path(os.environ["FAKE_CODER_ESCAPE"]).write_text("escaped\n", encoding="utf-8")
    elif mode == "look":
        read = look()
        if os.environ.get("FAKE_CODER_LOG"):
            with open(os.environ["FAKE_CODER_LOG"], "a", encoding="utf-8") as log:
                log.write(json.dumps({"mode": "look", "read": read}) + "\n")
        if os.environ.get("FAKE_CODER_SOLUTION"):
            copy_solution()
    elif mode == "connect":
        with socket.create_connection(("127.0.0.1", int(os.environ["FAKE_CODER_PORT"])), 5) as s:
            Path("reply.txt").write_bytes(s.recv(1024))
    elif mode == "delete-spec":
        os.remove(os.environ["BULLPEN_SPEC"])
    elif mode == "bench":
        done = 2 * int(os.environ["BULLPEN_ITERATION"])
        body = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(done))
        Path("calc.py").write_text(body, encoding="utf-8")
    elif mode == "answer":
        content = Path(os.environ["FAKE_ANSWER_FILE"]).read_text(encoding="utf-8")
        print(json.dumps({"files": [{"path": os.environ["FAKE_ANSWER_PATH"], "content": content}]}))
    elif mode != "nothing":
        print(f"unknown FAKE_CODER_MODE {mode!r}", file=sys.stderr)
        return 2
    return 0


def copy_solution() -> None:
    source = Path(os.environ["FAKE_CODER_SOLUTION"])
    for path in source.rglob("*"):
        if path.is_file():
            target = Path.cwd() / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


def look() -> str:
    target = Path(Path(os.environ["FAKE_CODER_READ"]).read_text(encoding="utf-8").strip())
    try:
        read: str = target.read_text(encoding="utf-8")
    except OSError as exc:
        read = f"unreadable: {exc.strerror}"
    try:
        with tempfile.NamedTemporaryFile(dir=os.environ.get("TMPDIR")):
            scratch = True
    except OSError:
        scratch = False
    seen = {"env": dict(os.environ), "read": read, "listed": _listing(target.parent)}
    Path("look.json").write_text(json.dumps({**seen, "scratch": scratch}), encoding="utf-8")
    print(read)
    return read


def _listing(folder: Path) -> list[str] | str:
    try:
        return sorted(os.listdir(folder))
    except OSError as exc:
        return f"unlistable: {exc.strerror}"


if __name__ == "__main__":
    sys.exit(main())
