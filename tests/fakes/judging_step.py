"""A step that asks one model judgment and replies with who answered: for seat routing tests."""

from __future__ import annotations

from pydantic import BaseModel

from agents.runtime.step import JudgmentRequest, Reply, StepContext
from room.message import Message


class Verdict(BaseModel):
    verdict: str


async def judge_once(message: Message, ctx: StepContext) -> Reply:
    request = JudgmentRequest(step="verdict", prompt=f"step: verdict\n{message.body}")
    judgment = await ctx.judge("verdict", request, Verdict)
    return Reply(judgment.answer.verdict, {"seat": judgment.seat})
