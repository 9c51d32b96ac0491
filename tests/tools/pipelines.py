"""An operator's own pipeline, registered from society.toml (`[pipelines]`), for the tests."""

from __future__ import annotations

from agents.foreman.pipeline import Action, Ask, Report, Run


class Shout:
    """Asks one nick to echo the text, then reports it in capitals."""

    name = "shout"

    def advance(self, run: Run) -> list[Action]:
        to = str(run.request.get("to", "echo"))
        reply = run.reply("echo")
        if reply is None:
            return [Ask("echo", to, str(run.request.get("text", "")))]
        return [Report("done", reply.body.upper(), {"shouted": True}, final=True)]

    def in_flight_limit(self, run: Run) -> int:
        return 1


class NotAPipeline:
    """Has no advance(run): registering it is a configuration error."""
