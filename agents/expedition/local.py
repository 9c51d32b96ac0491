"""The built-in local seat's answers: offline, deterministic, and honest.

With no model server, a run still does real work: terms come from the
corpus's own vocabulary around the keyword, scores from word overlap,
deep cuts from strong rows that never name the keyword. Each function
returns exactly the JSON object a model would, and the same gates judge it;
when the corpus gives too little, the answer is short and the gate flags it
rather than the seat inventing anything.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from agents.expedition.kb import IndexRow, load_index
from agents.expedition.scoring import MAX_WHY_WORDS
from agents.expedition.scotoma import MAX_DEEP_CUTS
from agents.expedition.stems import StemIndex
from agents.expedition.terms import MAX_TERMS, MIN_FANOUT, anchor_words, distinct
from agents.expedition.words import STOPWORDS, content_words, fold, names_any, stem

FANOUT_TARGET = 8  # aim above the gate's six, leaving room for keyword-side terms
MIN_TERM_LETTERS = 4

LocalAnswer = Callable[[dict[str, Any]], dict[str, Any]]


_PHRASE_BREAK = re.compile(r"[;,.:!?()\[\]\"“”]+")


def _row_text(row: IndexRow) -> str:
    """What retrieval matches terms against, so every term offered can match something."""
    return f"{row.summary}\n{row.keypoints}"


def _lowercase_words(texts: Iterable[str]) -> set[str]:
    """Words the corpus writes in lowercase somewhere; the rest are names, not terms."""
    return {w for text in texts for w in re.findall(r"\b[a-z]+\b", text)}


def _candidate_terms(text: str, common: set[str]) -> Counter[str]:
    """Content words and adjacent pairs within one phrase, with how often each occurs."""
    found: Counter[str] = Counter()
    for line in text.splitlines():
        folded = fold(line)
        for phrase in _PHRASE_BREAK.split(folded):
            tokens = [t if t in common else "" for t in re.findall(r"[a-z]+|[^a-z\s]+", phrase)]
            for i, word in enumerate(tokens):
                if not _usable(word):
                    continue
                found[word] += 1
                if i + 1 < len(tokens) and _usable(tokens[i + 1]):
                    pair = f"{word} {tokens[i + 1]}"
                    if pair in folded:
                        found[pair] += 1
    return found


def _usable(word: str) -> bool:
    return word.isalpha() and word not in STOPWORDS and len(word) >= MIN_TERM_LETTERS


def _touches(term: str, anchors: set[str]) -> bool:
    """Whether a term shares a word, or a word's stem, with the anchors."""
    stems = {stem(a) for a in anchors}
    return any(w in anchors or stem(w) in stems for w in content_words(term))


def termgen(payload: dict[str, Any]) -> dict[str, Any]:
    """Terms that co-occur with the keyword in the index, ranked tf-idf style.

    A row naming the keyword lends its words weight; so, less, does a row
    naming the operator's redirect. A term that also occurs in rows NOT
    naming the keyword ranks higher: it can reach files the keyword cannot.
    """
    rows = load_index(Path(str(payload["kb"]))).rows
    keyword, title = str(payload["keyword_primary"]), str(payload["title"])
    anchors = anchor_words(keyword, title, payload.get("blaze_phrases") or [])
    key_words = content_words(keyword)
    steer = content_words(str(payload.get("redirect") or ""))
    avoid = {fold(t) for t in payload.get("avoid") or []}

    texts = [_row_text(row) for row in rows]
    common = _lowercase_words(texts)
    counts = [_candidate_terms(text, common) for text in texts]
    df: Counter[str] = Counter(term for found in counts for term in found)
    weight: defaultdict[str, float] = defaultdict(float)  # a Counter holds ints
    near_rows: Counter[str] = Counter()
    for text, found in zip(texts, counts, strict=True):
        w = 2.0 * names_any(text, key_words) + 1.5 * bool(steer and names_any(text, steer))
        for term, tf in found.items() if w else ():
            weight[term] += w * tf
            near_rows[term] += 1
    n = len(rows)

    def rank(term: str) -> tuple[float, str]:
        idf = math.log(1 + n / df[term])
        reach = 1.5 if df[term] > near_rows[term] else 1.0
        pair = 1.25 if " " in term else 1.0
        return (-weight[term] * idf * reach * pair, term)

    usable = [t for t in weight if t not in avoid]
    fanout = sorted((t for t in usable if not _touches(t, anchors)), key=rank)
    near = sorted((t for t in usable if _touches(t, anchors)), key=rank)
    picked = _diverse(fanout, FANOUT_TARGET)
    keyword_term = fold(keyword)
    if keyword_term and keyword_term not in avoid and keyword_term not in picked:
        picked.append(keyword_term)
    for term in near + fanout:
        if len(picked) >= MAX_TERMS:
            break
        if term not in picked and not _overlaps(term, picked):
            picked.append(term)
    return {"terms": distinct(picked)[:MAX_TERMS]}


