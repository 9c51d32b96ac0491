"""The operator's command against a fake hub client: what it prints, posts and returns."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

from agents.expedition import command
from agents.expedition.command import (
    EXIT_FAILED,
    EXIT_MISSING,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_UNCLEAR,
    EXIT_USAGE,
    Follower,
    Progress,
    answer_post,
    request_data,
)
from agents.home import Home
from room.message import Message
from tests.expedition.sim import FakeClient, message, write_home

DIG = "=== DIG REPORT ===\n...\n=== END DIG REPORT ===\nReply to confirm, drop, or redirect any candidate before I build the brief."


def foreman_report(seq: int, body: str, key: str, **data: Any) -> Message:
    return message(
        seq, "foreman", "avery", "reply", body, data={"key": key, **data}, thread="exp-1"
    )


def room_until_dig() -> list[Message]:
    return [
        message(1, "avery", "foreman", "ask", "expedition", thread="exp-1"),
        message(
            2,
            "foreman",
            "scorer",
            "ask",
            "step 3 score: batch 1 of 2",
            data={"key": "score/1", "step": 3},
            thread="exp-1",
        ),
        message(
            3,
            "scorer",
            "foreman",
            "reply",
            "batch 1 of 2",
            data={"scores": [], "batch": 1, "of": 2, "seat": "local"},
            in_reply_to="m0002",
            thread="exp-1",
        ),
        message(
            4,
            "scorer",
            "foreman",
            "reply",
            "x",
            data={"scores": [], "batch": 1, "of": 2},
            thread="exp-1",
            verified=False,
        ),
        foreman_report(5, DIG, "dig-report", final=False),
    ]


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return write_home(tmp_path / "home", tmp_path / "kb")


def follow(
    home: Home, client: FakeClient, timeout: float = 5, **options: Any
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    follower = Follower(home, client, "exp-1", out, err, **options)  # type: ignore[arg-type]
    code = asyncio.run(follower.follow(1, timeout=timeout))
    return code, out.getvalue(), err.getvalue()


class TestFollow:
    def test_without_yes_the_run_is_left_waiting(self, home: Home) -> None:
        """Not at a terminal and not told to confirm: print the report, say how to go on, exit 0."""
        client = FakeClient(room_until_dig())
        code, out, err = follow(home, client)
        assert code == EXIT_OK and out.strip() == DIG and client.said == []
        assert "bullpen expedition confirm exp-1" in err

    def test_progress_is_plain_lines_and_ignores_unverified(self, home: Home) -> None:
        """Progress names each step and batch count, with no escape codes, skipping forgeries."""
        _, _, err = follow(home, FakeClient(room_until_dig()))
        assert "-> @scorer: step 3/6 score: batch 1 of 2" in err
        assert err.count("<- @scorer: step 3/6 score: 1 of 2 batches in") == 1
        assert "\x1b" not in err

    def test_yes_confirms_and_waits_for_the_brief(self, home: Home) -> None:
        """--yes answers the report with a confirm in its thread, then prints the brief's path."""
        done = foreman_report(0, "brief written: /b/x.md", "result", final=True, outcome="brief")
        client = FakeClient(room_until_dig(), on_say={"confirm": done})
        code, out, _ = follow(home, client, yes=True)
        assert code == EXIT_OK and "brief written: /b/x.md" in out
        (said,) = client.said
        assert (
            said["type"] == "reply" and said["in_reply_to"] == "m0005" and said["thread"] == "exp-1"
        )
        assert said["data"] == {"confirm": True, "drop": []}

    @pytest.mark.parametrize(
        ("outcome", "code"), [("missing", EXIT_MISSING), ("failed", EXIT_FAILED)]
    )
    def test_missing_or_failed_exit_non_zero(self, home: Home, outcome: str, code: int) -> None:
        """A MISSING anchor or a failed step ends the command with a non-zero code."""
        end = foreman_report(6, "[STEP_2 FAILED — x]", "result", final=True, outcome=outcome)
        client = FakeClient([*room_until_dig()[:4], end])
        assert follow(home, client)[0] == code

    def test_timeout_before_any_dig_report_says_how_to_follow(self, home: Home) -> None:
        """No Dig Report within the wait: say so and how to follow, never that the run waits on you."""
        client = FakeClient(room_until_dig()[:4])
        code, out, err = follow(home, client, timeout=0.2)
        assert code == EXIT_TIMEOUT and out == ""
        assert "No Dig Report arrived within 0.2 s" in err
        assert "bullpen tail --thread exp-1" in err
        assert "waits for your answer" not in err


