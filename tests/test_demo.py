"""`bullpen demo`, README's first command: the whole society once, and where its home goes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support import run_cli
from trust.audit import audit_file


@pytest.mark.long
def test_the_demo_runs_in_the_home_it_is_given_and_keeps_it(tmp_path: Path) -> None:
    """`bullpen demo --home DIR` runs every step there, exits 0 and says the home is kept."""
    home = tmp_path / "demo-home"
    done = run_cli(home, "demo", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last == f"demo: done; the home is kept at {home} (bullpen --home {home} tail)"
    assert "demo: FAILED" not in done.stdout
    # the build goes as far as it honestly can with no code seat, and says how to give it one
    build = done.stdout.split("a test-first build: checked", 1)[1].split("demo: [", 1)[0]
    assert "GRIND FAILED" not in build  # (the room's own record, shown later, keeps the reply)
    assert "the spec run red and routed to @py" in build
    assert "grinding it green needs a code-writing seat: `bullpen demo --model URL`" in done.stdout
    (gate,) = [line for line in done.stdout.splitlines() if "rejected (401): " in line]
    shown = gate.split("rejected (401): ", 1)[1]
    assert shown.endswith(" …") or not shown.endswith("…"), gate  # cut between words, if at all
    # the memory step: the saved lesson's id is among those @echo's next wake was handed
    (saved,) = re.findall(r"saves a lesson for @echo; @librarian: saved (m\d+) in ", done.stdout)
    (told,) = re.findall(
        r"@echo wakes for 'hello again' and is handed \d+ lesson\(s\): (.*)", done.stdout
    )
    assert saved in told.split(", "), told
    lines = [json.loads(raw) for raw in (home / "room" / "room.jsonl").read_bytes().splitlines()]
    echo_reply = [m for m in lines if m["from"] == "echo" and m["thread"] == "demo-memory"]
    assert echo_reply and saved in echo_reply[0]["data"]["lessons"]  # the room shows it too
    assert (home / "society.toml").is_file()
    result = audit_file(home / "room" / "room.jsonl")
    assert result.ok and result.lines > 20, result.summary()


def test_the_demo_refuses_a_home_that_is_not_empty(tmp_path: Path) -> None:
    """A --home that already holds files is refused (exit 78) and left exactly as it was."""
    home = tmp_path / "busy"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    done = run_cli(home, "demo", timeout=120)
    assert done.returncode == 78, done.stdout + done.stderr
    assert "bullpen:" in done.stderr
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"]
    assert (home / "notes.txt").read_text() == "mine"


@pytest.mark.long
def test_the_demo_gives_the_build_the_code_seat_of_model(tmp_path: Path) -> None:
    """`bullpen demo --model URL`: the build's grinder asks the OpenAI-compatible server at URL
    (here a fake coding model) through the seat the demo adds, and the demo says how it went."""
    import subprocess
    import sys

    fake = Path(__file__).resolve().parent / "fakes" / "fake_code_model.py"
    log = tmp_path / "asked.jsonl"
    server = subprocess.Popen(
        [sys.executable, str(fake), "--func", "slugify", "--wrong", "x", "--right", "y",
         "--log", str(log)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/v1"
        home = tmp_path / "demo-home"
        done = run_cli(home, "demo", "--model", url, "--model-name", "fix", timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "GRIND FAILED — no code-writing seat" not in done.stdout
        assert re.search(rf"the code seat demo-code \({re.escape(url)}\) ground it (green|red)",
                         done.stdout), done.stdout  # fmt: skip
        assert log.exists(), f"the code seat was never asked:\n{done.stdout}"
        asked = [json.loads(line) for line in log.read_text().splitlines()]
        assert asked and all(a["model"] == "fix" for a in asked)
    finally:
        server.kill()
        server.wait(10)
