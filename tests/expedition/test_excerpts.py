from __future__ import annotations

import re

from agents.expedition.excerpts import (
    flag_for,
    is_digest,
    paragraphs,
    slice_excerpt,
    tell_pattern,
    voice_paragraphs,
    words,
)
from tests.expedition.texts import paragraph

TELL = tell_pattern(["Avery", "Avery Quinn"], ["recounts", "reflects", "records", "describes"])
SUMMARY = (
    "Repointing the garden wall in lime mortar: each coat left to cure slowly under damp hessian "
    "for days; the spring I rushed it, frost cracked the joints."
)


def cut(body: str, summaries: list[str] | None = None, tell: re.Pattern[str] = TELL):
    return slice_excerpt(
        body, summaries or [SUMMARY], tell, min_words=150, max_words=500, threshold=0.8, prefix=200
    )


class TestDigestGate:
    def test_a_body_opening_with_its_summary_is_rejected_and_resliced(self) -> None:
        """When the first paragraph repeats the summary, the excerpt starts deeper."""
        body = "\n\n".join([SUMMARY, paragraph(100), paragraph(90)])
        result = cut(body)
        assert result.excerpt is not None and result.excerpt.start == 1
        assert result.rejected_digest == 1 and not result.excerpt.text.startswith("Repointing")

    def test_near_copies_count_as_digest(self) -> None:
        """An opening that is the summary with small edits is still over the 0.8 threshold."""
        edited = SUMMARY.replace("garden wall", "old wall").replace("days", "a week")
        assert is_digest(edited, [SUMMARY], threshold=0.8, prefix=200)
        assert not is_digest(paragraph(60), [SUMMARY], threshold=0.8, prefix=200)

    def test_either_summary_can_reject(self) -> None:
        """The index's summary cell rejects a slice as well as the file's own summary."""
        index_cell = "A quite different index summary about varnish, thin coats and dust."
        body = "\n\n".join([index_cell, paragraph(100), paragraph(90)])
        assert cut(body, ["unrelated own summary", index_cell]).rejected_digest == 1

    def test_nothing_but_digest_is_flagged(self) -> None:
        """A body that is all summary and narration yields no excerpt and the digest flag."""
        body = "\n\n".join(
            [SUMMARY, "Avery describes the wall. " + paragraph(100, first_person=False)]
        )
        result = cut(body)
        assert result.excerpt is None
        assert flag_for("digests/wall.md", result) == "[EXCERPT_DIGEST_REJECTED:digests/wall.md]"


class TestThirdPersonTell:
    def test_narration_of_the_operator_is_skipped(self) -> None:
        """Paragraphs opening 'Avery recounts' are not excerpted; prose after them is."""
        body = "\n\n".join(
            [
                "Avery recounts the summer. " + paragraph(80),
                "  avery reflects on it. " + paragraph(40),
                paragraph(100),
                paragraph(90),
            ]
        )
        result = cut(body)
        assert (
            result.rejected_tell == 2 and result.excerpt is not None and result.excerpt.start == 2
        )

    def test_names_come_from_configuration(self) -> None:
        """Only configured names are tells: another name's narration is not rejected."""
        assert TELL.search("Avery Quinn describes the kiln")
        assert not TELL.search("Jordan describes the kiln")
        other = tell_pattern(["Jordan"], ["describes"])
        assert other.search("Jordan describes the kiln") and not other.search("Avery describes it")

    def test_a_tell_inside_the_slice_stops_it(self) -> None:
        """A narration paragraph is never swallowed into the middle of an excerpt."""
        body = "\n\n".join(
            [
                paragraph(60),
                "Avery records the rest. " + paragraph(200),
                paragraph(100),
                paragraph(90),
            ]
        )
        result = cut(body)
        assert result.excerpt is not None and "Avery records" not in result.excerpt.text


class TestLength:
    def test_whole_paragraphs_between_150_and_500_words(self) -> None:
        """The excerpt is whole paragraphs, at least 150 words, at most 500."""
        paras = [paragraph(n) for n in (80, 90, 300, 60)]
        result = cut("# Heading\n\n" + "\n\n".join(paras))
        assert result.excerpt is not None
        assert result.excerpt.paragraphs == paras[:2]
        assert 150 <= result.excerpt.words <= 500
        assert all(p in paras for p in paragraphs(result.excerpt.text))

    def test_too_short_body_is_flagged_as_short(self) -> None:
        """Under 150 words of clean prose yields no excerpt and the too-short flag."""
        result = cut(paragraph(60) + "\n\n" + paragraph(50))
        assert result.excerpt is None and flag_for("a.md", result) == "[EXCERPT_TOO_SHORT:a.md]"

    def test_one_huge_paragraph_is_cut_at_a_sentence_end(self) -> None:
        """A single 800-word paragraph yields whole sentences up to 500 words, never mid-sentence."""
        result = cut(paragraph(800))
        assert result.excerpt is not None
        assert 150 <= result.excerpt.words <= 500 and result.excerpt.text.endswith(".")

    def test_headings_and_rules_are_not_prose(self) -> None:
        """Headings, rules and comments are left out of the paragraphs."""
        body = "# Title\n\nOne para.\n\n---\n\n<!-- note -->\n\nTwo para.\n"
        assert paragraphs(body) == ["One para.", "Two para."]
        assert words("one two  three\nfour") == 4


class TestVoice:
    def test_lived_first_person_counts_paragraphs(self) -> None:
        """A lived excerpt counts its paragraphs that say I, my or we."""
        text = "\n\n".join(
            [paragraph(50), paragraph(50, first_person=False), "We sanded it. My hands ached."]
        )
        assert voice_paragraphs("lived", text, TELL) == 2

    def test_guidance_and_narration_are_never_voice(self) -> None:
        """A guidance file, or a lived excerpt with a third-person tell, has no voice."""
        text = "\n\n".join([paragraph(50), paragraph(50)])
        assert voice_paragraphs("guidance", text, TELL) == 0
        assert voice_paragraphs("lived", text + "\n\nAvery reflects on it.", TELL) == 0
