"""The society's footprint (issue 26): an idle lurker defers what only a wake needs, and
`bullpen up`'s lurkers share the pages of the zygote they are forked from.

Measured on real processes: the interpreter's own import log (PYTHONPROFILEIMPORTTIME)
says what a lurker imported before it said "lurking", and /proc says how much memory
each lurker holds alone (USS: the pages no other process shares).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import Society, add_nick, run_cli, start_up, wait_for
from tests.test_lurker import replies_to, say, wait_reply
from tests.tools.lazy_step import MARKER

# What an idle lurker must not have imported: its handler's module (seen by the module
# it imports), the memory index and the lessons handed over on a wake, and the
# forked-step machinery. A lurker started alone idles on the stdlib (agents/runtime/lean.py):
# it has not loaded the full lurker, the handler table, the config and message models
# (pydantic), the hub client (httpx) or structlog (and rich) either; they load on the first
# line that may wake it.
DEFERRED = (
    MARKER,
    "agents.memory",
    "agents.memory.lessons",
    "agents.runtime.lessons",
    "agents.runtime.forked",
    "multiprocessing",
    "agents.runtime.lurker",
    "agents.runtime.handlers",
    "agents.seats",
    "agents.config",
    "agents.home",
    "room.message",
    "room.client",
    "room.logs",
    "pydantic",
    "httpx",
    "structlog",
    "rich",
    "uvloop",
    "opentelemetry",  # traces are exported only when asked (agents/telemetry/export.py)
)
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")
# The lone lurker's own log lines that bound its phases (agents/runtime/lean.py).
CHECKING, LURKING, HANDOVER = (
    '"event": "checking the start in a child"',
    '"event": "lurking"',
    '"event": "a line may wake us',
)


def imported(log: str) -> tuple[set[str], set[str]]:
    """The modules a lone lurker's own process imported while idle, and from its first wake on.

    The start checks run in a child that imports the full lurker and exits: its lines, between
    "checking the start" and the first "lurking", are the child's and count for neither."""
    idle: set[str] = set()
    woken: set[str] = set()
    seen: set[str] | None = idle
    for line in log.splitlines():
        if CHECKING in line:
            seen = None
        elif LURKING in line and seen is None:
            seen = idle
        elif HANDOVER in line:
            seen = woken
        found = IMPORT_LINE.match(line)
        if found and seen is not None:
            seen.add(found.group(1))
    return idle, woken


def mapped(pid: int, fragment: str) -> bool:
    """Whether a file whose path holds `fragment` (a compiled module) is mapped in `pid`."""
    return fragment in Path(f"/proc/{pid}/maps").read_text()


def uss_kb(pid: int) -> int:
    """The pages only this process holds: Private_Clean + Private_Dirty."""
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    fields = dict(line.split(":", 1) for line in rollup.splitlines()[1:])
    return sum(int(fields[name].split()[0]) for name in ("Private_Clean", "Private_Dirty"))


def lone_echo_uss(society: Society) -> int:
    """USS of `bullpen lurk echo` started alone (as its systemd unit runs it), once lurking."""
    society.start_hub()
    lurker = society.start_lurker("echo")
    ask = say(society, "@echo", "settle")  # one wake, as the lurkers under `up` had
    wait_reply(society, ask["id"], 30)
    try:
        return uss_kb(lurker.pid)
    finally:
        society.stop_all()