def _overlaps(term: str, picked: Iterable[str]) -> bool:
    """A pair whose words are already terms, or a word already inside a picked pair."""
    words = set(term.split())
    return any(words <= set(p.split()) or set(p.split()) <= words for p in picked)


def _diverse(ranked: Sequence[str], limit: int) -> list[str]:
    picked: list[str] = []
    for term in ranked:
        if len(picked) >= max(limit, MIN_FANOUT):
            break
        if not _overlaps(term, picked):
            picked.append(term)
    return picked


def _why(parts: list[str]) -> str:
    return " ".join(" ".join(parts).split()[:MAX_WHY_WORDS])


def score(payload: dict[str, Any]) -> dict[str, Any]:
    """Embodies 0-3 from the keyword, search terms and focus words a summary shares.

    A term or focus word is shared as retrieval finds it: as a substring, or
    by its words' stems (agents.expedition.stems). Three points for matching
    a redirect (the operator's latest words outweigh the keyword), else two
    for naming the keyword; one per search term found, one for any title or
    redirect word; 5+ is 3, 3-4 is 2, 1-2 is 1.
    """
    keyword = str(payload.get("keyword") or "")
    key_words = content_words(keyword)
    terms = [str(t) for t in payload.get("search_terms") or []]
    redirects = [str(r) for r in payload.get("redirects") or []]
    focus = str(payload.get("focus") or payload.get("pattern") or "")
    pattern_words = set(content_words(focus)) - set(key_words)
    scores = []
    summaries = [str(row["summary"]) for row in payload["rows"]]
    with StemIndex(summaries) as index:
        by_stem = index.terms_of(terms)
        echoed = {w: index.holding(w) for w in pattern_words}
    for n, (row, summary) in enumerate(zip(payload["rows"], summaries, strict=True)):
        hits = [
            t
            for t in terms
            if t != fold(keyword) and ((fold(t) and fold(t) in fold(summary)) or t in by_stem[n])
        ]
        named = bool(key_words) and names_any(summary, key_words)
        steered = any(t in hits for t in redirects)
        shared = sorted(w for w in pattern_words if n in echoed[w])
        points = len(hits) + (3 if steered else 2 if named else 0) + (1 if shared else 0)
        embodies = 3 if points >= 5 else 2 if points >= 3 else 1 if points >= 1 else 0
        parts = [f"names {keyword};" if named else ""]
        if hits:
            parts.append("shares " + ", ".join(hits[:4]))
        elif shared:
            parts.append("echoes " + ", ".join(shared[:4]))
        why = _why(parts) or "no shared words with the pattern"
        scores.append({"id": row["id"], "embodies": embodies, "why": why})
    return {"scores": scores}


def scotoma(payload: dict[str, Any]) -> dict[str, Any]:
    """Deep cuts: the first well-scored rows among those shown, which never name the keyword
    (the step sorts out the rows that do, as direct hits, before asking)."""
    keyword = str(payload.get("keyword") or "")
    key_words = content_words(keyword)
    terms = [str(t) for t in payload.get("terms") or []]
    deep: list[dict[str, str]] = []
    for row in payload["rows"]:
        if int(row.get("embodies", 0)) < 2:
            continue
        text = f"{row.get('summary', '')}\n{row.get('keypoints', '')}"
        if key_words and names_any(text, key_words):
            continue
        if len(deep) < MAX_DEEP_CUTS:
            shared = [t for t in terms if fold(t) in fold(text)][:3]
            via = ", ".join(shared) if shared else "its scored resemblance"
            deep.append(
                {"id": str(row["id"]), "connection": f"shares {via} without ever naming {keyword}"}
            )
    return {"deep_cuts": deep}


LOCAL_ANSWERS: dict[str, LocalAnswer] = {"termgen": termgen, "score": score, "scotoma": scotoma}
