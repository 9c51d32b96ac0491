"""The code step's sent schema: sized to the answer budget, its paths a fixed choice.

A schema-constraining server (llama.cpp) lets a model write the worst answer the schema
allows; SmolLM2 ran every fix-existing call to its 400-token cut inside one unbounded
string. The sent schema must fit the budget it is made for, drop no bound, offer only the
files shown (never the spec) and still hold the answer a capable model gives.
"""

from __future__ import annotations

from typing import Any

import pytest

from agents.build.codeseat import CODE_TOKENS
from agents.build.edits import CodeAnswer
from agents.build.editschema import code_answer_for, sent_code_schema
from agents.seats.answerschema import answer_schema, worst_case_tokens
from bench import fixexisting

MODULE = fixexisting.module("value")  # the fix-existing campaign's ~3 KB module, one bug


def _edits(schema: dict[str, Any]) -> dict[str, Any]:
    return dict(schema["properties"]["edits"])


@pytest.mark.parametrize("budget", [300, 400, 1000, 2000, CODE_TOKENS])
@pytest.mark.parametrize(
    "shown",
    [{"inventory.py": MODULE}, {}, {"a.py": "x\n", "b.py": "y\n"}, {"a.py": "x", "b.py": ""}],
)
def test_the_worst_answer_fits_the_budget_and_no_bound_is_dropped(
    budget: int, shown: dict[str, str]
) -> None:
    sent = answer_schema(code_answer_for(shown, budget))
    assert sent.loosened == ()
    worst = worst_case_tokens(sent.schema)
    assert worst is not None and worst <= budget, (budget, worst)


def test_paths_are_the_files_shown_and_lines_are_bounded_by_them() -> None:
    """An edit may name only a shown file, by a line it has; with nothing shown (a new
    project) the answer is a new file, never an edit."""
    schema = sent_code_schema({"inventory.py": MODULE, "lib/x.py": "a\nb\n"}, 400)
    item = _edits(schema)["items"]["properties"]
    assert item["path"] == {"enum": ["inventory.py", "lib/x.py"]}
    lines = len(MODULE.removesuffix("\n").split("\n"))
    assert item["start"]["maximum"] == item["end"]["maximum"] == lines
    for nothing in ({}, {"calc.py": ""}):  # a new project; an empty stub, shown
        empty = sent_code_schema(nothing, 400)
        assert _edits(empty)["maxItems"] == 0 and empty["properties"]["files"]["maxItems"] == 1
    stub = sent_code_schema({"inventory.py": MODULE, "calc.py": ""}, 400)
    assert _edits(stub)["items"]["properties"]["path"] == {"enum": ["inventory.py"]}
    assert stub["properties"]["files"]["maxItems"] == 1


def test_a_small_budget_asks_for_one_replacement_a_large_one_for_more() -> None:
    """400 tokens (a small model's cap): one edit of a few lines, no whole file; 4,096: several
    edits and whole files, each string longer."""
    small = sent_code_schema({"inventory.py": MODULE}, 400)
    large = sent_code_schema({"inventory.py": MODULE}, CODE_TOKENS)
    assert _edits(small)["maxItems"] == 1 and small["properties"]["files"]["maxItems"] == 0
    assert _edits(large)["maxItems"] >= 4 and large["properties"]["files"]["maxItems"] >= 1
    old = _edits(small)["items"]["properties"]["old"]["maxLength"]
    assert old >= 100  # a line of code and some, at 400 tokens
    assert _edits(large)["items"]["properties"]["old"]["maxLength"] > old


def test_a_capable_models_answer_fits_the_schema_and_validates() -> None:
    """What tests/fakes/fake_code_model.py answers for this module (the buggy function's lines,
    copied, fixed) is within every bound sent at the small budget, and the judge's model
    (the per-turn class) validates it as a CodeAnswer."""
    lines = MODULE.removesuffix("\n").split("\n")
    start = next(n for n, line in enumerate(lines, 1) if line.startswith("def value("))
    old = "\n".join(lines[start - 1 : start + 1])
    wrong, right = fixexisting.BUGS["value"]
    answer = {"edits": [{"path": "inventory.py", "start": start, "end": start + 1, "old": old,
                         "new": old.replace(wrong, right)}], "files": []}  # fmt: skip
    schema = sent_code_schema({"inventory.py": MODULE}, 400)
    item = _edits(schema)["items"]["properties"]
    for edit in answer["edits"]:
        assert edit["path"] in item["path"]["enum"]
        assert edit["end"] <= item["end"]["maximum"]
        assert len(edit["old"]) <= item["old"]["maxLength"]
        assert len(edit["new"]) <= item["new"]["maxLength"]
    made = code_answer_for({"inventory.py": MODULE}, 400).model_validate(answer)
    assert isinstance(made, CodeAnswer) and made.edits[0].start == start
