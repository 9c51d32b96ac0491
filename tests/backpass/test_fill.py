"""Literal template filling: nothing in a value is ever interpreted."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.backpass.fill import TemplateError, fill, placeholders

NASTY = "a & b $1 $& \\1 \\g<0> \\0 {} {0} {trace} {{trace}} {{session}} ${trace} %s \\n"


class TestFill:
    def test_special_characters_stay(self) -> None:
        """`&`, `$1`, `\\1`, `\\g<0>`, `{}` and placeholder names in a value come out exactly."""
        out = fill("step: analysis\n<{{trace}}>", {"trace": NASTY})
        assert out == f"step: analysis\n<{NASTY}>"

    def test_one_pass_never_rescans_inserted_text(self) -> None:
        """Text inserted for one placeholder is not scanned for another."""
        out = fill("{{trace}}|{{session}}", {"trace": "{{session}}", "session": "{{trace}}"})
        assert out == "{{session}}|{{trace}}"

    def test_every_occurrence_is_filled(self) -> None:
        """A placeholder used twice is filled twice."""
        assert fill("{{a}}-{{a}}", {"a": "&"}) == "&-&"

    def test_other_braces_in_the_template_stay(self) -> None:
        """JSON examples, `{}` and `{ x }` in a template are not placeholders."""
        template = 'x {"positive": [{"text": "..."}]} {} { a } {{trace}}'
        assert fill(template, {"trace": "T"}) == 'x {"positive": [{"text": "..."}]} {} { a } T'

    def test_unknown_placeholder_is_left_as_written(self) -> None:
        """Literal substitution: a marker nobody fills stays in the text, exactly."""
        assert fill("{{trac}} {{trace}}", {"trace": "x"}) == "{{trac}} x"

    def test_missing_required_placeholder_is_an_error(self) -> None:
        """A template without a required marker would not be self-contained."""
        with pytest.raises(TemplateError, match=r"lacks .*trace"):
            fill("step: analysis\nno trace here", {"trace": "x"}, required=["trace"])

    def test_placeholders_in_order(self) -> None:
        """placeholders() lists each name once, in order of first use."""
        assert placeholders("{{b}} {{a}} {{b}}") == ["b", "a"]

    @given(st.text(), st.text())
    def test_any_values_are_inserted_verbatim(self, trace: str, session: str) -> None:
        """For any text at all, the filled template is exactly the concatenation."""
        out = fill("S:{{session}}\nT:{{trace}}\n", {"trace": trace, "session": session})
        assert out == f"S:{session}\nT:{trace}\n"

    def test_a_naive_re_sub_would_have_failed(self) -> None:
        """The defect this module prevents: a string replacement expands `\\1` and `\\g<0>`."""
        naive = re.sub(r"\{\{(trace)\}\}", NASTY, "{{trace}}")
        assert naive != NASTY
        assert fill("{{trace}}", {"trace": NASTY}) == NASTY
