"""`backpass()`: the ask it posts, how it follows the thread, what it prints and returns."""

from __future__ import annotations

import asyncio
import io
import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from agents.backpass.command import EXIT_FAILED, EXIT_OK, EXIT_WAIT, Progress, backpass
from agents.backpass.config import RunParams
from agents.home import Home
from room.client import RoomClient
from room.errors import ConfigError, UsageError
from tests.backpass.helpers import BackpassHome, FakeJudge, Thread, drive_async, seat_error

ALPHA = "- The deploy failed & $1 broke it.\n- Quoting fixed it.\n"


@dataclass
class FakeClient:
    """Plays hub and society: the posted ask runs through the real pipeline and steps."""

    judge: FakeJudge | None = None
    silent: bool = False
    posts: list[dict[str, Any]] = field(default_factory=list)
    lines: list[dict[str, Any]] = field(default_factory=list)
    pinged: list[str] = field(default_factory=list)
    home: Home | None = None

    async def __aenter__(self) -> FakeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def say(self, to: str, body: str, **fields: Any) -> dict[str, Any]:
        if (fields.get("data") or {}).get("ping"):  # the foreman's lurker answers it at once
            self.pinged.append(to)
            pong = {"seq": 1, "id": "pong", "from": to.lstrip("@"), "to": "@operator",
                    "type": "reply", "body": "pong", "in_reply_to": "ping-ask",
                    "thread": fields["thread"], "verified": True}  # fmt: skip
            self.lines.append(pong)
            return {"seq": 0, "id": "ping-ask"}
        self.posts.append({"to": to, "body": body, **fields})
        if not self.silent:
            assert self.home is not None
            params = RunParams.model_validate(fields["data"])
            outcome = await drive_async(self.home, params, self.judge, thread_name=fields["thread"])
            self.lines = [m.to_dict() for m in outcome.thread.messages]
            noise = Thread(fields["thread"]).post(
                "intruder", "@operator", "reply", "fake", {"final": True, "ok": True}
            )
            self.lines.insert(2, {**noise.to_dict(), "seq": 0, "verified": False})
        return {"seq": 1}

    follow = RoomClient.follow  # the real long-poll loop, over this fake's read

    async def read(
        self, after: int, limit: int = 100, *, thread: str | None = None, wait: float = 0
    ) -> tuple[list[dict[str, Any]], int]:
        await asyncio.sleep(0)
        found = [line for line in self.lines if line["seq"] > after and line["thread"] == thread]
        found = found[:2]  # a slow hub: two lines per poll
        return found, (found[-1]["seq"] if found else after)


class ClientHome(Home):
    fake: FakeClient

    def client(self, nick: str | None = None, **_: Any) -> FakeClient:  # type: ignore[override]
        assert nick == "operator"
        return self.fake


def _home(bp_home: BackpassHome, fake: FakeClient, toml: str = "") -> ClientHome:
    (bp_home.root / "society.toml").write_text(toml)
    home = ClientHome(bp_home.root)
    fake.home = home
    home.fake = fake
    return home


