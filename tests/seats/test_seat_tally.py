"""A run's model answers counted: attempts, rescues, and the gates missed."""

from __future__ import annotations

from agents.expedition.report import Dig, tally_of
from agents.seats.tally import Tally, gate_of

NOT_JSON = "termgen: the answer is not valid JSON (not JSON: Expecting value); it began 'x'"
IDS = (
    "score: the JSON does not match the ScoresAnswerForBatch schema: the answer: score every "
    "id of the batch exactly once: missing ids row_3"
)


def test_gates_are_named_the_same_each_time() -> None:
    assert gate_of(NOT_JSON) == "answer is JSON"
    assert gate_of(IDS) == "score every id of the batch exactly once"
    where = "bulk: the JSON does not match the AnalysisAnswer schema: gaps: Field required"
    assert gate_of(where) == "gaps: Field required"
    assert gate_of("bulk: no answer from http://x within 120 s") == "seat answered"


def test_a_tally_counts_rescues_and_misses() -> None:
    tally = Tally()
    tally.add({"attempts": 1})
    tally.add({"attempts": 2, "misses": [NOT_JSON]})
    tally.add(None)  # a step that asked no model
    tally.miss("6 terms fan out", rescued=True)
    assert tally.data() == {
        "answers": 2,
        "attempts": 3,
        "rescued": 2,
        "missed": {"6 terms fan out": 1, "answer is JSON": 1},
    }
    assert tally.line() == (
        "2 answers in 3 model calls; 2 rescued by a retry; "
        "missed: 6 terms fan out ×1, answer is JSON ×1"
    )


def test_the_dig_report_says_what_the_model_missed() -> None:
    """From the steps' reply data: termgen's two judgments and its gate, a score batch."""
    termed = {
        "judgments": [{"attempts": 1}, {"attempts": 1}],
        "gates_missed": ["6 terms fan out"],
        "gate_rescued": True,
    }
    scored = {"judgment": {"attempts": 2, "misses": [IDS]}}
    model = tally_of([termed, scored, {"judgment": {"attempts": 1}}])
    dig = Dig(
        direct_hits=[], deep_cuts=[], excerpts=[], terms=["a"], scored=1, batches=1,
        pass4_empty=True, model=model,
    )  # fmt: skip
    assert (
        "Model: 4 answers in 5 model calls; 2 rescued by a retry; missed: 6 terms fan out ×1, "
        "score every id of the batch exactly once ×1"
    ) in dig.text()
    assert dig.data()["model"]["rescued"] == 2


def test_the_backpass_funnel_counts_model_answers_through_its_dict() -> None:
    """The funnel's tally survives the trip through a step's data (as_dict, from_dict)."""
    from agents.backpass.funnel import Funnel

    funnel = Funnel()
    funnel.add_seat({"role": "bulk", "seat": "bulk", "seat_kind": "openai", "attempts": 1})
    funnel.add_seat({"role": "bulk", "seat": "bulk", "attempts": 2, "misses": [NOT_JSON]})
    again = Funnel.from_dict(funnel.as_dict())
    assert "model answers       2 answers in 3 model calls; 1 rescued by a retry; missed: " in (
        again.render()
    )
