"""Excerpts (step 5): verbatim body prose, never the digest layer.

Many corpus files carry their own digest: the frontmatter summary, or a
body that opens by retelling it ("Avery recounts how ..."). An excerpt cut
there would hand the brief a summary dressed as a quote, and a voice anchor
that is not the operator's voice. So an excerpt is taken only below the
frontmatter fence, skips a slice whose opening is too like either summary,
skips paragraphs of third-person narration of the operator, and is whole
paragraphs of 150-500 words. A lived file whose whole body is under the
floor (a short voice log) is kept whole instead, and flagged
`[EXCERPT_SHORT:file]`: it is still the operator's own prose, and may still
anchor the voice; the digest and narration gates apply to it all the same.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from difflib import SequenceMatcher
from typing import Any

from agents.expedition.words import fold

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_RULE = re.compile(r"^\s*(?:[-*_]\s*){3,}$")
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'’”)\]]*\s+")
_FIRST_PERSON = re.compile(r"\bI\b|\b[Mm]y\b|\b[Ww]e\b")


def paragraphs(body: str) -> list[str]:
    """The body's prose paragraphs, verbatim; headings, rules and comments are not prose."""
    kept = []
    for block in _PARAGRAPH_BREAK.split(body.replace("\r\n", "\n")):
        text = block.strip("\n").rstrip()
        stripped = text.strip()
        if not stripped or stripped.startswith(("#", "<!--", "```")) or _RULE.match(stripped):
            continue
        kept.append(text.strip())
    return kept


def words(text: str) -> int:
    return len(text.split())


def similarity(a: str, b: str) -> float:
    """0..1, how alike two texts are once case and spacing are folded."""
    a, b = fold(a), fold(b)
    if not a or not b:
        return 0.0
    return SequenceMatcher(None, a, b, autojunk=False).ratio()


def is_digest(text: str, summaries: Sequence[str], *, threshold: float, prefix: int) -> bool:
    """Whether a slice's opening is the digest layer: too like a summary of the file.

    The opening (its first `prefix` characters, or as many as a shorter
    summary has) is compared with the summary's opening and with the whole
    summary; any comparison over the threshold is enough.
    """
    opening = text[:prefix]
    for summary in summaries:
        if not summary.strip():
            continue
        short = text[: min(prefix, len(summary))]
        best = max(
            similarity(opening, summary[:prefix]),
            similarity(opening, summary),
            similarity(short, summary[:prefix]),
        )
        if best > threshold:
            return True
    return False


def tell_pattern(names: Sequence[str], verbs: Sequence[str]) -> re.Pattern[str]:
    """The third-person digest tell, e.g. `^\\s*(Avery)\\s+(recounts|reflects|...)`."""
    name_part = "|".join(r"\s+".join(map(re.escape, name.split())) for name in names if name)
    verb_part = "|".join(map(re.escape, verbs))
    return re.compile(rf"^\s*(?:{name_part})\s+(?:{verb_part})\b", re.IGNORECASE | re.MULTILINE)


# Words that open a sentence in a name's place without naming anyone.
_NOT_NAMES = frozenset(
    {
        "he", "she", "they", "it", "this", "that", "these", "those", "the", "one",
        "someone", "everyone", "nobody", "who", "which", "here", "there", "then", "so",
        "and", "but", "a", "an", "each", "every", "our", "his", "her", "their",
    }
)  # fmt: skip


def unlisted_tellers(text: str, names: Sequence[str], verbs: Sequence[str]) -> list[str]:
    """Names that open a line of digest narration ("Jordan reflects on ...") but are not
    among `names` (the operator's, as the corpus writes them), in order, each once.

    The tell gate only knows the names it was given; a line narrating someone
    by another name may be the operator under a name the list lacks, or
    somebody else's story. Either way it is not to be taken as lived
    first-person prose without a person looking: the caller flags it.
    """
    verb_part = "|".join(map(re.escape, verbs))
    pattern = re.compile(
        rf"^\s*(?P<name>[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*){{0,2}})\s+(?:{verb_part})\b",
        re.MULTILINE,
    )
    listed = {" ".join(name.lower().split()) for name in names}
    found: list[str] = []
    for match in pattern.finditer(text):
        name = " ".join(match["name"].split())
        if name.lower() in listed or name.split()[0].lower() in _NOT_NAMES or name in found:
            continue
        found.append(name)
    return found


