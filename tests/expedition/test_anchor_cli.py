"""`bullpen expedition confirm THREAD --anchor FILE` as an operator runs it: a real hub and
lurkers under `bullpen up`, the real CLI, the demo knowledge base and the local seat."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.expedition.lurkers import expedition_society
from tests.support import Society, run_cli

EXPEDITION = ("expedition", "--title", "Waiting Is Part of the Work", "--keyword", "patience")
GOOD = "field-notes/pond-survey.md"  # lived, first-person in 3 paragraphs, not in the report
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def society(tmp_path: Path) -> Iterator[Society]:
    yield from expedition_society(tmp_path / "home")


def thread_of(output: str) -> str:
    found = re.search(r"\b(exp-[0-9a-f]+)\b", output)
    assert found, output
    return found.group(1)


def test_missing_then_pointed_anchor_writes_the_brief(society: Society) -> None:
    """A MISSING brief waits for a file; a refused file posts nothing; a good one is the anchor.

    Every file the report and the brief name is a path that exists in the knowledge base.
    Then a second run is confirmed with `--anchor` at its Dig Report, in one turn.
    """
    kb = society.root / "kb"
    first = run_cli(society.root, *EXPEDITION, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    thread = thread_of(first.stderr)
    listed = re.findall(r"^- (\S+\.md) \(row_\d+\)", first.stdout, re.M)
    assert listed and all((kb / f).is_file() for f in listed), first.stdout
    assert "Corpus/" not in first.stdout
    anchors = re.findall(r"^- \S+ \((row_\d+)\) — first-person", first.stdout, re.M)
    assert anchors and GOOD not in listed

    missing = run_cli(
        society.root, "expedition", "confirm", thread, "--drop", *anchors, timeout=180
    )
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "voice_anchor: MISSING" in missing.stdout
    assert f"bullpen expedition confirm {thread} --anchor FILE" in missing.stdout + missing.stderr

    before = len(society.lines())
    refused = run_cli(
        society.root, "expedition", "confirm", thread, "--anchor", "digests/seasoning-oak.md"
    )
    assert refused.returncode == 2 and "--anchor refused" in refused.stderr
    assert "digest layer or third-person narration" in refused.stderr
    assert len(society.lines()) == before  # nothing was posted

    done = run_cli(
        society.root, "expedition", "confirm", thread, "--anchor", f"Corpus/{GOOD}", timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (brief,) = (society.root / "briefs").glob("*.md")
    text = brief.read_text()
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["voice_anchor"].startswith(f"{GOOD} — first-person body prose confirmed")
    assert GOOD in [s["file"] for s in front["sources"]]
    named = [s["file"] for s in front["sources"]] + front["direct_hits"]
    assert all((kb / f).is_file() for f in named) and "Corpus/" not in text

    second = run_cli(society.root, *EXPEDITION, "--json", timeout=180)
    stopped = json.loads(second.stdout)  # --json: where the command ended, one object
    assert stopped["exit"] == 0 and stopped["thread"] == thread_of(second.stderr)
    assert stopped["data"]["key"].startswith("dig-report") and "DIG REPORT" in stopped["report"]
    at_report = run_cli(
        society.root,
        "expedition",
        "confirm",
        thread_of(second.stderr),
        "--anchor",
        GOOD,
        "--json",
        timeout=180,
    )
    assert at_report.returncode == 0, at_report.stdout + at_report.stderr
    result = json.loads(at_report.stdout)
    assert result["exit"] == 0 and result["data"]["final"] is True
    assert f"voice_anchor: {GOOD} — first-person body prose confirmed" in result["report"]


def test_a_confirmed_set_with_no_excerpt_asks_for_an_anchor(society: Society) -> None:
    """Every row dropped: no excerpt is confirmed at all. A Carbon brief then has no voice
    anchor, which is the MISSING prompt with its three ways to supply one (000 §5, §7), not a
    failed step; `confirm THREAD --anchor FILE` still writes the brief."""
    first = run_cli(society.root, *EXPEDITION, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    thread = thread_of(first.stderr)
    rows = sorted(set(re.findall(r"\((row_\d+)\)", first.stdout)))
    assert rows, first.stdout

    empty = run_cli(society.root, "expedition", "confirm", thread, "--drop", *rows, timeout=180)
    said = empty.stdout + empty.stderr
    assert "FAILED" not in said, said
    assert empty.returncode == 2, said
    assert "voice_anchor: MISSING" in empty.stdout
    assert all(way in empty.stdout for way in ("record a note", "point to a file", "dictate live"))
    assert f"bullpen expedition confirm {thread} --anchor FILE" in said

    done = run_cli(society.root, "expedition", "confirm", thread, "--anchor", GOOD, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"voice_anchor: {GOOD} — first-person body prose confirmed" in done.stdout
    (brief,) = (society.root / "briefs").glob("*.md")
    front = yaml.safe_load(brief.read_text().split("---\n")[1])
    assert [s["file"] for s in front["sources"]] == [GOOD]
