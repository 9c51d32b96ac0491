"""Lurkers: real hub and lurker processes, woken only by what the rules allow."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.runtime.lean import lone_args
from agents.runtime.wake import certain_refusal, refusal, wake_set
from room.message import Message, Post
from room.traceids import child_span_id
from tests.support import HTTP, Society, add_nick, run_cli, wait_for
from trust.proof import SecretSigner


def message(**fields: Any) -> Message:
    base = {
        "seq": 1,
        "id": "M1",
        "ts": "t",
        "from": "operator",
        "to": "@echo",
        "type": "ask",
        "body": "hi",
        "verified": True,
        "prev": "",
    }
    return Message.model_validate({**base, **fields})


class TestWakeRules:
    TRUSTED = frozenset({"operator", "foreman", "echo"})
    PLAIN_FAILURES: tuple[dict[str, Any], ...] = (
        {"from": "echo"},
        {"type": "reply"},
        {"type": "system"},
        {"to": "@other"},
        {"from": "stranger"},
        {"verified": False},
    )

    def test_all_rules_hold(self) -> None:
        """A verified ask from a trusted nick to us wakes us."""
        assert refusal(message(), "echo", wake_set(False), self.TRUSTED) is None

    @pytest.mark.parametrize(
        ("change", "rule"),
        [
            ({"from": "echo"}, "rule 1"),
            ({"type": "reply"}, "rule 2"),
            ({"type": "system"}, "rule 2"),
            ({"to": "@other"}, "rule 3"),
            ({"from": "stranger"}, "rule 4"),
            ({"verified": False}, "rule 5"),
        ],
    )
    def test_each_rule_alone_stops_the_wake(self, change: dict[str, Any], rule: str) -> None:
        """A message failing exactly one rule does not wake the lurker, and says which rule."""
        reason = refusal(message(**change), "echo", wake_set(False), self.TRUSTED)
        assert reason is not None and reason.startswith(rule)

    def test_replies_wake_only_reply_waking_nicks_and_never_their_own(self) -> None:
        """A reply wakes a flagged nick, never an unflagged one, and never its own reply."""
        reply = message(type="reply", to="@foreman")
        assert refusal(reply, "foreman", wake_set(True), self.TRUSTED) is None
        assert refusal(reply, "foreman", wake_set(False), self.TRUSTED) is not None
        own = message(type="reply", to="@foreman", **{"from": "foreman"})
        assert refusal(own, "foreman", wake_set(True), self.TRUSTED) is not None

    @pytest.mark.parametrize(
        "change",
        [
            {},
            {"from": "echo"},
            {"type": "reply"},
            {"type": "system"},
            {"to": "@other"},
            {"to": "echo"},
            {"from": "stranger"},
            {"verified": False},
            {"verified": None},
            {"verified": 0},
            {"verified": 1},
            {"verified": "true"},
            {"verified": "no"},
            {"from": 7},
            {"to": ["@echo"]},
            {"type": None},
            {"to": None},
        ],
    )
    def test_the_raw_rules_refuse_only_what_the_full_rules_refuse(
        self, change: dict[str, Any]
    ) -> None:
        """The lone lurker's idle loop judges a line on its raw fields: whatever it refuses,
        the model refuses to read or the full rules refuse for the same rule; the plain
        single-rule failures are all refused there, without the model."""
        line = {**message().to_dict(), **change}
        wake = wake_set(False)
        raw = certain_refusal(line, "echo", wake, self.TRUSTED)
        try:
            full = refusal(Message.model_validate(line), "echo", wake, self.TRUSTED)
        except ValueError:
            full = "not a room message"
        if raw is not None:
            assert full is not None and full.split(":")[0] in (
                raw.split(":")[0],
                "not a room message",
            )
        if any(repr(change) == repr(plain) for plain in self.PLAIN_FAILURES):  # 0 is not False
            assert raw is not None and raw == full
        if not change:
            assert raw is None and full is None


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["lurk", "echo"], (None, "echo", "info")),
        (["--home", "/h", "lurk", "echo"], ("/h", "echo", "info")),
        (["--home=/h", "--log-level", "debug", "lurk", "echo"], ("/h", "echo", "debug")),
        (["lurk", "--home", "/h", "echo"], ("/h", "echo", "info")),
        (["lurk"], None),
        (["lurk", "echo", "extra"], None),
        (["lurk", "--help"], None),
        (["--log-level", "loud", "lurk", "echo"], None),
        (["lurk", "echo", "--log-level", "debug"], None),
        (["read", "echo"], None),
        (["--home", "/h"], None),
    ],
)
def test_only_a_plain_lurk_takes_the_lean_start(
    argv: list[str], expected: tuple[str | None, str, str] | None
) -> None:
    """`bullpen lurk NICK` with the options a unit passes starts on the stdlib idle loop;
    anything else (a typo, --help, another command) goes to the full command line, which
    explains what is wrong."""
    assert lone_args(argv) == expected


def test_bullpen_lean_off_starts_the_full_lurker(monkeypatch: pytest.MonkeyPatch) -> None:
    """BULLPEN_LEAN=off in a lurker's environment skips the lean start (its first wake then
    loads nothing); any other value keeps it."""
    monkeypatch.setenv("BULLPEN_LEAN", "off")
    assert lone_args(["lurk", "echo"]) is None
    monkeypatch.setenv("BULLPEN_LEAN", "on")
    assert lone_args(["lurk", "echo"]) == (None, "echo", "info")


def say(
    society: Society,
    to: str,
    body: str,
    *,
    sender: str = "operator",
    signed: bool = True,
    **fields: Any,
) -> dict[str, Any]:
    payload = {"from": sender, "to": to, "type": fields.pop("type", "ask"), "body": body, **fields}
    if signed:
        payload.update(SecretSigner(society.secret()).prove(Post.model_validate(payload)))
    answer = HTTP.post(f"{society.strict_url}/say", json=payload, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def replies_to(society: Society, ask_id: str) -> list[dict[str, Any]]:
    return [m for m in society.lines() if m.get("in_reply_to") == ask_id]


def wait_reply(society: Society, ask_id: str, timeout: float = 20) -> dict[str, Any]:
    return wait_for(
        lambda: (replies_to(society, ask_id) or [None])[0], timeout, f"a reply to {ask_id}"
    )


@pytest.fixture
def running(society: Society) -> Society:
    society.start_hub()
    return society


class TestEcho:
    def test_ping_round_trip(self, running: Society) -> None:
        """A ping ask from the operator comes back as a verified pong addressed to @operator."""
        running.start_lurker("echo")
        ask = say(running, "@echo", "ping", data={"ping": True}, thread="t-ping")
        reply = wait_reply(running, ask["id"])
        assert reply["from"] == "echo" and reply["to"] == "@operator"
        assert reply["type"] == "reply" and reply["verified"] is True
        assert reply["body"] == "pong" and reply["thread"] == "t-ping"

    def test_only_the_fully_valid_message_wakes_it(self, running: Society) -> None:
        """Messages failing one rule each get no answer; the valid one after them does."""
        running.start_lurker("echo")
        ignored = [
            say(running, "@echo", "from a stranger", sender="stranger", signed=False),
            say(running, "@echo", "a reply", type="reply"),
            say(running, "@echo", "a system note", type="system"),
            say(running, "@someone", "not for echo"),
            say(running, "@echo", "relaxed but unprivileged", sender="visitor", signed=False),
        ]
        valid = say(running, "@echo", "for echo")
        reply = wait_reply(running, valid["id"])
        assert reply["body"] == "echo: for echo"
        for line in ignored:
            assert replies_to(running, line["id"]) == []
        # echo's own reply, and only it, came from echo
        assert [m for m in running.lines() if m["from"] == "echo"] == [reply]

    def test_reply_waking_nick_wakes_on_replies(self, society: Society) -> None:
        """A nick configured to wake on replies acts on a reply; another does not."""
        add_nick(society.root, "listener", handler="agents.examples:echo", wake_replies=True)
        add_nick(society.root, "deaf", handler="agents.examples:echo")
        running = society
        running.start_hub()
        running.start_lurker("listener")
        running.start_lurker("deaf")
        to_listener = say(running, "@listener", "a reply for you", type="reply")
        to_deaf = say(running, "@deaf", "a reply for you", type="reply")
        assert wait_reply(running, to_listener["id"])["from"] == "listener"
        marker = say(running, "@deaf", "an ask")
        wait_reply(running, marker["id"])
        assert replies_to(running, to_deaf["id"]) == []

    def test_wakereplies_flag_file_adds_reply_waking(self, running: Society) -> None:
        """The seed's .wakereplies flag file in the nick's state folder works like the key."""
        (running.root / "state" / "echo" / ".wakereplies").touch()
        running.start_lurker("echo")
        reply_in = say(running, "@echo", "a reply", type="reply")
        assert wait_reply(running, reply_in["id"])["from"] == "echo"


class TestFailures:
    @pytest.mark.parametrize(
        ("handler", "reason"),
        [
            ("tests.tools.steps:boom", "RuntimeError: the step exploded"),
            ("tests.tools.steps:refuse", "the knowledge base is empty"),
            ("tests.tools.steps:hang", "timed out after 1 s"),
        ],
    )
    def test_failing_handler_replies_failed(
        self, society: Society, handler: str, reason: str
    ) -> None:
        """A step that raises or hangs still replies: [<nick> FAILED — reason], reason in data."""
        add_nick(society.root, "worker", handler=handler, timeout_s=1)
        running = society
        running.start_hub()
        lurker = running.start_lurker("worker")
        ask = say(running, "@worker", "do it")
        reply = wait_reply(running, ask["id"])
        assert reply["body"].startswith("[worker FAILED — ") and reason in reply["body"]
        assert reply["data"]["failed"] is True and reason in reply["data"]["reason"]
        assert reply["verified"] is True
        assert lurker.stop() == 0  # a hung step thread does not hold up shutdown

    def test_command_handler(self, society: Society, tmp_path: Path) -> None:
        """An external command gets the message on stdin; its JSON stdout becomes the reply."""
        script = tmp_path / "agent.py"
        script.write_text(
            "import json, sys\n"
            "m = json.load(sys.stdin)\n"
            "print(json.dumps({'body': 'seen ' + m['body'], 'data': {'id': m['id']}}))\n"
        )
        add_nick(society.root, "shell", command=["python3", str(script)], timeout_s=10)
        running = society
        running.start_hub()
        running.start_lurker("shell")
        ask = say(running, "@shell", "the message")
        reply = wait_reply(running, ask["id"])
        assert reply["body"] == "seen the message" and reply["data"] == {"id": ask["id"]}

    def test_a_command_handler_is_given_its_traced_runs_context(
        self, society: Society, tmp_path: Path
    ) -> None:
        """Issue 36: a step run by an external program gets `TRACEPARENT`, in the run's trace
        and naming the lurker's own `handle` span as parent, so the spans it makes itself join
        the run's trace; an ask of no traced run gives it none."""
        script = tmp_path / "agent.py"
        script.write_text(
            "import json, os, sys\n"
            "json.load(sys.stdin)\n"
            "print(json.dumps({'body': os.environ.get('TRACEPARENT', 'none')}))\n"
        )
        add_nick(society.root, "shell", command=["python3", str(script)], timeout_s=10)
        society.start_hub()
        society.start_lurker("shell")
        run = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
        traced = say(society, "@shell", "a step", thread="exp-traced", data={"traceparent": run})
        given = wait_reply(society, traced["id"])["body"]
        version, trace, parent, flags = given.split("-")
        assert (version, trace, flags) == ("00", "ab" * 16, "01"), given
        assert parent == child_span_id("cd" * 8, f"handle shell {traced['seq']}")
        plain = say(society, "@shell", "no run", thread="exp-plain")
        assert wait_reply(society, plain["id"])["body"] == "none"

    @pytest.mark.parametrize(
        ("code", "reason"),
        [
            ("import sys; sys.exit(3)", "exited with status 3"),
            ("import time; time.sleep(60)", "timed out"),
        ],
    )
    def test_command_failure_replies_failed(self, society: Society, code: str, reason: str) -> None:
        """A command that exits non-zero or overruns its timeout is a FAILED reply."""
        add_nick(society.root, "shell", command=["python3", "-c", code], timeout_s=1)
        running = society
        running.start_hub()
        running.start_lurker("shell")
        ask = say(running, "@shell", "go")
        reply = wait_reply(running, ask["id"])
        assert "FAILED" in reply["body"] and reason in reply["body"]


