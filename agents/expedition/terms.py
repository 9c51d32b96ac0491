"""The term fan-out gate (step 1).

A model asked for search terms tends to hand back the keyword in costume:
"deep patience", "patient work", "the patience of wood". Such terms find
only what the keyword already finds. So at least six of the 10-12 terms
must share no whole word with the keyword, the title and the blaze's named
phrases. The gate is code; the model gets one more try with its failing
terms shown, and then the run proceeds with what it has, flagged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from agents.expedition.words import content_words, word_set
from agents.seats.placeholder import copied, plain_text

MIN_TERMS = 10
MAX_TERMS = 12
MIN_FANOUT = 6
WEAK_FLAG = "[TERM_FANOUT_WEAK]"


TERM_CHARS = 32  # three plain words


class TermsAnswer(BaseModel):
    """The termgen seat's answer; the count and fan-out are judged by the gate, not here."""

    # This docstring is the sent schema's description, so it is part of every termgen
    # request: reworded, a recorded request no longer matches (tests/golden replays one).
    # Subclasses made by `terms_schema` offer a fixed set of words to choose from.
    model_config = ConfigDict(extra="ignore")
    choices: ClassVar[tuple[str, ...]] = ()

    terms: list[str] = Field(max_length=100)

    @classmethod
    def sent_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        """What a schema-constraining server is sent: ten to twelve short terms of plain
        words, never a placeholder or a key name (the gate judges the rest); with `choices`,
        each term one of them (as many as there are, when they are fewer than ten)."""
        terms = schema["properties"]["terms"]
        if cls.choices:
            terms["items"] = {"type": "string", "enum": list(cls.choices)}
            count = len(cls.choices)
            terms["minItems"], terms["maxItems"] = min(MIN_TERMS, count), min(MAX_TERMS, count)
        else:
            terms["items"] = plain_text(TERM_CHARS)
            terms["minItems"], terms["maxItems"] = MIN_TERMS, MAX_TERMS
        return schema


def terms_schema(choices: Iterable[str]) -> type[TermsAnswer]:
    """A TermsAnswer whose sent schema holds every term to one of `choices` (the retry's:
    the knowledge base's own words, agents/expedition/vocabulary.py); no choices, the
    plain TermsAnswer. A choice longer than a term may be is left out, so the worst answer
    still fits the step's max_tokens."""
    kept = tuple(word for word in distinct(choices) if len(word) <= TERM_CHARS)
    if not kept:
        return TermsAnswer
    return type("TermsAnswerFromChoices", (TermsAnswer,), {"choices": kept, "__module__": __name__})


def anchor_words(keyword: str, title: str, phrases: Iterable[str] = ()) -> set[str]:
    """The words a fan-out term must avoid: keyword, title and blaze phrases."""
    return word_set([keyword, title, *phrases])


def shares_word(term: str, anchors: set[str]) -> bool:
    return any(word in anchors for word in content_words(term))


def distinct(terms: Iterable[str]) -> list[str]:
    """Terms stripped, blanks dropped, repeats (ignoring case and spacing) removed."""
    seen: set[str] = set()
    kept: list[str] = []
    for term in terms:
        cleaned = " ".join(str(term).split())
        folded = cleaned.lower()
        if cleaned and folded not in seen:
            seen.add(folded)
            kept.append(cleaned)
    return kept


@dataclass(frozen=True)
class TermCheck:
    """What the gate found in one answer."""

    terms: list[str]
    fanout: list[str]  # terms sharing no word with the anchors
    failing: list[str]  # terms that do share one
    echoed: list[str] = field(default_factory=list)  # the prompt's own words, dropped

    @property
    def count_ok(self) -> bool:
        return MIN_TERMS <= len(self.terms) <= MAX_TERMS

    @property
    def fanout_ok(self) -> bool:
        return len(self.fanout) >= MIN_FANOUT

    @property
    def ok(self) -> bool:
        return self.count_ok and self.fanout_ok

    def missed(self) -> list[str]:
        """The gates this answer missed, as a run's report counts them (agents/seats/tally.py)."""
        gates = []
        if not self.count_ok:
            gates.append(f"{MIN_TERMS} to {MAX_TERMS} terms")
        if not self.fanout_ok:
            gates.append(f"{MIN_FANOUT} terms fan out")
        return gates

    def problems(self) -> str:
        """What to tell the model on its second try."""
        said: list[str] = []
        if not self.count_ok:
            said.append(
                f"You returned {len(self.terms)} distinct terms; return between "
                f"{MIN_TERMS} and {MAX_TERMS}."
            )
        if not self.fanout_ok:
            line = (
                f"Only {len(self.fanout)} terms share no word with the keyword, title or "
                f"blaze phrases; at least {MIN_FANOUT} must."
            )
            if self.failing:
                line += " These share one: " + "; ".join(self.failing) + "."
            said.append(line)
        if self.echoed:
            said.append(
                "These are words of the prompt, not search terms, and were dropped: "
                + "; ".join(self.echoed)
                + "."
            )
        return " ".join(said)


def check_terms(
    terms: Iterable[str], anchors: set[str], prompt_words: Iterable[str] = ()
) -> TermCheck:
    """The gate on one answer; a term that hands back the prompt's placeholder, a schema word
    or one of `prompt_words` (the inputs' key names), or has only small words, is dropped
    and named, never searched
    (underscores in any other term are read as the spaces a model meant)."""
    names = list(prompt_words)
    given = distinct(str(t) for t in terms)
    echoed = [t for t in given if copied(t, names) or not content_words(t)]
    kept = distinct(t.replace("_", " ") for t in given if t not in echoed)
    fanout = [t for t in kept if not shares_word(t, anchors)]
    failing = [t for t in kept if shares_word(t, anchors)]
    return TermCheck(kept, fanout, failing, echoed)


def _capped(check: TermCheck) -> list[str]:
    """At most MAX_TERMS, dropping keyword-sharing terms from the end first."""
    terms = list(check.terms)
    failing = set(check.failing)
    while len(terms) > MAX_TERMS:
        drop = next((t for t in reversed(terms) if t in failing), terms[-1])
        terms.remove(drop)
    return terms


def settle(first: TermCheck, retry: TermCheck | None) -> tuple[list[str], list[str]]:
    """The terms the run proceeds with, and its flags.

    A passing first answer stands. Otherwise the retry is used unless the
    first answer had more fan-out (or as much, and more terms); either way a
    result still failing the gate is flagged, never padded.
    """
    if first.ok or retry is None:
        chosen = first
    else:
        better = (len(first.fanout), len(first.terms)) > (len(retry.fanout), len(retry.terms))
        chosen = first if better else retry
    terms = _capped(chosen)
    fanout = set(chosen.fanout)
    weak = not MIN_TERMS <= len(terms) <= MAX_TERMS or sum(t in fanout for t in terms) < MIN_FANOUT
    return terms, [WEAK_FLAG] if weak else []
