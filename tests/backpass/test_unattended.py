"""The backpass runs unattended on real traces (issue 25).

A society run — a real hub, foreman and lurkers under `bullpen up`, the
real CLI, real git — with a bulk model that is a real program with a
context window (tests/fakes/context_model.py): a 600,000-character trace is
analysed in chunks and the run succeeds; the model proposes a lesson seen
in one session and the code holds it back; the merged branch's unchecked
relay line is listed as the next run starts. Then the pieces one by one.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.backpass import steps
from agents.backpass.chunks import estimate, merge_items, split, window
from agents.backpass.config import BackpassConfig
from agents.backpass.ledger import Entry
from agents.backpass.relay import checklist, open_relays, section
from agents.backpass.schemas import Edit
from agents.backpass.threshold import hold_back
from agents.roots import Roots
from agents.runtime.step import JudgmentRequest, StepContext
from room.errors import StepFailed
from room.message import Message
from tests.backpass.helpers import START_TS, BackpassHome, FakeJudge, git, make_repo
from tests.support import BACKPASS_LURKERS, REPO, Society, run_cli, set_seat, start_up

FAKE = REPO / "tests" / "fakes" / "context_model.py"
FILLER = "step {n:06d}: the build ran and nothing new happened in this part of the session.\n"
LESSON_A = "LESSON: pin the compiler version before a release build"
LESSON_B = "LESSON: the staging cache must be flushed by hand after a deploy"
LESSON_C = "LESSON: run the migrations on a copy of the database first"


def long_trace(chars: int, lessons: dict[int, str]) -> str:
    """`chars` characters of filler lines, each lesson line placed at about its offset."""
    parts: list[str] = []
    size = 0
    pending = sorted(lessons.items())
    n = 0
    while size < chars:
        if pending and size >= pending[0][0]:
            line = pending.pop(0)[1] + "\n"
        else:
            line = FILLER.format(n=n)
            n += 1
        parts.append(line)
        size += len(line)
    text = "".join(parts)
    return text[: chars - 1] + "\n"


def funnel_value(output: str, label: str) -> str:
    match = re.search(rf"^{re.escape(label)}\s+(.+)$", output, re.M)
    assert match, output
    return match.group(1)


@pytest.mark.timeout(600)
def test_a_long_trace_a_one_session_lesson_and_the_relay(tmp_path: Path) -> None:
    demo = Society(tmp_path / "home", demo=True)
    traces = demo.root / "traces"
    for old in traces.rglob("*"):
        if old.is_file():
            old.unlink()
    big = long_trace(600_000, {30_000: LESSON_A, 247_500: LESSON_B, 540_000: LESSON_C})
    assert len(big) == 600_000
    (traces / "big.md").write_text(big)
    (traces / "short.md").write_text(f"Session two.\n{LESSON_A}\nDone.\n")
    society = demo.root / "society.toml"
    text = society.read_text()
    setting = "context_chars = 250000\n"
    if "[backpass]\n" in text:
        text = text.replace("[backpass]\n", "[backpass]\n" + setting, 1)
    else:
        text += "\n[backpass]\n" + setting
    society.write_text(text)
    log = tmp_path / "calls.jsonl"
    env = {"FAKE_CONTEXT_CHARS": "260000", "FAKE_MODEL_LOG": str(log)}
    seat = "\n".join(
        [
            'kind = "cmd"',
            f"command = {json.dumps([sys.executable, str(FAKE)])}",
            "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }",
            "timeout_s = 60",
        ]
    )
    for role in ("bulk", "synthesis"):
        set_seat(demo.root, role, seat)
    up = start_up(demo, nicks=BACKPASS_LURKERS)
    try:
        first = run_cli(demo.root, "backpass", timeout=300)
        out = first.stdout
        assert first.returncode == 0, out + first.stderr
        # the long trace went in chunks, each within the model's context, and the run succeeded
        assert funnel_value(out, "analysed") == "2 (1 long trace in 3 chunks)"
        assert re.search(r"^  big\.md: 3 kept, 0 dropped, 3 chunks$", out, re.M), out
        assert funnel_value(out, "items returned") == "4"
        assert funnel_value(out, "dropped: no quote").startswith("0 ")
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        analyses = [c for c in calls if c["step"] == "analysis"]
        assert len(analyses) == 4 and all(c["chars"] <= 260_000 for c in analyses)
        # the model proposed all three lessons; only the one two sessions saw was added
        assert funnel_value(out, "held back") == "2 new lesson(s) under the threshold"
        assert "staging cache must be flushed" in out and "migrations on a copy" in out
        assert funnel_value(out, "edits") == "1 (public 0, private 1)"
        private = demo.root / "memory" / "private"
        branch = git(
            private, "for-each-ref", "--format=%(refname:short)", "refs/heads/memory-backpass/"
        )
        memory = git(private, "show", f"{branch}:memory.md")
        assert "pin the compiler version before a release build" in memory
        assert "staging cache" not in memory and "migrations" not in memory
        body_path = Path(funnel_value(out, "PR body"))
        body = body_path.read_text()
        assert (
            "Label: relay" in body
            and "- [ ] relay: after merging, run `bullpen memory sync`" in body
        )
        assert "held back: private add “the staging cache must be flushed" in body

        # nothing merged yet: the next run lists no relay
        waiting = run_cli(demo.root, "backpass", timeout=120)
        assert waiting.returncode == 0 and "RELAY open" not in waiting.stdout + waiting.stderr

        # merged, its relay line unchecked: listed as the next run starts, and in the funnel
        git(private, "merge", "--quiet", "--no-ff", "-m", "merge the backpass", branch)
        second = run_cli(demo.root, "backpass", timeout=120)
        assert second.returncode == 0, second.stdout + second.stderr
        said = f"RELAY open: {branch} is merged but its PR body ({body_path}) has 1 unchecked"
        assert said in second.stderr and said in second.stdout

        # ticked: no longer listed
        body_path.write_text(body.replace("- [ ] relay:", "- [x] relay:"))
        third = run_cli(demo.root, "backpass", timeout=120)
        assert third.returncode == 0 and "RELAY open" not in third.stdout + third.stderr
    finally:
        up.stop()


class TestChunks:
    def test_windows_overlap_and_cover_the_text(self) -> None:
        text = "".join(f"line {n:05d} of the session\n" for n in range(4000))  # 96,000 chars
        parts = split(text, 30_000, 2_000)
        assert parts[0].start == 0 and parts[-1].end == len(text)
        for before, after in itertools.pairwise(parts):
            assert after.start < before.end and before.end - after.start <= 2_000
            assert text[before.end - 1] == "\n"  # cut on a line break
        assert all(len(p.text) <= 30_000 for p in parts)
        assert estimate(len(text), 30_000, 2_000) >= len(parts)

    def test_a_short_text_is_one_chunk(self) -> None:
        assert [c.text for c in split("short", 1000, 10)] == ["short"]

    def test_a_context_in_tokens_leaves_room_for_the_template(self) -> None:
        """…and for the answer: the server keeps the analysis' max_tokens of its context."""
        from agents.backpass.prompts import ANALYSIS_TOKENS

        assert window(400_000, 100_000, 4000, 3000) == (100_000 - ANALYSIS_TOKENS) * 3 - 3000
        assert window(400_000, None, 4000, 3000) == 400_000

    def test_overlapping_answers_merge_by_quote_or_text(self) -> None:
        one = [{"kind": "positive", "text": "Pin it.", "quote": "pinned  the\nversion"}]
        two = [
            {"kind": "positive", "text": "Pin the version.", "quote": "pinned the version"},
            {"kind": "negative", "text": "Pin it.", "quote": "other"},
            {"kind": "positive", "text": "Pin it.", "quote": "another quote"},
        ]
        merged = merge_items([one, two])
        assert [(i["kind"], i["text"]) for i in merged] == [
            ("positive", "Pin it."),
            ("negative", "Pin it."),
        ]

    def test_an_overlap_over_a_quarter_of_the_context_is_refused(self) -> None:
        with pytest.raises(ValueError, match="chunk_overlap_chars"):
            BackpassConfig(context_chars=10_000, chunk_overlap_chars=5_000)