class TestRestarts:
    def test_rewound_cursor_does_not_answer_twice(self, society: Society, tmp_path: Path) -> None:
        """After a crash between replying and saving the cursor, the restarted lurker skips the answered ask."""
        count = tmp_path / "count"
        env = {"BULLPEN_TEST_COUNT_FILE": str(count)}
        add_nick(society.root, "worker", handler="tests.tools.steps:counted")
        running = society
        running.start_hub()
        lurker = running.start_lurker("worker", env=env)
        first = say(running, "@worker", "one")
        wait_reply(running, first["id"])
        lurker.signal(signal.SIGKILL)
        lurker.proc.wait(10)
        # the state a crash just after replying leaves: the cursor still before the ask
        (running.root / "state" / "worker" / "cursor").write_text(
            json.dumps({"seq": first["seq"] - 1, "offset": -1})
        )
        running.start_lurker("worker", env=env)
        second = say(running, "@worker", "two")
        wait_reply(running, second["id"])
        assert len(replies_to(running, first["id"])) == 1
        assert count.read_text().split() == [first["id"], second["id"]]

    def test_sigkill_mid_handling_answers_exactly_once(
        self, society: Society, tmp_path: Path
    ) -> None:
        """A lurker killed while handling answers the ask once after it restarts."""
        count = tmp_path / "count"
        env = {"BULLPEN_TEST_COUNT_FILE": str(count)}
        add_nick(society.root, "worker", handler="tests.tools.steps:counted", timeout_s=30)
        running = society
        running.start_hub()
        lurker = running.start_lurker("worker", env=env)
        ask = say(running, "@worker", "slow one", data={"sleep": 30})
        wait_for(
            lambda: count.exists() and ask["id"] in count.read_text(), 20, "the handler to start"
        )
        lurker.kill()
        assert replies_to(running, ask["id"]) == []
        fast = say(running, "@worker", "fast", data={"sleep": 0})
        running.start_lurker("worker", env=env)  # handles the interrupted ask again, quickly
        reply = wait_reply(running, ask["id"], 60)
        wait_reply(running, fast["id"], 60)
        assert reply["from"] == "worker"
        assert len(replies_to(running, ask["id"])) == 1

    @pytest.mark.parametrize("read_mode", ["file", "hub"])
    def test_hub_restart_under_a_running_lurker(self, society: Society, read_mode: str) -> None:
        """The hub goes down and comes back: the lurker resumes, misses nothing, answers nothing twice."""
        add_nick(society.root, "remote", handler="agents.examples:echo", read="hub")
        running = society
        running.start_hub()
        nick = "remote" if read_mode == "hub" else "echo"
        running.start_lurker(nick)
        before = say(running, f"@{nick}", "before")
        wait_reply(running, before["id"])
        hub = next(p for p in running.procs if p.argv[-1] == "hub")
        assert hub.stop() == 0
        running.procs.remove(hub)
        running.start_hub()
        after = [say(running, f"@{nick}", f"after {n}") for n in range(3)]
        for ask in after:
            wait_reply(running, ask["id"], 40)
        for ask in [before, *after]:
            assert len(replies_to(running, ask["id"])) == 1

    @pytest.mark.parametrize("read", ["file", "hub"])
    def test_room_shorter_than_cursor_stops_with_a_clear_error(
        self, running: Society, read: str
    ) -> None:
        """A lurker whose cursor is past the end of the room stops at once, says what happened,
        and exits 78 so that neither `up` nor systemd restarts it into the same wall."""
        nick = f"short{read}"
        add_nick(running.root, nick, handler="agents.examples:echo", read=read)
        (running.root / "state" / nick / "cursor").write_text(
            json.dumps({"seq": 50, "offset": 9000})
        )
        say(running, "@nobody", "one line")
        proc = running.spawn(f"lurk-{nick}", "lurk", nick)
        assert proc.proc.wait(15) == 78, proc.output()
        assert "truncated" in proc.output()

    def test_a_second_lurker_for_a_nick_is_refused(self, running: Society) -> None:
        """Two lurkers for one nick would answer everything twice: the second exits 78."""
        first = running.start_lurker("echo")
        second = running.spawn("lurk-echo-2", "lurk", "echo")
        assert second.proc.wait(20) == 78
        assert f"pid {first.pid}" in second.output() and "already running" in second.output()
        ask = say(running, "@echo", "once only", type="ask")
        wait_reply(running, ask["id"], 30)
        assert len(replies_to(running, ask["id"])) == 1