def _run(home: Home, **options: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = asyncio.run(backpass(home, out=out, err=err, **options))
    return code, out.getvalue(), err.getvalue()


class TestCommand:
    def test_posts_the_ask_and_prints_the_funnel(self, bp_home: BackpassHome) -> None:
        """One ask to @foreman with absolute paths; progress on stderr; the funnel on stdout; exit 0."""
        bp_home.trace("a.md", ALPHA)
        bp_home.trace("b.md", ALPHA + "- Why?\n")
        fake = FakeClient()
        home = _home(bp_home, fake, "[backpass]\nconcurrency = 3\n")
        code, out, err = _run(home, traces="traces", timeout=30)
        assert code == EXIT_OK, out + err
        (post,) = fake.posts
        assert post["to"] == "@foreman" and post["type"] == "ask"
        assert post["thread"].startswith("backpass-")
        data = post["data"]
        assert data["pipeline"] == "backpass" and data["report_only"] is False
        assert data["traces"] == str(bp_home.traces) and data["state"] == str(bp_home.state)
        assert (data["concurrency"], data["timeout_s"]) == (3, 30)
        assert out.startswith("=== BACKPASS FUNNEL ===\n") and "analysed            2" in out
        steps = [line for line in err.splitlines() if line.startswith("step ")]
        assert steps == [
            "step 1/5 list",
            "step 2/5 analysis 0/2",
            "step 2/5 analysis 1/2",
            "step 2/5 analysis 2/2",
            "step 3/5 quote check",
            "step 4/5 ledger",
            "step 5/5 synthesis and git",
        ]
        assert "\r" not in err and "\x1b" not in err  # not a terminal: plain lines

    def test_failed_trace_exits_non_zero(self, bp_home: BackpassHome) -> None:
        """Any failed trace makes the exit code 1, and the funnel names it."""
        bp_home.trace("a.md", ALPHA)
        bp_home.trace("b.md", ALPHA)

        def script(step: str, request: Any) -> Any:
            from agents.backpass.local import LOCAL_ANSWERS

            if request.payload.get("session") == "b.md":
                return seat_error("refused")
            return LOCAL_ANSWERS[step](dict(request.payload))

        home = _home(bp_home, FakeClient(judge=FakeJudge(script)))
        code, out, _ = _run(home, report_only=True)
        assert code == EXIT_FAILED
        assert "FAILED traces (1), pending again next run:\n  b.md:" in out

    def test_no_final_report_gives_up_with_the_thread(self, bp_home: BackpassHome) -> None:
        """Without a verified final report from the foreman in time, exit 75 and name the thread."""
        fake = FakeClient(silent=True)
        home = _home(bp_home, fake)
        code, out, err = _run(home, wait_timeout=0.05)
        assert code == EXIT_WAIT and out == ""
        assert f"its thread is {fake.posts[0]['thread']}" in err

    def test_bad_configuration_is_a_config_error(self, bp_home: BackpassHome) -> None:
        """A misspelt [backpass] key fails before anything is posted, naming the key."""
        fake = FakeClient()
        home = _home(bp_home, fake, "[backpass]\nconcurency = 3\n")
        with pytest.raises(ConfigError, match=r"backpass\.concurency: unknown key"):
            _run(home)
        assert fake.posts == []

    def test_empty_traces_folder_says_there_are_no_traces(self, bp_home: BackpassHome) -> None:
        """An empty traces folder is named as such, with what counts as a trace; not "all 0 traces"."""
        bp_home.trace(".hidden.md", "- It worked.\n")
        bp_home.trace("image.png", "\x00binary")
        home = _home(bp_home, FakeClient())
        code, out, _ = _run(home)
        assert code == EXIT_OK, out
        assert out.startswith(f"no traces in {bp_home.traces}: ")
        assert "hidden" in out and "binary" in out
        assert "skipped             1 binary file in the traces folder" in out
        assert "all 0 traces" not in out


class TestRefusedBeforeAsking:
    """Bad input is refused before the ask is posted: a clear error, nothing written."""

    def test_a_file_that_is_not_a_state_file(self, bp_home: BackpassHome) -> None:
        """--state at society.toml, outside [roots] state: a usage error naming it, none of its text
        shown; the file is untouched."""
        fake = FakeClient()
        home = _home(bp_home, fake, "[backpass]\nconcurrency = 3\n")
        society = bp_home.root / "society.toml"
        before = sorted(bp_home.root.iterdir())
        with pytest.raises(UsageError) as caught:
            _run(home, state=str(society))
        message = caught.value.message
        assert message.startswith("--state: refused") and str(society) in message
        assert "[roots] state" in message and "concurrency" not in message
        assert fake.posts == []
        assert society.read_text() == "[backpass]\nconcurrency = 3\n"
        assert sorted(bp_home.root.iterdir()) == before  # no society.toml.lock

    def test_a_garbage_state_file_from_the_config(self, bp_home: BackpassHome) -> None:
        """The same check for [backpass] state is a configuration error (exit 78)."""
        bp_home.state.write_text("f" * 64 + "  /ok\ngarbage line here\n")
        fake = FakeClient()
        home = _home(bp_home, fake)
        with pytest.raises(ConfigError, match=r"\[backpass\] state: .*line 2.*garbage line here"):
            _run(home)
        assert fake.posts == []
        assert bp_home.state.read_text() == "f" * 64 + "  /ok\ngarbage line here\n"

    @pytest.mark.parametrize(
        ("where", "says"),
        [
            ("state/nope/state", "does not exist"),
            ("state", "is a folder"),
            ("/proc/nope/state", "outside"),
        ],
    )
    def test_a_state_path_no_run_could_write(
        self, bp_home: BackpassHome, where: str, says: str
    ) -> None:
        """A state file in a missing folder, or a folder as the state file: refused up front."""
        fake = FakeClient()
        home = _home(bp_home, fake)
        with pytest.raises(UsageError, match=says):
            _run(home, state=where)
        assert fake.posts == []

    @pytest.mark.parametrize(
        ("option", "value"),
        [
            ("wait_timeout", 0.0),
            ("wait_timeout", -1.0),
            ("wait_timeout", math.nan),
            ("wait_timeout", math.inf),
            ("timeout", 0.0),
            ("timeout", math.nan),
            ("timeout", math.inf),
            ("concurrency", 0),
            ("concurrency", 65),
        ],
    )
    def test_numbers_out_of_range(self, bp_home: BackpassHome, option: str, value: float) -> None:
        """Non-positive, non-finite or out-of-range numbers are refused, naming the option."""
        fake = FakeClient()
        home = _home(bp_home, fake)
        flag = "--" + option.replace("_", "-")
        with pytest.raises(UsageError, match=f"^{flag} must be "):
            _run(home, **{option: value})
        assert fake.posts == []

    def test_an_infinite_timeout_in_the_config(self, bp_home: BackpassHome) -> None:
        """[backpass] timeout_s = inf is a configuration error, not a run that never times out."""
        fake = FakeClient()
        home = _home(bp_home, fake, "[backpass]\ntimeout_s = inf\n")
        with pytest.raises(ConfigError, match=r"backpass\.timeout_s"):
            _run(home)
        assert fake.posts == []


class TtyBuffer(io.StringIO):
    def isatty(self) -> bool:
        return True


LINES = [
    {"from": "foreman", "type": "ask", "to": "@tracelister"},
    {"from": "tracelister", "type": "reply", "data": {"traces": [{}, {}]}},
    {"from": "analyst", "type": "reply"},
    {"from": "foreman", "type": "ask", "to": "@quotechecker"},
]


class TestProgress:
    def test_a_terminal_rewrites_the_line_in_place(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """On a capable terminal each update replaces the last one."""
        monkeypatch.setenv("TERM", "xterm-256color")
        stream = TtyBuffer()
        progress = Progress(stream)
        for line in LINES:
            progress.see(line)
        progress.done()
        assert stream.getvalue().startswith("\r\x1b[Kstep 1/5 list\r\x1b[Kstep 2/5 analysis 0/2")
        assert stream.getvalue().endswith("\r\x1b[Kstep 3/5 quote check\r\x1b[K")

    @pytest.mark.parametrize("term", ["dumb", None])
    def test_a_dumb_terminal_gets_plain_lines(
        self, monkeypatch: pytest.MonkeyPatch, term: str | None
    ) -> None:
        """TERM=dumb (or no TERM) on a tty: one line per update and no escapes, as in a pipe."""
        if term is None:
            monkeypatch.delenv("TERM", raising=False)
        else:
            monkeypatch.setenv("TERM", term)
        stream = TtyBuffer()
        progress = Progress(stream)
        for line in LINES:
            progress.see(line)
        progress.done()
        assert stream.getvalue() == (
            "step 1/5 list\nstep 2/5 analysis 0/2\nstep 2/5 analysis 1/2\nstep 3/5 quote check\n"
        )

    def test_no_color_changes_nothing(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """NO_COLOR is about colour, and progress has none: a terminal still rewrites in place."""
        monkeypatch.setenv("TERM", "xterm")
        monkeypatch.setenv("NO_COLOR", "1")
        stream = TtyBuffer()
        Progress(stream).see(LINES[0])
        assert stream.getvalue() == "\r\x1b[Kstep 1/5 list"
