"""The smallest pipeline: hand a text to one or more nicks, gather their replies.

`bullpen say @foreman "relay" --type ask --thread T --data '{"pipeline":
"relay", "to": ["echo"], "text": "hi", "max_in_flight": 2}'` fans the text
out to every nick in `to` (at most `max_in_flight` at once; a step silent for
`overdue_s` is reported), joins the replies and reports them to the operator. It exercises everything the real
pipelines rely on — dispatch, the in-flight bound, the join, failure flags,
the overdue report and resuming from the thread — with no model or files.
"""

from __future__ import annotations

from agents.foreman.pipeline import Action, Ask, Report, Run


def _targets(run: Run) -> list[str]:
    to = run.request.get("to", [])
    return [to] if isinstance(to, str) else [str(nick) for nick in to]


class Relay:
    name = "relay"

    def advance(self, run: Run) -> list[Action]:
        targets = _targets(run)
        if not targets:
            return [
                Report(
                    "failed",
                    "[RELAY FAILED — the ask names no nick in data.to]",
                    {"failed": True},
                    final=True,
                )
            ]
        text = str(run.request.get("text", run.start.body))
        overdue = run.request.get("overdue_s")
        limit = float(overdue) if isinstance(overdue, int | float) else None
        asks = [
            Ask(f"relay/{i}", nick, text, {"text": text}, timeout_s=limit)
            for i, nick in enumerate(targets, 1)
        ]
        answers = {ask.key: run.reply(ask.key) for ask in asks}
        if None in answers.values():
            return list(asks)
        failed = [key for key in answers if run.failed(key)]
        lines = [f"@{ask.to}: {answers[ask.key].body}" for ask in asks]  # type: ignore[union-attr]
        data = {"replies": {ask.to: answers[ask.key].body for ask in asks}, "failed": bool(failed)}  # type: ignore[union-attr]
        return [Report("done", "\n".join(lines), data, final=True)]

    def in_flight_limit(self, run: Run) -> int:
        bound = run.request.get("max_in_flight", 4)
        return bound if isinstance(bound, int) and bound > 0 else 4
