"""The judge: a role's question in, a validated answer and who gave it out.

For a role it asks the role's seat (the `[seats.<role>]` table, or the one
`roles` maps it to). An answer must be JSON matching the step's schema; a
Markdown fence is forgiven, nothing else is. A rejected answer is retried
once on the same seat with the reason appended to the prompt; a seat that
failed outright (refused, timed out, exited non-zero) is retried once with
the prompt unchanged. Then the seat's fallback gets the same two chances,
then its fallback, and so on. When every seat has failed, SeatError says
what each one did wrong; the caller posts it as the step's FAILED flag.
No answer is ever made up and no seat stands in for another unannounced:
the Judgment names the seat that answered.

The step's schema travels with the request (agents/seats/answerschema.py),
so a seat that can have a server hold its decoding to it sends it; the
Judgment says how the answer was held ("structured") and why each failed
attempt before it failed ("misses"), so a retry that rescued a step is
counted, not hidden.

Every prompt passes the home's screen (trust/screen.py) right before it goes
to a seat, retries included: a prompt holding a secret or a private key is
SecretFound (a StepFailed: the step's FAILED flag) and no seat sees it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

import structlog

from agents.seats.answerschema import answer_schema
from agents.seats.base import Seat
from agents.seats.jsonanswer import AnswerRejected, validate_answer
from agents.seats.registry import SeatRegistry
from agents.seats.request import AnswerT, Judge, Judgment, JudgmentRequest
from room.errors import ConfigError, SeatError
from trust.screen import HomeSecrets, Screen

__all__ = ["ATTEMPTS_PER_SEAT", "SeatJudge", "make_judge", "retry_prompt"]

log = structlog.get_logger("agents.seats")

ATTEMPTS_PER_SEAT = 2


CUT_OFF = "the answer was cut off at its max_tokens bound before it was complete; answer shorter"


def retry_prompt(prompt: str, error: str, structured: bool = True) -> str:
    """The prompt again, with why the last answer was rejected."""
    ask = "Return ONLY valid JSON matching the schema." if structured else "Answer as asked."
    return f"{prompt}\n\nYour previous answer was rejected: {error}. {ask}"


class SeatJudge:
    """Judge over a SeatRegistry; see the module docstring for the rules."""

    def __init__(
        self,
        registry: SeatRegistry,
        roles: Mapping[str, str] | None = None,
        screen: Screen | HomeSecrets | None = None,
    ) -> None:
        self.registry = registry
        self.roles = dict(roles or {})
        self.screen = screen or Screen.of([])  # with no home: still every PEM private key
        for role, seat in self.roles.items():
            if seat not in registry:
                raise ConfigError(
                    f"role {role!r} is set to seat {seat!r}, but there is no such seat; the "
                    f"known seats are {', '.join(registry.names())}"
                )

    def seat_for(self, role: str) -> Seat:
        return self.registry.get(self.roles.get(role, role))

    async def __call__(
        self,
        role: str,
        request: JudgmentRequest,
        schema: type[AnswerT],
        *,
        seat: str | None = None,
    ) -> Judgment[AnswerT]:
        if seat is not None and seat not in self.registry:
            raise ConfigError(
                f"role {role!r} was sent to seat {seat!r}, but there is no such seat; the "
                f"known seats are {', '.join(self.registry.names())}"
            )
        first = self.registry.get(seat) if seat is not None else self.seat_for(role)
        return await self._ask(role, request, schema, first)

    async def _ask(
        self, role: str, request: JudgmentRequest, schema: type[AnswerT], first: Seat
    ) -> Judgment[AnswerT]:
        chain = self.registry.chain(first.name)
        if request.answer_schema is None:
            request = dataclasses.replace(request, answer_schema=answer_schema(schema))
        failures: list[str] = []
        misses: list[str] = []
        attempts = 0
        tokens: int | None = None
        for position, seat in enumerate(chain):
            prompt_request = request
            error = ""
            for try_number in range(1, ATTEMPTS_PER_SEAT + 1):
                attempts += 1
                started = time.monotonic()
                self.screen.check(
                    prompt_request.prompt, f"the prompt of step {request.step!r} for {seat}"
                )
                try:
                    completion = await seat.answer(prompt_request)
                    if completion.tokens is not None:
                        tokens = (tokens or 0) + completion.tokens
                    if completion.cut_off and not request.structured:  # no grammar closed it
                        raise AnswerRejected("the answer is incomplete")
                    answer = validate_answer(completion.text, schema)
                except SeatError as exc:
                    error = str(exc.details.get("reason", exc.message))
                    if exc.details.get("final"):  # the gateway said no: nothing else is asked
                        self._log(role, request, seat, try_number, attempts, started, error)
                        raise SeatError(
                            f"{role}: no answer from seat '{seat.name}' ({seat.kind}): {error}",
                            role=role,
                            step=request.step,
                            seats=[seat.name],
                        ) from None
                    prompt_request = request  # the model never answered: ask the same again
                except AnswerRejected as exc:
                    error = str(exc)
                    if completion.cut_off:  # say why it broke off: the bound, not the model
                        error = f"{CUT_OFF} ({error})"
                    prompt_request = dataclasses.replace(
                        request, prompt=retry_prompt(request.prompt, error, request.structured)
                    )
                else:
                    self._log(role, request, seat, try_number, attempts, started, None)
                    return Judgment(
                        answer=answer,
                        seat=seat.name,
                        kind=seat.kind,
                        role=role,
                        fallback_used=position > 0,
                        attempts=attempts,
                        structured=completion.structured,
                        misses=tuple(misses),
                        tokens=tokens,
                    )
                misses.append(f"{seat.name}: {error}")
                self._log(role, request, seat, try_number, attempts, started, error)
            label = f"seat '{seat.name}'" if position == 0 else f"fallback '{seat.name}'"
            failures.append(f"{label} ({seat.kind}) after {ATTEMPTS_PER_SEAT} attempts: {error}")
        head, *rest = failures
        message = f"{role}: no valid answer from {head}"
        if rest:
            message += "; " + "; ".join(rest)
        elif first.fallback is None:
            message += f" (no fallback is set for [seats.{first.name}])"
        raise SeatError(message, role=role, step=request.step, seats=[seat.name for seat in chain])

    @staticmethod
    def _log(
        role: str,
        request: JudgmentRequest,
        seat: Seat,
        try_number: int,
        attempts: int,
        started: float,
        error: str | None,
    ) -> None:
        # Never the prompt or the answer: they may quote private material.
        log.info(
            "seat.attempt",
            role=role,
            step=request.step,
            seat=seat.name,
            kind=seat.kind,
            try_number=try_number,
            attempt=attempts,
            ok=error is None,
            error=error,
            elapsed_ms=round((time.monotonic() - started) * 1000),
        )


def make_judge(
    registry: SeatRegistry,
    roles: dict[str, str] | None = None,
    screen: Screen | HomeSecrets | None = None,
) -> Judge:
    """A Judge over `registry`; `roles` sends a role to another seat table (role → table);
    `screen` is the home's secret set every prompt is checked against."""
    return SeatJudge(registry, roles, screen)
