"""A step case asked once, in the eval's home, and its answer judged by the case's validators.

The request is built by the pipeline's own prompt builder (the prompt a run sends), the
answer is asked of the seat the eval home gives the step's nick (the seat under test),
with the lessons that nick would be handed on waking when lessons are on, and validated
by the step's own schema (a seat that answers nothing valid fails `answered`). Then the
step's own gate and the case's validators judge it (stepcheck.py). A build step the
seat cannot answer (the built-in seat writes no code) is `skipped` with its reason,
neither passed nor failed.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agents.evaluate import stepcheck
from agents.evaluate.stepcases import NICK, StepCase
from room.errors import SeatError

if TYPE_CHECKING:
    from agents.evaluate.cases import Loaded
    from agents.evaluate.runners import CaseResult
    from agents.evaluate.society import EvalSociety
    from agents.home import Home
    from agents.seats.request import Judge, Judgment, JudgmentRequest

STEP_TIMEOUT_S = 900.0  # one model call and its judge's retry, at most
RECALL_CHARS = 2000  # how much of the input the lessons are recalled by (a lurker: the body)


def _services(home: Home, nick: str) -> Any:
    from agents.replay import sandbox

    return sandbox.seat_services(home, nick)


def _judge(home: Home, nick: str, lessons: bool, recall: str) -> tuple[Judge, list[str]]:
    """The nick's judge in the eval home, told its lessons as its lurker would be."""
    from agents.memory.lessons import LessonReader
    from agents.runtime.lessons import told

    services = _services(home, nick)
    judge: Judge = services.judge
    if not lessons:
        return judge, []
    found, _problem = LessonReader(home, nick).recall(recall)
    if not found:
        return judge, []
    return told(judge, found), [lesson.id for lesson in found]


def _code_seat(home: Home, seat: str | None, step: str) -> tuple[str | None, str]:
    """(the seat that writes this build step's files, why none) for the eval home."""
    from agents.build.codeseat import code_seat_kind
    from agents.build.config import BuildConfig

    config = BuildConfig.of(home)
    name: str | None = seat  # --seat NAME: the seat under test writes the code too
    if name is None:
        name = config.testdesign_seat if step == "testdesign" else next(iter(config.tiers), None)
    if name is None or name not in home.society.seats or code_seat_kind(home, name) == "local":
        return None, (
            "the built-in seat writes no code: give --seat a model seat, or set [build] "
            "tiers or testdesign_seat to one"
        )
    return name, ""


async def _ask(
    judge: Judge, role: str, request: JudgmentRequest, schema: type[BaseModel]
) -> Judgment[Any]:
    return await judge(role, request, schema)


def run_step(
    society: EvalSociety, loaded: Loaded, result: CaseResult, seat: str | None, lessons: bool
) -> None:
    """Ask the case's step once and judge the answer; fills `result`."""
    case = loaded.case
    assert isinstance(case, StepCase)
    result.step = case.step
    home = society.home
    with tempfile.TemporaryDirectory(prefix="bullpen-eval-step-") as scratch:
        route = None
        if case.pipeline == "build":
            route, why = _code_seat(home, seat, case.step)
            if route is None:
                result.skipped = why
                return
        asked = stepcheck.prepare(society, loaded, Path(scratch), route)
        if asked.answered is not None:  # the step's code answers; no model is asked
            _judged(result, asked.check(asked.answered))
            return
        role = route or asked.role
        recall = f"{case.step} " + json.dumps(case.input, ensure_ascii=False)[:RECALL_CHARS]
        judge, told = _judge(home, NICK[case.step], lessons, recall)
        result.lessons += len(told)
        try:
            judgment = asyncio.run(
                asyncio.wait_for(
                    _ask(judge, role, asked.request, asked.schema),
                    STEP_TIMEOUT_S,
                )
            )
        except SeatError as exc:
            result.failed_gates.append(f"{case.step}.answered")
            result.note = exc.message[-300:]
            return
        except TimeoutError:
            result.failed_gates.append(f"{case.step}.answered")
            result.note = f"no answer within {STEP_TIMEOUT_S:g} s"
            return
        provenance = judgment.provenance()
        if provenance.get("seat_kind") != "openai":
            result.model_calls += int(provenance.get("attempts") or 1)
        if judgment.attempts > 1:
            result.rescued += 1
        _judged(result, asked.check(judgment.answer.model_dump(mode="json")))


def _judged(result: CaseResult, failed: dict[str, str]) -> None:
    """The case's verdict from the validators that failed (none: it passed)."""
    result.failed_gates += [f"{result.step}.{name}" for name in failed]
    result.note = "; ".join(failed.values())[:300]
    result.passed = not result.failed_gates