class TestConfirm:
    def test_confirm_answers_the_latest_report(
        self, home: Home, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`confirm THREAD --drop` replies to the newest Dig Report and follows to the end."""
        lines = [*room_until_dig(), foreman_report(6, DIG, "dig-report@1", final=False)]
        done = foreman_report(0, "brief written: /b/y.md", "result", final=True, outcome="brief")
        client = FakeClient(lines, on_say={"confirm, drop row_2": done})
        monkeypatch.setattr(home, "client", lambda *a, **k: client)
        out = io.StringIO()
        code = asyncio.run(
            command.confirm(home, "exp-1", drop=["row_2"], out=out, err=io.StringIO())
        )
        assert code == EXIT_OK and "/b/y.md" in out.getvalue()
        assert client.said[0]["in_reply_to"] == "m0006"

    def test_confirm_of_an_unknown_thread_says_it_does_not_exist(
        self, home: Home, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A thread with no ask to @foreman is not a run: say so, and how to find the thread."""
        client = FakeClient(room_until_dig())
        monkeypatch.setattr(home, "client", lambda *a, **k: client)
        err = io.StringIO()
        code = asyncio.run(command.confirm(home, "exp-nope", out=io.StringIO(), err=err))
        assert code == EXIT_USAGE and client.said == []
        said = err.getvalue()
        assert "no expedition with the thread exp-nope" in said
        assert "bullpen runs --kind expedition" in said and "no Dig Report yet" not in said

    def test_confirm_of_another_pipelines_thread_says_which_it_is(
        self, home: Home, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A thread that is a backpass run is not confirmed as an expedition."""
        ask = message(
            1, "avery", "foreman", "ask", "backpass", data={"pipeline": "backpass"}, thread="bp-1"
        )
        client = FakeClient([ask])
        monkeypatch.setattr(home, "client", lambda *a, **k: client)
        err = io.StringIO()
        code = asyncio.run(command.confirm(home, "bp-1", out=io.StringIO(), err=err))
        assert code == EXIT_USAGE and "is a backpass run, not an expedition" in err.getvalue()
        assert client.said == []

    def test_confirm_without_a_report_fails(
        self, home: Home, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Confirming a run that has no Dig Report yet is an error that says to wait."""
        client = FakeClient(room_until_dig()[:3])
        monkeypatch.setattr(home, "client", lambda *a, **k: client)
        err = io.StringIO()
        assert (
            asyncio.run(command.confirm(home, "exp-1", out=io.StringIO(), err=err)) == EXIT_FAILED
        )
        assert "no Dig Report yet" in err.getvalue() and client.said == []


class TestHelpers:
    def test_request_paths_are_made_absolute(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Paths typed at the shell are resolved against its folder; omitted ones are left out."""
        monkeypatch.chdir(tmp_path)
        data = request_data(title="T", keyword="k", kb="kb", blaze="b.md")
        assert data == {
            "pipeline": "expedition",
            "title": "T",
            "keyword": "k",
            "voice": "Carbon",
            "kb": str(tmp_path / "kb"),
            "blaze": str(tmp_path / "b.md"),
        }

    def test_answer_forms(self) -> None:
        """Confirm, drop and redirect each have a readable body and a structured form."""
        assert answer_post() == ("confirm", {"confirm": True, "drop": []})
        assert answer_post(["row_2", "row_5"]) == (
            "confirm, drop row_2 row_5",
            {"confirm": True, "drop": ["row_2", "row_5"]},
        )
        assert answer_post(redirect="kilns") == ("redirect kilns", {"redirect": "kilns"})

    def test_progress_says_which_step_of_how_many(self) -> None:
        """Each ask and its reply carry `step N/6`, the whole run's count, not only batches."""
        progress = Progress()
        asked = message(
            2,
            "foreman",
            "termgen",
            "ask",
            "step 1 terms: patience",
            data={"key": "terms", "step": 1},
        )
        replied = message(
            3,
            "termgen",
            "foreman",
            "reply",
            "12 terms, 8 fan out: rushed; cracked",
            data={"terms": [], "seat": "local"},
            in_reply_to="m0002",
        )
        assert progress.line(asked) == "-> @termgen: step 1/6 terms: patience"
        assert progress.line(replied) == (
            "<- @termgen: step 1/6: 12 terms, 8 fan out: rushed; cracked (seat local)"
        )
        failed = message(
            4,
            "termgen",
            "foreman",
            "reply",
            "[TERMGEN FAILED — no index]",
            data={"failed": True},
            in_reply_to="m0002",
        )
        assert progress.line(failed) == "<- @termgen: step 1/6: [TERMGEN FAILED — no index]"

    def test_progress_stays_plain_in_a_pipe(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Control characters from a step's body never reach stderr: no escapes, TERM=dumb or not."""
        monkeypatch.setenv("TERM", "dumb")
        painted = message(
            3,
            "termgen",
            "foreman",
            "reply",
            "\x1b[31mred\x1b[0m terms\x07\tdone\r",
            data={},
        )
        line = Progress().line(painted)
        assert line == "<- @termgen: red terms done"

    def test_progress_of_a_failed_step(self) -> None:
        """A failed step's flag is shown as it came."""
        failed = message(
            3, "scorer", "foreman", "reply", "[SCORER FAILED — bad]", data={"failed": True}
        )
        assert Progress().line(failed) == "<- @scorer: [SCORER FAILED — bad]"


def test_an_unclear_answer_is_reported_not_waited_on(home: Home) -> None:
    """When the foreman cannot act on the answer, the command says so and exits with its own code."""
    unclear = foreman_report(
        6, "I could not act on your answer: it drops row_9", "unclear/m5", outcome="unclear"
    )
    code, _, err = follow(home, FakeClient([*room_until_dig()[:4], unclear]))
    assert code == EXIT_UNCLEAR and "row_9" in err and "bullpen expedition confirm exp-1" in err
    assert EXIT_UNCLEAR not in (EXIT_OK, EXIT_FAILED, EXIT_MISSING, EXIT_TIMEOUT)


def test_confirm_dropping_an_unknown_row_exits_with_the_unclear_code(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`confirm THREAD --drop row_99`: the foreman asks again, and the exit code says so."""
    unclear = foreman_report(
        0,
        "I could not act on your answer: it drops row_99, which the Dig Report does not list.",
        "unclear/m6",
        outcome="unclear",
    )
    client = FakeClient(room_until_dig(), on_say={"confirm, drop row_99": unclear})
    monkeypatch.setattr(home, "client", lambda *a, **k: client)
    err = io.StringIO()
    code = asyncio.run(
        command.confirm(home, "exp-1", drop=["row_99"], out=io.StringIO(), err=err, timeout=5)
    )
    assert code == EXIT_UNCLEAR and "row_99" in err.getvalue()
