"""`backpass()`: the ask it posts, how it follows the thread, what it prints and returns."""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass, field
from typing import Any

import pytest

from agents.backpass.command import EXIT_FAILED, EXIT_OK, EXIT_WAIT, backpass
from agents.backpass.config import RunParams
from agents.home import Home
from room.client import RoomClient
from tests.backpass.helpers import BackpassHome, FakeJudge, Thread, drive_async, seat_error

ALPHA = "- The deploy failed & $1 broke it.\n- Quoting fixed it.\n"


@dataclass
class FakeClient:
    """Plays hub and society: the posted ask runs through the real pipeline and steps."""

    judge: FakeJudge | None = None
    silent: bool = False
    posts: list[dict[str, Any]] = field(default_factory=list)
    lines: list[dict[str, Any]] = field(default_factory=list)
    home: Home | None = None

    async def __aenter__(self) -> FakeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def say(self, to: str, body: str, **fields: Any) -> dict[str, Any]:
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
        assert "analysis 0/2\nanalysis 1/2\nanalysis 2/2\n" in err
        assert "\r" not in err  # not a terminal: plain lines

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
        from room.errors import ConfigError

        fake = FakeClient()
        home = _home(bp_home, fake, "[backpass]\nconcurency = 3\n")
        with pytest.raises(ConfigError, match=r"backpass\.concurency: unknown key"):
            _run(home)
        assert fake.posts == []