class TestLazyLoading:
    def test_an_idle_lurker_has_not_imported_what_a_wake_needs(self, society: Society) -> None:
        """Until its first wake, a lurker started alone has imported neither its handler's
        module nor memory, the forked-step machinery, pydantic, httpx or structlog, and holds
        no page of them; its first wake loads them and is answered as before."""
        add_nick(society.root, "hues", handler="tests.tools.lazy_step:hue")
        society.start_hub()
        lurker = society.start_lurker(
            "hues", env={"PYTHONPROFILEIMPORTTIME": "1", "PYTHONUNBUFFERED": "1"}
        )
        idle, _ = imported(lurker.output())
        assert {"agents.runtime.lean", "room.tail"} <= idle  # the log is an import log
        assert sorted(m for m in idle if m.split(".")[0] in DEFERRED or m in DEFERRED) == []
        assert not mapped(lurker.pid, "pydantic_core") and not mapped(lurker.pid, "uvloop")
        ask = say(society, "@hues", "wake up")
        assert wait_reply(society, ask["id"], 60)["body"] == "wave: 1"
        wait_for(
            lambda: (
                {MARKER, "agents.memory.lessons", "multiprocessing", "pydantic"}
                <= imported(lurker.output())[1]
            ),
            10,
            "the first wake's imports in the lurker's log",
        )
        assert mapped(lurker.pid, "pydantic_core")  # the check above can see a loaded module
        woken = imported(lurker.output())[1]
        assert not [m for m in woken if m.split(".")[0] == "opentelemetry"]  # off by default

    def test_lines_the_wake_rules_refuse_leave_a_lone_lurker_idle(self, society: Society) -> None:
        """Lines addressed to the nick that surely fail a wake rule (a stranger's, a reply,
        a system note, one for another nick) are passed on their raw fields: the idle loop
        stays on the stdlib and answers none; the first line that may wake it loads the full
        lurker, which answers it, once."""
        society.start_hub()
        lurker = society.start_lurker("echo")
        ignored = [
            say(society, "@echo", "from a stranger", sender="stranger", signed=False),
            say(society, "@echo", "a reply", type="reply"),
            say(society, "@echo", "a system note", type="system"),
            say(society, "@someone", "not for echo"),
        ]
        cursor = society.root / "state" / "echo" / "cursor"
        first = json.loads(cursor.read_text())["seq"]
        valid = say(society, "@echo", "for echo")
        assert wait_reply(society, valid["id"], 60)["body"] == "echo: for echo"
        log = lurker.output()
        assert log.count(HANDOVER) == 1, log
        handover = json.loads(next(line for line in log.splitlines() if HANDOVER in line))
        assert first < handover["after"] < valid["seq"]  # the refused lines were passed
        for line in ignored:
            assert replies_to(society, line["id"]) == []
        assert len(replies_to(society, valid["id"])) == 1

    def test_a_handler_module_that_does_not_exist_still_stops_the_lurker(
        self, society: Society
    ) -> None:
        """Deferring the import does not defer the check: a misspelt module exits 78 at start,
        before the lurker listens, and names the handler."""
        path = society.root / "society.toml"
        path.write_text(
            path.read_text().replace('"agents.examples:echo"', '"agents.exampels:echo"')
        )
        done = run_cli(society.root, "lurk", "echo", timeout=60)
        assert done.returncode == 78, done.stderr
        assert "agents.exampels:echo" in done.stderr and "check the module" in done.stderr

    def test_a_missing_function_is_a_failed_reply_on_the_first_wake(self, society: Society) -> None:
        """A function name that is not in its (existing) module is found when the module
        loads, on the first wake: that ask is answered FAILED with the reason, not silence."""
        path = society.root / "society.toml"
        path.write_text(
            path.read_text().replace('"agents.examples:echo"', '"agents.examples:ehco"')
        )
        society.start_hub()
        society.start_lurker("echo")
        ask = say(society, "@echo", "anyone there?")
        reply = wait_reply(society, ask["id"], 30)
        assert reply["body"].startswith("[echo FAILED")
        assert "agents.examples:ehco" in reply["body"] and "cannot be loaded" in reply["body"]


def up_pids(society: Society) -> dict[str, int]:
    return dict(json.loads((society.root / "state" / "up.json").read_text())["pids"])


