"""One knowledge-base file as an excerpt, and as the voice anchor the operator points to.

Step 5 cuts an excerpt from each chosen file here; the operator may also
name a file themselves (`bullpen expedition confirm THREAD --anchor FILE`),
and that file must pass exactly the gates a found anchor passes: a lived
file of this knowledge base, body prose below the frontmatter, not the
digest layer, first-person in enough paragraphs with no third-person tell.
`check_anchor` is the one place that decision is made: the command calls it
before it posts anything, the briefer again before it writes (the answer is
data from a poster), and any other front end (a web page) can call it too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.expedition import excerpts as cut
from agents.expedition.config import ExpeditionConfig
from agents.expedition.kb import Document, locate, on_disk, read_document
from agents.roots import inside

if TYPE_CHECKING:
    from agents.home import Home

_CARRIED = ("id", "file", "kind", "why", "connection", "embodies")
ANCHOR_ID = "anchor"  # the id a pointed-to anchor carries in the brief's excerpts


class AnchorRefused(Exception):
    """The file the operator pointed to cannot anchor the voice; `message` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def tell_of(config: ExpeditionConfig) -> re.Pattern[str]:
    return cut.tell_pattern(config.operator_names, config.digest_verbs)


def excerpt_entry(
    kb: Path, item: dict[str, Any], config: ExpeditionConfig, tell: re.Pattern[str]
) -> tuple[dict[str, Any] | None, str | None, str]:
    """(entry, flag, role) for one file: its gated excerpt and any flag, or the flag saying why none.

    A short lived file comes back as an entry and `[EXCERPT_SHORT:file]` both.
    """
    return entry_of(read_document(kb, str(item["file"])), item, config, tell)


def entry_of(
    read: tuple[Document | None, str | None],
    item: dict[str, Any],
    config: ExpeditionConfig,
    tell: re.Pattern[str],
) -> tuple[dict[str, Any] | None, str | None, str]:
    """excerpt_entry for a file already read (`read`: read_document's answer), here or
    fetched by its hash from the object store (agents/expedition/travel.py)."""
    document, flag = read
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
        keep_short=document.role == "lived",
    )
    flag = cut.flag_for(str(item["file"]), result)
    if result.excerpt is None:
        return None, flag, document.role
    first_person = cut.voice_paragraphs(document.role, result.excerpt.text, tell)
    tellers = cut.unlisted_tellers(result.excerpt.text, config.operator_names, config.digest_verbs)
    entry = {
        **{key: item[key] for key in _CARRIED if key in item},
        "role": document.role,
        **cut.as_data(result.excerpt),
        "short": result.short,
        "first_person": first_person,
        # narration under a name the operator did not list is never taken as lived prose
        "voice_anchor": first_person >= config.voice_anchor_paragraphs and not tellers,
        "unlisted_tellers": tellers,
        "review": [review_flag(str(item["file"]), name) for name in tellers],
        "rejected_digest": result.rejected_digest,
        "rejected_tell": result.rejected_tell,
    }
    return entry, flag, document.role


def review_flag(file: str, name: str) -> str:
    """The flag a line narrating `name` (not in operator_names) earns its file."""
    return f"[DIGEST_NAME_UNLISTED:{file}:{name}]"


def kb_name(kb: Path, typed: str, cwd: Path | None = None) -> str:
    """The path inside the knowledge base a typed name means, as it is on disk.

    A path that exists from the shell's folder (or is absolute) and lies in
    the knowledge base is made relative to it; anything else is read as a
    path inside the knowledge base, as the index writes them (a leading
    `Corpus/` is tolerated). AnchorRefused when it names no file there.
    """
    root = kb.resolve()
    given = Path(typed).expanduser()
    here = given if given.is_absolute() else (cwd or Path.cwd()) / given
    if here.is_file() and inside(root, here.resolve()):
        return here.resolve().relative_to(root).as_posix()
    path, flag = locate(kb, typed)
    if path is None:
        where = "lies outside" if flag and "OUTSIDE" in flag else "is not a file in"
        raise AnchorRefused(
            f"{typed} {where} the run's knowledge base {kb}; name a file inside it, as the Dig "
            "Report lists them (e.g. voice-logs/2024-03-glue-up.md)"
        )
    return on_disk(kb, typed) or typed


def check_anchor(kb: Path, file: str, config: ExpeditionConfig) -> dict[str, Any]:
    """The excerpt entry of the file the operator named, or AnchorRefused saying why not."""
    name = kb_name(kb, file)
    return judge_anchor(read_document(kb, name), name, config)


def judge_anchor(
    read: tuple[Document | None, str | None], name: str, config: ExpeditionConfig
) -> dict[str, Any]:
    """check_anchor's gates on a file already read (read_document's answer), here or
    fetched by its hash (agents/expedition/travel.py): its entry, or AnchorRefused."""
    item = {"id": ANCHOR_ID, "file": name, "kind": "voice"}
    entry, flag, role = entry_of(read, item, config, tell_of(config))
    need = config.voice_anchor_paragraphs
    if entry is None and flag and flag.startswith("[KB_"):
        raise AnchorRefused(f"{name} cannot be read as a knowledge-base file: {flag}")
    if role != "lived":
        said = f"is role: {role}" if role else "has no role in its frontmatter"
        raise AnchorRefused(
            f"{name} {said}, not role: lived; a voice anchor is the operator's own lived "
            "prose (a voice log or transcript)"
        )
    if entry is None:
        raise AnchorRefused(
            f"{name} has no body prose that passes the gates ({flag}): its body is the digest "
            "layer or third-person narration, not first-person prose"
        )
    if entry["unlisted_tellers"]:
        names = ", ".join(entry["unlisted_tellers"])
        raise AnchorRefused(
            f"{name}'s excerpt has a line of third-person narration naming {names}, which is "
            "not in [expedition] operator_names; if that is how the corpus names you, add it "
            "there, otherwise point to a file of your own first-person prose"
        )
    if not entry["voice_anchor"]:
        raise AnchorRefused(
            f"{name}'s excerpt has first-person prose in {entry['first_person']} paragraph(s) "
            f"without third-person narration; a voice anchor needs {need} or more"
        )
    return entry


def anchor_for_run(home: Home, request: dict[str, Any], typed: str) -> dict[str, Any]:
    """check_anchor against the knowledge base a run reads (its ask's `kb`, else the home's).

    What `bullpen expedition confirm --anchor` (and any other front end
    answering a run) calls before it posts: AnchorRefused says why not.
    """
    config = ExpeditionConfig.from_home(home)
    kb = request.get("kb")
    paths = config.paths(home, kb=str(kb) if kb else None)
    return check_anchor(paths.kb, typed, config)
