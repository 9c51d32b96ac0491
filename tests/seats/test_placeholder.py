"""What counts as a prompt's placeholder handed back, and what is an answer after all."""

from __future__ import annotations

import pytest

from agents.backpass.schemas import SynthesisAnswer
from agents.seats.placeholder import copied


@pytest.mark.parametrize("value", ["<term>", " <reason> ", "<term_3>", "string", "...", "one line"])
def test_placeholders_and_schema_words_are_copied(value: str) -> None:
    assert copied(value)


@pytest.mark.parametrize("value", ["none", "n/a", "glue cures overnight", "a \\g<0> in a quote"])
def test_answers_are_not(value: str) -> None:
    """'none' is a synthesis with nothing to say (bench/backpass.py's fake says it), and a
    placeholder-like run inside a longer text is that text's own."""
    assert not copied(value)


def test_a_summary_of_none_is_a_summary() -> None:
    assert SynthesisAnswer.model_validate({"edits": [], "summary": "none"}).summary == "none"
    with pytest.raises(ValueError, match="placeholder"):
        SynthesisAnswer.model_validate({"edits": [], "summary": "<summary>"})
