"""Whole backpass runs: the real pipeline and steps, real git, a scripted fake judge."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from agents.backpass.ledger import open_entries, parse
from agents.runtime.step import JudgmentRequest
from tests.backpass.helpers import (
    DAY,
    BackpassHome,
    FakeJudge,
    drive,
    git,
    local_script,
    seat_error,
    tree_digest,
)

ALPHA = """# Session alpha
- The deploy failed because sed 's/V/&-rc/' put the match back & broke the tag.
- Quoting the replacement fixed it: $1 and \\1 stayed literal.
- Why does {{trace}} appear in the log?
"""
BETA = '{"role": "user", "content": "The tests passed after\\n   pinning the version."}\n'


def _item(text: str, quote: str) -> dict[str, str]:
    return {"text": text, "quote": quote}


def scripted(answers: dict[str, Any], synthesis: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    """Analysis answers by session (a dict, or an Exception to fail); synthesis fixed or local."""

    def script(step: str, request: JudgmentRequest) -> Any:
        if step == "analysis":
            return answers[request.payload["session"]]
        return synthesis if synthesis is not None else local_script(step, request)

    return script


SOURCE = ["L-00000000"]  # stands for the first open ledger line, whose id only the run knows


def cited(script):  # type: ignore[no-untyped-def]
    """`script`, with SOURCE in a synthesis answer replaced by the first open ledger line's id."""

    def answer(step: str, request: JudgmentRequest) -> Any:
        found = script(step, request)
        if step != "synthesis" or not isinstance(found, dict):
            return found
        first = [request.payload["ledger"][0]["id"]]
        edits = [
            {**e, "sources": first} if e.get("sources") == SOURCE else e for e in found["edits"]
        ]
        return {**found, "edits": edits}

    return answer


GOOD_AND_FABRICATED = {
    "alpha.md": {
        "positive": [
            _item(
                "Quote the sed replacement.",
                "Quoting the replacement fixed it: $1 and \\1 stayed literal.",
            )
        ],
        "negative": [
            _item(
                "sed & puts the match back.", "sed 's/V/&-rc/' put the match back & broke the tag."
            ),
            _item("Invented.", "The deploy succeeded on the first try."),  # fabricated
        ],
        "gaps": [_item("{{trace}} leaks into the log.", "Why does {{trace}} appear in the log?")],
    },
    "beta.jsonl": {
        "positive": [
            _item(
                "Pin versions to keep tests green.", "The tests passed after pinning the version."
            ),  # re-wrapped
            _item("Empty quote.", ""),  # missing
        ],
        "negative": [],
        "gaps": [],
    },
}


class TestFunnel:
    def test_counts_exactly_with_good_and_fabricated_quotes(self, bp_home: BackpassHome) -> None:
        """6 items returned, 2 dropped (a fabricated and an empty quote), 4 kept, 4 new lines."""
        bp_home.trace("alpha.md", ALPHA)
        bp_home.trace("beta.jsonl", BETA)
        outcome = drive(bp_home.home, bp_home.params(), FakeJudge(scripted(GOOD_AND_FABRICATED)))
        funnel = outcome.funnel
        assert (funnel["traces_pending"], funnel["traces_analyzed"], funnel["traces_failed"]) == (
            2,
            2,
            0,
        )
        assert (funnel["items_returned"], funnel["items_dropped"], funnel["items_kept"]) == (
            6,
            2,
            4,
        )
        assert (funnel["new_lines"], funnel["corroborations"], funnel["covered"]) == (4, 0, 0)
        assert funnel["drop_rate"] == round(2 / 6, 4)
        assert outcome.data["ok"] is True
        assert "WARNING: 33% of the items were dropped" in outcome.final.body
        assert "corrupted input, not a bad model" in outcome.final.body
        ledger = git(bp_home.private, "show", f"memory-backpass/{DAY}:ledger.md")
        assert "sed & puts the match back." in ledger and "Invented." not in ledger

    def test_literal_substitution_end_to_end(self, bp_home: BackpassHome) -> None:
        """Traces full of `&`, `$1`, `\\1` and placeholder names reach the seat exactly; no quote drops."""
        nasty = "- It failed: & $1 $& \\1 \\g<0> {} {{trace}} {{session}} {{date}} worked?\n" * 3
        bp_home.trace("nasty.md", nasty)
        bp_home.trace("alpha.md", ALPHA)
        judge = FakeJudge()
        outcome = drive(bp_home.home, bp_home.params(), judge)
        prompts = {r.payload["session"]: r.prompt for role, r in judge.history if role == "bulk"}
        assert prompts["nasty.md"].count(nasty) == 1
        assert prompts["alpha.md"].count(ALPHA) == 1
        assert "{{trace}}" not in prompts["alpha.md"].replace(ALPHA, "")
        assert outcome.funnel["items_dropped"] == 0 and outcome.funnel["items_returned"] > 0