def entry(text: str, *sessions: str) -> Entry:
    return Entry(True, "positive", text, [("2026-10-20", s) for s in sessions])


class TestThreshold:
    def test_an_add_needs_two_sessions_across_its_sources(self) -> None:
        one, other, both = entry("a", "s1"), entry("b", "s2"), entry("c", "s1", "s2")
        adds = [
            Edit(repo="private", op="add", text="from one", sources=[one.id]),
            Edit(repo="private", op="add", text="from two lines", sources=[one.id, other.id]),
            Edit(repo="private", op="add", text="from both", sources=[both.id]),
            Edit(repo="private", op="add", text="from nothing"),
            Edit(repo="private", op="remove", bullet="PRV-001"),
        ]
        kept, held = hold_back(adds, [one, other, both], 2)
        assert [e.text for e in kept] == ["from two lines", "from both", None]
        assert [h.edit.text for h in held] == ["from one", "from nothing"]
        assert "seen in 1 session; a new lesson needs 2" in held[0].reason
        assert "cites no ledger line" in held[1].reason


class TestRelay:
    def body(self, branch: str, sha: str, ticked: bool = False) -> str:
        branches = {"private": {"branch": branch, "commits": [sha]}}
        lines = checklist(branches, {"private": 1}, {}, "coder")
        text = "\n".join(section(lines, branches))
        return "# memory-backpass: 2026-10-20\n\n" + (
            text.replace("- [ ]", "- [x]") if ticked else text
        )

    def test_only_merged_bodies_with_unchecked_lines_are_listed(self, tmp_path: Path) -> None:
        repo = make_repo(tmp_path / "private", {"memory.md": "# Private\n"})
        git(repo, "checkout", "--quiet", "-b", "memory-backpass/2026-10-20")
        (repo / "memory.md").write_text("# Private\n\n- new\n")
        git(repo, "commit", "--quiet", "-am", "edit")
        merged_sha = git(repo, "rev-parse", "HEAD")
        git(repo, "checkout", "--quiet", "-b", "memory-backpass/2026-10-21")
        (repo / "memory.md").write_text("# Private\n\n- new\n- newer\n")
        git(repo, "commit", "--quiet", "-am", "edit 2")
        unmerged_sha = git(repo, "rev-parse", "HEAD")
        git(repo, "checkout", "--quiet", "main")
        git(repo, "merge", "--quiet", "--no-ff", "-m", "m", "memory-backpass/2026-10-20")
        runs = tmp_path / "runs"
        bodies = {
            "open": self.body("memory-backpass/2026-10-20", merged_sha),
            "ticked": self.body("memory-backpass/2026-10-20", merged_sha, ticked=True),
            "unmerged": self.body("memory-backpass/2026-10-21", unmerged_sha),
            "forged": self.body("memory-backpass/2026-10-20", "--upload-pack=x" + "0" * 25),
        }
        for name, text in bodies.items():
            (runs / name).mkdir(parents=True)
            (runs / name / "PR_BODY.md").write_text(text)
        found = open_relays(runs, Roots.single("runs", runs), repo, "main")
        assert [(Path(r.pr_body).parent.name, r.branch) for r in found] == [
            ("open", "memory-backpass/2026-10-20")
        ]
        assert found[0].lines == [
            "relay: after merging, run `bullpen memory sync` so @coder recall the new private bullets"
        ]

    def test_no_edits_no_relay(self) -> None:
        branches = {"private": {"branch": "b", "commits": ["0" * 40]}}
        assert checklist(branches, {"private": 0, "public": 0}, {}, None) == []
        assert section([], branches) == []


