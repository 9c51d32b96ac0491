from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from agents.expedition.scoring import batches, merge, scores_schema
from agents.expedition.scotoma import scotoma_schema, split_named, top_rows

IDS = ["row_1", "row_2", "row_3"]


def scores(*triples: tuple[str, object, str]) -> dict[str, object]:
    return {"scores": [{"id": i, "embodies": e, "why": w} for i, e, w in triples]}


class TestBatchCoverage:
    def test_every_id_exactly_once_passes(self) -> None:
        """An answer scoring each batch id once validates."""
        answer = scores_schema(IDS).model_validate(
            scores(("row_1", 0, "no"), ("row_2", 3, "yes"), ("row_3", "2", "ok"))
        )
        assert [s.embodies for s in answer.scores] == [0, 3, 2]

    @pytest.mark.parametrize(
        ("given", "problem"),
        [
            ([("row_1", 1, "a"), ("row_2", 1, "b")], "missing ids row_3"),
            (
                [("row_1", 1, "a"), ("row_1", 2, "a"), ("row_2", 1, "b"), ("row_3", 1, "c")],
                "more than once row_1",
            ),
            (
                [("row_1", 1, "a"), ("row_2", 1, "b"), ("row_3", 1, "c"), ("row_9", 1, "d")],
                "not in this batch row_9",
            ),
        ],
    )
    def test_coverage_failures_are_validation_errors(
        self, given: list[tuple[str, int, str]], problem: str
    ) -> None:
        """Missing, repeated or foreign ids fail validation, so the judge retries the batch."""
        with pytest.raises(ValidationError, match=problem):
            scores_schema(IDS).model_validate(scores(*given))

    def test_embodies_must_be_zero_to_three(self) -> None:
        """Scores of 4, -1 or true are rejected."""
        for bad in (4, -1, True):
            with pytest.raises(ValidationError):
                scores_schema(["row_1"]).model_validate(scores(("row_1", bad, "why")))

    def test_why_is_at_most_twelve_words(self) -> None:
        """A thirteen-word reason keeps its first twelve words; a batch is not failed for it."""
        schema = scores_schema(["row_1"])
        twelve = " ".join(f"w{n}" for n in range(12))
        assert schema.model_validate(scores(("row_1", 1, twelve))).scores[0].why == twelve
        kept = schema.model_validate(scores(("row_1", 1, twelve + " w12"))).scores[0].why
        assert kept == twelve

    def test_scores_keyed_by_id_are_the_scores_list(self) -> None:
        """The shape a server is sent (scores keyed by id) validates as the same scores."""
        keyed = {
            "scores": {
                "row_1": {"embodies": 2, "why": "glue"},
                "row_2": {"embodies": 0, "why": "no"},
            }
        }
        answer = scores_schema(["row_1", "row_2"]).model_validate(keyed)
        assert [(s.id, s.embodies) for s in answer.scores] == [("row_1", 2), ("row_2", 0)]

    @pytest.mark.parametrize("why", ["<reason>", "at most 12 words", "string", " <reason> "])
    def test_a_copied_placeholder_is_no_reason(self, why: str) -> None:
        """The prompt's placeholder (or its old example words) handed back fails the batch."""
        with pytest.raises(ValidationError, match="placeholder"):
            scores_schema(["row_1"]).model_validate(scores(("row_1", 1, why)))

    def test_each_batch_schema_checks_its_own_ids(self) -> None:
        """Two schemas built for two batches do not share their expected ids."""
        first, second = scores_schema(["row_1"]), scores_schema(["row_2"])
        first.model_validate(scores(("row_1", 1, "a")))
        with pytest.raises(ValidationError):
            second.model_validate(scores(("row_1", 1, "a")))