class TestHashMarker:
    def test_rerun_finds_nothing_then_a_grown_trace(self, bp_home: BackpassHome) -> None:
        """A rerun has nothing pending; a grown trace alone is pending again, and its items repeat."""
        alpha = bp_home.trace("alpha.md", ALPHA)
        bp_home.trace("beta.jsonl", BETA)
        first = drive(bp_home.home, bp_home.params())
        assert first.data["ok"] and first.funnel["traces_analyzed"] == 2
        second = drive(bp_home.home, bp_home.params())
        assert second.data.get("nothing_pending") is True
        assert second.final.body.startswith("nothing pending: all 2 traces are unchanged")
        with alpha.open("a") as handle:
            handle.write("- The rollback worked on the second try.\n")
        third = drive(bp_home.home, bp_home.params())
        funnel = third.funnel
        assert (funnel["traces_pending"], funnel["traces_analyzed"]) == (1, 1)
        assert funnel["new_lines"] == 1 and funnel["corroborations"] == 0
        assert funnel["repeats"] == funnel["items_kept"] - 1  # one line per item and session

    def test_an_empty_traces_folder_is_named_not_counted(self, bp_home: BackpassHome) -> None:
        """No traces at all: the report says the folder has none and what counts as one."""
        outcome = drive(bp_home.home, bp_home.params())
        assert outcome.data["ok"] is True and outcome.data["no_traces"] is True
        body = outcome.final.body
        assert body.startswith(f"no traces in {bp_home.traces}: every regular file under it")
        assert "all 0 traces" not in body
        assert not bp_home.state.exists()

    def test_failed_trace_stays_pending(self, bp_home: BackpassHome) -> None:
        """A trace whose analysis fails is reported, makes the run not ok, and is pending next time."""
        bp_home.trace("alpha.md", ALPHA)
        bp_home.trace("beta.jsonl", BETA)
        answers = dict(
            GOOD_AND_FABRICATED,
            **{"beta.jsonl": seat_error("no valid answer after retry and fallback")},
        )
        outcome = drive(bp_home.home, bp_home.params(), FakeJudge(scripted(answers)))
        assert outcome.data["ok"] is False
        assert [f["session"] for f in outcome.data["failed_traces"]] == ["beta.jsonl"]
        assert "no valid answer after retry and fallback" in outcome.final.body
        assert outcome.funnel["traces_failed"] == 1 and outcome.funnel["traces_analyzed"] == 1
        state = bp_home.state.read_text()
        assert "alpha.md" in state and "beta.jsonl" not in state
        again = drive(bp_home.home, bp_home.params())
        assert again.funnel["traces_pending"] == 1 and again.data["ok"] is True, again.final.body

    def test_timeout_is_a_failed_trace(self, bp_home: BackpassHome) -> None:
        """An analysis over the hard timeout fails that trace, not the run."""
        import asyncio

        bp_home.trace("alpha.md", ALPHA)
        bp_home.trace("slow.md", "- It worked.\n")

        async def hang() -> dict[str, Any]:
            await asyncio.Event().wait()
            return {}

        def script(step: str, request: JudgmentRequest) -> Any:
            if request.payload.get("session") == "slow.md":
                return hang()
            return local_script(step, request)

        outcome = drive(bp_home.home, bp_home.params(timeout_s=0.05), FakeJudge(script))
        assert [f["session"] for f in outcome.data["failed_traces"]] == ["slow.md"]
        assert "hard timeout" in outcome.data["failed_traces"][0]["reason"]