def _analyse(
    bp_home: BackpassHome, path: Path, judge: FakeJudge, nick: str = "analyst", **params: Any
) -> Any:
    data = {
        "run": bp_home.params(**params).model_dump(),
        "date": "2026-10-20",
        "trace": {"n": 1, "path": str(path), "session": path.name},
    }
    ask = Message.model_validate(
        {
            "seq": 2, "id": "m2", "ts": START_TS, "from": "foreman", "to": f"@{nick}",
            "type": "ask", "body": "b", "data": data, "thread": "backpass-chunks",
            "verified": True,
        }
    )  # fmt: skip

    async def read_thread(_: str, __: int = 0) -> list[Message]:
        return []

    return asyncio.run(steps.analyse(ask, StepContext(nick, bp_home.home, {}, judge, read_thread)))


class TestChunkedStep:
    def test_every_chunk_is_asked_and_items_merge(self, bp_home: BackpassHome) -> None:
        """Each chunk's prompt holds only its part, says which part it is, and fits the window;
        the reply names the chunks and the items come back once each."""
        text = long_trace(20_000, {1_000: LESSON_A, 9_800: LESSON_B, 18_000: LESSON_C})
        path = bp_home.trace("long.md", text)

        def script(step: str, request: JudgmentRequest) -> dict[str, Any]:
            shown = str(request.payload["text"])
            items = [
                {"text": line.split("LESSON:")[1], "quote": line}
                for line in shown.splitlines()
                if "LESSON:" in line
            ]
            return {"positive": items, "negative": [], "gaps": []}

        judge = FakeJudge(script)
        reply = _analyse(bp_home, path, judge, context_chars=8_000, chunk_overlap_chars=500)
        prompts = [r.payload for _, r in judge.history]
        assert reply.data["chunks"] == len(prompts) >= 3
        assert all(len(p["text"]) <= 8_000 for p in prompts)
        assert (
            "(part 2 of " in prompts[1]["session"] and "the parts overlap" in prompts[1]["session"]
        )
        assert reply.data["items"] == 3
        assert len(reply.data["provenances"]) == len(prompts)
        record = json.loads(Path(reply.data["artifact"]).read_text())
        assert sorted(i["quote"] for i in record["items"]) == sorted([LESSON_A, LESSON_B, LESSON_C])

    def test_the_nicks_own_timeout_bounds_all_the_chunks(self, bp_home: BackpassHome) -> None:
        """When the chunks would outlast the analyst's own timeout, the step fails in time,
        naming the setting to raise, rather than being cut off without a word."""
        (bp_home.root / "society.toml").write_text(
            '[nicks.analyst]\nhandler = "agents.backpass.steps:analyse"\ntimeout_s = 7\n'
        )
        path = bp_home.trace("long.md", long_trace(20_000, {1_000: LESSON_A}))

        async def slow(step: str, request: JudgmentRequest) -> dict[str, Any]:
            await asyncio.sleep(1.5)
            return {"positive": [], "negative": [], "gaps": []}

        judge = FakeJudge(slow)  # type: ignore[arg-type]
        with pytest.raises(StepFailed, match=r"nicks\.analyst\] timeout_s") as failed:
            _analyse(bp_home, path, judge, context_chars=8_000, chunk_overlap_chars=500)
        assert "chunk 2 of" in failed.value.message and len(judge.history) == 2
