"""The prompts of a build: what a code seat and the testdesign seat are told.

Self-contained, first line `step: <step>`: a remote seat sees only this.
A model is shown what its change needs (agents/build/repomap.py): the
repository's map, the full current text of the files it may change, its
own last change as a diff and the failing output, and — when its last
answer did not apply — why. It is also told the lessons its grinder was
handed on this wake, and the `/bullpen/sandbox` and `/bullpen/ops` entries
its step recalled for it (agents/memory/manual.py): the seed's escalation
recipe, followed by the step, since a fenced seat can neither ask @librarian
nor run `bullpen memory recall`. The prompt gives no instruction the seat
cannot follow from where it runs.

A cmd code seat edits the files in its working directory; an openai one
answers JSON edits of numbered lines (agents/build/edits.py), so its files
are shown with their lines numbered and the format is spelled out, with
placeholders (`<file>`, `<number>`) that fail the checks if copied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.build.edits import shown_lines
from agents.memory.lessons import block
from agents.memory.manual import manual_block, recall_manual

if TYPE_CHECKING:
    from agents.build.repomap import RepoView
    from agents.home import Home
    from agents.memory.lessons import Lesson

__all__ = [
    "ANSWER_FORMAT",
    "CodeContext",
    "code_prompt",
    "numbered",
    "step_memory",
    "testdesign_prompt",
]

OUTPUT_TAIL = 4000
DIFF_TAIL = 6000
ANSWER_FORMAT = (
    "Answer with ONLY a JSON object\n"
    '{"edits": [{"path": "<file>", "start": <number>, "end": <number>, "old": "<those lines as '
    'they are>", "new": "<the lines that replace them>"}], "files": [{"path": "<new file>", '
    '"content": "<the whole file>"}]}\n'
    "FILES shows each line after its number and '| '. An edit replaces the lines start to end "
    "of one file shown under FILES: old is those lines copied exactly, without their numbers "
    "(several lines joined by a newline), new the lines that replace them (empty to delete "
    "them). The numbers are the file's as shown, for every edit of one answer; edits may not "
    "overlap. A whole file is for a new file, or a file shown in full. Give edits, files, or "
    "both; paths are relative to the repository root. If any edit does not apply, none of "
    "the answer is applied and the next prompt says why."
)


NEW_FILES_FORMAT = (
    'Answer with ONLY a JSON object {"files": [{"path": "relative/path", "content": "the whole '
    'new file"}]}; paths are relative to the repository root, and only new files are written.'
)


def step_memory(home: Home, job: dict[str, Any]) -> list[Lesson]:
    """The /bullpen/sandbox and /bullpen/ops entries a step recalls for its seat, by the
    ticket's words (agents/memory/manual.py): what the escalation recipe would have found."""
    words = " ".join(str(job.get(key) or "") for key in ("problem", "traps", "constraints"))
    return recall_manual(home, words)


@dataclass(frozen=True)
class CodeContext:
    """Everything one code-seat turn is shown."""

    tier: str
    iteration: int
    kind: str  # cmd or openai
    spec_relative: str
    spec_text: str
    last_output: str
    view: RepoView | None = None
    last_change: str = ""  # the seat's own last change, as a diff
    refused: str | None = None  # why its last answer was not applied
    lessons: list[Lesson] = field(default_factory=list)
    memory: list[Lesson] = field(default_factory=list)  # /bullpen/sandbox, /bullpen/ops


def _section(title: str, text: Any) -> list[str]:
    """One titled part of the ticket, as both prompts show it."""
    return [f"{title}:", str(text or ""), ""]


def numbered(text: str) -> str:
    """`text` with each line after its number and '| ', as an openai code seat's edits name
    them (agents/build/edits.py: shown_lines)."""
    lines = shown_lines(text)
    width = len(str(len(lines)))
    return "\n".join(f"{n:>{width}}| {line}" for n, line in enumerate(lines, 1))


def _files(view: RepoView | None, numbers: bool = False) -> list[str]:
    if view is None:
        return []
    lines = ["REPOSITORY MAP (path, size, top-level definitions):", view.map_text or "(empty)", ""]
    if view.files:
        said = ", each line after its number" if numbers else ""
        lines.append(f"FILES (the full current text of each file you may change{said}):")
        for path, text in view.files.items():
            shown = numbered(text) if numbers else text.rstrip("\n")
            lines += [f"--- {path}", shown, f"--- end of {path}", ""]
    else:
        lines += ["FILES: none yet (answer new files whole)", ""]
    if view.left_out:
        lines += ["LEFT OUT of this prompt (budget): " + "; ".join(view.left_out), ""]
    return lines


def code_prompt(job: dict[str, Any], context: CodeContext) -> str:
    """The code seat's prompt: lessons, the problem, the repository, the spec, the last turn."""
    how = (
        "Edit the files in your working directory (the repository) so the spec passes."
        if context.kind == "cmd"
        else ANSWER_FORMAT
    )
    lessons = block(context.lessons)
    lines = [
        "step: code",
        *([lessons.rstrip("\n")] if lessons else []),
        f"You are the code seat {context.tier!r} of a test-first build, iteration "
        f"{context.iteration}. Make the spec pass. Never change or delete the spec: it is the "
        "contract.",
        "",
        *_section("PROBLEM", job.get("problem")),
        *_section("TRAPS (plausible-but-wrong fixes)", job.get("traps")),
        *_section("CONSTRAINTS", job.get("constraints")),
        *_files(context.view, numbers=context.kind != "cmd"),
        f"SPEC ({context.spec_relative}, read-only):",
        context.spec_text.rstrip("\n"),
        "",
    ]
    if context.refused:
        lines += ["YOUR LAST ANSWER WAS NOT APPLIED:", context.refused, ""]
    if context.last_change:
        lines += ["YOUR LAST CHANGE (a diff; it is in the files above):",
                  context.last_change[-DIFF_TAIL:], ""]  # fmt: skip
    lines += [
        "LAST TEST RUN (its tail):",
        context.last_output[-OUTPUT_TAIL:],
        "",
        manual_block(context.memory),
        "",
        how,
    ]
    return "\n".join(lines)


def testdesign_prompt(
    job: dict[str, Any], view: RepoView | None = None, memory: list[Lesson] | None = None
) -> str:
    """The testdesign seat's prompt: write the executable spec at the test path; `memory`:
    the /bullpen/sandbox and /bullpen/ops entries its step recalled for it."""
    return "\n".join(
        [
            "step: testdesign",
            f"Write an executable {job['language']} spec at {job['spec_relative']} (relative to "
            "the repository root) that covers the acceptance contract below and fails against "
            "the current code. Answer it as a new file under files; the files shown are for "
            "reading only: a spec writer changes none of them.",
            "",
            *_section("PROBLEM", job.get("problem")),
            *_section("ACCEPTANCE CONTRACT (STEP 1)", job.get("contract")),
            *_section("TRAPS", job.get("traps")),
            "TARGETS: " + (", ".join(job.get("targets") or []) or "(none named)"),
            "",
            *_files(view),
            manual_block(memory or []),
            "",
            NEW_FILES_FORMAT,
        ]
    )
