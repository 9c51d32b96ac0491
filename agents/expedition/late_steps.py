"""Steps 5 and 6, the two that read and write files: excerpts and the brief.

    extract_excerpts  @excerpter  step 5: verbatim body excerpts behind the digest gates
    assemble_brief    @briefer    step 6: the brief behind the voice-anchor gate

Neither asks a model. The excerpter reads every chosen file, and then the
other retrieved files, best scored first, for lived voice anchors; the
briefer re-checks the anchor from the excerpt text itself rather than
trusting an earlier step's word for it, and checks a file the operator
pointed to (`confirm --anchor FILE`) with the same gates (agents.expedition.anchor).
On a host without the knowledge base, both read the files the retriever handed on,
fetched by their SHA-256 (agents.expedition.travel).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agents.expedition.anchor import (
    ANCHOR_ID,
    AnchorRefused,
    check_anchor,
    entry_of,
    judge_anchor,
    tell_of,
)
from agents.expedition.brief import (
    MISSING,
    BriefFront,
    VoiceAnchor,
    banned_phrases,
    brief_filename,
    find_voice_anchor,
    missing_prompt,
    needs_anchor,
    render_brief,
)
from agents.expedition.config import ExpeditionConfig
from agents.expedition.steps import (
    blaze_step,
    config_of,
    context_of,
    data_of,
    kb_of,
    roots_of,
)
from agents.expedition.travel import KbReader, handed_on
from agents.objects import here
from agents.roots import Roots
from agents.runtime.step import Reply, StepContext
from agents.wording import counted
from room.errors import StepFailed
from room.message import Message


async def extract_excerpts(message: Message, ctx: StepContext) -> Reply:
    """Step 5: an excerpt per chosen file, plus lived files that can anchor the voice.

    Each file is read from the knowledge base on this host, or fetched from the object
    store by the SHA-256 the retriever named for it (agents.expedition.travel)."""
    context = context_of(message)
    data = data_of(message)
    config = config_of(ctx)
    tell = tell_of(config)
    files = KbReader(ctx, kb_of(ctx, context))
    entries: list[dict[str, Any]] = []
    flags: list[str] = []
    for item in data.get("chosen") or []:
        entry, flag, _ = await _entry(files, item, config, tell)
        if entry is not None:
            entries.append(entry)
            flags += entry["review"]
        if flag:
            flags.append(flag)
    found = sum(1 for e in entries if e["voice_anchor"])
    for item in data.get("others") or []:  # every other retrieved file, best scored first
        if found >= config.voice_anchors_wanted:
            break
        entry, flag, role = await _entry(files, {**item, "kind": "voice"}, config, tell)
        if flag and flag.startswith(("[KB_FILE", "[KB_FRONTMATTER")):
            flags.append(flag)
        if entry is not None and role == "lived":  # left out as an anchor: a person should look
            flags += entry["review"]
        if entry is not None and role == "lived" and entry["voice_anchor"]:
            entries.append(entry)
            found += 1
            if flag:
                flags.append(flag)
    body = f"{len(entries)} excerpts, {found} voice anchors"
    if files.fetched:
        body += f" ({counted(len(files.fetched), 'file')} fetched from the store)"
    if flags:
        body += " " + " ".join(flags)
    return Reply(body, {"excerpts": entries, "flags": flags, "fetched": files.fetched})


async def _entry(
    files: KbReader, item: dict[str, Any], config: ExpeditionConfig, tell: re.Pattern[str]
) -> tuple[dict[str, Any] | None, str | None, str]:
    """excerpt_entry for one item, its file read here or fetched; the entry names the
    SHA-256 of the bytes it was cut from when the retriever named one."""
    read, sha = await files.read(item)
    entry, flag, role = entry_of(read, item, config, tell)
    if entry is not None and sha is not None:
        entry["sha256"] = sha
    return entry, flag, role


async def _pointed_anchor(
    ctx: StepContext, kb: Path, data: dict[str, Any], pointed: str, config: ExpeditionConfig
) -> dict[str, Any]:
    """The anchor the operator named, through check_anchor's gates: read from the knowledge
    base here, or, on a host without it, from the bytes of the file the run handed on
    (a direct hit, deep cut or excerpt named by its SHA-256), fetched and checked."""
    if kb.is_dir():
        return check_anchor(kb, pointed, config)
    item = handed_on(data, pointed)
    if item is None:
        raise AnchorRefused(
            f"the knowledge base {kb} is not on host {here()} where @{ctx.nick} runs, and "
            f"{pointed} is none of the files this run handed on; name a file the Dig Report "
            "lists, or run @briefer where the knowledge base is"
        )
    file = str(item["file"])
    read, sha = await KbReader(ctx, kb, "brief").read({"file": file, "sha256": item["sha256"]})
    return {**judge_anchor(read, file, config), "sha256": sha}


def _blaze_phrases(context: dict[str, Any], roots: Roots) -> list[str]:
    """The blaze's banned phrases: its frontmatter `phrases`, its marked spans, then its
    short plain-prose sentences (agents.expedition.phrases)."""
    if not context.get("blaze_path"):
        return []
    return blaze_step(Path(context["blaze_path"]), roots).banned


def _write(roots: Roots, path: Path, text: str) -> None:
    """All or nothing: a brief is never half written, and only ever under the briefs root."""
    try:
        roots.write_bytes("briefs", path, text.encode("utf-8"), "the brief", mode=0o600)
    except OSError as exc:
        raise StepFailed(
            f"cannot write the brief to {path} ({exc.strerror or exc}); check [expedition] "
            "briefs in society.toml and the folder's permissions"
        ) from None


async def assemble_brief(message: Message, ctx: StepContext) -> Reply:
    """Step 6: the brief, written only when the voice-anchor gate passes."""
    context = context_of(message)
    data = data_of(message)
    config = config_of(ctx)
    roots = roots_of(ctx)  # before anything else: the ask's folder is data from a poster
    briefs = roots.check("briefs", str(context.get("briefs") or ""), "the briefs folder")
    excerpts = [e for e in data.get("excerpts") or [] if isinstance(e, dict)]
    thread = message.thread or "run"
    voice = str(context["voice"])
    if not excerpts and not data.get("anchor") and not needs_anchor(voice):
        raise StepFailed(
            "no confirmed candidate has a body excerpt, so there is nothing to brief; "
            "confirm a candidate with an excerpt or redirect the dig"
        )
    # A Carbon brief with nothing confirmed has no voice anchor either: the MISSING prompt
    # below, with its three ways to supply one (000 §5, §7), not a failed step.
    pointed = str(data.get("anchor") or "").strip()
    if pointed:  # the operator named the anchor: it passes the gates again here, or no brief
        try:
            entry = await _pointed_anchor(ctx, kb_of(ctx, context), data, pointed, config)
        except AnchorRefused as exc:
            prompt = f"voice_anchor: {MISSING} — {exc.message}; the brief was not written."
            return Reply(prompt, {"written": False, "voice_anchor": MISSING, "prompt": prompt})
        excerpts = [e for e in excerpts if e.get("id") != ANCHOR_ID and e["file"] != entry["file"]]
        excerpts.append(entry)
        anchor: VoiceAnchor | None = VoiceAnchor(str(entry["file"]), int(entry["first_person"]))
    else:
        anchor = find_voice_anchor(excerpts, tell_of(config), config.voice_anchor_paragraphs)
    if anchor is None and needs_anchor(voice):
        prompt = missing_prompt(str(context["title"]), config.voice_anchor_paragraphs, thread)
        return Reply(prompt, {"written": False, "voice_anchor": MISSING, "prompt": prompt})
    guidance = [str(e["text"]) for e in excerpts if str(e.get("role")).lower() == "guidance"]
    banned = banned_phrases(guidance, _blaze_phrases(context, roots))
    try:
        front = BriefFront(
            title=context["title"],
            keyword_primary=context["keyword_primary"],
            slug=context["slug"],
            voice=voice,
            archetype_primary=context.get("archetype_primary"),
            monomyth_hint=context.get("monomyth_hint"),
            thread=thread,
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            voice_anchor=anchor.line() if anchor else f"none (not required for {voice})",
            banned_phrases=banned,
            direct_hits=[str(h["file"]) for h in data.get("direct_hits") or []],
            deep_cuts=[
                {"file": str(c["file"]), "connection": str(c["connection"])}
                for c in data.get("deep_cuts") or []
            ],
            sources=[
                {
                    "file": e["file"],
                    "kind": e.get("kind"),
                    "role": e.get("role"),
                    "words": e["words"],
                }
                for e in excerpts
            ],
            search_terms=[str(t) for t in data.get("terms") or []],
            redirects=[str(r) for r in data.get("redirects") or []],
            dropped=[str(d) for d in data.get("dropped") or []],
            flags=[str(f) for f in data.get("flags") or []],
        )
    except (ValidationError, KeyError) as exc:
        raise StepFailed(f"the brief did not validate and was not written: {exc}") from None
    path = briefs / brief_filename(front.slug, thread)
    _write(roots, path, render_brief(front, str(context["pattern"]), excerpts))
    return Reply(
        f"brief written: {path}",
        {
            "written": True,
            "path": str(path),
            "voice_anchor": front.voice_anchor,
            "banned_phrases": banned,
        },
    )
