"""The local seat's answers: deterministic, offline, and never fabricated."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.backpass.local import LOCAL_ANSWERS, analysis, synthesis
from agents.backpass.quotes import check_items
from agents.backpass.schemas import AnalysisAnswer, SynthesisAnswer
from agents.backpass.traces import render, scan
from tests.backpass.helpers import DEMO


class TestLocalAnalysis:
    def test_marker_sentences_become_items(self) -> None:
        """Questions and TODOs are gaps, 'worked'/'fixed' positive, 'failed'/'error' negative."""
        text = (
            "- The build failed with an error & a $1 in the log.\n"
            "- Pinning the version fixed it.\n"
            "- It did not work.\n"
            "- Why does the hook run twice?\n"
            "- TODO: document the release.\n"
            "- A plain remark.\n"
        )
        answer = AnalysisAnswer.model_validate(analysis({"text": text}))
        assert [i.text for i in answer.positive] == ["Pinning the version fixed it."]
        assert [i.text for i in answer.negative] == [
            "The build failed with an error & a $1 in the log."
        ]
        assert [i.text for i in answer.gaps] == [
            "Why does the hook run twice?",
            "TODO: document the release.",
        ]

    def test_negated_success_is_negative(self) -> None:
        """'never worked' is not a success."""
        answer = analysis({"text": "The old script never worked on this machine."})
        assert answer["negative"] and not answer["positive"]

    def test_every_demo_quote_survives_the_quote_check(self) -> None:
        """On every demo trace, the local seat's quotes are all in the rendered trace."""
        found, _ = scan(DEMO / "traces")
        assert len(found) >= 6
        for trace in found:
            text = render(trace.path, Path(trace.path).read_bytes())
            items = AnalysisAnswer.model_validate(analysis({"text": text})).items()
            assert items, trace.session
            assert check_items(items, text).dropped == [], trace.session

    @settings(max_examples=200, deadline=None)
    @given(
        st.text(alphabet=st.sampled_from(list("ab .?!\n\t&$\\{}worked failed TODO")), max_size=300)
    )
    def test_quotes_are_always_verbatim(self, text: str) -> None:
        """For any text, every quote the local seat returns is found by the quote check."""
        items = AnalysisAnswer.model_validate(analysis({"text": text})).items()
        assert check_items(items, text).dropped == []

    def test_registered_by_step_name(self) -> None:
        """LOCAL_ANSWERS maps the two step names the prompts begin with."""
        assert set(LOCAL_ANSWERS) == {"analysis", "synthesis"}


class TestLocalSynthesis:
    def test_proposes_corroborated_uncovered_lines_only(self) -> None:
        """Lines seen in enough sessions and covered by no bullet become private adds."""
        payload = {
            "min_sessions": 2,
            "cover_threshold": 0.8,
            "bullets": {
                "public": [{"id": "PUB-001", "text": "Run the linter first."}],
                "private": [],
            },
            "ledger": [
                {
                    "id": "L-00000001",
                    "kind": "positive",
                    "text": "Tests first worked.",
                    "sessions": ["a", "b"],
                },
                {"id": "L-00000002", "kind": "gap", "text": "Seen once only.", "sessions": ["a"]},
                {
                    "id": "L-00000003",
                    "kind": "positive",
                    "text": "Run the linter first.",
                    "sessions": ["a", "b"],
                },
                {
                    "id": "L-00000004",
                    "kind": "positive",
                    "text": "Tests first worked!",
                    "sessions": ["c", "d"],
                },
            ],
        }
        answer = SynthesisAnswer.model_validate(synthesis(payload))
        assert [(e.repo, e.op, e.text, e.sources) for e in answer.edits] == [
            ("private", "add", "Tests first worked.", ["L-00000001"])
        ]
        assert "never edits public memory" in answer.summary
