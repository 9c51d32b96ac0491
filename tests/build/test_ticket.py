"""The §8.3 ticket checks and the one routing table, as plain functions."""

from __future__ import annotations

import pytest

from agents.build.config import BuildConfig
from agents.build.routing import LANGUAGES, route
from agents.build.ticket import TicketError, parse_ticket, title
from tests.build.helpers import ticket

CONFIG = BuildConfig(root="/tmp/bullpen-build", alias="/tmp/sandbox")
SPEC = "/tmp/sandbox/tests/test_calc.py"


def test_a_valid_ticket_is_read_whole() -> None:
    checked = parse_ticket(
        ticket("/tmp/sandbox", SPEC, tiers="cheap,strong", targets="calc.py"), CONFIG
    )
    assert checked.repo == "/tmp/sandbox" and checked.spec == SPEC
    assert checked.spec_relative == "tests/test_calc.py"
    assert checked.language.nick == "py" and checked.tiers == ["cheap", "strong"]
    assert checked.targets == ["calc.py"] and not checked.routed_away
    assert checked.sections["TRAPS"].startswith("Do not special-case")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (ticket("/tmp/sandbox", SPEC, drop="PROBLEM"), "the section PROBLEM is missing"),
        (ticket("/tmp/sandbox", SPEC).replace("Do not special-case the inputs of the spec.", ""),
         "the section TRAPS is empty"),
        (ticket("/tmp/sandbox", SPEC).replace("Dispatch, then END YOUR TURN.", ""),
         "must end with the line 'Dispatch, then END YOUR TURN.'"),
        (ticket("/tmp/sandbox", SPEC).replace("STEP 1\n", "X\n").replace("PROBLEM\n", "STEP 1\n")
         .replace("X\n", "PROBLEM\n"), "out of order"),
        (ticket("/tmp/sandbox", SPEC).replace(f"SPEC: {SPEC}", "the spec is the calc test"),
         "STEP 2 has no SPEC: <absolute path>"),
        (ticket("/tmp/sandbox", "tests/test_calc.py"), "is not an absolute path"),
        (ticket("/tmp/sandbox", "/tmp/other/tests/test_calc.py"), "does not lie in REPO /tmp/sandbox"),
        (ticket("/tmp/elsewhere", "/tmp/elsewhere/test_x.py"), "outside the build root"),
        (ticket("/home/me/code", "/home/me/code/test_x.py"), "lies under /home"),
        (ticket("/", "/test_x.py"), "the filesystem's root"),
        (ticket("/etc/app", "/etc/app/test_x.py"), "lies under /etc"),
        (ticket("/tmp/sandbox", "/tmp/sandbox/spec.rb"), "no grinder runs the SPEC spec.rb"),
        (ticket("/tmp/sandbox", SPEC, tiers="ok,b@d"), "STEP 2 tiers="),
        (ticket("/tmp/sandbox", SPEC, targets="../x.py"), "without '..'"),
        (ticket("/tmp/sandbox", SPEC).replace(f"the spec at {SPEC} ", "the spec "),
         "STEP 1 names no test path under REPO /tmp/sandbox"),
        (ticket("/tmp/sandbox", SPEC).replace(f"the spec at {SPEC}", "the spec at /tmp/x/t.py"),
         "STEP 1 names no test path under REPO"),
        (ticket("/tmp/sandbox", SPEC).replace(f"the spec at {SPEC}",
                                              "the spec at /tmp/sandbox/tests/test_other.py"),
         "but STEP 2's SPEC is /tmp/sandbox/tests/test_calc.py"),
        (ticket("/tmp/sandbox", SPEC).replace(", no regression.", "."),
         "has no no-regression clause"),
    ],
)  # fmt: skip
def test_an_invalid_ticket_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(TicketError) as caught:
        parse_ticket(text, CONFIG)
    assert says in str(caught.value)


def test_tiers_must_name_configured_seats() -> None:
    """With the home's seat names given, a tier naming no seat is an invalid ticket."""
    text = ticket("/tmp/sandbox", SPEC, tiers="cheap,strnog")
    with pytest.raises(TicketError, match="tiers= names strnog, which no"):
        parse_ticket(text, CONFIG, {"cheap", "strong"})
    assert parse_ticket(text.replace("strnog", "strong"), CONFIG, {"cheap", "strong"}).tiers == [
        "cheap", "strong",
    ]  # fmt: skip


