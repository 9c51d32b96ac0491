"""Lessons on every wake: what the lurker recalls before its handler runs, and how it hands
them over (agents/memory/lessons.py does the recall).

The handler gets a copy of the nick's StepContext with `lessons` set and a
judge whose prompts start (after their `step:` line) with the lessons block;
the reply's data then names the lesson ids that were handed over, so the
room shows what each agent was told.

BULLPEN_LESSONS=off in a lurker's environment wakes it with none (how `bullpen
eval --lessons off` measures what the memory is worth; docs/replay.md).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from agents.memory.lessons import Lesson, LessonReader, block
from agents.runtime.outcome import Failure, Outcome
from agents.runtime.step import Reply, StepContext
from agents.seats.request import AnswerT, Judge, Judgment, JudgmentRequest
from room.message import Message

__all__ = ["LESSONS_SWITCH", "for_wake", "named", "told"]

LESSONS_SWITCH = "BULLPEN_LESSONS"  # "off": every wake without lessons


def told(judge: Judge, lessons: list[Lesson]) -> Judge:
    """A judge whose every prompt carries the lessons block right after its `step:` line."""
    text = block(lessons)

    async def told(
        role: str,
        request: JudgmentRequest,
        schema: type[AnswerT],
        *,
        seat: str | None = None,
    ) -> Judgment[AnswerT]:
        head, sep, rest = request.prompt.partition("\n")
        prompt = f"{head}\n{text}{rest}" if sep else f"{head}\n{text}"
        told_request = dataclasses.replace(request, prompt=prompt)
        if seat is None:
            return await judge(role, told_request, schema)
        return await judge(role, told_request, schema, seat=seat)

    return told


def for_wake(
    ctx: StepContext, reader: LessonReader, message: Message, log: Any
) -> tuple[StepContext, list[Lesson]]:
    """This wake's context: the nick's own, with its lessons (none when the index is away,
    or when BULLPEN_LESSONS=off)."""
    if os.environ.get(LESSONS_SWITCH, "on").strip().lower() == "off":
        return ctx, []
    lessons, problem = reader.recall(message.body)
    if problem is not None and problem != reader.said:  # once, and again when it changes
        log.warning("waking without lessons: the memory index is unavailable", why=problem)
    reader.said = problem
    if not lessons:
        return ctx, []
    return dataclasses.replace(ctx, lessons=lessons, judge=told(ctx.judge, lessons)), lessons


def named(outcome: Outcome, lessons: list[Lesson]) -> Outcome:
    """The outcome with the ids of the lessons handed over named in its data."""
    if not lessons:
        return outcome
    ids = [lesson.id for lesson in lessons]
    if isinstance(outcome, Reply):
        data = dict(outcome.data or {})
        data.setdefault("lessons", ids)
        return Reply(outcome.body, data)
    if isinstance(outcome, Failure):
        return Failure(outcome.reason, {"lessons": ids, **outcome.details})
    return outcome