class TestMerge:
    def test_batches_of_ten(self) -> None:
        """Twenty-three candidates make batches of 10, 10 and 3, in order."""
        groups = batches([{"id": f"row_{i}"} for i in range(23)], 10)
        assert [len(g) for g in groups] == [10, 10, 3] and groups[2][0]["id"] == "row_20"

    def test_sorted_by_embodies_then_prescore(self) -> None:
        """Merged rows sort by embodies desc, then prescore desc, then index order."""
        cands = [
            {"id": "a", "prescore": 1},
            {"id": "b", "prescore": 5},
            {"id": "c", "prescore": 1},
            {"id": "d", "prescore": 9},
        ]
        merged = merge(
            cands,
            [
                [{"id": "a", "embodies": 2, "why": "x"}, {"id": "b", "embodies": 2, "why": "x"}],
                [{"id": "c", "embodies": 2, "why": "x"}, {"id": "d", "embodies": 1, "why": "x"}],
            ],
        )
        assert [m["id"] for m in merged] == ["b", "a", "c", "d"]

    def test_an_unscored_candidate_is_an_error(self) -> None:
        """A candidate with no score is never silently counted as zero."""
        with pytest.raises(ValueError, match="never scored"):
            merge([{"id": "a"}, {"id": "b"}], [[{"id": "a", "embodies": 1, "why": "x"}]])


class TestScotoma:
    ROWS: ClassVar[list[str]] = [f"row_{i}" for i in range(1, 9)]

    def answer(self, **fields: object) -> dict[str, object]:
        return {"deep_cuts": [], "direct_hits": [], "pass4_empty": True, **fields}

    def test_valid_pick(self) -> None:
        """Up to two deep cuts among the given ids, with direct hits, validate."""
        scotoma_schema(self.ROWS).model_validate(
            self.answer(
                deep_cuts=[{"id": "row_7", "connection": "lime sets slowly"}],
                direct_hits=["row_1"],
                pass4_empty=False,
            )
        )

    def test_ids_outside_the_top_rows_are_rejected(self) -> None:
        """A deep cut naming a row that was not shown fails validation."""
        with pytest.raises(ValidationError, match="not among the rows given"):
            scotoma_schema(self.ROWS).model_validate(
                self.answer(deep_cuts=[{"id": "row_30", "connection": "x"}], pass4_empty=False)
            )

    def test_at_most_two_deep_cuts(self) -> None:
        """Three deep cuts fail validation."""
        cuts = [{"id": f"row_{i}", "connection": "x"} for i in (1, 2, 3)]
        with pytest.raises(ValidationError):
            scotoma_schema(self.ROWS).model_validate(self.answer(deep_cuts=cuts, pass4_empty=False))

    def test_pass4_empty_is_derived_from_the_cuts(self) -> None:
        """No deep cut is pass 4 empty, whatever an older answer said of it."""
        schema = scotoma_schema(self.ROWS)
        assert schema.model_validate(self.answer(pass4_empty=False)).pass4_empty is True
        cut = [{"id": "row_2", "connection": "lime sets slowly"}]
        assert schema.model_validate(self.answer(deep_cuts=cut)).pass4_empty is False

    @pytest.mark.parametrize("said", ["<connection>", "one line", "<id>"])
    def test_a_copied_placeholder_is_no_connection(self, said: str) -> None:
        """The prompt's placeholder (or the old example's words) handed back is refused."""
        with pytest.raises(ValidationError, match="placeholder"):
            scotoma_schema(self.ROWS).model_validate(
                self.answer(deep_cuts=[{"id": "row_2", "connection": said}])
            )

    def test_the_rows_naming_the_keyword_are_direct_hits_by_code(self) -> None:
        """split_named: well-scored rows naming the keyword are direct hits; only the others
        are offered as deep cuts."""
        rows = [
            {"id": "row_1", "summary": "Patience at the kiln", "embodies": 3},
            {"id": "row_2", "summary": "Glue cures overnight", "embodies": 2},
            {"id": "row_3", "summary": "An impatient buyer", "embodies": 2},
        ]
        direct, open_rows = split_named(rows, "patience")
        assert direct == ["row_1"]
        assert [r["id"] for r in open_rows] == ["row_2", "row_3"]

    def test_a_row_the_scorer_found_faint_is_no_deep_cut(self) -> None:
        """SmolLM2 chose every row it was shown, a row scored 0 among them (the scotoma step
        cases): a row scored below 2 (none, faint) is not offered, whether or not it names
        the keyword; one that names it is no direct hit either."""
        rows = [
            {"id": "row_1", "summary": "Patience at the kiln", "embodies": 1},
            {"id": "row_2", "summary": "Glue cures overnight", "embodies": 2},
            {"id": "row_3", "summary": "Sold spoons at the market", "embodies": 1},
            {"id": "row_4", "summary": "A new saw", "embodies": 0},
        ]
        direct, open_rows = split_named(rows, "patience")
        assert direct == [] and [r["id"] for r in open_rows] == ["row_2"]

    def test_top_rows_takes_the_best_n(self) -> None:
        """top_rows keeps the first n merged rows and only the fields the judgment needs."""
        merged = [
            {"id": f"row_{i}", "file": "f", "summary": "s", "embodies": 1, "why": "w", "tags": "t"}
            for i in range(12)
        ]
        top = top_rows(merged, 8)
        assert len(top) == 8 and "tags" not in top[0]


