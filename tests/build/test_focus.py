"""The focused code turn (agents/build/focus.py): the function a failing test calls, a code block.

The region is found from a real pytest run of the fix-existing campaign's module; the
grind runs are bench/fixexisting.py's (the real fence, real pytest) with the fake code
model, a real program behind the OpenAI protocol: with a small answer budget it is shown
the one function and answers a code block, with a large one the JSON edits as before.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from agents.build.edits import apply_answer
from agents.build.focus import FocusAnswer, find_region, focus_answer_for, focus_prompt
from agents.seats import Seat, SeatRegistry, make_judge
from agents.seats.base import Completion
from agents.seats.jsonanswer import AnswerRejected, validate_answer
from agents.seats.request import JudgmentRequest
from bench import fixexisting
from tests.build.helpers import set_build
from tests.support import Proc, Society, set_seat, wait_for

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "fake_code_model.py"
SPEC = "tests/test_inventory.py"
PLAIN = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # this venv's plugins: seconds
pytestmark = pytest.mark.timeout(300)


def _red_run(folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short", SPEC],
        cwd=folder, capture_output=True, text=True, timeout=120, env=PLAIN,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    return done.stdout


def test_the_region_is_the_function_the_failing_test_calls(tmp_path: Path) -> None:
    folder = fixexisting.campaign(tmp_path, "value", "x")
    module = (folder / "inventory.py").read_text()
    output = _red_run(folder)
    spec = (SPEC, (folder / SPEC).read_text())
    region = find_region(spec, output, {"inventory.py": module})
    assert region is not None
    lines = module.split("\n")
    start = lines.index("def value(items):") + 1
    assert (region.path, region.name, region.start, region.end) == (
        "inventory.py",
        "value",
        start,
        start + 1,
    )
    assert region.text == "\n".join(lines[start - 1 : start + 1])
    assert "i['price'] + i['count']" in region.text
    assert region.test.startswith("def test_value():") and "== 6" in region.test
    prompt = focus_prompt(region, "your value left the spec red")
    assert prompt.startswith("step: code\n")
    assert region.text in prompt and region.test in prompt
    assert "helper_3" not in prompt and "test_restock" not in prompt  # nothing else is shown
    assert "not kept: your value left the spec red" in prompt
    assert "not kept" not in focus_prompt(region)


def test_no_region_where_none_can_be_found(tmp_path: Path) -> None:
    folder = fixexisting.campaign(tmp_path, "clamp", "x")
    module = (folder / "inventory.py").read_text()
    output = _red_run(folder)
    spec = (SPEC, (folder / SPEC).read_text())
    assert find_region(spec, output, {"inventory.py": module}) is not None
    assert find_region(spec, output, {}) is None  # the module is not one the seat may edit
    assert find_region(spec, "1 passed\n", {"inventory.py": module}) is None  # nothing failed
    assert find_region((SPEC, "not python ("), output, {"inventory.py": module}) is None
    other = ("tests/other.py", spec[1])  # a failure in another file than the spec
    assert find_region(other, output, {"inventory.py": module}) is None
    broken = {"inventory.py": "def clamp(:\n"}  # the module does not parse: no focus
    assert find_region(spec, output, broken) is None


def test_the_answer_is_the_code_block_and_a_copy_changes_nothing(tmp_path: Path) -> None:
    folder = fixexisting.campaign(tmp_path, "value", "x")
    module = (folder / "inventory.py").read_text()
    region = find_region((SPEC, (folder / SPEC).read_text()), _red_run(folder),
                         {"inventory.py": module})  # fmt: skip
    assert region is not None
    schema = focus_answer_for(region)
    fixed = region.text.replace("+", "*")
    said = f"Here is the corrected function:\n```python\n{fixed}\n```\nIt multiplies."
    answer = validate_answer(said, schema)
    assert answer.code == fixed
    with pytest.raises(AnswerRejected, match="no code block"):
        validate_answer("The function adds where it should multiply.", schema)
    with pytest.raises(ValidationError, match="changes nothing"):
        schema.model_validate(FocusAnswer.from_text(f"```python\n{region.text}\n```"))
    apply_answer(folder, answer.as_edit(region), {"inventory.py"}, {SPEC})
    assert (folder / "inventory.py").read_text() == module.replace(region.text, fixed)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", SPEC],
                          cwd=folder, capture_output=True, text=True, timeout=120, env=PLAIN)  # fmt: skip
    assert done.returncode == 0, done.stdout


class CutSeat(Seat):
    """A seat whose first answer stops at max_tokens inside its code block, the second not."""

    kind = "fake"

    def __init__(self) -> None:
        super().__init__("small")
        self.asked: list[JudgmentRequest] = []

    async def complete(self, request: JudgmentRequest) -> str:
        return (await self.answer(request)).text

    async def answer(self, request: JudgmentRequest) -> Completion:
        self.asked.append(request)
        if len(self.asked) == 1:
            return Completion(
                "```python\ndef value(items):\n    return sum(", "prompt", cut_off=True
            )
        return Completion("```python\ndef value(items):\n    return 6\n```", "prompt")


def test_a_text_answer_cut_at_its_bound_is_refused_and_asked_again() -> None:
    seat = CutSeat()
    judge = make_judge(SeatRegistry({"small": seat}), {"code": "small"})
    request = JudgmentRequest("code", "step: code\nWrite the function.", structured=False)
    told = asyncio.run(judge("code", request, FocusAnswer))
    assert told.answer.code == "def value(items):\n    return 6"  # the whole one, not the cut
    assert told.attempts == 2 and "cut off at its max_tokens" in told.misses[0]
    retry = seat.asked[1].prompt
    assert retry.endswith("Answer as asked.") and "JSON" not in retry


class Bench:
    """A society home and the fake code model for one campaign's bug, as the bench sets them."""

    def __init__(self, base: Path, buggy: str) -> None:
        self.base, self.buggy = base, buggy
        self.society = Society(base / "home")
        self.builds = base / "builds"
        self.builds.mkdir()
        set_build(self.society.root, root=str(self.builds), alias=str(base / "sandbox"))
        wrong, right = fixexisting.BUGS[buggy]
        self.log = base / "model.jsonl"
        self.model = Proc([sys.executable, str(FAKE), "--func", buggy, "--wrong", wrong,
                           "--right", right, "--log", str(self.log)], base / "model.out")  # fmt: skip
        self.port = wait_for(lambda: self.model.output().split("\n", 1)[0].strip() or None, 30,
                             "the fake model")  # fmt: skip

    def seat(self, name: str, model: str, cap: str) -> None:
        set_seat(self.society.root, name, f'kind = "openai"\nbase_url = "http://127.0.0.1:'
                 f'{self.port}/v1"\nmodel = "{model}"\ntimeout_s = 30\n{cap}')  # fmt: skip

    def grind(self, seat: str) -> dict:
        config = fixexisting.build_config(self.builds, self.base / "sandbox", seat)
        folder = fixexisting.campaign(self.builds, self.buggy, seat)
        return asyncio.run(fixexisting.one(self.society, config, folder, seat))

    def calls(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    made = Bench(tmp_path, "average")
    yield made
    made.model.stop()
    made.society.stop_all()


def test_a_small_budget_asks_for_the_function_and_a_large_one_for_edits(bench: Bench) -> None:
    bench.seat("small", "fix", "max_tokens = 400")
    outcome = bench.grind("small")
    assert outcome["green"] and outcome["iterations"] == 1, outcome
    (call,) = bench.calls()
    assert call["format"] is False  # a code block is asked: no response_format
    assert "temperature" not in call and "seed" not in call  # the first try: the seat's own
    assert call["stop"] == ["\n```\n"]  # the answer ends at its block's closing fence
    assert "```python\ndef average(prices):" in call["prompt"]
    assert "FILES" not in call["prompt"] and "helper_0" not in call["prompt"]
    assert outcome["turns"][0]["judgment"]["structured"] == "prompt"
    bench.log.unlink()
    bench.seat("large", "fix", "")  # the step's own 4,096 tokens: the whole turn, JSON edits
    outcome = bench.grind("large")
    assert outcome["green"] and outcome["iterations"] == 1, outcome
    (call,) = bench.calls()
    assert call["format"] is True and "FILES" in call["prompt"]
    assert outcome["turns"][0]["judgment"]["structured"] == "json_schema"


def test_a_candidate_no_better_is_rolled_back_and_the_next_is_sampled(bench: Bench) -> None:
    bench.seat("sloppy", "sloppy", "max_tokens = 400\ntemperature = 0")
    config = fixexisting.build_config(bench.builds, bench.base / "sandbox", "sloppy")
    folder = fixexisting.campaign(bench.builds, "average", "sloppy")
    planted = (folder / "inventory.py").read_text()
    outcome = asyncio.run(fixexisting.one(bench.society, config, folder, "sloppy"))
    assert outcome["green"] and outcome["iterations"] == 2, outcome
    first, second = outcome["turns"]
    assert first["rolled_back"] is True and first["passing"] == 4, first
    assert "left the spec red (4/5 passing" in first["problem"], first  # the run says so
    assert "rolled_back" not in second and second["green"], second
    calls = bench.calls()
    assert len(calls) == 2
    assert calls[0]["temperature"] == 0 and "seed" not in calls[0]
    assert calls[1]["temperature"] == 0.7 and calls[1]["seed"] == 2  # another answer asked
    assert "not kept: your average left the spec red (4/5 passing" in calls[1]["prompt"]
    assert "# checked" not in calls[1]["prompt"]  # shown the function as it is again
    final = (outcome["clone"] / "inventory.py").read_text()
    assert "# checked" not in final and final == planted.replace("(len(prices) + 1)", "len(prices)")
    assert (folder / "inventory.py").read_text() == planted
