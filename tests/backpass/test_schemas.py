"""The answer schemas the judge validates model answers against."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agents.backpass.schemas import AnalysisAnswer, Edit, SynthesisAnswer, bind_synthesis


class TestAnalysisAnswer:
    def test_all_three_arrays_are_required(self) -> None:
        """An answer without `gaps` is rejected, so the judge retries."""
        with pytest.raises(ValidationError, match="gaps"):
            AnalysisAnswer.model_validate({"positive": [], "negative": []})

    def test_items_carry_their_kind(self) -> None:
        """items() flattens the arrays with ledger kinds, `gaps` becoming `gap`."""
        answer = AnalysisAnswer.model_validate(
            {
                "positive": [{"text": "p", "quote": "q1", "confidence": 0.9}],
                "negative": [],
                "gaps": [{"text": "g", "quote": ""}],
            }
        )
        assert answer.items() == [
            {"kind": "positive", "text": "p", "quote": "q1"},
            {"kind": "gap", "text": "g", "quote": ""},
        ]

    def test_blank_text_is_rejected(self) -> None:
        """An item must say something."""
        with pytest.raises(ValidationError, match="blank"):
            AnalysisAnswer.model_validate(
                {"positive": [{"text": "  ", "quote": "x"}], "negative": [], "gaps": []}
            )


class TestSynthesisAnswer:
    def test_bullet_prefix_must_match_repo(self) -> None:
        """A public edit cannot name a private bullet."""
        with pytest.raises(ValidationError, match="not in the public memory"):
            Edit.model_validate({"repo": "public", "op": "remove", "bullet": "PRV-001"})

    def test_replace_needs_bullet_and_text(self) -> None:
        """replace without a bullet, or add without text, is rejected."""
        with pytest.raises(ValidationError, match="needs the bullet"):
            Edit.model_validate({"repo": "private", "op": "replace", "text": "x"})
        with pytest.raises(ValidationError, match="needs the bullet's text"):
            Edit.model_validate({"repo": "private", "op": "add"})

    def test_text_is_one_line_without_marker(self) -> None:
        """A bullet's text is folded to one line and a leading '- ' is dropped."""
        edit = Edit.model_validate({"repo": "private", "op": "add", "text": "- two\n lines"})
        assert edit.text == "two lines"

    def test_unknown_bullet_is_rejected_when_bound(self) -> None:
        """A bound schema names the bullets that exist when the answer invents one."""
        schema = bind_synthesis(["PUB-001", "PRV-001"], ["L-0123abcd"])
        with pytest.raises(ValidationError, match=r"PUB-009 does not exist.*PUB-001"):
            schema.model_validate(
                {"edits": [{"repo": "public", "op": "remove", "bullet": "PUB-009"}], "summary": ""}
            )
        with pytest.raises(ValidationError, match="L-ffffffff are not open ledger lines"):
            schema.model_validate(
                {
                    "edits": [
                        {"repo": "private", "op": "add", "text": "t", "sources": ["L-ffffffff"]}
                    ]
                }
            )
        assert schema.__name__ == "SynthesisAnswer"
        assert SynthesisAnswer.known_bullets is None  # binding never leaks into the base

    def test_one_change_per_bullet(self) -> None:
        """Two edits of the same bullet, or an add after a removed one, are rejected."""
        twice = [
            {"repo": "private", "op": "replace", "bullet": "PRV-001", "text": "a"},
            {"repo": "private", "op": "remove", "bullet": "PRV-001"},
        ]
        with pytest.raises(ValidationError, match="changed twice"):
            SynthesisAnswer.model_validate({"edits": twice})
        after_removed = [
            {"repo": "private", "op": "remove", "bullet": "PRV-001"},
            {"repo": "private", "op": "add", "bullet": "PRV-001", "text": "a"},
        ]
        with pytest.raises(ValidationError, match="which another edit removes"):
            SynthesisAnswer.model_validate({"edits": after_removed})

    def test_unknown_keys_are_rejected(self) -> None:
        """A misspelt key in an edit is an error the model is told about."""
        with pytest.raises(ValidationError, match="extra"):
            SynthesisAnswer.model_validate(
                {"edits": [{"repo": "private", "op": "add", "txt": "a", "text": "b"}]}
            )


def test_with_no_bullet_yet_the_sent_schema_allows_only_an_add_after_none() -> None:
    """A memory with no bullet can only be added to: the schema a server holds the model to
    says so, so the prompt's "PUB-nnn" cannot be copied as an id, nor a remove be made of
    nothing (SmolLM2 did both in the eval's synthesis step cases)."""
    from agents.seats.answerschema import answer_schema

    empty = answer_schema(bind_synthesis([], ["L-1a2b3c4d"])).schema["$defs"]["Edit"]
    assert empty["properties"]["op"] == {"type": "string", "enum": ["add"]}
    assert empty["properties"]["bullet"] == {"type": "null"}
    some = answer_schema(bind_synthesis(["PUB-001"], ["L-1a2b3c4d"])).schema["$defs"]["Edit"]
    assert "remove" in some["properties"]["op"]["enum"]
    assert {"type": "string", "enum": ["PUB-001"]} in some["properties"]["bullet"]["anyOf"]