def test_step1_may_name_the_spec_through_the_alias_and_any_no_regression_wording() -> None:
    real = "/tmp/bullpen-build/calc"
    text = ticket(real, f"{real}/tests/test_calc.py").replace(
        f"the spec at {real}/tests/test_calc.py covers add and sub, no regression.",
        f"the spec at {SPEC} covers add; the existing tests still pass.",
    )
    assert parse_ticket(text, CONFIG).spec_relative == "tests/test_calc.py"


def test_the_example_and_demo_tickets_are_valid() -> None:
    from agents.build.helpers import demo_ticket
    from agents.packaged import defaults

    example = (defaults() / "build-ticket.md").read_text()
    assert parse_ticket(example, CONFIG, {"cheap", "strong"}).language.nick == "py"
    assert parse_ticket(demo_ticket("/tmp/sandbox"), CONFIG).targets == ["slugify.py"]


def test_a_ticket_to_the_wrong_grinder_is_routed_by_file_type() -> None:
    checked = parse_ticket(
        ticket("/tmp/sandbox", "/tmp/sandbox/calc_test.go", grinder="@py"), CONFIG
    )
    assert checked.language.nick == "godev" and checked.routed_away


@pytest.mark.parametrize(
    ("path", "nick"),
    [
        ("tests/test_calc.py", "py"), ("tests/helpers.py", "py"), ("test_calc.py", "py"),
        ("pkg/calc_test.py", "py"), ("pkg/calc_test.go", "godev"), ("calc.test.js", "jsdev"),
        ("web/calc_test.js", "jsdev"), ("calc.test.mjs", "jsdev"), ("calc.py", None),
        ("calc.go", None), ("calc.js", None), ("game.test.html", "jsdev"),
        ("web/pong_test.html", "jsdev"), ("index.html", None),
    ],
)  # fmt: skip
def test_routing_is_by_the_spec_path_alone(path: str, nick: str | None) -> None:
    found = route(path)
    assert (found.nick if found else None) == nick


def test_every_language_row_has_patterns_and_a_runner() -> None:
    """Failure mode B: a runner the parser cannot reach, or a pattern no runner runs."""
    assert {lang.nick for lang in LANGUAGES} == {"py", "godev", "jsdev"}
    for lang in LANGUAGES:
        assert lang.patterns and all(lang.patterns), lang.name
        assert lang.runner and lang.syntax_check and lang.test_pattern, lang.name
        assert any("{spec}" in part or part == "." for part in lang.runner), lang.name
        for pattern in lang.patterns:  # each pattern routes to its own row, not an earlier one
            example = pattern.replace("*", "x")
            assert route(example) is lang, (pattern, example)


def test_the_runners_counts_are_read() -> None:
    py, go, js = LANGUAGES[:3]
    assert py.counts("F.\n=== 1 failed, 3 passed in 0.1s ===").passing == 3
    assert py.counts("1 failed, 3 passed in 0.1s").total == 4
    assert py.counts("1 error in 0.1s").total == 1 and py.counts("nothing").total is None
    events = '{"Action":"pass","Test":"TestA"}\n{"Action":"fail","Test":"TestB"}\n{"Action":"pass","Test":"TestB/sub"}\n'
    assert (go.counts(events).passing, go.counts(events).total) == (1, 2)
    assert (
        js.counts("# tests 3\n# pass 2\n# fail 1\n").passing,
        js.counts("# tests 3\n# pass 2\n").total,
    ) == (2, 3)


def test_a_run_is_titled_by_its_problem_text_not_its_first_header() -> None:
    """The title is PROBLEM's text, whitespace squashed and cut at the limit with an ellipsis;
    a text with no PROBLEM section falls back to its first line."""
    text = "PROBLEM\n  Sums   are\nwrong.\n\nREPO\n/tmp/x\n"
    assert title(text) == "Sums are wrong."
    assert title("PROBLEM\n" + "word " * 100, limit=20) == "word word word word…"
    assert title("no sections here\nsecond line") == "no sections here"
