"""The prompts of a build: what a code seat and the testdesign seat are told.

Self-contained, first line `step: <step>`: a remote seat sees only this.
A cmd code seat edits the files in its working directory; an openai one
answers JSON, so the answer format is spelled out for it.
"""

from __future__ import annotations

from typing import Any

OUTPUT_TAIL = 4000
FILES_ANSWER = (
    'Answer with ONLY a JSON object {"files": [{"path": "relative/path", "content": "the '
    'whole new file"}]}; paths are relative to the repository root.'
)


def code_prompt(
    job: dict[str, Any], spec_text: str, last_output: str, tier: str, iteration: int, kind: str
) -> str:
    """The code seat's prompt: problem, traps, the spec, the last failing output, constraints."""
    how = (
        "Edit the files in your working directory (the repository) so the spec passes."
        if kind == "cmd"
        else FILES_ANSWER
    )
    return "\n".join(
        [
            "step: code",
            f"You are the code seat {tier!r} of a test-first build, iteration {iteration}.",
            f"{how} Never change or delete the spec: it is the contract.",
            "",
            "PROBLEM:",
            str(job.get("problem", "")),
            "",
            "TRAPS (plausible-but-wrong fixes):",
            str(job.get("traps", "")),
            "",
            f"SPEC ({job['spec_relative']}):",
            spec_text,
            "",
            "LAST TEST RUN (its tail):",
            last_output[-OUTPUT_TAIL:],
            "",
            "CONSTRAINTS:",
            str(job.get("constraints", "")),
        ]
    )


def testdesign_prompt(job: dict[str, Any]) -> str:
    """The testdesign seat's prompt: write the executable spec at the test path."""
    return "\n".join(
        [
            "step: testdesign",
            f"Write an executable {job['language']} spec at {job['spec_relative']} (relative to "
            "the repository root) that covers the acceptance contract below and fails against "
            "the current stub.",
            FILES_ANSWER,
            "",
            "PROBLEM:",
            str(job.get("problem", "")),
            "",
            "ACCEPTANCE CONTRACT (STEP 1):",
            str(job.get("contract", "")),
            "",
            "TRAPS:",
            str(job.get("traps", "")),
            "",
            "STUB TARGETS: " + (", ".join(job.get("targets") or []) or "(none named)"),
        ]
    )
