"""Runs read back from their threads, and their charts: pure functions over room lines."""

from __future__ import annotations

from typing import Any

from agents.web import charts
from agents.web.runs import build_run, build_runs

TRUSTED = frozenset({"operator", "foreman", "grinder", "slow", "analyst"})


def line(seq: int, sender: str, to: str, kind: str, body: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "seq": seq,
        "id": f"id{seq}",
        "ts": f"2026-12-01T00:00:{seq:02d}.000Z",
        "from": sender,
        "to": to,
        "type": kind,
        "body": body,
        "thread": "t-1",
        "verified": True,
        **extra,
    }


def build_thread() -> list[dict[str, Any]]:
    iteration = {"kind": "grind-iteration", "tier": 1, "passing": 2, "total": 5, "files_changed": 1}
    return [
        line(1, "operator", "@foreman", "ask", "build", data={"pipeline": "build"}),
        line(2, "foreman", "@grinder", "ask", "grind", data={"key": "grind"}),
        line(3, "grinder", "@foreman", "reply", "it 1", in_reply_to="id2",
             data={**iteration, "iteration": 1, "seat": "code-small"}),
        line(4, "grinder", "@foreman", "reply", "it 2", in_reply_to="id2",
             data={**iteration, "iteration": 2, "passing": 5, "tier": 2}),
        line(5, "foreman", "@slow", "ask", "step 9", data={"key": "slow"}),
        line(6, "foreman", "@operator", "reply", "[STEP TIMEOUT — @slow did not reply in 5 s]",
             data={"key": "overdue/slow", "overdue": "slow", "final": False}),
        line(7, "mallory", "@foreman", "reply", "not trusted", in_reply_to="id5"),
        line(8, "foreman", "@operator", "reply", "build red", data={
            "key": "report", "final": True, "kind": "build-report", "green": False, "tier": 2,
            "passing": 4, "total": 5, "clone": "/tmp/c", "iterations": 2}),
    ]  # fmt: skip


def test_a_build_run_has_its_steps_its_climb_and_its_red_verdict() -> None:
    """Steps are answered or overdue (an untrusted reply counts for nothing); the grind
    iterations are charted; a red build report makes the run failed."""
    run = build_run(build_thread(), TRUSTED)
    assert run is not None and run.pipeline == "build"
    assert [(s.nick, s.state) for s in run.steps] == [("grinder", "answered"), ("slow", "overdue")]
    assert run.steps[0].seat == "code-small" and run.steps[0].duration == 1.0
    assert [i["iteration"] for i in run.iterations] == [1, 2]
    assert run.state == "failed" and run.build_report["green"] is False  # type: ignore[index]
    svg = charts.tier_climb(run.iterations)
    assert svg.count("<circle") == 2 and "tier 2 · iteration 2: 5/5 passing" in svg


def test_open_runs_come_first_and_threads_without_a_start_are_not_runs() -> None:
    """A finished run sorts after an open one; a thread with no ask to the foreman, or a trust
    check's ping, is no run."""
    done = build_thread()
    opened = [dict(m, thread="t-2", id=f"o{m['seq']}", seq=m["seq"]) for m in done[:2]]
    chat = [line(1, "operator", "@echo", "chat", "hi", thread="t-3")]
    ping = [line(1, "operator", "@foreman", "ask", "ping", thread="t-4", data={"ping": True})]
    runs = build_runs({"t-1": done, "t-2": opened, "t-3": chat, "t-4": ping}, TRUSTED)
    assert [r.thread for r in runs] == ["t-2", "t-1"]
    assert runs[0].state == "open" and runs[0].steps[0].state == "asked"


def test_the_funnel_chart_draws_the_alarm_line_and_marks_a_rate_above_it() -> None:
    """The drop-rate bar is red above the alarm; labels are escaped."""
    calm = charts.funnel({"items_returned": 100, "items_dropped": 3, "drop_rate": 0.03})
    alarmed = charts.funnel({"items_returned": 100, "items_dropped": 36, "drop_rate": 0.36})
    assert 'class="alarm-line"' in calm and 'class="rate"' in calm
    assert 'class="rate alarm"' in alarmed and "drop rate 36.0% · alarm above 10%" in alarmed
    assert "<script" not in charts.tier_climb([{"tier": "<script>", "passing": 1, "total": 2}])


def test_the_runs_page_writes_iterations_per_tier_as_words_not_a_dict() -> None:
    """A build report's `iterations` ({'cheap': 2, 'strong': 1}) reads `cheap 2, strong 1`."""
    from agents.web import pages

    thread = build_thread()
    thread[-1]["data"]["iterations"] = {"cheap": 2, "strong": 1}
    run = build_run(thread, TRUSTED)
    assert run is not None
    html = pages.runs([run], "csrf")
    assert "iterations: cheap 2, strong 1" in html
    assert "{" not in html.split("<main>", 1)[1].split("</main>", 1)[0]


def test_a_waiting_run_counts_on_from_its_start() -> None:
    """An open run's duration is taken against now (and ticks in the page), not frozen at its
    last line; a finished run keeps its own duration."""
    from agents.web import pages

    opened = build_thread()[:2]
    run = build_run(opened, TRUSTED)
    assert run is not None and run.state == "open"
    html = pages.runs([run], "csrf")
    assert 'data-since="2026-12-01T00:00:01.000Z"' in html
    assert "1.0 s" not in html  # not frozen at its last line, a second after its start
    done = build_run(build_thread(), TRUSTED)
    assert done is not None and "data-since" not in pages.runs([done], "csrf")


def test_a_message_page_has_a_way_back() -> None:
    """ "No such run" (and every other message page) links back to the Runs page and the Room."""
    from agents.web import pages

    html = pages.message("No such run", "No expedition in the room has the thread exp-x.")
    assert 'href="/runs"' in html and 'href="/room"' in html


def test_a_failed_step_is_named_and_an_open_run_names_whom_it_waits_on() -> None:
    """`where` (the runs page's and `bullpen runs`' one line): the step number, key and nick
    of the first failed step; an open run's pending step's nick; calls and tokens summed."""
    judged = {"judgment": {"seat": "s", "attempts": 2, "tokens": 30}}
    thread = [
        line(1, "operator", "@foreman", "ask", "expedition", data={"pipeline": "expedition", "title": "T"}),
        line(2, "foreman", "@analyst", "ask", "step 1", data={"key": "terms"}),
        line(3, "analyst", "@foreman", "reply", "terms", in_reply_to="id2", data=judged),
        line(4, "foreman", "@grinder", "ask", "step 2", data={"key": "brief"}),
    ]  # fmt: skip
    (running,) = build_runs({"t-1": thread}, TRUSTED)
    assert running.where == "waiting on @grinder (1 step(s))" and running.waits_on == "grinder"
    assert (running.calls, running.tokens, running.title) == (2, 30, "T")
    thread += [
        line(5, "grinder", "@foreman", "reply", "[GRINDER FAILED — no]", in_reply_to="id4",
             data={"failed": True}),
        line(6, "foreman", "@operator", "reply", "[STEP_2 FAILED — no]",
             data={"key": "report", "final": True, "failed": True}),
    ]  # fmt: skip
    (failed,) = build_runs({"t-1": thread}, TRUSTED)
    assert failed.state == "failed" and failed.where == "failed at step 2 (brief, @grinder)"
    assert failed.summary()["failed_step"] == 2 and failed.waits_on is None