def test_unknown_nick_is_a_config_error(society: Society) -> None:
    """Lurking as a nick with no [nicks.X] table exits 78 and lists the configured nicks."""
    done = run_cli(society.root, "lurk", "nobody")
    assert done.returncode == 78 and "nobody" in done.stderr and "echo" in done.stderr


def test_under_systemd_the_flag_and_cursor_in_the_home_still_count(
    society: Society, tmp_path: Path
) -> None:
    """With $STATE_DIRECTORY set (a systemd unit), a `.wakereplies` flag left in the home's
    state folder still makes the nick reply-waking, and the cursor `bullpen up` saved there
    is taken over rather than restarting from the end of the room."""
    society.start_hub()
    add_nick(society.root, "watcher", handler="agents.examples:echo")
    (society.root / "state" / "watcher" / ".wakereplies").touch()
    ask = say(society, "@watcher", "asked before the move")  # after the saved cursor (seq 0)
    unit_state = tmp_path / "unit-state"
    proc = society.start_lurker("watcher", env={"STATE_DIRECTORY": str(unit_state)})
    wait_reply(society, ask["id"], 30)
    started = [
        json.loads(line)
        for line in proc.output().splitlines()
        if line.startswith("{") and '"lurking"' in line
    ]
    assert started and "reply" in started[0]["wake"], proc.output()
    assert (unit_state / "watcher" / "cursor").exists()
    assert "taking over the cursor" in proc.output()


