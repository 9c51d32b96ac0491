"""The operator's report of a build: green or red, and where to look.

The final report's data is a contract read by the web view:
`{"kind": "build-report", "green", "tier", "passing", "total", "clone",
"iterations"}` always, whatever ended the run; the body says the same for
a person, with the review commands of §8.5. The clone holds no `.git` (its
git directory is kept beside it, agents/git/apart.py), so the history commands
name that directory; an operator's git run inside the clone finds nothing the
grind's code planted.
"""

from __future__ import annotations

from typing import Any

from agents.seats.tally import Tally

__all__ = ["failed_report", "grind_report", "report_data"]


def report_data(
    *,
    green: bool,
    tier: str | None = None,
    passing: int = 0,
    total: int = 0,
    clone: str | None = None,
    iterations: dict[str, int] | None = None,
    **more: Any,
) -> dict[str, Any]:
    return {
        "kind": "build-report",
        "green": green,
        "tier": tier,
        "passing": passing,
        "total": total,
        "clone": clone,
        "iterations": dict(iterations or {}),
        **more,
    }


def review_commands(clone: str, baseline: str, build_dir: str, gitdir: str = "") -> list[str]:
    gitdir = gitdir or f"{clone}.git"  # where agents/git/apart.py keeps it
    return [
        f"git --git-dir {gitdir} diff --stat {baseline} HEAD   # what the grind changed",
        f"git --git-dir {gitdir} log --oneline {baseline}..   # the climb, one commit per "
        "iteration",
        f"ls {clone}   # the full green tree: the canonical artifact",
        f"git -C {build_dir} status   # the build dir keeps the stub",
    ]


def grind_report(grind: dict[str, Any], routed: str | None) -> tuple[str, dict[str, Any]]:
    """The body and data of the final report of a grind that ran."""
    green = bool(grind.get("green"))
    passing, total = int(grind.get("passing", 0)), int(grind.get("total", 0))
    iterations = {str(k): int(v) for k, v in (grind.get("iterations") or {}).items()}
    tier = grind.get("tier") if green else None
    if green:
        head = f"BUILD GREEN — {passing}/{total} tests passing"
        head += f"; tier {tier} produced the green" if tier else " (already green, no change)"
    else:
        head = f"BUILD RED — {passing}/{total} tests passing after the whole ladder"
    lines = [head]
    climbed = ", ".join(f"{name} {count}" for name, count in iterations.items()) or "none"
    lines.append(f"iterations: {climbed}")
    if grind.get("skipped"):
        lines.append(f"skipped (local seats write no code): {', '.join(grind['skipped'])}")
    lines.append(f"fence: {grind.get('fence')}")
    seat_fence = {str(k): str(v) for k, v in (grind.get("seat_fence") or {}).items()}
    if seat_fence:  # only seats that ran a program here (an openai seat's files are written)
        lines.append("seat fence: " + ", ".join(f"{t} {f}" for t, f in seat_fence.items()))
    if grind.get("model"):  # an openai code seat's answers: attempts, rescues, misses
        lines.append(f"model answers: {Tally(**grind['model']).line()}")
    lines.append(f"clone (the artifact): {grind.get('clone')}")
    lines.append(f"baseline (the diff boundary): {grind.get('baseline')}")
    artifact = grind.get("artifact") if isinstance(grind.get("artifact"), dict) else None
    if grind.get("artifact_problem"):
        lines.append(f"artifact: not handed on ({grind['artifact_problem']})")
    if artifact:
        lines.append(
            f"artifact: bundle {artifact.get('sha256')} ({artifact.get('bytes')} bytes, commit "
            f"{str(artifact.get('commit'))[:12]}) in the room's object store, from "
            f"@{artifact.get('nick')} on host {artifact.get('host')}"
        )
    if routed:
        lines.append(routed)
    for problem in grind.get("problems") or []:
        lines.append(f"problem: {problem}")
    if grind.get("diff_stat"):
        lines += ["git diff --stat:", str(grind["diff_stat"])]
    lines.append("review:")
    lines += [
        "  " + c
        for c in review_commands(
            str(grind.get("clone")),
            str(grind.get("baseline")),
            str(grind.get("build_dir")),
            str(grind.get("gitdir") or ""),
        )
    ]
    data = report_data(
        green=green,
        tier=tier,
        passing=passing,
        total=total,
        clone=grind.get("clone"),
        iterations=iterations,
        fence=grind.get("fence"),
        seat_fence=seat_fence,
        baseline=grind.get("baseline"),
        gitdir=grind.get("gitdir"),
        diff_stat=grind.get("diff_stat"),
        problems=list(grind.get("problems") or []),
        routed=routed,
        outcome="green" if green else "red",
        **({"artifact": artifact} if artifact else {}),
        **(
            {"artifact_problem": grind["artifact_problem"]} if grind.get("artifact_problem") else {}
        ),
    )
    return "\n".join(lines), data


def failed_report(
    step: str, reason: str, spec: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """`[<STEP> FAILED — reason]`, with the contract's keys."""
    spec = spec or {}
    body = f"[{step} FAILED — {reason}]"
    data = report_data(
        green=False,
        passing=int(spec.get("passing", 0)),
        total=int(spec.get("total", 0)),
        failed=True,
        failed_step=step,
        reason=reason,
        outcome="failed",
    )
    return body, data