def test_the_scotoma_step_counts_in_the_singular_and_plural(demo_home: Any) -> None:
    """Its reply reads `1 deep cut, 2 direct hits`, never `1 deep cuts`; the direct hits are
    the rows naming the keyword, and the model is shown only the others."""
    import asyncio

    from agents.expedition.steps import pick_scotoma
    from tests.expedition.sim import ScriptedJudge, ask, step_context

    rows = [
        {"id": "row_1", "summary": "glue left overnight", "keypoints": "", "embodies": 2},
        {"id": "row_2", "summary": "patience at the kiln", "keypoints": "", "embodies": 2},
        {"id": "row_3", "summary": "a patient bather", "keypoints": "", "embodies": 3},
    ]
    answer = {"deep_cuts": [{"id": "row_1", "connection": "waiting, never named"}]}
    judge = ScriptedJudge({"scotoma": [answer]})
    data = {"pattern": "patience", "keyword": "patience", "terms": ["wait"], "rows": rows}
    reply = asyncio.run(pick_scotoma(ask(data), step_context(demo_home, judge)))
    assert reply.body == "1 deep cut, 2 direct hits"
    assert reply.data and reply.data["direct_hits"] == ["row_2", "row_3"]
    shown = judge.requests[0].payload["rows"]
    assert [row["id"] for row in shown] == ["row_1"]


def test_no_model_is_asked_when_no_unnamed_row_scored_two(demo_home: Any) -> None:
    """The rows that do not name the keyword all scored below 2: pass 4 is empty, no call."""
    import asyncio

    from agents.expedition.steps import pick_scotoma
    from tests.expedition.sim import ScriptedJudge, ask, step_context

    rows = [
        {"id": "row_1", "summary": "patience itself", "keypoints": "", "embodies": 3},
        {"id": "row_2", "summary": "a new saw", "keypoints": "", "embodies": 1},
    ]
    judge = ScriptedJudge({"scotoma": []})
    data = {"pattern": "patience", "keyword": "patience", "terms": ["wait"], "rows": rows}
    reply = asyncio.run(pick_scotoma(ask(data), step_context(demo_home, judge)))
    assert judge.requests == [] and reply.data and reply.data["pass4_empty"] is True
    assert "scored below 2, so no model was asked" in reply.body


def test_no_model_is_asked_when_every_top_row_names_the_keyword(demo_home: Any) -> None:
    """Pass 4 is empty by what the code sees, with no call and no seat."""
    import asyncio

    from agents.expedition.steps import pick_scotoma
    from tests.expedition.sim import ScriptedJudge, ask, step_context

    rows = [{"id": "row_1", "summary": "patience itself", "keypoints": "", "embodies": 3}]
    judge = ScriptedJudge({"scotoma": []})
    data = {"pattern": "patience", "keyword": "patience", "terms": ["wait"], "rows": rows}
    reply = asyncio.run(pick_scotoma(ask(data), step_context(demo_home, judge)))
    assert reply.data and reply.data["pass4_empty"] is True and reply.data["seat"] is None
    assert reply.data["direct_hits"] == ["row_1"] and "no model was asked" in reply.body