def test_a_nicks_own_seat_answers_its_judgments(society: Society, tmp_path: Path) -> None:
    """`[nicks.X] seat = "T"` sends that nick's model calls to [seats.T], whatever the role;
    an unknown T is a configuration error that names the seats there are."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps({"verdict": {"json": {"verdict": "from mine"}}}))
    fake = Path(__file__).parent / "fakes" / "fake_model.py"
    society_toml = society.root / "society.toml"
    society_toml.write_text(
        society_toml.read_text()
        + f'\n[seats.mine]\nkind = "cmd"\ncommand = {json.dumps([sys.executable, str(fake)])}\n'
    )
    add_nick(
        society.root,
        "judger",
        handler="tests.fakes.judging_step:judge_once",
        seat="mine",
        env={"FAKE_MODEL_SCRIPT": str(script)},
    )
    society.start_hub()
    society.start_lurker("judger", env={"FAKE_MODEL_SCRIPT": str(script)})
    ask = say(society, "@judger", "is it so?")
    reply = wait_reply(society, ask["id"], 30)
    assert reply["body"] == "from mine" and reply["data"]["seat"] == "mine", reply
    add_nick(society.root, "lost", handler="agents.examples:echo", seat="nowhere")
    done = run_cli(society.root, "lurk", "lost")
    assert done.returncode == 78 and "nowhere" in done.stderr and "mine" in done.stderr
    assert f"{society_toml}: [nicks.lost]" in done.stderr, done.stderr  # names the file


def test_a_key_a_model_echoes_back_never_reaches_the_room(society: Society) -> None:
    """A server that answers with the seat's API key inside non-JSON text: the retry prompt
    that would quote it is screened (trust/screen.py), and the FAILED reply says so, without
    the key, as for every secret the lurker holds."""
    from tests.fakes.fake_openai import FakeOpenAI

    key = "sk-test-9f8e7d6c5b4a3921"
    with FakeOpenAI({"verdict": f"not json at all, key Bearer {key}"}) as server:
        society_toml = society.root / "society.toml"
        society_toml.write_text(
            society_toml.read_text()
            + '\n[seats.remote]\nkind = "openai"\n'
            + f'base_url = "{server.base_url}"\nmodel = "m"\napi_key_env = "BULLPEN_TEST_KEY"\n'
        )
        add_nick(
            society.root, "asker", handler="tests.fakes.judging_step:judge_once", seat="remote"
        )
        society.start_hub()
        society.start_lurker("asker", env={"BULLPEN_TEST_KEY": key})
        ask = say(society, "@asker", "is it so?")
        reply = wait_reply(society, ask["id"], 60)
    assert "FAILED" in reply["body"] and "holds a secret this process holds" in reply["body"]
    assert key not in society.room.read_text()
