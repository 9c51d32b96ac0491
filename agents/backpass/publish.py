"""Step 5: the synthesis call, the branches and commits, the PR body, the state file.

Where things go (nothing is pushed, ever):
- private repository: a new branch `<prefix>/<date>` (`-2`, `-3` … when taken)
  from the run's base, in a worktree at `<runs>/<thread>/worktrees/private/<date>`;
  one commit for the ledger, then one commit per private memory edit;
- public repository: the same, at `…/worktrees/public/<date>`, one commit per
  public edit, only when there is one;
- `<runs>/<thread>/PR_BODY.md`: the funnel, the seats and the edits, for the
  pull request or the merge; it is left beside, never committed, so merging
  a branch never adds it to memory;
- the state file: the hashes of the traces that succeeded, written only
  after every commit landed. It is checked again before the first branch
  (it may have been edited while the analyses ran), so a file that is not a
  state file, or a folder the run cannot write in, stops the run with no
  branch made rather than after the branches.

The synthesis call is skipped (and said so) when the ledger did not change
or has no open lines: there is nothing new to synthesise. In report-only
mode the call is still made, its edits are previewed under
`<runs>/<thread>/preview/`, and nothing else is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from agents.backpass import ledger as ledgers
from agents.backpass import relay, seating
from agents.backpass.config import RunParams
from agents.backpass.funnel import Funnel, seat_label
from agents.backpass.gitwork import (
    RepoInfo,
    Worktree,
    add_worktree,
    commit,
    discard,
    free_branch,
    release,
    repos_from,
    show_file,
)
from agents.backpass.memory import Bullet, apply_edits, bullets
from agents.backpass.prompts import load_template, synthesis_request
from agents.backpass.schemas import Edit, bind_synthesis
from agents.backpass.threshold import hold_back
from agents.backpass.traces import StateFileError, check_state, update_state
from agents.roots import Roots
from agents.runtime.step import Reply, StepContext
from agents.wording import counted
from room.errors import SeatError, StepFailed
from trust.screen import HomeSecrets

__all__ = ["commit_message", "pr_body", "synthesize_and_publish"]

PREFIX = {"public": "PUB", "private": "PRV"}
REPOS = ("private", "public")


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """One run at a time writes branches and the state file (a timer and a person may overlap)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def describe_edit(edit: Edit, by_id: dict[str, Bullet]) -> str:
    old = by_id[edit.bullet].text if edit.bullet in by_id else ""
    if edit.op == "add":
        where = f" after {edit.bullet}" if edit.bullet else ""
        line = f"add{where}: “{edit.text}”"
    elif edit.op == "replace":
        line = f"replace {edit.bullet}: “{old}” → “{edit.text}”"
    else:
        line = f"remove {edit.bullet}: “{old}”"
    extra = [f"sources {', '.join(edit.sources)}"] if edit.sources else []
    extra += [edit.reason] if edit.reason else []
    return line + (f" — {'; '.join(extra)}" if extra else "")


def pr_body(
    *,
    date: str,
    thread: str,
    funnel: Funnel,
    edits: dict[str, list[str]],
    branches: dict[str, dict[str, Any]],
    summary: str,
    repos: dict[str, RepoInfo],
    relay_section: Sequence[str] = (),
) -> str:
    """The pull request's description: what was read, who judged, what changed, and the
    relay checklist (agents.backpass.relay) when tonight's edits need carrying on."""
    lines = [f"# memory-backpass: {date}", "", f"Run `{thread}`, written by bullpen.", ""]
    if funnel.report_only:
        lines += ["**Report only: no branch, no ledger and no state change were written.**", ""]
    lines += ["## Funnel", "", "```", funnel.render(), "```", "", "## Seats", ""]
    for role in sorted(funnel.seats):
        used = ", ".join(f"{label} ×{n}" for label, n in sorted(funnel.seats[role].items()))
        lines.append(f"- {role}: {used}")
    lines += [f"- fallbacks: {funnel.fallbacks}", "", "## Edits", ""]
    held = [f"- held back: {line}" for line in funnel.held_back]
    for repo in REPOS:
        branch = branches.get(repo, {}).get("branch")
        where = f"branch `{branch}` from `{repos[repo].base}`" if branch else "no branch"
        lines.append(f"### {repo} ({where})")
        lines += [f"- {text}" for text in edits.get(repo, [])] or ["- none"]
        lines.append("")
    if held:
        lines += ["### held back (under the session threshold)", *held, ""]
    if summary:
        lines += ["## Summary from the synthesis seat", "", summary, ""]
    lines += ["## Review and merge", ""]
    for repo in REPOS:
        info = branches.get(repo)
        if info:
            lines += [
                f"- {repo}: `git -C {repos[repo].path} log -p {repos[repo].default}.."
                f"{info['branch']}`, then `git merge {info['branch']}` on "
                f"`{repos[repo].default}` (or push the branch and open a pull request)",
            ]
    if not branches:
        lines.append("- nothing to merge")
    if relay_section:
        lines += ["", *relay_section]
    return "\n".join(lines).rstrip("\n") + "\n"


