"""The relay (steps 1 and 9 of the skill): what a merged backpass asks of the next one.

A run's edits do not end at its branch. Public edits wait on a second,
unpushed branch that someone must carry into public memory; private bullets
reach an agent only after `bullpen memory sync`. So the PR body (step 9)
carries a relay checklist, labelled `relay`::

    ## Relay
    Label: relay
    <!-- relay-branch: private memory-backpass/2026-10-20 <commit> -->
    - [ ] relay: merge the public branch `memory-backpass/2026-10-20` (2 edits) ...
    - [ ] relay: after merging, run `bullpen memory sync` ...

The person who merges ticks a line (`- [x]`) in `<runs>/<thread>/PR_BODY.md`
(or in the pull request made from it) once it is done. At the start of
every run (step 1) the run folders are read: a PR body titled
`# memory-backpass:` with the label, whose private branch's commit is
merged into the private default branch, and which still has an unchecked
relay line, is listed — in step 1's reply, on the operator's screen as the
run starts, and in the funnel. A branch not merged yet is not listed: its
review is still open, and the run builds on it anyway.

PR bodies are data a person may edit: they are read only from under the
runs root, and the commit they name must be 40 hex digits before git sees it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agents.backpass.gitwork import git
from agents.roots import FileTooLarge, OutsideRoot, Roots

__all__ = ["LABEL", "OpenRelay", "announce", "checklist", "open_relays", "section"]

LABEL = "relay"
TITLE = "# memory-backpass:"
BODY_NAME = "PR_BODY.md"
MAX_BODIES = 200  # run folders read at the start of a run, newest first
MAX_BODY_BYTES = 256 * 1024

_MARKER = re.compile(
    r"^<!-- relay-branch: private (?P<branch>[A-Za-z0-9._/-]{1,200}) (?P<sha>[0-9a-f]{40}) -->$",
    re.M,
)
_LABEL_LINE = re.compile(rf"^Label: {LABEL}\s*$", re.M)
_UNCHECKED = re.compile(r"^- \[ \] (?P<text>relay: .+)$", re.M)


@dataclass(frozen=True)
class OpenRelay:
    """A merged backpass whose PR body still has unchecked relay lines."""

    pr_body: str
    branch: str
    lines: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def checklist(
    branches: Mapping[str, Mapping[str, Any]],
    edits: Mapping[str, int],
    repos: Mapping[str, Any],
    private_nick: str | None,
) -> list[str]:
    """The relay lines tonight's edits call for; none when nothing needs carrying on."""
    lines: list[str] = []
    public = branches.get("public")
    if public and edits.get("public"):
        where = getattr(repos.get("public"), "path", "the public memory")
        default = getattr(repos.get("public"), "default", "its default branch")
        lines.append(
            f"relay: merge the public branch `{public['branch']}` ({edits['public']} edits) "
            f"into `{default}` of {where}, and push it where public memory is shared"
        )
    if branches.get("private") and edits.get("private"):
        who = f"@{private_nick}" if private_nick else "the agents"
        lines.append(
            f"relay: after merging, run `bullpen memory sync` so {who} recall the new "
            "private bullets"
        )
    return lines


def section(lines: Sequence[str], branches: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The PR body's relay section: the label, the private branch's marker, the checklist."""
    private = branches.get("private")
    commits = list((private or {}).get("commits") or [])
    if not lines or not private or not commits:
        return []
    marker = f"<!-- relay-branch: private {private['branch']} {commits[-1]} -->"
    return ["## Relay", "", f"Label: {LABEL}", marker, *(f"- [ ] {line}" for line in lines), ""]


def _merged(repo: Path, sha: str, default: str) -> bool:
    code, _, _ = git(repo, "merge-base", "--is-ancestor", sha, f"refs/heads/{default}", check=False)
    return code == 0


def open_relays(runs: Path, roots: Roots, private: Path, default: str) -> list[OpenRelay]:
    """Merged backpasses whose PR bodies have unchecked relay lines, newest first."""
    try:
        folders = sorted(
            (p for p in runs.iterdir() if p.is_dir() and (p / BODY_NAME).is_file()),
            key=lambda p: (p / BODY_NAME).stat().st_mtime,
            reverse=True,
        )[:MAX_BODIES]
    except OSError:
        return []
    found: list[OpenRelay] = []
    for folder in folders:
        path = folder / BODY_NAME
        try:
            raw = roots.read_bytes("runs", path, "a PR body", limit=MAX_BODY_BYTES)
        except (OSError, FileTooLarge, OutsideRoot):  # an unreadable old PR body lists nothing
            continue
        text = raw.decode("utf-8", "replace")
        marker = _MARKER.search(text)
        if not text.startswith(TITLE) or not _LABEL_LINE.search(text) or marker is None:
            continue
        lines = [m["text"] for m in _UNCHECKED.finditer(text)]
        if lines and _merged(private, marker["sha"], default):
            found.append(OpenRelay(str(path), marker["branch"], lines))
    return found


def announce(relays: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the operator is shown as a run starts: each open relay, then its lines."""
    out: list[str] = []
    for relay in relays:
        lines = [str(line) for line in relay.get("lines") or []]
        out.append(
            f"RELAY open: {relay.get('branch')} is merged but its PR body "
            f"({relay.get('pr_body')}) has {len(lines)} unchecked relay line(s):"
        )
        out += [f"  - [ ] {line}" for line in lines]
    return out
