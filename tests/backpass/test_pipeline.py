"""Backpass.advance over hand-built runs: pure, deterministic, bounded."""

from __future__ import annotations

from typing import Any

from agents.backpass.pipeline import Backpass
from agents.foreman.pipeline import Ask, Report
from room.message import Message
from tests.backpass.helpers import START_EPOCH, Thread

PARAMS = {
    "pipeline": "backpass",
    "public": "/m/public",
    "private": "/m/private",
    "traces": "/t",
    "state": "/s",
    "concurrency": 2,
    "timeout_s": 100.0,
    "timeout_margin_s": 20.0,
}
REPOS = {
    name: {
        "path": f"/m/{name}",
        "default": "main",
        "base": "main",
        "commit": "c" * 40,
        "main_worktree": f"/m/{name}",
        "protected": ["main"],
        "unmerged": [],
    }
    for name in ("public", "private")
}


def _traces(count: int) -> list[dict[str, Any]]:
    return [
        {"n": n, "path": f"/t/{n}.md", "session": f"{n}.md", "sha256": f"{n:064x}", "size": n}
        for n in range(1, count + 1)
    ]


class Runner:
    """Posts what the pipeline asks, as the runtime would, and step replies by hand."""

    def __init__(self, **params: Any) -> None:
        self.thread = Thread()
        self.pipeline = Backpass()
        self.thread.post("operator", "@foreman", "ask", "backpass", {**PARAMS, **params})

    def advance(self, now: float = START_EPOCH) -> list[Ask | Report]:
        return self.pipeline.advance(self.thread.run(now))

    def post(self, actions: list[Ask | Report], ts: str | None = None) -> list[Message]:
        posted = []
        for action in actions:
            assert isinstance(action, Ask)
            extra = {"ts": ts} if ts else {}
            posted.append(
                self.thread.post(
                    "foreman",
                    f"@{action.to}",
                    "ask",
                    action.body,
                    {**action.data, "key": action.key},
                    **extra,
                )
            )
        return posted

    def reply(self, key: str, data: dict[str, Any], failed: bool = False) -> None:
        ask = self.thread.run().ask(key)
        assert ask is not None, key
        if failed:
            data = {"failed": True, "message": data.get("message", "boom")}
        self.thread.post(
            ask.to.removeprefix("@"), "@foreman", "reply", "r", data, in_reply_to=ask.id
        )

    def listed(self, count: int) -> None:
        self.post(self.advance())
        data = {"traces": _traces(count), "found": count + 3, "pending": count, "repos": REPOS}
        self.reply("list", data)

    def analysed(self, n: int, items: int = 2, fallback: bool = False) -> None:
        provenance = {
            "seat": "big",
            "seat_kind": "openai",
            "role": "bulk",
            "fallback_used": fallback,
        }
        trace = _traces(n)[-1]
        self.reply(
            f"analysis/{n}",
            {**trace, "items": items, "artifact": f"/r/{n}.json", "provenance": provenance},
        )


class TestStart:
    def test_first_ask_lists_traces(self) -> None:
        """A new run asks the tracelister, carrying the run's parameters and date."""
        actions = Runner().advance()
        assert len(actions) == 1 and isinstance(actions[0], Ask)
        ask = actions[0]
        assert (ask.key, ask.to) == ("list", "tracelister")
        assert ask.data["date"] == "2026-10-20"
        assert ask.data["run"]["traces"] == "/t" and ask.data["run"]["concurrency"] == 2

    def test_bad_request_fails_the_run(self) -> None:
        """A starting ask with an invalid parameter ends in a failure report naming it."""
        actions = Runner(concurrency=0).advance()
        assert len(actions) == 1 and isinstance(actions[0], Report) and actions[0].final
        assert actions[0].data["ok"] is False
        assert "concurrency" in actions[0].data["error"]

    def test_nothing_pending_says_so(self) -> None:
        """With no pending trace the run ends at once, successfully, and says why."""
        runner = Runner()
        runner.listed(0)
        (report,) = runner.advance()
        assert isinstance(report, Report) and report.final
        assert report.body.startswith("nothing pending: all 3 traces are unchanged")
        assert report.data["ok"] is True and report.data["nothing_pending"] is True
        assert report.data["failed_traces"] == []

    def test_failed_list_ends_the_run(self) -> None:
        """A FAILED list step ends the run with a failure report."""
        runner = Runner()
        runner.post(runner.advance())
        runner.reply("list", {"message": "no traces folder"}, failed=True)
        (report,) = runner.advance()
        assert isinstance(report, Report) and report.final and report.data["ok"] is False
        assert "no traces folder" in report.data["error"]

    def test_finished_run_does_nothing(self) -> None:
        """Once a final report is in the thread, advance returns nothing."""
        runner = Runner()
        runner.listed(0)
        (report,) = runner.advance()
        runner.thread.post(
            "foreman",
            "@operator",
            "reply",
            report.body,
            {**report.data, "key": report.key, "final": True},
        )
        assert runner.advance() == []