def has_tell(text: str, tell: re.Pattern[str]) -> bool:
    return bool(tell.search(text))


def first_person_paragraphs(texts: Sequence[str]) -> int:
    """How many paragraphs speak as I, my or we."""
    return sum(1 for text in texts if _FIRST_PERSON.search(text))


def _whole_sentences(paragraph: str, max_words: int) -> str:
    """The longest run of whole sentences from the paragraph's start within max_words."""
    kept: list[str] = []
    count = 0
    for sentence in _SENTENCE_END.split(paragraph):
        n = words(sentence)
        if count + n > max_words:
            break
        kept.append(sentence)
        count += n
    return " ".join(kept)


@dataclass(frozen=True)
class Excerpt:
    text: str
    paragraphs: list[str]
    words: int
    start: int  # index of the first prose paragraph used


@dataclass
class SliceResult:
    excerpt: Excerpt | None
    rejected_digest: int = 0
    rejected_tell: int = 0
    short: bool = False  # the whole body, under the word floor, kept as it is

    @property
    def rejected(self) -> bool:
        return bool(self.rejected_digest or self.rejected_tell)


def _grow(paras: Sequence[str], start: int, tell: re.Pattern[str], lo: int, hi: int) -> list[str]:
    chosen: list[str] = []
    count = 0
    for paragraph in paras[start:]:
        if has_tell(paragraph, tell):
            break
        n = words(paragraph)
        if count + n > hi:
            if not chosen:
                cut = _whole_sentences(paragraph, hi)
                chosen = [cut] if cut else []
            break
        chosen.append(paragraph)
        count += n
        if count >= lo and len(chosen) >= 2:
            break
    return chosen


def slice_excerpt(
    body: str,
    summaries: Sequence[str],
    tell: re.Pattern[str],
    *,
    min_words: int,
    max_words: int,
    threshold: float,
    prefix: int,
    keep_short: bool = False,
) -> SliceResult:
    """The first slice of body prose that passes every gate, moving deeper on each rejection.

    `keep_short`: a body whose prose is under `min_words` in all is not
    refused for its length; its first slice that passes the gates (all of it
    from there, since it never reaches the floor) is the excerpt, marked short.
    """
    paras = paragraphs(body)
    whole_is_short = keep_short and sum(map(words, paras)) < min_words
    result = SliceResult(None)
    for start in range(len(paras)):
        if has_tell(paras[start], tell):
            result.rejected_tell += 1
            continue
        chosen = _grow(paras, start, tell, min_words, max_words)
        text = "\n\n".join(chosen)
        if is_digest(text, summaries, threshold=threshold, prefix=prefix):
            result.rejected_digest += 1
            continue
        count = words(text)
        if min_words <= count <= max_words or (whole_is_short and count):
            result.excerpt = Excerpt(text, chosen, count, start)
            result.short = count < min_words
            return result
    return result


def flag_for(file: str, result: SliceResult) -> str | None:
    """The flag a file earns: none, short (kept whole), or why no slice of it qualified."""
    if result.excerpt is not None:
        return f"[EXCERPT_SHORT:{file}]" if result.short else None
    if result.rejected:
        return f"[EXCERPT_DIGEST_REJECTED:{file}]"
    return f"[EXCERPT_TOO_SHORT:{file}]"


def voice_paragraphs(role: str, text: str, tell: re.Pattern[str]) -> int:
    """First-person paragraphs of a lived excerpt with no third-person tell; else 0."""
    if role.strip().lower() != "lived" or has_tell(text, tell):
        return 0
    return first_person_paragraphs(paragraphs(text))


def as_data(excerpt: Excerpt) -> dict[str, Any]:
    data = asdict(excerpt)
    data.pop("paragraphs")
    data["paragraph_count"] = len(excerpt.paragraphs)
    return data
