"""The built-in local seat on the sample knowledge base: valid, deterministic and honest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agents.expedition.kb import load_index
from agents.expedition.local import score, scotoma, termgen
from agents.expedition.retrieve import matched_terms
from agents.expedition.scoring import scores_schema
from agents.expedition.scotoma import scotoma_schema, split_named
from agents.expedition.terms import TermsAnswer, anchor_words, check_terms
from agents.expedition.words import content_words, names_any
from tests.support import REPO

TITLE, KEYWORD = "Waiting Is Part of the Work", "patience"


def payload(kb: Path, **extra: object) -> dict[str, object]:
    return {"keyword_primary": KEYWORD, "title": TITLE, "kb": str(kb), **extra}


class TestTermgen:
    def test_terms_pass_the_gate(self, demo_kb: Path) -> None:
        """On the sample corpus the local terms are 10-12 with at least six fanning out."""
        answer = TermsAnswer.model_validate(termgen(payload(demo_kb)))
        checked = check_terms(answer.terms, anchor_words(KEYWORD, TITLE))
        assert checked.ok, checked.problems()

    def test_every_term_comes_from_the_corpus(self, demo_kb: Path) -> None:
        """Each term matches some index row: nothing is invented."""
        rows = load_index(demo_kb).rows
        for term in termgen(payload(demo_kb))["terms"]:
            assert any(matched_terms(row, [term]) for row in rows), term

    def test_deterministic_across_processes(self, demo_kb: Path) -> None:
        """Two processes with different hash seeds give the same local answers: no set or dict
        order leaks into what the built-in seat says."""
        script = (
            "import json, sys; from agents.expedition.local import termgen, score, scotoma; "
            "from agents.expedition.kb import load_index; from pathlib import Path; "
            "kb = Path(sys.argv[1]); p = {'keyword_primary': 'patience', "
            "'title': 'Waiting Is Part of the Work', 'kb': str(kb)}; "
            "rows = [{'id': r.id, 'summary': r.summary, 'keypoints': r.keypoints, 'embodies': 1} "
            "for r in load_index(kb).rows]; "
            "print(json.dumps([termgen(p), scotoma({'keyword': 'patience', 'rows': rows})]))"
        )
        outputs = [
            subprocess.run(
                [sys.executable, "-c", script, str(demo_kb)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONHASHSEED": seed},
                cwd=REPO,
            ).stdout
            for seed in ("1", "4242")
        ]
        assert outputs[0] == outputs[1]
        assert json.loads(outputs[0])[0]["terms"]  # it answered something

    def test_avoided_terms_are_not_repeated(self, demo_kb: Path) -> None:
        """On a retry, the terms to avoid stay out of the answer."""
        first = termgen(payload(demo_kb))["terms"]
        second = termgen(payload(demo_kb, avoid=first[:3]))["terms"]
        assert not set(first[:3]) & set(second)

    def test_a_keyword_the_corpus_never_uses_gives_too_few(self, demo_kb: Path) -> None:
        """With nothing to co-occur with, the seat returns little and the gate will flag it."""
        answer = termgen({"keyword_primary": "quasar", "title": "Quasar", "kb": str(demo_kb)})
        assert len(answer["terms"]) < 10


ROWS = [
    {
        "id": "row_1",
        "summary": "Patience at the glue-up: clamps left overnight; I rushed it and it cracked.",
    },
    {
        "id": "row_2",
        "summary": "Lime mortar left to cure slowly; the spring I rushed it, frost cracked it.",
    },
    {"id": "row_3", "summary": "A tool auction in a barn with boxes of planes."},
]


class TestScore:
    def test_valid_and_ordered_by_evidence(self) -> None:
        """Every id once; the keyword row scores highest, a row sharing nothing scores zero."""
        answer = score(
            {
                "pattern": "Files that embody patience.",
                "keyword": KEYWORD,
                "search_terms": ["rushed", "cracked", "overnight", "cure"],
                "rows": ROWS,
            }
        )
        parsed = scores_schema(["row_1", "row_2", "row_3"]).model_validate(answer)
        by_id = {s.id: s.embodies for s in parsed.scores}
        assert by_id["row_1"] == 3 and by_id["row_2"] >= 2 and by_id["row_3"] == 0


class TestScotoma:
    def test_deep_cuts_never_name_the_keyword(self) -> None:
        """Strong rows naming the keyword are direct hits (by code: split_named); strong rows
        that do not are the local seat's deep cuts, even when shown a row naming it."""
        rows = [
            {"id": "row_1", "summary": "Patience at the glue-up", "keypoints": "", "embodies": 3},
            {
                "id": "row_2",
                "summary": "Lime left to cure slowly",
                "keypoints": "rushed",
                "embodies": 2,
            },
            {"id": "row_3", "summary": "A tool auction", "keypoints": "", "embodies": 0},
        ]
        answer = scotoma({"keyword": KEYWORD, "terms": ["cure", "rushed"], "rows": rows})
        parsed = scotoma_schema(["row_1", "row_2", "row_3"]).model_validate(answer)
        assert split_named(rows, KEYWORD)[0] == ["row_1"]
        assert [c.id for c in parsed.deep_cuts] == ["row_2"]
        assert not parsed.pass4_empty and "patience" in parsed.deep_cuts[0].connection

    def test_no_deep_cut_is_pass4_empty(self) -> None:
        """When every strong row names the keyword, the pick is empty and says so."""
        rows = [{"id": "row_1", "summary": "patience", "keypoints": "", "embodies": 3}]
        assert scotoma({"keyword": KEYWORD, "rows": rows}) == {"deep_cuts": []}
        assert split_named(rows, KEYWORD) == (["row_1"], [])


def test_demo_deep_cut_does_not_name_the_keyword(demo_kb: Path) -> None:
    """The documented demo's deep-cut file never names the keyword in its summary or keypoints."""
    row = next(r for r in load_index(demo_kb).rows if r.file.endswith("lime-mortar.md"))
    assert not names_any(f"{row.summary} {row.keypoints}", content_words(KEYWORD))