class TestAnalyses:
    def test_in_flight_bound(self) -> None:
        """At most `concurrency` analyses await replies; each reply frees one slot."""
        runner = Runner()
        runner.listed(5)
        first = runner.advance()
        assert [a.key for a in first] == ["analysis/1", "analysis/2"]
        assert all(isinstance(a, Ask) and a.to == "analyst" for a in first)
        assert first[0].timeout_s == 120.0 and first[0].data["deadline_s"] == 120.0
        assert first[0].data["trace"]["session"] == "1.md"
        assert runner.pipeline.in_flight_limit(runner.thread.run()) == 2
        runner.post(first)
        assert runner.advance() == []
        runner.analysed(1)
        assert [a.key for a in runner.advance()] == ["analysis/3"]

    def test_failed_trace_is_counted_and_the_run_goes_on(self) -> None:
        """A FAILED analysis is a failed trace; the quote check covers the others."""
        runner = Runner(concurrency=4)
        runner.listed(3)
        runner.post(runner.advance())
        runner.analysed(1)
        runner.reply("analysis/2", {"message": "seat 'big' timed out"}, failed=True)
        runner.analysed(3, fallback=True)
        (ask,) = runner.advance()
        assert isinstance(ask, Ask) and (ask.key, ask.to) == ("quotes", "quotechecker")
        assert [a["n"] for a in ask.data["analyses"]] == [1, 3]
        assert ask.data["failed"] == [{"n": 2, "session": "2.md", "reason": "seat 'big' timed out"}]

    def test_overdue_analysis_fails_and_frees_its_slot(self) -> None:
        """An analysis with no reply past its deadline is a failed trace and holds no slot."""
        runner = Runner(concurrency=1)
        runner.listed(2)
        runner.post(runner.advance())  # analysis/1, never answered
        later = START_EPOCH + 121
        assert runner.pipeline.in_flight_limit(runner.thread.run(later)) == 2
        (second,) = runner.advance(later)
        assert second.key == "analysis/2"
        runner.post([second], ts="2026-10-20T03:02:01.000Z")
        runner.analysed(2)
        (ask,) = runner.advance(later)
        assert ask.key == "quotes"
        assert ask.data["failed"][0]["n"] == 1 and "overdue" in ask.data["failed"][0]["reason"]

    def test_every_trace_failed(self) -> None:
        """When no analysis succeeded the run ends failed, listing every failed trace."""
        runner = Runner()
        runner.listed(2)
        runner.post(runner.advance())
        runner.reply("analysis/1", {}, failed=True)
        runner.reply("analysis/2", {}, failed=True)
        (report,) = runner.advance()
        assert isinstance(report, Report) and report.final and report.data["ok"] is False
        assert [f["n"] for f in report.data["failed_traces"]] == [1, 2]
        assert report.data["funnel"]["traces_failed"] == 2


def _to_ledger(runner: Runner) -> None:
    runner.listed(3)
    runner.post(runner.advance())
    runner.analysed(1)
    runner.analysed(2)
    runner.post(runner.advance())
    runner.analysed(3)
    runner.post(runner.advance())  # quotes
    runner.reply(
        "quotes",
        {
            "returned": 10,
            "dropped": 2,
            "kept": 8,
            "checked": [1, 2],
            "items_file": "/r/items.json",
            "changed": [{"n": 3, "session": "3.md", "reason": "rewritten"}],
        },
    )


