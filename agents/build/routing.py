"""The one table of languages a build can grind: path patterns AND runner, row by row.

A spec is routed by its path's file type, never by a nick named in the
ticket (§8.4). Each row holds everything one language needs: the patterns
that pick it, the grinder nick, the runner command, the syntax check that
tells "cannot be collected" from "red", how to count the spec's tests, and
how to read the runner's counts. Adding a language is one row; a test
checks that no row lacks a pattern or a runner (failure mode B: a runner
the parser cannot reach).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["LANGUAGES", "Counts", "Language", "route"]


@dataclass(frozen=True)
class Counts:
    """What a runner said: tests passing of total (None: it said no count)."""

    passing: int
    total: int | None


def _pytest_counts(output: str) -> Counts:
    found = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "xfailed": 0, "xpassed": 0}
    summary = [
        line for line in output.splitlines() if re.search(r"\d+ (passed|failed|error)", line)
    ]
    if not summary:
        return Counts(0, None)
    for number, word in re.findall(
        r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)", summary[-1]
    ):
        found[word.rstrip("s") if word.startswith("error") else word] += int(number)
    return Counts(found["passed"] + found["xpassed"], sum(found.values()))


def _go_counts(output: str) -> Counts:
    results: dict[str, str] = {}
    for line in output.splitlines():
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        test = event.get("Test")
        if test and "/" not in test and event.get("Action") in ("pass", "fail", "skip"):
            results[test] = event["Action"]
    if not results:
        return Counts(0, None)
    return Counts(sum(1 for r in results.values() if r == "pass"), len(results))


def _tap_counts(output: str) -> Counts:
    tests = re.search(r"^# tests (\d+)$", output, re.M)
    passing = re.search(r"^# pass (\d+)$", output, re.M)
    if not tests or not passing:
        return Counts(0, None)
    return Counts(int(passing[1]), int(tests[1]))


@dataclass(frozen=True)
class Language:
    """One row: which specs, which grinder, which runner, and how to read it."""

    name: str
    nick: str
    patterns: tuple[str, ...]  # matched against the spec's path relative to the build dir
    runner: tuple[str, ...]  # the command; {spec} is the spec's path relative to its cwd
    run_in_spec_dir: bool  # go test runs in the package's folder
    syntax_check: tuple[str, ...]  # exit 0 when the spec parses; {spec} as above
    test_pattern: str  # a regex counting the spec's tests in its text
    counts: Callable[[str], Counts]
    stub: Callable[[str, str], str]  # (target path, spec text) -> the stub's text
    env: tuple[tuple[str, str], ...] = ()  # the runner's own variables
    # The runner's address-space limit when [build] memory_mb cannot hold it: a browser
    # reserves tens of GB it never uses, and RLIMIT_AS counts reservations.
    memory_mb: int | None = None

    def matches(self, relative: str) -> bool:
        path = PurePosixPath(relative)
        return any(
            fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(path.name, pattern)
            for pattern in self.patterns
        )

    def tests_in(self, text: str) -> int:
        return len(re.findall(self.test_pattern, text, re.M))


def _empty(target: str, spec: str) -> str:
    return ""


def _go_stub(target: str, spec: str) -> str:
    found = re.search(r"^package\s+(\w+)", spec, re.M)
    return f"package {(found[1] if found else 'main').removesuffix('_test')}\n"


WEBGAME = str(Path(__file__).resolve().with_name("webgame.py"))  # run by path, isolated

LANGUAGES: tuple[Language, ...] = (
    Language(
        name="python",
        nick="py",
        patterns=("tests/*.py", "test_*.py", "*_test.py"),
        runner=("{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short", "{spec}"),
        run_in_spec_dir=False,
        syntax_check=(
            "{python}",
            "-c",
            "import ast,sys; ast.parse(open(sys.argv[1]).read())",
            "{spec}",
        ),
        test_pattern=r"^\s*(?:async\s+)?def\s+test\w*\s*\(",
        counts=_pytest_counts,
        stub=_empty,
        # plugins are named, not auto-loaded: faster, and no entry point runs unasked
        env=(("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1"),),
    ),
    Language(
        name="go",
        nick="godev",
        patterns=("*_test.go",),
        runner=("go", "test", "-vet=off", "-json", "-count=1", "."),  # vet is a lint: 5x the run
        run_in_spec_dir=True,
        syntax_check=("gofmt", "-e", "{spec}"),
        test_pattern=r"^func\s+Test\w*\s*\(\s*\w+\s+\*testing\.T\s*\)",
        counts=_go_counts,
        stub=_go_stub,
    ),
    Language(
        name="js",
        nick="jsdev",
        patterns=("*.test.js", "*_test.js", "*.test.mjs"),
        runner=("node", "--test", "--test-reporter=tap", "{spec}"),
        run_in_spec_dir=False,
        syntax_check=("node", "--check", "{spec}"),
        test_pattern=r"\b(?:test|it)\s*\(\s*['\"`]",
        counts=_tap_counts,
        stub=_empty,
    ),
    Language(  # a single-file HTML canvas game: webgame smoke in a headless browser (§4)
        name="webgame",
        nick="jsdev",
        patterns=("*.test.html", "*_test.html", "*.test.htm"),
        runner=("{python}", "-I", WEBGAME, "{spec}"),
        run_in_spec_dir=False,
        syntax_check=("{python}", "-I", WEBGAME, "--check", "{spec}"),
        test_pattern=r"<canvas\b|\bsmoke\(\s*['\"`]",
        counts=_tap_counts,
        stub=_empty,
        memory_mb=1024 * 1024,
    ),
)


def route(relative: str) -> Language | None:
    """The language whose patterns match the spec's path (relative to the build dir)."""
    return next((language for language in LANGUAGES if language.matches(relative)), None)


def by_name(name: str) -> Language:
    return next(language for language in LANGUAGES if language.name == name)


def kinds() -> str:
    """Every pattern, for a message saying which file types a build can grind."""
    return ", ".join(f"{' '.join(lang.patterns)} (@{lang.nick})" for lang in LANGUAGES)
