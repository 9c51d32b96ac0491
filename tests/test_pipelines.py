"""Both pipelines as society runs: a real hub, real lurkers under `bullpen up`, the real CLI.

Model seats are the built-in local seat, or real programs the `cmd` seat
runs (tests/fakes/expedition_model.py, tests/fakes/fake_model.py), or a real
HTTP server speaking the OpenAI wire format (tests/fakes/fake_openai.py).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.expedition_model import TERMS
from tests.support import (
    BACKPASS_LURKERS,
    EXPEDITION_LURKERS,
    REPO,
    Society,
    run_cli,
    set_seat,
    start_up,
    wait_for,
)

FAKES = REPO / "tests" / "fakes"
EXPEDITION = ("expedition", "--title", "Waiting Is Part of the Work", "--keyword", "patience")


@pytest.fixture
def demo(tmp_path: Path) -> Society:
    return Society(tmp_path / "home", demo=True)


def foreman_lines(society: Society, thread: str) -> list[dict[str, Any]]:
    return [m for m in society.lines() if m.get("thread") == thread]


def thread_from(output: str) -> str:
    match = re.search(r"\b(exp-[0-9a-f]+)\b", output)
    assert match, output
    return match.group(1)


def briefs(society: Society) -> list[Path]:
    return sorted((society.root / "briefs").glob("*.md"))


def cmd_seat(role: str, script: Path, env: dict[str, str], fallback: str | None = None) -> str:
    lines = ['kind = "cmd"', f"command = {json.dumps([sys.executable, str(script)])}"]
    lines.append("env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }")
    lines.append("timeout_s = 30")
    if fallback:
        lines.append(f'fallback = "{fallback}"')
    return "\n".join(lines)


class TestExpedition:
    def test_two_turn_stop_then_confirm_with_the_local_seat(self, demo: Society) -> None:
        """The run stops at the Dig Report; no brief exists until the operator confirms."""
        up = start_up(demo, nicks=EXPEDITION_LURKERS)
        first = run_cli(demo.root, *EXPEDITION, timeout=180)
        assert first.returncode == 0, first.stdout + first.stderr
        assert "=== DIG REPORT ===" in first.stdout and "=== END DIG REPORT ===" in first.stdout
        assert (
            "Reply to confirm, drop, or redirect any candidate before I build the brief."
            in first.stdout
        )
        assert "Deep cuts:" in first.stdout and "Searched: [" in first.stdout
        thread = thread_from(first.stdout + first.stderr)
        assert briefs(demo) == []
        assert not any(m["to"] == "@briefer" for m in foreman_lines(demo, thread))
        second = run_cli(demo.root, "expedition", "confirm", thread, timeout=180)
        assert second.returncode == 0, second.stdout + second.stderr
        written = briefs(demo)
        assert len(written) == 1 and str(written[0]) in second.stdout
        brief = written[0].read_text()
        assert "voice_anchor:" in brief and "MISSING" not in brief
        assert "banned_phrases:" in brief
        termgen = next(m for m in foreman_lines(demo, thread) if m["from"] == "termgen")
        assert termgen["data"]["seat"] == "termgen"
        assert termgen["data"]["judgments"][-1]["seat_kind"] == "local"
        up.stop()

    def test_cmd_model_retry_and_self_contained_prompts(
        self, demo: Society, tmp_path: Path
    ) -> None:
        """A model program that answers garbage first is retried once and the run completes."""
        log = tmp_path / "prompts.jsonl"
        env = {
            "FAKE_EXPEDITION_MODE": "garbage-once",
            "FAKE_EXPEDITION_STATE": str(tmp_path / "state"),
            "FAKE_MODEL_LOG": str(log),
        }
        for role in ("termgen", "score", "scotoma"):
            set_seat(demo.root, role, cmd_seat(role, FAKES / "expedition_model.py", env))
        up = start_up(demo, nicks=EXPEDITION_LURKERS)
        done = run_cli(demo.root, *EXPEDITION, "--yes", timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(briefs(demo)) == 1
        thread = thread_from(done.stdout + done.stderr)
        termgen = next(m for m in foreman_lines(demo, thread) if m["from"] == "termgen")
        judgment = termgen["data"]["judgments"][-1]
        assert judgment["seat_kind"] == "cmd" and judgment["attempts"] == 2
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        assert {c["step"] for c in calls} == {"termgen", "score", "scotoma"}
        for call in calls:
            assert call["prompt"].split("\n", 1)[0] == f"step: {call['step']}"
            assert "Return ONLY valid JSON" in call["prompt"]
        retried = [c for c in calls if c["step"] == "termgen"][1]
        assert "rejected" in retried["prompt"]
        up.stop()

    def test_garbage_twice_fails_loud_and_fabricates_nothing(
        self, demo: Society, tmp_path: Path
    ) -> None:
        """A model that never answers JSON fails step 1 loud: the operator is told, no brief, no terms."""
        env = {"FAKE_EXPEDITION_MODE": "garbage-always"}
        set_seat(demo.root, "termgen", cmd_seat("termgen", FAKES / "expedition_model.py", env))
        up = start_up(demo, nicks=EXPEDITION_LURKERS)
        done = run_cli(demo.root, *EXPEDITION, "--yes", timeout=180)
        assert done.returncode == 1, done.stdout + done.stderr
        thread = thread_from(done.stdout + done.stderr)
        lines = foreman_lines(demo, thread)
        final = next(m for m in lines if m["from"] == "foreman" and (m["data"] or {}).get("final"))
        assert final["to"] == "@operator" and "[STEP_1 FAILED" in final["body"]
        termgen = next(m for m in lines if m["from"] == "termgen")
        assert termgen["data"]["failed"] is True and "terms" not in termgen["data"]
        assert not any(m["to"] in ("@retriever", "@scorer", "@briefer") for m in lines)
        assert briefs(demo) == []
        up.stop()

    def test_fallback_seat_answers_and_is_named(self, demo: Society) -> None:
        """When the role's seat fails twice, its fallback seat answers and the reply names it."""
        set_seat(
            demo.root,
            "termgen",
            cmd_seat(
                "termgen",
                FAKES / "expedition_model.py",
                {"FAKE_EXPEDITION_MODE": "garbage-always"},
                fallback="backup",
            ),
        )
        set_seat(demo.root, "backup", 'kind = "local"')
        up = start_up(demo, nicks=EXPEDITION_LURKERS)
        done = run_cli(demo.root, *EXPEDITION, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        thread = thread_from(done.stdout + done.stderr)
        termgen = next(m for m in foreman_lines(demo, thread) if m["from"] == "termgen")
        judgment = termgen["data"]["judgments"][-1]
        assert termgen["data"]["seat"] == "backup" and judgment["fallback_used"] is True
        assert judgment["attempts"] == 3
        up.stop()

    def test_openai_seat_against_a_real_http_server(self, demo: Society, tmp_path: Path) -> None:
        """The termgen role served by an OpenAI-compatible HTTP server drives a real run."""
        script = tmp_path / "openai.json"
        terms = json.dumps({"terms": TERMS})
        script.write_text(json.dumps({"termgen": [terms, terms]}))
        server = subprocess.Popen(
            [sys.executable, str(FAKES / "fake_openai.py"), "--port", "0", "--script", str(script)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline().strip())
            set_seat(
                demo.root,
                "termgen",
                f'kind = "openai"\nbase_url = "http://127.0.0.1:{port}/v1"\nmodel = "test-model"\ntimeout_s = 30',
            )
            up = start_up(demo, nicks=EXPEDITION_LURKERS)
            done = run_cli(demo.root, *EXPEDITION, timeout=180)
            assert done.returncode == 0, done.stdout + done.stderr
            thread = thread_from(done.stdout + done.stderr)
            termgen = next(m for m in foreman_lines(demo, thread) if m["from"] == "termgen")
            assert termgen["data"]["judgments"][-1]["seat_kind"] == "openai"
            assert "rushed" in done.stdout
            up.stop()
        finally:
            server.terminate()
            server.wait(10)

    def test_foreman_restarted_mid_run_resumes(self, demo: Society, tmp_path: Path) -> None:
        """The foreman killed while a step works picks the expedition up from the room."""
        env = {"FAKE_EXPEDITION_MODE": "slow", "FAKE_EXPEDITION_SLEEP": "3"}
        set_seat(demo.root, "termgen", cmd_seat("termgen", FAKES / "expedition_model.py", env))
        up = start_up(demo, nicks=EXPEDITION_LURKERS)
        pid = int(
            next(
                line.split()[3]
                for line in up.output().splitlines()
                if line.startswith("up: foreman")
            )
        )
        command = subprocess.Popen(
            [sys.executable, "-m", "agents.cli", "--home", str(demo.root), *EXPEDITION],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(
                lambda: any(m["to"] == "@termgen" for m in demo.lines()),
                60,
                "the foreman's ask to termgen",
            )
            import os

            os.kill(pid, signal.SIGKILL)
            out, err = command.communicate(timeout=180)
        finally:
            if command.poll() is None:
                command.kill()
        assert command.returncode == 0, out + err
        assert "=== DIG REPORT ===" in out
        assert "foreman was killed by SIGKILL; restarting" in up.output()
        up.stop()


def backpass_script(tmp_path: Path, analysis: Any, synthesis: Any | None = None) -> dict[str, str]:
    script = tmp_path / "model.json"
    script.write_text(
        json.dumps(
            {
                "analysis": analysis,
                "synthesis": synthesis or {"json": {"edits": [], "summary": "no change"}},
            }
        )
    )
    return {"FAKE_MODEL_SCRIPT": str(script), "FAKE_MODEL_STATE": str(tmp_path / "model.state")}


def funnel_value(output: str, label: str) -> str:
    match = re.search(rf"^{re.escape(label)}\s+(.+)$", output, re.M)
    assert match, output
    return match.group(1).strip()


class TestBackpass:
    def test_funnel_counts_exactly_with_a_fake_model(self, demo: Society, tmp_path: Path) -> None:
        """Known good and fabricated quotes give exact funnel counts; a rerun finds nothing pending."""
        traces = demo.root / "traces"
        for old in traces.rglob("*"):
            if old.is_file():
                old.unlink()
        for name in ("one.md", "two.md"):
            (traces / name).write_text(
                "We tried again & again.\nThe deploy worked after the retry.\n"
            )
        item = {"text": "retrying works", "quote": "The deploy worked after the retry."}
        fake = {"text": "invented", "quote": "we never touched the database"}
        answer = {"json": {"positive": [item], "negative": [fake], "gaps": []}}
        env = backpass_script(tmp_path, answer)
        for role in ("bulk", "synthesis"):
            set_seat(demo.root, role, cmd_seat(role, FAKES / "fake_model.py", env))
        up = start_up(demo, nicks=BACKPASS_LURKERS)
        done = run_cli(demo.root, "backpass", timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        assert funnel_value(done.stdout, "analysed") == "2"
        assert funnel_value(done.stdout, "items returned") == "4"
        assert funnel_value(done.stdout, "dropped: no quote").startswith("2 (50.0%)")
        assert "corrupted input" in done.stdout
        assert funnel_value(done.stdout, "seat bulk") == "bulk (cmd) ×2"
        again = run_cli(demo.root, "backpass", timeout=120)
        assert again.returncode == 0 and "nothing pending" in again.stdout
        up.stop()

    def test_hanging_model_hits_the_timeout_and_exits_non_zero(
        self, demo: Society, tmp_path: Path
    ) -> None:
        """A model that hangs is cut off at the hard timeout; the trace is reported failed and stays pending."""
        env = backpass_script(tmp_path, {"sleep": 60})
        table = cmd_seat("bulk", FAKES / "fake_model.py", env).replace(
            "timeout_s = 30", "timeout_s = 1"
        )
        set_seat(demo.root, "bulk", table)
        up = start_up(demo, nicks=BACKPASS_LURKERS)
        done = run_cli(demo.root, "backpass", "--timeout", "3", "--report-only", timeout=240)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "FAILED traces" in done.stdout
        assert funnel_value(done.stdout, "failed") != "0"
        up.stop()

    def test_the_real_foreman_keeps_analyses_in_flight_within_concurrency(
        self, demo: Society, tmp_path: Path
    ) -> None:
        """With 5 traces, concurrency 2 and an analyst that could take 4 at once, the room never
        shows more than 2 analysis asks awaiting replies, and shows 2 at some point."""
        traces = demo.root / "traces"
        for old in traces.rglob("*"):
            if old.is_file():
                old.unlink()
        for n in range(5):
            (traces / f"t{n}.md").write_text(f"Session {n}.\nThe deploy worked after the retry.\n")
        item = {"text": "retrying works", "quote": "The deploy worked after the retry."}
        answer = {"json": {"positive": [item], "negative": [], "gaps": []}, "sleep": 1}
        env = backpass_script(tmp_path, answer)
        for role in ("bulk", "synthesis"):
            set_seat(demo.root, role, cmd_seat(role, FAKES / "fake_model.py", env))
        assert demo.home.society.nicks["analyst"].concurrency == 4  # it could take more
        up = start_up(demo, nicks=BACKPASS_LURKERS)
        done = run_cli(demo.root, "backpass", "--concurrency", "2", "--report-only", timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        assert funnel_value(done.stdout, "analysed") == "5"
        waiting: set[str] = set()
        most = 0
        for line in demo.lines():
            key = str((line.get("data") or {}).get("key", ""))
            if line["from"] == "foreman" and line["type"] == "ask" and key.startswith("analysis/"):
                waiting.add(line["id"])
            elif line["from"] == "analyst" and line["type"] == "reply":
                waiting.discard(line.get("in_reply_to") or "")
            most = max(most, len(waiting))
        assert most == 2
        up.stop()
