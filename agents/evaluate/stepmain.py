"""The step cases of one seat assignment, asked in a process of the eval home's own.

`bullpen eval` starts `python -m agents.evaluate.stepmain ROOT SEAT ROUND CASE…` with the eval
home's environment (BULLPEN_LESSONS included) and its stderr in the home's
logs/eval-steps.log, so every model call a seat makes logs its `seat.http` line there and
is counted as a lurker's is. It prints one JSON line per case (a CaseResult) as each
ends, so the eval shows progress; `run_steps` is the eval's side of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from agents.evaluate.cases import Loaded, load_case
from agents.evaluate.runners import CaseResult, count_server_calls, log_marks
from agents.evaluate.society import EvalSociety
from agents.evaluate.stepcases import StepCase
from agents.evaluate.steprun import STEP_TIMEOUT_S, run_step
from agents.runtime.lessons import LESSONS_SWITCH
from room.errors import BullpenError

LOG = "eval-steps.log"
NO_SEAT = "-"


def _one(
    society: EvalSociety, folder: Path, seat: str | None, lessons: bool, number: int
) -> CaseResult:
    loaded = load_case(folder)
    result = CaseResult(loaded.name, "step")
    loaded = loaded.in_round(number)
    assert isinstance(loaded.case, StepCase)
    result.step = loaded.case.step
    started = time.monotonic()
    marks = log_marks(society.root)
    try:
        run_step(society, loaded, result, seat, lessons)
    except BullpenError as exc:  # a step problem (a kb without an index, a bad template)
        result.failed_gates.append(f"{result.step or 'step'}.answered")
        result.note = exc.message[-300:]
    sys.stderr.flush()
    count_server_calls(society.root, marks, result)
    result.wall_s = round(time.monotonic() - started, 2)
    return result


def main(argv: list[str]) -> int:
    from room import logs

    logs.configure(json=True)
    root, seat = Path(argv[0]), (None if argv[1] == NO_SEAT else argv[1])
    number, folders = int(argv[2]), argv[3:]
    lessons = os.environ.get(LESSONS_SWITCH, "on").strip().lower() != "off"
    society = EvalSociety(root, dict(os.environ))
    for folder in folders:
        result = _one(society, Path(folder), seat, lessons, number)
        print(json.dumps(result.to_dict(), ensure_ascii=False), flush=True)
    return 0


def run_steps(
    society: EvalSociety, cases: list[Loaded], seat: str | None, number: int = 1
) -> Iterator[CaseResult]:
    """Every step case (of round `number`), asked in one child process of the eval home, as
    each is judged."""
    if not cases:
        return
    argv = [sys.executable, "-m", "agents.evaluate.stepmain", str(society.root)]
    argv += [seat or NO_SEAT, str(number), *(str(loaded.folder) for loaded in cases)]
    (society.root / "logs").mkdir(exist_ok=True)
    with (
        open(society.root / "logs" / LOG, "ab") as log,
        subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            env=society.env,
            text=True,
        ) as child,  # fmt: skip
    ):
        assert child.stdout is not None
        seen = 0
        try:
            for line in child.stdout:
                seen += 1
                yield CaseResult(**json.loads(line))
        finally:
            if child.poll() is None:
                child.kill()  # Ctrl-C, or the eval gave up: this child, by its own handle
            child.wait(STEP_TIMEOUT_S)
    for loaded in cases[seen:]:  # the child died before these: say so, never drop them
        assert isinstance(loaded.case, StepCase)
        lost = CaseResult(loaded.name, "step", failed_gates=["run.step_process"])
        lost.step = loaded.case.step
        lost.note = f"the step process ended (exit {child.returncode}); see logs/{LOG}"
        yield lost


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
