"""Model seats: who answers a step's bounded JSON question, and how.

    Seat              one abstract method: complete(request) -> raw text
    ├── LocalSeat     built in, deterministic, offline (the default)
    ├── OpenAISeat    any OpenAI-compatible chat-completions server
    └── CmdSeat       an external program: prompt on stdin, answer on stdout

`build_seats(society.seats)` checks the `[seats.<name>]` tables and returns a
SeatRegistry; `make_judge(registry)` returns the Judge a StepContext holds.
See docs/seats.md.
"""

from __future__ import annotations

from agents.seats.base import Seat
from agents.seats.cmd import CmdSeat
from agents.seats.jsonanswer import AnswerRejected, parse_answer, strip_fence, validate_answer
from agents.seats.judge import SeatJudge, make_judge, retry_prompt
from agents.seats.local import (
    LocalAnswer,
    LocalSeat,
    local_answers,
    register_local,
    unregister_local,
)
from agents.seats.openai import OpenAISeat
from agents.seats.registry import (
    ROLES,
    CmdSeatConfig,
    LocalSeatConfig,
    OpenAISeatConfig,
    SeatConfig,
    SeatRegistry,
    build_seats,
    parse_seat_table,
)

__all__ = [
    "ROLES",
    "AnswerRejected",
    "CmdSeat",
    "CmdSeatConfig",
    "LocalAnswer",
    "LocalSeat",
    "LocalSeatConfig",
    "OpenAISeat",
    "OpenAISeatConfig",
    "Seat",
    "SeatConfig",
    "SeatJudge",
    "SeatRegistry",
    "build_seats",
    "local_answers",
    "make_judge",
    "parse_answer",
    "parse_seat_table",
    "register_local",
    "retry_prompt",
    "strip_fence",
    "unregister_local",
    "validate_answer",
]
