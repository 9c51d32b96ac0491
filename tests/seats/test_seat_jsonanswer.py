"""An answer's text: the one Markdown fence forgiven, strict JSON, the schema."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from agents.seats import AnswerRejected, parse_answer, strip_fence, validate_answer


class Terms(BaseModel):
    terms: list[str] = Field(min_length=2)


class TestStripFence:
    @pytest.mark.parametrize(
        "text",
        [
            '{"a": 1}',
            '```json\n{"a": 1}\n```',
            '```\n{"a": 1}\n```',
            '```JSON\n{"a": 1}```',
            '  \n\n```json\n{"a": 1}\n```\n\n  ',
            'Here is the JSON:\n```json\n{"a": 1}\n```',
            'Sure! ```json\n{"a": 1}\n```',
            '```{"a": 1}```',
        ],
    )
    def test_fenced_forms_yield_the_body(self, text: str) -> None:
        """A fence around the whole answer, with a tag, whitespace or one short preamble, goes."""
        assert strip_fence(text) == '{"a": 1}'

    def test_a_multiline_body_keeps_its_lines(self) -> None:
        """The body between the fences comes back whole."""
        assert strip_fence('```json\n{\n  "a": [1,\n 2]\n}\n```') == '{\n  "a": [1,\n 2]\n}'

    @pytest.mark.parametrize(
        "text",
        [
            'Line one.\nLine two.\n```json\n{"a": 1}\n```',
            '```json\n{"a": 1}\n```\nHope this helps!',
            '```json\n{"a": 1}\n```\n```json\n{"b": 2}\n```',
            "x" * 300 + '\n```json\n{"a": 1}\n```',
        ],
    )
    def test_more_than_an_accidental_fence_is_left_alone(self, text: str) -> None:
        """Prose after the fence, a long preamble or two fences are returned unchanged."""
        assert strip_fence(text) == text.strip()


class TestParseAnswer:
    def test_plain_json(self) -> None:
        """An answer that is JSON is parsed as it is."""
        assert parse_answer(' {"a": [1, 2]} \n') == {"a": [1, 2]}

    def test_fenced_json(self) -> None:
        """A fenced answer is parsed from inside the fence."""
        assert parse_answer('Here you go:\n```json\n{"a": 1}\n```') == {"a": 1}

    def test_backticks_inside_a_json_string_are_content(self) -> None:
        """Backticks inside a JSON string do not count as a fence."""
        assert parse_answer('{"code": "```x```"}') == {"code": "```x```"}

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("", "empty"),
            ("   \n", "empty"),
            ("Sure! The terms are: a, b, c.", "not valid JSON"),
            ('{"a": NaN}', "NaN"),
            ('{"a": 1, "a": 2}', "duplicate key"),
            ("{'a': 1}", "not valid JSON"),
            ('```json\n{"a": 1,}\n```', "not valid JSON"),
        ],
    )
    def test_what_is_not_strict_json_is_rejected(self, text: str, reason: str) -> None:
        """Empty text, prose, NaN, duplicate keys and broken JSON are rejected with a reason."""
        with pytest.raises(AnswerRejected, match=reason):
            parse_answer(text)

    def test_the_error_quotes_how_the_answer_began(self) -> None:
        """A rejection shows the start of the answer, so the model sees what it sent."""
        with pytest.raises(AnswerRejected, match="it began 'Sure! The terms"):
            parse_answer("Sure! The terms are: a, b, c.")


class TestValidateAnswer:
    def test_a_matching_answer_becomes_the_model(self) -> None:
        """Valid JSON matching the schema is returned as the schema's instance."""
        assert validate_answer('{"terms": ["a", "b"]}', Terms) == Terms(terms=["a", "b"])

    def test_a_mismatch_names_the_field(self) -> None:
        """JSON of the wrong shape is rejected naming the schema and the field."""
        with pytest.raises(AnswerRejected, match=r"Terms schema: terms: List should have at least"):
            validate_answer('{"terms": ["a"]}', Terms)

    def test_a_list_is_not_an_object(self) -> None:
        """A JSON list where an object is expected is a schema mismatch."""
        with pytest.raises(AnswerRejected, match="does not match the Terms schema"):
            validate_answer('["a", "b"]', Terms)
