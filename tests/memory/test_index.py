"""The index and the namespace rules on their own: a real SQLite file, no processes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agents.memory.entry import parse_save
from agents.memory.errors import Refused
from agents.memory.index import Index
from agents.memory.lessons import Lesson, wake_lessons
from agents.memory.namespaces import normalize
from agents.runtime.lessons import told as _told
from agents.seats.request import JudgmentRequest


def _add(index: Index, seq: int, ns: str, text: str, **extra: object) -> None:
    with index.writing():
        index.add(
            seq, f"id{seq}", "operator", "t", parse_save({"ns": ns, "text": text, **extra}), ns
        )


@pytest.fixture
def index(tmp_path: Path) -> Index:
    return Index.open(tmp_path / "memory.sqlite")


class TestNamespaces:
    @pytest.mark.parametrize(
        ("ns", "said"),
        [
            ("", "missing"),
            ("/etc", "outside /bullpen"),
            ("/bullpen/Ops", "bad segment"),
            ("/bullpenx", "outside"),
        ],
    )
    def test_bad_namespaces_are_refused(self, ns: str, said: str) -> None:
        """Each says what is wrong with the namespace."""
        with pytest.raises(Refused, match=said):
            normalize(ns)

    def test_a_trailing_slash_is_the_same_namespace(self) -> None:
        assert normalize("/bullpen/ops/") == "/bullpen/ops"


class TestRecall:
    def test_prefixes_match_whole_segments(self, index: Index) -> None:
        """ops sees ops and ops/x, not opsx; exact sees only itself."""
        for seq, ns in enumerate(("/bullpen/ops", "/bullpen/ops/x", "/bullpen/opsx"), 1):
            _add(index, seq, ns, "tern")
        assert sorted(e.ns for e in index.recall("tern", "/bullpen/ops", 10)) == [
            "/bullpen/ops",
            "/bullpen/ops/x",
        ]
        assert [e.ns for e in index.recall("tern", "/bullpen/ops", 10, exact=True)] == [
            "/bullpen/ops"
        ]
        assert len(index.recall(None, "/bullpen", 10)) == 3

    @pytest.mark.parametrize("query", ["tern(", 'AND "', "a) OR (b", "NEAR("])
    def test_a_malformed_query_is_refused_not_raised(self, index: Index, query: str) -> None:
        _add(index, 1, "/bullpen/ops", "tern")
        with pytest.raises(Refused, match="FTS5"):
            index.recall(query, "/bullpen", 5)

    def test_applying_a_save_twice_is_a_no_op(self, index: Index) -> None:
        """Idempotent by seq: the second apply changes nothing."""
        _add(index, 1, "/bullpen/ops", "tern")
        _add(index, 1, "/bullpen/ops", "tern")
        assert len(index.recall("tern", "/bullpen", 10)) == 1

    def test_a_retraction_withdraws_without_a_replacement(self, index: Index) -> None:
        _add(index, 1, "/bullpen/ops", "tern one")
        _add(index, 2, "/bullpen/ops", "withdrawn", supersedes="m1", retract=True)
        assert (
            index.recall("tern", "/bullpen", 10) == [] and index.recall(None, "/bullpen", 10) == []
        )
        assert index.get(1).superseded_by == "m2"  # type: ignore[union-attr]


class TestLessons:
    def test_own_lessons_first_by_match_then_newest_and_two_general(self, index: Index) -> None:
        for seq in range(1, 11):
            _add(
                index,
                seq,
                "/bullpen/lessons-learned/ann",
                f"lesson {seq}" + (" gull" if seq == 3 else ""),
            )
        for seq in range(11, 15):
            _add(index, seq, "/bullpen/lessons-learned", f"general {seq}")
        _add(index, 15, "/bullpen/lessons-learned/bob", "gull for bob")
        got = wake_lessons(index, "ann", "a gull!")
        assert [lesson.id for lesson in got[:2]] == ["m3", "m10"]
        assert [lesson.ns for lesson in got].count("/bullpen/lessons-learned/ann") == 8
        assert [lesson.ns for lesson in got[8:]] == ["/bullpen/lessons-learned"] * 2
        assert "m15" not in [lesson.id for lesson in got]


def test_a_seats_prompt_carries_the_lessons_after_its_step_line() -> None:
    """The judge a wake hands over puts the lessons block right after `step: NAME`."""
    seen: list[str] = []

    async def judge(role: str, request: JudgmentRequest, schema: type) -> str:
        seen.append(request.prompt)
        return "ok"

    told = _told(judge, [Lesson("m7", "/bullpen/lessons-learned/ann", "check the build dir")])  # type: ignore[arg-type]
    asyncio.run(
        told("verdict", JudgmentRequest(step="verdict", prompt="step: verdict\nthe ask"), object)
    )  # type: ignore[arg-type]
    assert seen == [
        "step: verdict\nLessons from shared memory (recalled for you; follow them unless the ask says otherwise):\n- [m7] check the build dir\n\nthe ask"
    ]


def test_a_lessons_tag_never_runs_into_a_word_of_another_namespace(index: Index) -> None:
    """Namespace 1's word '7gull' and namespace 17's word 'gull' would both read 's17gull'
    with an unpadded tag: each nick's wake must see its own lesson only."""
    nicks = [f"n{n}" for n in range(1, 18)]
    for seq, nick in enumerate(nicks, start=1):  # space ids 1..17, in order
        _add(index, seq, f"/bullpen/lessons-learned/{nick}", "filler")
    _add(index, 100, "/bullpen/lessons-learned/n1", "watch the 7gull")
    _add(index, 101, "/bullpen/lessons-learned/n17", "watch the gull")
    assert [lesson.id for lesson in wake_lessons(index, "n17", "gull")][:1] == ["m101"]
    assert [lesson.id for lesson in wake_lessons(index, "n1", "7gull")][:1] == ["m100"]
    assert "m100" not in [lesson.id for lesson in wake_lessons(index, "n17", "gull")]
