"""The local seat: built in, deterministic, offline — the default for every role.

It answers by looking up `request.step` in a table of plain functions
`(payload) -> dict` and returning the dict as JSON. The expedition and the
backpass ship their tables as `LOCAL_ANSWERS` in `agents.expedition.local`
and `agents.backpass.local`; they are imported on first use, so a missing
package only matters when one of its steps is asked for. Anything else —
a test, a plugin — adds answers with `register_local`, the same path; a
registered answer wins over a built-in one for the same step.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable
from typing import Any, ClassVar

from agents.seats.base import Seat
from agents.seats.request import JudgmentRequest

__all__ = ["LocalAnswer", "LocalSeat", "local_answers", "register_local", "unregister_local"]

LocalAnswer = Callable[[dict[str, Any]], dict[str, Any]]

BUILTIN_MODULES = ("agents.expedition.local", "agents.backpass.local")

_registered: dict[str, LocalAnswer] = {}


def register_local(step: str, answer: LocalAnswer, *, replace: bool = False) -> None:
    """Make the local seat answer `step` with `answer(payload)`."""
    if not replace and step in _registered and _registered[step] is not answer:
        raise ValueError(
            f"a local answer for step {step!r} is already registered; "
            "pass replace=True to swap it or unregister_local() it first"
        )
    _registered[step] = answer


def unregister_local(step: str) -> None:
    """Forget a registered answer (a built-in one for the step comes back)."""
    _registered.pop(step, None)


def _builtin_answers() -> dict[str, LocalAnswer]:
    answers: dict[str, LocalAnswer] = {}
    for module_name in BUILTIN_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only the module itself (or its package) being absent is expected;
            # a missing dependency inside it is a bug that must be seen.
            if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
                continue
            raise
        answers.update(getattr(module, "LOCAL_ANSWERS", {}))
    return answers


def local_answers() -> dict[str, LocalAnswer]:
    """Every step the local seat can answer now: built-ins, then registrations over them."""
    return {**_builtin_answers(), **_registered}


class LocalSeat(Seat):
    """Answers from code, never from a model."""

    kind: ClassVar[str] = "local"

    async def complete(self, request: JudgmentRequest) -> str:
        try:
            answers = local_answers()
        except ImportError as exc:
            raise self.fail(f"the built-in local answers failed to import: {exc}") from exc
        answer = answers.get(request.step)
        if answer is None:
            known = ", ".join(sorted(answers)) or "none"
            raise self.fail(
                f"the local seat has no answer for step {request.step!r} (it knows: {known}); "
                f"point [seats.{self.name}] at an openai or cmd seat, or register one "
                "with agents.seats.register_local"
            )
        try:
            result: Any = answer(dict(request.payload))
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            raise self.fail(
                f"the local answer for step {request.step!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        try:
            return json.dumps(result, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise self.fail(
                f"the local answer for step {request.step!r} is not JSON-serializable: {exc}"
            ) from exc