class TestWrites:
    def test_report_only_writes_nothing(self, bp_home: BackpassHome) -> None:
        """--report-only leaves both repositories (.git included) and the state file byte-identical."""
        bp_home.trace("alpha.md", ALPHA)
        bp_home.state.write_text("# earlier state\n")
        before = {p: tree_digest(p) for p in (bp_home.public, bp_home.private)}
        state_before = bp_home.state.read_bytes()
        outcome = drive(
            bp_home.home, bp_home.params(report_only=True), FakeJudge(scripted(GOOD_AND_FABRICATED))
        )
        assert outcome.data["ok"] and outcome.data["report_only"] is True
        assert outcome.funnel["items_kept"] == 3 and outcome.funnel["new_lines"] == 3
        assert {p: tree_digest(p) for p in (bp_home.public, bp_home.private)} == before
        assert bp_home.state.read_bytes() == state_before
        assert outcome.data["branches"] == {}
        assert "report only" in outcome.final.body
        run = next((bp_home.root / "runs").iterdir())
        assert (run / "PR_BODY.md").exists() and (run / "ledger.md").exists()

    def test_default_branches_untouched_and_nothing_pushed(
        self, tmp_path: Path, bp_home: BackpassHome
    ) -> None:
        """Edits land on new branches in worktrees; main, the main worktrees and the remote stay."""
        origin = tmp_path / "origin.git"
        subprocess.run(
            ["git", "clone", "--quiet", "--bare", str(bp_home.public), str(origin)], check=True
        )
        git(bp_home.public, "remote", "add", "origin", str(origin))
        git(bp_home.public, "fetch", "--quiet", "origin")
        remote_refs = git(origin, "show-ref")
        bp_home.trace("alpha.md", ALPHA)
        bp_home.trace("beta.jsonl", BETA)
        heads = {p: git(p, "rev-parse", "main") for p in (bp_home.public, bp_home.private)}
        files = {p: (p / "memory.md").read_bytes() for p in (bp_home.public, bp_home.private)}
        synthesis = {
            "edits": [
                {
                    "repo": "public",
                    "op": "replace",
                    "bullet": "PUB-002",
                    "text": "Keep commits small & focused.",
                },
                {
                    "repo": "public",
                    "op": "add",
                    "text": "Quote sed replacements: & and \\1 are special.",
                    "sources": SOURCE,  # the ledger line it rests on, filled in by cited()
                },
                {
                    "repo": "private",
                    "op": "remove",
                    "bullet": "PRV-001",
                    "reason": "rebuilt daily now",
                },
            ],
            "summary": "Three edits.",
        }
        outcome = drive(
            bp_home.home,
            bp_home.params(min_sessions=1),  # a new lesson from one session may be added
            FakeJudge(cited(scripted(GOOD_AND_FABRICATED, synthesis))),
        )
        assert outcome.data["ok"], outcome.final.body
        for repo in (bp_home.public, bp_home.private):
            assert git(repo, "rev-parse", "main") == heads[repo]
            assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
            assert (repo / "memory.md").read_bytes() == files[repo]
            assert git(repo, "status", "--porcelain") == ""
        assert git(origin, "show-ref") == remote_refs
        branch = f"memory-backpass/{DAY}"
        public = git(bp_home.public, "show", f"{branch}:memory.md")
        assert "- Keep commits small & focused.\n" in public
        assert public.endswith("- Quote sed replacements: & and \\1 are special.")
        assert git(bp_home.public, "rev-list", "--count", f"main..{branch}") == "2"
        private = git(bp_home.private, "show", f"{branch}:memory.md")
        assert "staging database" not in private
        assert (
            git(bp_home.private, "rev-list", "--count", f"main..{branch}") == "2"
        )  # ledger + edit
        body = Path(outcome.data["pr_body"]).read_text()
        assert "replace PUB-002: “Keep commits small.” → “Keep commits small & focused.”" in body
        assert "remove PRV-001" in body and "Three edits." in body
        assert outcome.funnel["edits"] == 3

    def test_second_run_same_day_stacks_and_suffixes(self, bp_home: BackpassHome) -> None:
        """A branch name already taken gets a suffix; the new branch builds on the unmerged one."""
        bp_home.trace("alpha.md", ALPHA)
        drive(bp_home.home, bp_home.params())
        bp_home.trace("beta.jsonl", BETA)
        outcome = drive(bp_home.home, bp_home.params())
        assert outcome.data["branches"]["private"]["branch"] == f"memory-backpass/{DAY}-2"
        assert outcome.data["branches"]["private"]["base"] == f"memory-backpass/{DAY}"
        assert "is not merged into main yet" in outcome.final.body
        ledger = git(bp_home.private, "show", f"memory-backpass/{DAY}-2:ledger.md")
        sessions = {s for e in open_entries(parse(ledger)) for s in e.sessions}
        assert sessions == {"alpha.md", "beta.jsonl"}

    def test_git_failure_leaves_nothing_behind(self, bp_home: BackpassHome) -> None:
        """When a git step fails after the private branch was made and committed, the run
        fails, its worktrees and branches are gone, and the state is not written."""
        # A repository's own filters and hooks never run (agents/git/safe.py), so the failure
        # is a lock someone else holds on the public branch the run is about to make.
        locks = bp_home.public / ".git" / "refs" / "heads" / "memory-backpass"
        locks.mkdir(parents=True)
        (locks / f"{DAY}.lock").write_text("held by a test\n")
        bp_home.trace("alpha.md", ALPHA)
        edit = {"repo": "public", "op": "add", "text": "x y z", "sources": SOURCE}
        synthesis = {"edits": [edit], "summary": ""}
        outcome = drive(
            bp_home.home,
            bp_home.params(min_sessions=1),
            FakeJudge(cited(scripted(GOOD_AND_FABRICATED, synthesis))),
        )
        body = outcome.final.body
        assert (
            outcome.data["ok"] is False and "`git worktree add --quiet -b memory-backpass/" in body
        )
        for repo in (bp_home.public, bp_home.private):
            assert git(repo, "branch", "--list", "memory-backpass/*") == ""
            assert len(git(repo, "worktree", "list").splitlines()) == 1
        assert not bp_home.state.exists()


class TestGitSurprises:
    def test_hooks_and_global_config_never_run(
        self, bp_home: BackpassHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A memory repo's hooks and a global config's signing program never run in a backpass."""
        marker = tmp_path / "ran"
        script = f'#!/bin/sh\necho "$0" >> {marker}\n'
        for repo in (bp_home.public, bp_home.private):
            for name in (
                "pre-commit",
                "commit-msg",
                "post-commit",
                "post-checkout",
                "post-index-change",
            ):
                hook = repo / ".git" / "hooks" / name
                hook.write_text(script)
                hook.chmod(0o755)
        signer = tmp_path / "gpg"
        signer.write_text(script + "exit 1\n")
        signer.chmod(0o755)
        global_config = tmp_path / "gitconfig"
        global_config.write_text(f"[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = {signer}\n")
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))
        bp_home.trace("alpha.md", ALPHA)
        outcome = drive(bp_home.home, bp_home.params(), FakeJudge(scripted(GOOD_AND_FABRICATED)))
        assert outcome.data["ok"] is True, outcome.final.body
        assert git(bp_home.private, "branch", "--list", "memory-backpass/*").strip()
        assert not marker.exists(), marker.read_text()
