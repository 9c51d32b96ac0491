"""Nothing secret leaves the home: the hub, a lurker's post, a seat's prompt, a backpass commit.

Each door is tried through real processes: a real hub refuses a post holding
the hub's private key or any PEM private key block and stores nothing; a
lurker whose step echoes the relaxed token posts a FAILED flag instead; a
backpass run over a trace holding the shared secret or a PEM block fails that
trace by name, the bulk model (a `cmd` seat that logs its prompts) never sees
it and no commit holds it; a secret under 32 bytes stops the hub and a
lurker with exit 78.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.room.test_screen import foreign_pem
from tests.support import (
    BACKPASS_LURKERS,
    HTTP,
    REPO,
    Society,
    add_nick,
    record_output,
    run_cli,
    set_seat,
    start_up,
    wait_for,
)
from tests.test_pipelines import backpass_script, cmd_seat
from trust.secretfiles import create_secret_file

FAKE_MODEL = REPO / "tests" / "fakes" / "fake_model.py"


def _post(society: Society, body: str) -> httpx.Response:
    payload = {"from": "stranger", "to": "@all", "type": "chat", "body": body}
    answer = HTTP.post(f"{society.strict_url}/say", json=payload, timeout=10)
    record_output("screen: hub answer", answer.text)
    return answer


def test_the_hub_refuses_a_pasted_private_key_and_stores_nothing(society: Society) -> None:
    """The hub's own key (whole, its body line, JSON-escaped), a foreign OPENSSH key and a
    percent-encoded secret in a query are refused with 400 and what to do; no line is stored."""
    society.start_hub()
    pem = society.home.trust.hub_key_file.read_text()
    body_line = pem.splitlines()[1]
    before = len(society.lines())
    for body in (f"my key:\n{pem}", f"just {body_line}", foreign_pem("openssh")):
        answer = _post(society, body)
        assert answer.status_code == 400, answer.text
        message = answer.json()["message"]
        assert "secret material" in message and "Remove it" in message
        assert body_line not in answer.text
    escaped = json.dumps({"from": "stranger", "to": "@all", "type": "chat", "body": pem})
    escaped = escaped.replace("B", "\\u0042")  # the same text, spelled with JSON escapes
    answer = HTTP.post(
        f"{society.strict_url}/say",
        content=escaped,
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert answer.status_code == 400, answer.text
    secret = quote(society.secret().decode(), safe="").replace("a", "%61")
    answer = HTTP.get(f"{society.strict_url}/read?thread={secret}", timeout=10)
    assert answer.status_code == 400, answer.text
    assert _post(society, "an honest line").status_code == 200
    assert len(society.lines()) == before + 1
    assert "PRIVATE KEY" not in society.room.read_text()


def test_a_reply_holding_the_relaxed_token_becomes_a_failed_flag(society: Society) -> None:
    """A step that prints the relaxed token, or a PEM block, is posted as `[NICK FAILED — ...]`
    naming the problem, never the token or the key."""
    secrets = society.root / "secrets"
    add_nick(
        society.root, "leaky", command=["sh", "-c", f"cat >/dev/null; cat {secrets}/relaxed-token"]
    )
    key_file = society.root / "foreign.pem"
    key_file.write_text(foreign_pem("rsa"))
    add_nick(society.root, "keyprinter", command=["sh", "-c", f"cat >/dev/null; cat {key_file}"])
    add_nick(society.root, "honest", command=["sh", "-c", "cat >/dev/null; echo all fine"])
    society.start_hub()
    for nick in ("leaky", "keyprinter", "honest"):
        society.start_lurker(nick)
    done = run_cli(society.root, "say", "--as", "operator", "@leaky", "go")
    assert done.returncode == 0, done.stderr
    run_cli(society.root, "say", "--as", "operator", "@keyprinter", "go")
    run_cli(society.root, "say", "--as", "operator", "@honest", "go")

    def replies() -> dict[str, dict[str, Any]]:
        return {m["from"]: m for m in society.lines() if m["type"] == "reply"}

    got = wait_for(lambda: len(replies()) == 3 and replies(), 30, "three replies")
    flag = got["leaky"]
    assert flag["body"].startswith("[leaky FAILED — ") and "the relaxed token" in flag["body"]
    assert flag["data"]["failed"] is True and flag["data"]["secret"] == "the relaxed token"
    assert got["keyprinter"]["body"].startswith("[keyprinter FAILED — ")
    assert "a PEM private key block" in got["keyprinter"]["body"]
    assert got["honest"]["body"] == "all fine"
    room = society.room.read_text()
    assert society.token() not in room and "PRIVATE KEY" not in room
    key_file.unlink()


def test_a_backpass_never_sends_a_secret_to_the_model_nor_commits_it(
    tmp_path: Path,
) -> None:
    """A trace holding the shared secret and one holding a PEM block fail by name; the bulk
    model's prompt log never holds either, and no commit of either memory repo does."""
    demo = Society(tmp_path / "home", demo=True)
    traces = demo.root / "traces"
    for old in traces.rglob("*"):
        if old.is_file():
            old.unlink()
    secret = demo.secret().decode()
    leak = traces / "leak.md"
    pem = traces / "pem.md"
    try:
        (traces / "clean.md").write_text("The deploy worked after the retry.\n")
        leak.write_text(f"The deploy worked after the retry.\nexport POST_SECRET={secret}\n")
        pem.write_text("The deploy worked after the retry.\n" + foreign_pem("ec"))
        item = {"text": "retrying works", "quote": "The deploy worked after the retry."}
        env = backpass_script(tmp_path, {"json": {"positive": [item], "negative": [], "gaps": []}})
        prompts = tmp_path / "prompts.jsonl"
        env["FAKE_MODEL_LOG"] = str(prompts)
        for role in ("bulk", "synthesis"):
            set_seat(demo.root, role, cmd_seat(role, FAKE_MODEL, env))
        up = start_up(demo, nicks=BACKPASS_LURKERS)
        done = run_cli(demo.root, "backpass", timeout=240)
        out = done.stdout + done.stderr
        assert done.returncode == 1, out
        assert "leak.md" in out and "the shared secret" in out, out
        assert "pem.md" in out and "a PEM private key block" in out, out
        calls = [json.loads(line) for line in prompts.read_text().splitlines()]
        analysed = [c for c in calls if c["step"] == "analysis"]
        assert len(analysed) == 1 and "clean.md" in analysed[0]["prompt"]
        assert not [c for c in calls if secret in c["prompt"] or "PRIVATE KEY" in c["prompt"]]
        for repo in (demo.root / "memory").iterdir():
            history = subprocess.run(
                ["git", "-C", str(repo), "log", "--all", "-p"], capture_output=True, text=True
            ).stdout
            assert secret not in history and "PRIVATE KEY" not in history
        up.stop()
    finally:
        demo.stop_all()
        leak.unlink(missing_ok=True)  # the session's secret scan must find it nowhere else
        pem.unlink(missing_ok=True)


def _short(path: Path) -> None:
    path.unlink()
    create_secret_file(path, "only-twenty" + "-bytes-00\n")  # 20 bytes, never whole in this file


@pytest.mark.parametrize("which", ["secret_file", "relaxed_token_file"])
def test_a_short_secret_stops_the_hub_and_a_lurker(society: Society, which: str) -> None:
    """A shared secret or token under 32 bytes: hub and lurker exit 78 saying how to make one."""
    path = getattr(society.home.trust, which)
    _short(path)
    add_nick(society.root, "relaxedone", command=["echo", "x"], relaxed=True)
    nick = "relaxedone" if which == "relaxed_token_file" else "echo"
    for proc in (society.spawn("hub", "hub"), society.spawn("lurker", "lurk", nick)):
        wait_for(proc.proc.poll, 20, "the process to refuse the secret")  # its exit code, 78
        assert proc.proc.poll() == 78, proc.output()
        out = proc.output()
        assert str(path) in out and "token_hex(32)" in out and "only-twenty" not in out, out
