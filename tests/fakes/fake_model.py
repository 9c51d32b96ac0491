#!/usr/bin/env python3
"""A fake model for the `cmd` seat: reads a prompt on stdin, answers from a script.

    FAKE_MODEL_SCRIPT  JSON file: {"<step>" or "*": [answer, ...] | answer}
    FAKE_MODEL_STATE   call counts per step (default: <script>.state), so that
                       consecutive processes walk down each step's list
    FAKE_MODEL_LOG     JSON lines, one per call: {"step", "prompt", "pid", "pgid", "child"}

The step is the prompt's first line, `step: X`. A list is consumed in order
(running out is an error, exit 4); a single answer is given every time. An
answer is either a string, printed as is, or an object with any of:

    "stdout": "text"       printed (default "")
    "json": {...}          printed as JSON
    "stderr": "text"       written to stderr
    "exit": 3              the exit code (default 0)
    "sleep": 30            seconds to sleep before answering
    "spawn_child": true    first start a child that sleeps (and is logged), to
                           prove a timeout kills the whole process group

Stdlib only, so it starts fast.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

ANSWER_KEYS = {"stdout", "json", "stderr", "exit", "sleep", "spawn_child"}


def fail(code: int, message: str) -> NoReturn:
    sys.stderr.write(f"fake_model: {message}\n")
    sys.exit(code)


def next_answer(script_path: Path, state_path: Path, step: str) -> Any:
    try:
        script = json.loads(script_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        fail(2, f"cannot read the script {script_path}: {exc}")
    if not isinstance(script, dict):
        fail(2, f"the script {script_path} must map step names to answers")
    key = step if step in script else "*"
    if key not in script:
        fail(4, f"the script {script_path} has no answer for step {step!r} and no '*'")
    answers = script[key]
    if not isinstance(answers, list):
        return answers
    with open(state_path, "a+", encoding="utf-8") as state:
        fcntl.flock(state, fcntl.LOCK_EX)
        state.seek(0)
        text = state.read()
        counts = json.loads(text) if text.strip() else {}
        used = counts.get(step, 0)
        counts[step] = used + 1
        state.seek(0)
        state.truncate()
        state.write(json.dumps(counts))
    if used >= len(answers):
        fail(4, f"no scripted answer left for step {step!r} (the script has {len(answers)})")
    return answers[used]


def log_call(step: str, prompt: str, child: int | None) -> None:
    log_path = os.environ.get("FAKE_MODEL_LOG")
    if not log_path:
        return
    line = json.dumps(
        {"step": step, "prompt": prompt, "pid": os.getpid(), "pgid": os.getpgid(0), "child": child}
    )
    with open(log_path, "a", encoding="utf-8") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.write(line + "\n")
        log.flush()


def main() -> None:
    prompt = sys.stdin.buffer.read().decode("utf-8")
    first = prompt.split("\n", 1)[0].strip()
    if not first.startswith("step: ") or not first[6:].strip():
        log_call("", prompt, None)
        fail(2, f"the prompt's first line must be 'step: X', not {first[:80]!r}")
    step = first[6:].strip()
    script_env = os.environ.get("FAKE_MODEL_SCRIPT")
    if not script_env:
        log_call(step, prompt, None)
        fail(2, "set FAKE_MODEL_SCRIPT to a JSON script file")
    script_path = Path(script_env)
    state_path = Path(os.environ.get("FAKE_MODEL_STATE") or f"{script_path}.state")
    answer = next_answer(script_path, state_path, step)
    if isinstance(answer, str):
        answer = {"stdout": answer}
    if not isinstance(answer, dict) or set(answer) - ANSWER_KEYS:
        log_call(step, prompt, None)
        fail(2, f"a scripted answer must be a string or an object with keys {sorted(ANSWER_KEYS)}")
    child = None
    if answer.get("spawn_child"):
        # Same process group (the default), stdout inherited: a realistic straggler.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]).pid
    log_call(step, prompt, child)
    if answer.get("sleep"):
        time.sleep(float(answer["sleep"]))
    if "json" in answer:
        sys.stdout.write(json.dumps(answer["json"]))
    sys.stdout.write(answer.get("stdout", ""))
    sys.stdout.flush()
    if answer.get("stderr"):
        sys.stderr.write(answer["stderr"])
        sys.stderr.flush()
    sys.exit(int(answer.get("exit", 0)))


if __name__ == "__main__":
    main()