class TestUpSharesPages:
    def test_up_lurkers_hold_far_less_of_their_own_than_a_lone_lurker(
        self, society: Society
    ) -> None:
        """`up` forks its lurkers from one zygote: each holds well under the private memory
        of the same lurker started alone, and its parent is the zygote, not `up`."""
        up = start_up(society, ready=True, nicks=("echo", "foreman", "context"))
        ask = say(society, "@echo", "settle")
        assert wait_reply(society, ask["id"], 30)["body"] == "echo: settle"
        pids = up_pids(society)
        shared = uss_kb(pids["echo"])
        parent = int(Path(f"/proc/{pids['echo']}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert parent != up.pid
        assert Path(f"/proc/{parent}/comm").read_text().strip() == "bullpen-zygote"
        up.stop()
        alone = lone_echo_uss(society)
        assert shared < 0.6 * alone, f"echo under up: {shared} kB own; alone: {alone} kB"

    def test_lurkers_outlive_a_dead_zygote(self, society: Society) -> None:
        """Should the zygote die, its lurkers end (they die with their parent) and `up`
        restarts each as a separate process, which answers."""
        up = start_up(society, ready=True, nicks=("echo",))
        echo = up_pids(society)["echo"]
        stat = Path(f"/proc/{echo}/stat").read_text()
        zygote = int(stat.rsplit(")", 1)[1].split()[1])
        os.kill(zygote, signal.SIGKILL)
        wait_for(
            lambda: re.search(r"up: echo +pid \d+ +restarted \(1\)", up.output()),
            60,
            "up to restart echo once its zygote died",
        )
        ask = say(society, "@echo", "still here")
        assert wait_reply(society, ask["id"], 30)["body"] == "echo: still here"
        assert up_pids(society)["echo"] != echo
        up.stop()


def test_the_hub_and_a_poster_import_nothing_they_never_use(tmp_path: Path) -> None:
    """structlog imports rich, httpx its own CLI (click, pygments, rich) and httpcore trio
    whenever they are installed, as they are beside the test extra: about 0.4 s of CPU in
    every process (the hub imports click all the same: uvicorn needs it).
    agents/cli/skipimports.py keeps them out; the hub still logs its structlog lines, and
    `bullpen say` (an httpx client over httpcore) still posts. Nor does the hub load a
    websocket library (it serves none) or an HTTP client (it posts nothing).
    """
    profile = {"PYTHONPROFILEIMPORTTIME": "1"}
    society = Society(tmp_path / "home")
    hub = society.start_hub(env=profile)
    said = run_cli(society.root, "say", "@echo", "hello", env=profile)
    assert said.returncode == 0, said.stderr[-2000:]
    never = {"rich.console", "pygments.lexers", "trio._core", "wsproto", "websockets"}
    never |= {"opentelemetry.trace", "opentelemetry.sdk"}  # telemetry off: nothing of it
    for who, log, needs, unused in (
        # The hub posts nothing: no HTTP client (the seat tables it checks load theirs late).
        ("the hub", hub.own_output(), {"structlog", "room.hub"}, {*never, "httpx"}),
        ("bullpen say", said.stderr, {"httpx", "httpcore._async.connection"}, never),
    ):
        # A refused import is still logged, with no module under it: count the ones that ran.
        loaded = {m.group(1) for m in map(IMPORT_LINE.match, log.splitlines()) if m}
        assert needs <= loaded, f"{who}:\n{log[-2000:]}"
        assert not unused & loaded, f"{who} imported {sorted(unused & loaded)}"
    assert '"event": "hub listening"' in hub.own_output()
    assert society.healthy()


def test_main_called_in_a_program_of_its_own_leaves_its_imports_alone() -> None:
    """Only the process's entry (the `bullpen` script, `python -m agents.cli`) keeps rich and
    trio out; a program that calls `agents.cli.main` in its own process can still load them."""
    program = (
        "from agents.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "import rich.console, trio\nprint('both load')"
    )
    ran = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert ran.stdout.strip().endswith("both load"), ran.stderr[-2000:]
