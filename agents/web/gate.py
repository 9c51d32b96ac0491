"""The operator's gate in the browser: answer an expedition's Dig Report.

The form posts exactly what `bullpen expedition confirm` posts, through the
same functions (agents/expedition/cli.py and command.py): the thread is
read over the hub, checked to be an expedition, the answer goes to the
newest Dig Report with the operator's proof. Before anything is posted the
answer is checked: an unknown thread, a report that is not the newest one
or was already answered, a blank redirect, a dropped row the report does
not list — each is a GateRefusal whose message the page shows, and nothing
reaches the room.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents.expedition.cli import check_answer
from agents.expedition.command import (
    answer_post,
    not_a_run,
    post_answer,
    reports_of,
)
from room.client import read_thread
from room.errors import BullpenError, UsageError
from room.message import Message, bare

if TYPE_CHECKING:
    from agents.home import Home


class GateRefusal(Exception):
    """An answer the gate will not post, and why (shown on the page)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def candidates(report: dict[str, Any] | Message) -> list[dict[str, Any]]:
    """Every row the Dig Report offers, once each: direct hits, deep cuts, voice anchors."""
    data = (report.data if isinstance(report, Message) else report.get("data")) or {}
    found: dict[str, dict[str, Any]] = {}
    for kind, rows in (
        ("direct hit", data.get("direct_hits")),
        ("deep cut", data.get("deep_cuts")),
        ("voice anchor", data.get("voice_anchors")),
    ):
        for row in rows or []:
            if isinstance(row, dict) and row.get("id") and str(row["id"]) not in found:
                why = row.get("why") or row.get("connection") or ""
                found[str(row["id"])] = {
                    "id": str(row["id"]),
                    "file": str(row.get("file", "")),
                    "kind": kind,
                    "why": str(why),
                }
    return list(found.values())


@dataclass(frozen=True)
class Answered:
    body: str
    seq: int


async def answer(
    home: Home,
    thread: str,
    report_id: str,
    keep: Sequence[str],
    redirect: str | None,
) -> Answered:
    """Post the operator's answer to `thread`'s Dig Report `report_id`; GateRefusal if not."""
    thread = thread.strip()
    if not thread:
        raise GateRefusal("No thread was given; open the run from the Runs page.")
    if redirect is not None and not redirect.strip():  # said before the room is even read
        raise GateRefusal(
            "The redirect is empty: say what to look for instead, or confirm. Nothing was posted."
        )
    operator = home.society.operator
    try:
        async with home.client(operator) as client:
            messages = await read_thread(client, thread)
            problem = not_a_run(messages, thread)
            if problem:
                raise GateRefusal(problem.split("\n")[0] + " Nothing was posted.")
            final, reports = reports_of(messages, operator)
            if final is not None:
                raise GateRefusal(f"The run {thread} is already over; nothing was posted.")
            if not reports:
                raise GateRefusal(f"The run {thread} has no Dig Report yet; nothing was posted.")
            report = reports[-1]
            answered = any(
                m.in_reply_to == report.id and m.from_ == operator and bare(m.to) == "foreman"
                for m in messages
            )
            if report.id != report_id or answered:
                raise GateRefusal(
                    "This Dig Report was already answered or a newer one replaced it; "
                    "nothing was posted. The page now shows the run as it is."
                )
            rows = [row["id"] for row in candidates(report)]
            unknown = [row for row in keep if row not in rows]
            if unknown:
                raise GateRefusal(f"The Dig Report lists no row {unknown[0]}; nothing was posted.")
            drop = [] if redirect is not None else [row for row in rows if row not in keep]
            try:
                check_answer(drop, redirect)  # the command's own checks, word for word
            except UsageError as exc:
                raise GateRefusal(f"{exc.message}. Nothing was posted.") from None
            body, data = answer_post(drop, redirect)
            seq = await post_answer(client, report, thread, body, data)
    except BullpenError as exc:
        raise GateRefusal(f"The hub could not take the answer: {exc.message}") from None
    return Answered(body, seq)
