"""A fix-existing-code campaign ground by an openai code seat that sees only its prompt.

Real hub, foreman, step lurkers and librarian, real git and pytest; the model is
tests/fakes/fake_code_model.py, a real OpenAI-protocol server with no access to the
repository: it can fix the bug only by copying the buggy function from the prompt,
its lines numbered, into an edit of those lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents.build.prompts import numbered
from agents.memory.index import Index
from agents.memory.namespaces import index_path
from tests.build.helpers import set_build, ticket
from tests.support import Proc, Society, run_cli, set_seat, wait_for

FAKE = Path(__file__).resolve().parent.parent / "fakes" / "fake_code_model.py"
NICKS = ("foreman", "sandbox", "testdesigner", "py", "librarian")
LESSON = "LESSON-ZEBRA: a discount is a fraction of the price, never an amount taken off"
WRONG, RIGHT = "price - discount", "price * (1 - discount)"

REPO = {
    "README.md": "A small shop.\n",
    "shop/__init__.py": "",
    "shop/tax.py": "def with_tax(amount):\n    return round(amount * 1.2, 2)\n",
    "shop/pricing.py": (
        '"""Prices of a basket."""\n\nfrom shop.tax import with_tax\n\n\n'
        "def subtotal(prices):\n    return sum(prices)\n\n\n"
        "def total(price, discount):\n"
        '    """The price after a fractional discount (0.25 = a quarter off), with tax."""\n'
        f"    return with_tax({WRONG})\n\n\n"
        'def describe(price):\n    return f"{price:.2f} EUR"\n'
    ),
    "tests/test_existing.py": (
        "from shop.pricing import subtotal\n\n\n"
        "def test_subtotal():\n    assert subtotal([1, 2]) == 3\n"
    ),
}
SPEC = """\
from shop.pricing import describe, total


def test_a_quarter_off():
    assert total(100, 0.25) == 90.0


def test_no_discount():
    assert total(10, 0) == 12.0


def test_describe_is_unchanged():
    assert describe(3) == "3.00 EUR"