def _write(roots: Roots, path: Path, text: str) -> None:
    """Into the run folder only, and over a link rather than through it: a memory repository
    may commit `ledger.md` as a link to anywhere, and the worktree checks it out as one."""
    roots.write_bytes("runs", path, text.encode("utf-8"))


def commit_message(date: str, edit: Edit) -> str:
    """One edit's commit: its subject says what happened to which bullet."""
    if edit.op == "add":
        target = f"a bullet after {edit.bullet}" if edit.bullet else "a bullet at the end"
    else:
        target = str(edit.bullet)
    head = f"memory-backpass {date}: {edit.op} {target}"
    body = [edit.text or ""] if edit.op != "remove" else []
    body += [f"Reason: {edit.reason}"] if edit.reason else []
    body += [f"Ledger: {', '.join(edit.sources)}"] if edit.sources else []
    return head + ("\n\n" + "\n".join(body) if body else "")


def write_branches(
    *,
    params: RunParams,
    repos: dict[str, RepoInfo],
    folder: Path,
    date: str,
    ledger_text: str | None,
    ledger_counts: str,
    edits: dict[str, list[Edit]],
    texts: dict[str, list[str]],
    roots: Roots,
    screen: HomeSecrets | None = None,
) -> dict[str, dict[str, Any]]:
    """Branches and commits for tonight's ledger and edits; on failure nothing is left behind."""
    created: list[Worktree] = []
    results: dict[str, dict[str, Any]] = {}
    try:
        for repo in REPOS:
            has_ledger = repo == "private" and ledger_text is not None
            if not has_ledger and not edits[repo]:
                continue
            info = repos[repo]
            branch = free_branch(Path(info.path), f"{params.branch_prefix}/{date}")
            leaf = branch.rsplit("/", 1)[-1]  # unique, since the branch name is
            worktree = add_worktree(info, branch, folder / "worktrees" / repo / leaf)
            created.append(worktree)
            commits: list[str] = []
            if has_ledger:
                assert ledger_text is not None
                _write(roots, worktree.path / params.ledger, ledger_text)
                message = f"memory-backpass {date}: ledger\n\n{ledger_counts}"
                sha = commit(
                    worktree, message, [params.ledger], prefix=params.branch_prefix, screen=screen
                )
                commits += [sha] if sha else []
            for edit, text in zip(edits[repo], texts[repo], strict=True):
                _write(roots, worktree.path / params.memory_file, text)
                message = commit_message(date, edit)
                sha = commit(
                    worktree,
                    message,
                    [params.memory_file],
                    prefix=params.branch_prefix,
                    screen=screen,
                )
                commits += [sha] if sha else []
            results[repo] = {
                "branch": branch,
                "base": info.base,
                "worktree": str(worktree.path) if params.keep_worktrees else None,
                "commits": commits,
            }
        if not params.keep_worktrees:
            for worktree in created:
                release(worktree)
    except BaseException:
        for worktree in created:
            discard(worktree)
        raise
    return results