class TestLaterSteps:
    def test_late_reply_does_not_change_a_posted_quote_check(self) -> None:
        """The quotes ask records its analyses; a reply arriving after it changes nothing."""
        runner = Runner(concurrency=2)
        runner.listed(2)
        runner.post(runner.advance())
        runner.analysed(1)
        runner.reply("analysis/2", {}, failed=True)
        (quotes,) = runner.advance()
        runner.post([quotes])
        assert runner.advance() == []
        assert [a["n"] for a in quotes.data["analyses"]] == [1]

    def test_ledger_and_synthesis_asks_carry_what_they_need(self) -> None:
        """The ledger ask gets the items and bases; synthesis gets the succeeded traces and funnel."""
        runner = Runner(concurrency=2)
        _to_ledger(runner)
        (ledger,) = runner.advance()
        assert (ledger.key, ledger.to) == ("ledger", "ledgerkeeper")
        assert ledger.data["items_file"] == "/r/items.json" and ledger.data["repos"] == REPOS
        runner.post([ledger])
        runner.reply(
            "ledger",
            {
                "new_lines": 5,
                "corroborations": 2,
                "repeats": 1,
                "covered": 0,
                "prunes_age": 1,
                "prunes_covered": 0,
                "changed": True,
                "ledger_file": "/r/ledger.md",
            },
        )
        (synthesis,) = runner.advance()
        assert (synthesis.key, synthesis.to) == ("synthesis", "synthesizer")
        assert synthesis.data["succeeded"] == [
            {"path": "/t/1.md", "sha256": f"{1:064x}"},
            {"path": "/t/2.md", "sha256": f"{2:064x}"},
        ]
        assert synthesis.data["ledger_changed"] is True
        assert synthesis.data["funnel"]["items_dropped"] == 2

    def test_final_report_holds_the_funnel_and_failed_traces(self) -> None:
        """The final report's data has the funnel numbers, the failed traces and ok=False."""
        runner = Runner(concurrency=2)
        _to_ledger(runner)
        runner.post(runner.advance())
        runner.reply(
            "ledger", {"new_lines": 5, "corroborations": 2, "prunes_age": 1, "changed": True}
        )
        runner.post(runner.advance())
        runner.reply(
            "synthesis",
            {
                "edits": {"public": 1, "private": 2},
                "synthesis": "called (s (openai))",
                "provenance": {"seat": "s", "seat_kind": "openai", "role": "synthesis"},
                "branches": {
                    "private": {"branch": "memory-backpass/2026-10-20", "commits": ["a", "b"]}
                },
                "pr_body": "/r/PR_BODY.md",
            },
        )
        (report,) = runner.advance()
        assert isinstance(report, Report) and report.final and report.key == "report"
        funnel = report.data["funnel"]
        assert funnel["traces_analyzed"] == 2 and funnel["traces_failed"] == 1
        assert (funnel["items_returned"], funnel["items_dropped"], funnel["items_kept"]) == (
            10,
            2,
            8,
        )
        assert (funnel["new_lines"], funnel["corroborations"], funnel["prunes"]) == (5, 2, 1)
        assert (funnel["edits_public"], funnel["edits_private"], funnel["edits"]) == (1, 2, 3)
        assert funnel["seats"] == {"bulk": {"big (openai)": 3}, "synthesis": {"s (openai)": 1}}
        assert funnel["drop_rate"] == 0.2
        assert report.data["failed_traces"] == [{"n": 3, "session": "3.md", "reason": "rewritten"}]
        assert report.data["ok"] is False
        assert "WARNING: 20% of the items were dropped" in report.body
        assert "memory-backpass/2026-10-20 (2 commits, unpushed)" in report.body

    def test_one_commit_is_singular(self) -> None:
        """A branch with one commit says '1 commit', not '1 commits'."""
        runner = Runner(concurrency=2)
        _to_ledger(runner)
        runner.post(runner.advance())
        runner.reply("ledger", {"new_lines": 1, "changed": True})
        runner.post(runner.advance())
        branch = {"branch": "memory-backpass/2026-10-20", "commits": ["a"]}
        runner.reply("synthesis", {"edits": {}, "branches": {"private": branch}})
        (report,) = runner.advance()
        assert "memory-backpass/2026-10-20 (1 commit, unpushed)" in report.body

    def test_failed_synthesis_ends_the_run(self) -> None:
        """A FAILED synthesis step ends the run with a failure report."""
        runner = Runner(concurrency=2)
        _to_ledger(runner)
        runner.post(runner.advance())
        runner.reply("ledger", {"changed": True})
        runner.post(runner.advance())
        runner.reply("synthesis", {"message": "no seat gave a valid synthesis"}, failed=True)
        (report,) = runner.advance()
        assert isinstance(report, Report) and report.final and report.data["ok"] is False
        assert "no seat gave a valid synthesis" in report.body