"""


@dataclass
class Shop:
    society: Society
    base: Path
    builds: Path
    log: Path

    def campaign(self, slug: str) -> Path:
        """A git repository holding real, buggy code and a baseline commit."""
        folder = self.builds / slug
        for name, text in {**REPO, "tests/test_pricing.py": SPEC}.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "baseline"]):
            subprocess.run(
                ["git", "-c", "user.name=op", "-c", "user.email=op@example.org", *args],
                cwd=folder, check=True, capture_output=True,
            )  # fmt: skip
        return folder

    def build(self, slug: str, tier: str) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
        """Run the campaign through `bullpen build`: the folder, the report, the thread."""
        folder = self.campaign(slug)
        path = self.base / f"{slug}.md"
        path.write_text(ticket(str(folder), f"{folder}/tests/test_pricing.py", tiers=tier))
        done = run_cli(
            self.society.root, "build", str(path), "--wait-timeout", "150", "--json", timeout=200
        )
        thread = done.stderr.split("build ", 1)[1].split()[0]
        lines = [m for m in self.society.lines() if m.get("thread") == thread]
        report = next(m["data"] for m in lines if (m.get("data") or {}).get("final"))
        result = json.loads(done.stdout)  # --json: the final report, as the room holds it
        assert result["thread"] == thread and result["data"] == report, done.stdout
        assert result["exit"] == done.returncode
        return folder, report, lines

    def prompts(self, model: str) -> list[str]:
        if not self.log.exists():
            return []
        calls = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [c["prompt"] for c in calls if c["model"] == model]


def _iterations(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["data"] for m in lines if (m.get("data") or {}).get("kind") == "grind-iteration"]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    base = tmp_path_factory.mktemp("fix")
    society = Society(base / "home")
    builds = base / "builds"
    builds.mkdir()
    set_build(society.root, root=str(builds), alias=str(base / "sandbox"), stall_after=2,
              max_iterations=3, run_timeout_s=60)  # fmt: skip
    log = base / "model.jsonl"
    model = Proc(
        [sys.executable, str(FAKE), "--func", "total", "--wrong", WRONG, "--right", RIGHT,
         "--guess-path", "shop/pricing.py", "--lesson", "LESSON-ZEBRA", "--log", str(log)],
        base / "model.out",
    )  # fmt: skip
    try:
        port = wait_for(lambda: model.output().split("\n", 1)[0].strip() or None, 30, "the model")
        for name in ("fix", "sloppy", "lesson"):
            set_seat(society.root, name, f'kind = "openai"\nbase_url = '
                     f'"http://127.0.0.1:{port}/v1"\nmodel = "{name}"\ntimeout_s = 30')  # fmt: skip
        society.start_hub()
        procs = [society.spawn(f"lurk-{nick}", "lurk", nick) for nick in NICKS]
        wait_for(
            lambda: all("lurking" in p.output() or not p.alive() for p in procs), 60, "lurkers"
        )
        assert all(p.alive() for p in procs), "\n".join(p.output() for p in procs)
        saved = run_cli(society.root, "memory", "save", "--ns", "/bullpen/lessons-learned/py",
                        LESSON)  # fmt: skip
        assert saved.returncode == 0, saved.stderr
        other = run_cli(
            society.root,
            "memory",
            "save",
            "--ns",
            "/bullpen/lessons-learned/testdesigner",
            "LESSON-OKAPI: keep specs small",
        )
        assert other.returncode == 0, other.stderr  # fmt: skip

        def indexed() -> bool:
            if not index_path(society.home).exists():
                return False
            with Index.open(index_path(society.home), create=False) as index:
                return bool(
                    index.recall("ZEBRA", "/bullpen/lessons-learned/py", 1)
                    and index.recall("OKAPI", "/bullpen/lessons-learned/testdesigner", 1)
                )

        wait_for(indexed, 30, "the lesson in the index")
        yield Shop(society, base, builds, log)
    finally:
        society.stop_all()
        model.stop()


def test_a_fix_existing_code_campaign_goes_green_editing_only_what_was_shown(shop: Shop) -> None:
    """The seat is shown the map and the current text of the module the spec imports; its
    edit of the numbered lines, copied from that text, turns the spec green in one iteration and
    changes nothing else; the build dir keeps the buggy original."""
    folder, report, lines = shop.build("shop-fix", "fix")
    assert report["green"] and report["tier"] == "fix", report
    assert report["iterations"] == {"fix": 1}
    clone = Path(report["clone"])
    assert f"return with_tax({RIGHT})" in (clone / "shop/pricing.py").read_text()
    assert WRONG in (folder / "shop/pricing.py").read_text()  # the build dir keeps the original
    changed = subprocess.run(
        ["git", "--git-dir", report["gitdir"], "diff", "--name-only", report["baseline"], "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert changed == ["shop/pricing.py"]
    prompt = shop.prompts("fix")[-1]
    assert prompt.startswith("step: code\n")
    assert "REPOSITORY MAP" in prompt and "shop/tax.py (" in prompt and "def with_tax" in prompt
    assert "--- shop/pricing.py\n" + numbered(REPO["shop/pricing.py"]) in prompt
    assert "--- shop/tax.py\n" not in prompt  # imported by the module, not by the spec: map only
    # the manual-lookup memory recalled for the seat, no instruction it cannot follow
    assert "SHARED MEMORY (/bullpen/sandbox and /bullpen/ops)" in prompt
    assert "@librarian" not in prompt and "bullpen memory recall" not in prompt
    assert _iterations(lines)[0]["files_changed"] == ["shop/pricing.py"]


def test_an_edit_that_does_not_apply_comes_back_as_the_next_input(shop: Shop) -> None:
    """The first answer's old text is not what its lines say: nothing is written, the iteration
    says why, and the next prompt carries that reason; the corrected edit goes green."""
    _, report, lines = shop.build("shop-sloppy", "sloppy")
    assert report["green"] and report["iterations"] == {"sloppy": 2}, report
    first, second = _iterations(lines)[:2]
    assert first["files_changed"] == [] and "old is not what those lines say" in first["problem"]
    assert "none of the answer was applied" in first["problem"]
    assert second["files_changed"] == ["shop/pricing.py"] and second["green"]
    prompts = shop.prompts("sloppy")[-2:]
    assert "WAS NOT APPLIED" not in prompts[0]
    assert "YOUR LAST ANSWER WAS NOT APPLIED:" in prompts[1]
    assert "old is not what those lines say" in prompts[1]
    assert f"return with_tax({WRONG})" in prompts[1]  # shown again, as it still is


def test_the_grinders_lessons_reach_the_code_seat_and_the_reply_names_them(shop: Shop) -> None:
    """The lesson saved for @py is in the code seat's prompt (the fake fixes only then), and
    the grind's reply names its id among the lessons the model was given."""
    _, report, lines = shop.build("shop-lesson", "lesson")
    assert report["green"] and report["iterations"] == {"lesson": 1}, report
    prompt = shop.prompts("lesson")[-1]
    line = next(x for x in prompt.splitlines() if "LESSON-ZEBRA" in x)
    lesson_id = line.split("[", 1)[1].split("]", 1)[0]
    assert prompt.splitlines()[1].startswith("Lessons from shared memory")
    grind = next(m for m in lines if m["from"] == "py" and m["data"].get("kind") == "grind-result")
    assert lesson_id in grind["data"]["lessons"]
    checked = next(m for m in lines if m["from"] == "testdesigner")
    assert checked["data"]["written_by"] == "operator" and checked["data"]["lessons"] == []
