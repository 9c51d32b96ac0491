"""Steps 5 and 6, the two that read and write files: excerpts and the brief.

    extract_excerpts  @excerpter  step 5: verbatim body excerpts behind the digest gates
    assemble_brief    @briefer    step 6: the brief behind the voice-anchor gate

Neither asks a model. The excerpter reads every chosen file, and a few more
lived files for voice anchors; the briefer re-checks the anchor from the
excerpt text itself rather than trusting an earlier step's word for it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agents.expedition import excerpts as cut
from agents.expedition.brief import (
    MISSING,
    BriefFront,
    banned_phrases,
    brief_filename,
    find_voice_anchor,
    missing_prompt,
    needs_anchor,
    render_brief,
)
from agents.expedition.config import ExpeditionConfig
from agents.expedition.kb import read_document
from agents.expedition.steps import (
    config_of,
    context_of,
    data_of,
    kb_of,
    read_blaze_step,
    roots_of,
)
from agents.roots import Roots
from agents.runtime.step import Reply, StepContext
from room.errors import StepFailed
from room.message import Message

_CARRIED = ("id", "file", "kind", "why", "connection", "embodies")


def _tell(config: ExpeditionConfig) -> re.Pattern[str]:
    return cut.tell_pattern(config.operator_names, config.digest_verbs)


def excerpt_entry(
    kb: Path, item: dict[str, Any], config: ExpeditionConfig, tell: re.Pattern[str]
) -> tuple[dict[str, Any] | None, str | None, str]:
    """(entry, flag, role) for one file: its gated excerpt, or the flag saying why none."""
    document, flag = read_document(kb, str(item["file"]))
    if document is None:
        return None, flag, ""
    result = cut.slice_excerpt(
        document.body,
        [document.summary, str(item.get("summary") or "")],
        tell,
        min_words=config.excerpt_min_words,
        max_words=config.excerpt_max_words,
        threshold=config.digest_similarity,
        prefix=config.digest_prefix_chars,
    )
    if result.excerpt is None:
        return None, cut.flag_for(str(item["file"]), result), document.role
    first_person = cut.voice_paragraphs(document.role, result.excerpt.text, tell)
    entry = {
        **{key: item[key] for key in _CARRIED if key in item},
        "role": document.role,
        **cut.as_data(result.excerpt),
        "first_person": first_person,
        "voice_anchor": first_person >= config.voice_anchor_paragraphs,
        "rejected_digest": result.rejected_digest,
        "rejected_tell": result.rejected_tell,
    }
    return entry, None, document.role


def extract_excerpts(message: Message, ctx: StepContext) -> Reply:
    """Step 5: an excerpt per chosen file, plus lived files that can anchor the voice."""
    context = context_of(message)
    data = data_of(message)
    config = config_of(ctx)
    tell = _tell(config)
    kb = kb_of(ctx, context)
    entries: list[dict[str, Any]] = []
    flags: list[str] = []
    for item in data.get("chosen") or []:
        entry, flag, _ = excerpt_entry(kb, item, config, tell)
        if entry is not None:
            entries.append(entry)
        if flag:
            flags.append(flag)
    found = sum(1 for e in entries if e["voice_anchor"])
    for item in data.get("others") or []:
        if found >= config.voice_anchors_wanted:
            break
        entry, flag, role = excerpt_entry(kb, {**item, "kind": "voice"}, config, tell)
        if flag and flag.startswith(("[KB_FILE", "[KB_FRONTMATTER")):
            flags.append(flag)
        if entry is not None and role == "lived" and entry["voice_anchor"]:
            entries.append(entry)
            found += 1
    body = f"{len(entries)} excerpts, {found} voice anchors"
    if flags:
        body += " " + " ".join(flags)
    return Reply(body, {"excerpts": entries, "flags": flags})


def _blaze_phrases(context: dict[str, Any], roots: Roots) -> list[str]:
    """The blaze's named phrases: its frontmatter `phrases`, then its quoted and bold ones."""
    if not context.get("blaze_path"):
        return []
    return read_blaze_step(Path(context["blaze_path"]), roots)[1]


def _write(roots: Roots, path: Path, text: str) -> None:
    """All or nothing: a brief is never half written, and only ever under the briefs root."""
    try:
        roots.write_bytes("briefs", path, text.encode("utf-8"), "the brief", mode=0o600)
    except OSError as exc:
        raise StepFailed(
            f"cannot write the brief to {path} ({exc.strerror or exc}); check [expedition] "
            "briefs in society.toml and the folder's permissions"
        ) from None


def assemble_brief(message: Message, ctx: StepContext) -> Reply:
    """Step 6: the brief, written only when the voice-anchor gate passes."""
    context = context_of(message)
    data = data_of(message)
    config = config_of(ctx)
    roots = roots_of(ctx)  # before anything else: the ask's folder is data from a poster
    briefs = roots.check("briefs", str(context.get("briefs") or ""), "the briefs folder")
    excerpts = [e for e in data.get("excerpts") or [] if isinstance(e, dict)]
    if not excerpts:
        raise StepFailed(
            "no confirmed candidate has a body excerpt, so there is nothing to brief; "
            "confirm a candidate with an excerpt or redirect the dig"
        )
    anchor = find_voice_anchor(excerpts, _tell(config), config.voice_anchor_paragraphs)
    voice = str(context["voice"])
    if anchor is None and needs_anchor(voice):
        prompt = missing_prompt(str(context["title"]), config.voice_anchor_paragraphs)
        return Reply(prompt, {"written": False, "voice_anchor": MISSING, "prompt": prompt})
    guidance = [str(e["text"]) for e in excerpts if str(e.get("role")).lower() == "guidance"]
    banned = banned_phrases(guidance, _blaze_phrases(context, roots))
    thread = message.thread or "run"
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
