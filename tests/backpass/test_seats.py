"""The backpass through the real judge: a fake model program as the `cmd` seat, the local seat."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agents.seats import SeatJudge
from agents.seats.registry import build_seats
from tests.backpass.helpers import REPO_ROOT, BackpassHome, drive

FAKE_MODEL = REPO_ROOT / "tests" / "fakes" / "fake_model.py"


def _analysis(quote: str) -> dict[str, object]:
    return {
        "json": {
            "positive": [{"text": "Literal text worked.", "quote": quote}],
            "negative": [],
            "gaps": [],
        }
    }


class TestRealJudge:
    def test_local_seat_answers_every_step(self, bp_home: BackpassHome) -> None:
        """With no seat tables, the built-in local seat answers analysis and synthesis."""
        bp_home.trace("a.md", "- Running the tests first worked.\n")
        bp_home.trace("b.md", "- Running the tests first worked again.\n")
        outcome = drive(bp_home.home, bp_home.params(), SeatJudge(build_seats({})))
        funnel = outcome.funnel
        assert outcome.data["ok"], outcome.final.body
        assert funnel["seats"]["bulk"] == {"bulk (local)": 2}
        assert funnel["edits_private"] == 1 and funnel["corroborations"] == 1

    def test_cmd_seat_retry_and_fallback_are_reported(
        self, tmp_path: Path, bp_home: BackpassHome
    ) -> None:
        """A fenced answer is accepted, a bad one retried, a twice-bad one goes to the fallback, and the funnel says so."""
        bp_home.trace("a.md", "- It worked fine & $1 \\1 {{trace}}.\n")
        bp_home.trace("b.md", "- It worked fine & $1 \\1 {{trace}}.\n- Also this worked.\n")
        bp_home.trace("c.md", "- Nothing to see, it worked.\n")
        script = tmp_path / "script.json"
        fenced = (
            "```json\n"
            + json.dumps(_analysis("It worked fine & $1 \\1 {{trace}}.")["json"])
            + "\n```"
        )
        script.write_text(
            json.dumps(
                {
                    "analysis": [
                        fenced,
                        "not json at all",
                        _analysis("Also this worked."),
                        "nope",
                        "nope",
                    ],
                    "synthesis": {"json": {"edits": [], "summary": "Nothing to change."}},
                }
            )
        )
        log = tmp_path / "calls.jsonl"
        env = {"FAKE_MODEL_SCRIPT": str(script), "FAKE_MODEL_LOG": str(log)}
        command = [sys.executable, str(FAKE_MODEL)]
        seats = build_seats(
            {
                "bulk": {"kind": "cmd", "command": command, "env": env, "fallback": "backup"},
                "backup": {"kind": "local"},
                "synthesis": {"kind": "cmd", "command": command, "env": env},
            }
        )
        outcome = drive(bp_home.home, bp_home.params(), SeatJudge(seats))
        funnel = outcome.funnel
        assert outcome.data["ok"], outcome.final.body
        assert funnel["seats"]["bulk"] == {"bulk (cmd)": 2, "backup (local)": 1}
        assert funnel["seats"]["synthesis"] == {"synthesis (cmd)": 1}
        assert funnel["fallbacks"] == 1 and funnel["items_dropped"] == 0
        assert "NOTE: the fallback seat answered 1 call(s)." in outcome.final.body
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        assert [c["step"] for c in calls] == ["analysis"] * 5 + ["synthesis"]
        assert "- It worked fine & $1 \\1 {{trace}}.\n" in calls[0]["prompt"]