def _screen_outputs(
    screen: HomeSecrets,
    data: dict[str, Any],
    params: RunParams,
    date: str,
    ledger_text: str,
    edits: dict[str, list[Edit]],
    texts: dict[str, list[str]],
    summary: str,
) -> None:
    """Everything tonight would commit or put in the PR body, screened before the first
    branch: a hit fails the step naming the file it came from, and nothing is committed."""
    screen.check(ledger_text, f"the ledger {data['ledger_file']}")
    screen.check(summary, "the synthesis summary (for the PR body)")
    for repo in REPOS:
        for n, (edit, text) in enumerate(zip(edits[repo], texts[repo], strict=True), start=1):
            # Only the edit's number and op in the name: its text is what may hold the secret.
            where = f"the {repo} {params.memory_file} after edit {n} ({edit.op})"
            screen.check(text, where)
            screen.check(commit_message(date, edit), f"the commit message of {repo} edit {n}")


async def synthesize_and_publish(
    data: dict[str, Any], params: RunParams, folder: Path, ctx: StepContext, roots: Roots
) -> Reply:
    """The synthesizer step's work; see the module docstring."""
    repos = repos_from(data)
    date = str(data["date"])
    memory_text: dict[str, str] = {}
    memory: dict[str, list[Bullet]] = {}
    for repo, info in repos.items():
        text = show_file(Path(info.path), info.commit, params.memory_file)
        if text is None:
            raise StepFailed(f"{info.path} has no {params.memory_file} on {info.base}; commit one")
        memory_text[repo], memory[repo] = text, bullets(text, PREFIX[repo])
    try:
        ledger_text = roots.read_text("runs", str(data["ledger_file"]), "the run's ledger")
    except (KeyError, OSError, UnicodeDecodeError) as exc:
        raise StepFailed(f"cannot read the run's ledger: {exc}; run the backpass again") from None
    ledger_changed = bool(data.get("ledger_changed"))
    entries = ledgers.open_entries(ledgers.parse(ledger_text))
    funnel = Funnel.from_dict(data.get("funnel") or {})
    summary, provenance = "", None
    seat, fallback_used = None, False
    edits: dict[str, list[Edit]] = {repo: [] for repo in REPOS}
    refused = None
    if ledger_changed and entries:  # a call would be made: does the gateway have room for it?
        refused = await seating.budget_refusal(ctx.home, params, ctx.nick, "synthesis")
    if not ledger_changed:
        funnel.synthesis = "skipped: the ledger did not change, so nothing new to synthesise"
    elif not entries:
        funnel.synthesis = "skipped: the ledger has no open lines"
    elif refused:
        funnel.synthesis = (
            f"skipped: {refused}. No branch or state was written: every trace stays pending"
        )
        funnel.synthesis_refused = refused
    else:
        template = load_template(params.path(ctx.home, "synthesis_prompt"), "synthesis", roots)
        request = synthesis_request(
            template,
            date=date,
            entries=entries,
            public=memory["public"],
            private=memory["private"],
            min_sessions=params.min_sessions,
            cover_threshold=params.cover_threshold,
        )
        ids = [b.id for repo in REPOS for b in memory[repo]]
        schema = bind_synthesis(ids, [entry.id for entry in entries])
        try:
            judgment = await asyncio.wait_for(
                seating.judge(ctx, params, "synthesis", request, schema), timeout=params.timeout_s
            )
        except TimeoutError:
            raise StepFailed(
                f"the synthesis call ran over {params.timeout_s:.0f} s; nothing was written and "
                "every trace stays pending. Raise [backpass] timeout_s or check the synthesis seat"
            ) from None
        except SeatError as exc:
            raise StepFailed(f"no seat gave a valid synthesis: {exc.message}") from None
        summary, provenance = judgment.answer.summary, judgment.provenance()
        seat, fallback_used = judgment.seat, judgment.fallback_used
        funnel.add_seat(provenance)
        funnel.synthesis = f"called ({seat_label(provenance)})"
        edits = {repo: judgment.answer.for_repo(repo) for repo in REPOS}
        for repo in REPOS:  # the threshold for a new lesson, in code (agents.backpass.threshold)
            edits[repo], held = hold_back(edits[repo], entries, params.min_sessions)
            funnel.held_back += [h.line() for h in held]
    texts = {repo: apply_edits(memory_text[repo], PREFIX[repo], edits[repo]) for repo in REPOS}
    by_id = {b.id: b for repo in REPOS for b in memory[repo]}
    described = {repo: [describe_edit(e, by_id) for e in edits[repo]] for repo in REPOS}
    funnel.edits_public, funnel.edits_private = len(edits["public"]), len(edits["private"])
    for repo in REPOS:
        if texts[repo]:
            preview = folder / "preview" / f"{repo}-{params.memory_file.replace('/', '_')}"
            _write(roots, preview, texts[repo][-1])
    screen = ctx.home.screen
    _screen_outputs(screen, data, params, date, ledger_text, edits, texts, summary)
    branches: dict[str, dict[str, Any]] = {}
    succeeded = {str(t["path"]): str(t["sha256"]) for t in data.get("succeeded") or []}
    if not params.report_only and not refused:
        counts = (
            f"{funnel.new_lines} new lines, {funnel.corroborations} corroborations, "
            f"{funnel.prunes} prunes"
        )
        state = params.path(ctx.home, "state")
        with _lock(params.path(ctx.home, "runs") / ".backpass.lock"):
            try:
                await asyncio.to_thread(check_state, state, roots=roots)
            except StateFileError as exc:
                raise StepFailed(f"no branch was made: {exc}") from None
            branches = await asyncio.to_thread(
                write_branches,
                params=params,
                repos=repos,
                folder=folder,
                date=date,
                ledger_text=ledger_text if ledger_changed else None,
                ledger_counts=counts,
                edits=edits,
                texts=texts,
                roots=roots,
                screen=screen,
            )
            try:
                await asyncio.to_thread(update_state, state, succeeded, roots)
            except (OSError, StateFileError) as exc:
                written = ", ".join(f"{repo} {b['branch']}" for repo, b in branches.items())
                if written:
                    done = f"the branches were written ({written}), but"
                else:
                    done = "no branch was needed, but"
                raise StepFailed(
                    f"{done} the state file {state} could not be updated ({exc}). Fix what that "
                    "names; until then tonight's traces stay pending and are analysed again next run"
                ) from None
    body_path = folder / "PR_BODY.md"
    thread = folder.name
    edit_counts = {"public": funnel.edits_public, "private": funnel.edits_private}
    relay_lines = relay.checklist(branches, edit_counts, repos, params.private_nick)
    body_text = pr_body(
        date=date,
        thread=thread,
        funnel=funnel,
        edits=described,
        branches=branches,
        summary=summary,
        repos=repos,
        relay_section=relay.section(relay_lines, branches),
    )
    screen.check(body_text, f"the PR body {body_path}")
    _write(roots, body_path, body_text)
    where = ", ".join(f"{repo} {b['branch']}" for repo, b in branches.items()) or "no branch"
    body = (
        f"step 5: {counted(funnel.edits, 'edit')} (public {funnel.edits_public}, private "
        f"{funnel.edits_private}); {where}; "
        + (
            "report only: no branch, ledger or state written"
            if params.report_only
            else f"{counted(len(succeeded), 'trace')} marked done"
        )
    )
    return Reply(
        body,
        {
            "edits": {"public": funnel.edits_public, "private": funnel.edits_private},
            "described": described,
            "synthesis": funnel.synthesis,
            "synthesis_refused": funnel.synthesis_refused,
            "held_back": funnel.held_back,
            "seat": seat,
            "fallback_used": fallback_used,
            "provenance": provenance,
            "branches": branches,
            "state_updated": 0 if params.report_only or refused else len(succeeded),
            "pr_body": str(body_path),
            "relay": relay_lines if relay.section(relay_lines, branches) else [],
            "summary": summary[:2000],
            "report_only": params.report_only,
        },
    )
