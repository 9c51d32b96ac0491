"""The default prompt templates and how they are filled."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.backpass.ledger import open_entries, parse
from agents.backpass.memory import bullets
from agents.backpass.prompts import (
    analysis_request,
    load_template,
    synthesis_request,
    unknown_placeholders,
)
from room.errors import StepFailed
from tests.backpass.helpers import PROMPTS

TRACE = "user: use sed 's/a/&&/' and $1 and \\1 and {} and {{trace}} and {{session}} and {{date}}\n"


class TestTemplates:
    def test_defaults_load_and_begin_with_their_step(self) -> None:
        """Both default templates exist and name their step on the first line."""
        for step in ("analysis", "synthesis"):
            text = load_template(PROMPTS / f"{step}-prompt.md", step)
            assert text.startswith(f"step: {step}\n")

    def test_a_template_without_its_step_line_gets_one_first(self, tmp_path: Path) -> None:
        """A custom template that lacks `step: analysis` is given it as the prompt's first line."""
        path = tmp_path / "p.md"
        path.write_text("Analyse this: {{trace}}\n")
        template = load_template(path, "analysis")
        assert template == "step: analysis\n\nAnalyse this: {{trace}}\n"
        request = analysis_request(template, session="s", trace="T", date="d", path="/t")
        assert request.prompt.splitlines()[0] == "step: analysis"

    def test_leading_blank_lines_and_comments_before_the_step_line(self, tmp_path: Path) -> None:
        """Blank lines and HTML comments above `step: synthesis` are tolerated; the step goes first."""
        path = tmp_path / "p.md"
        path.write_text(
            "\n<!-- house prompt,\n v2 -->\n\n  step: synthesis  \n"
            "{{ledger}} {{public_bullets}} {{private_bullets}}\n"
        )
        template = load_template(path, "synthesis")
        assert template.splitlines()[:3] == ["step: synthesis", "<!-- house prompt,", " v2 -->"]
        assert template.count("step: synthesis") == 1

    def test_another_step_line_is_refused(self, tmp_path: Path) -> None:
        """An analysis template that says `step: synthesis` is the wrong file: fail with the key."""
        path = tmp_path / "p.md"
        path.write_text("step: synthesis\n{{trace}}\n")
        with pytest.raises(StepFailed, match=r"step: synthesis.*\[backpass\] analysis_prompt"):
            load_template(path, "analysis")

    def test_missing_required_placeholder_names_it_and_the_fix(self, tmp_path: Path) -> None:
        """A template without `{{trace}}` fails at load time, saying which marker and where."""
        path = tmp_path / "p.md"
        path.write_text("step: analysis\nAnalyse the session {{session}}.\n")
        with pytest.raises(StepFailed) as caught:
            load_template(path, "analysis")
        message = caught.value.message
        assert "{{trace}}" in message and str(path) in message and "Add the marker" in message

    def test_unknown_placeholder_reaches_the_model_as_written(self, tmp_path: Path) -> None:
        """`{{sesion}}` is no placeholder: it is left verbatim, and the known ones are filled."""
        path = tmp_path / "p.md"
        path.write_text("step: analysis\n{{sesion}} / {{session}}\n{{trace}}\n")
        template = load_template(path, "analysis")
        assert unknown_placeholders(template, "analysis") == ["sesion"]
        request = analysis_request(template, session="s & $1", trace="T", date="d", path="/t")
        assert request.prompt == "step: analysis\n{{sesion}} / s & $1\nT\n"

    def test_missing_template_names_the_config_key(self, tmp_path: Path) -> None:
        """A missing template says which [backpass] key points at it."""
        with pytest.raises(StepFailed, match=r"\[backpass\] synthesis_prompt"):
            load_template(tmp_path / "none.md", "synthesis")


class TestRequests:
    def test_analysis_prompt_holds_the_trace_literally(self) -> None:
        """The filled analysis prompt contains the trace byte for byte, once."""
        template = load_template(PROMPTS / "analysis-prompt.md", "analysis")
        request = analysis_request(
            template, session="s & $1.md", trace=TRACE, date="2026-10-20", path="/t"
        )
        assert request.prompt.count(TRACE) == 1
        assert "Session: s & $1.md\n" in request.prompt
        assert request.prompt.startswith("step: analysis\n")
        assert request.payload["text"] == TRACE

    def test_synthesis_prompt_lists_bullets_and_ledger_ids(self) -> None:
        """The synthesis prompt names every bullet and open ledger line by id."""
        template = load_template(PROMPTS / "synthesis-prompt.md", "synthesis")
        entries = open_entries(parse("- [ ] gap: why & $1? ⟨2026-10-19 a.md⟩ ⟨2026-10-20 b.md⟩\n"))
        request = synthesis_request(
            template,
            date="2026-10-20",
            entries=entries,
            public=bullets("- pub {{ledger}}\n", "PUB"),
            private=bullets("- prv \\1\n", "PRV"),
            min_sessions=2,
            cover_threshold=0.8,
        )
        assert f"{entries[0].id}  [gap] why & $1?  (2 sessions)" in request.prompt
        assert "PUB-001  pub {{ledger}}" in request.prompt
        assert "PRV-001  prv \\1" in request.prompt
        assert "at least 2 sessions" in request.prompt
        assert request.payload["ledger"][0]["sessions"] == ["a.md", "b.md"]
