"""What a code seat is shown of the repository: a map of it, and the files it must change.

A model cannot read a repository; it answers about what its prompt holds.
So the prompt carries (1) a map: every file's path, size and top-level
definitions (Python through `ast`, Go and JavaScript through line patterns),
and (2) the full current text of the files the seat will change — the
ticket's targets, the spec, and every file of the repository the spec
imports — within a token budget. What does not fit is named as left out,
never silently cut, and only a file shown in full may be answered as a
whole file or edited (agents/build/edits.py).

Reads stay inside the clone: links and .git are skipped, files are read
as text with bad bytes replaced, and a binary file is listed without its
text. The repository is hostile input: a file's text reaches a model and
nothing else.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

__all__ = ["RepoView", "definitions", "imported_files", "script_sources", "view_repo"]

CHARS_PER_TOKEN = 4  # a rough, model-independent estimate: the budget is a bound, not a count
MAX_MAP_FILES = 400
MAX_DEFS = 12  # per file on the map
SKIP_DIRS = {".git", "__pycache__", "node_modules", ".pytest_cache", ".mypy_cache", ".venv"}
MAX_READ = 256 * 1024  # a file larger than this is never shown in full

_GO_DEF = re.compile(r"^(?:func\s+(?:\([^)]*\)\s*)?(\w+)|type\s+(\w+))", re.M)
_JS_DEF = re.compile(
    r"^(?:export\s+(?:default\s+)?)?(?:async\s+)?(?:function\s*\*?\s*(\w+)|class\s+(\w+)"
    r"|(?:const|let|var)\s+(\w+)\s*=)|^(?:module\.)?exports\.(\w+)\s*=",
    re.M,
)
_PY_IMPORT = re.compile(
    r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w.]+(?:\s*,\s*[\w.]+)*))", re.M
)
_JS_IMPORT = re.compile(
    r"""(?:require\s*\(\s*|from\s+|import\s*\(\s*|import\s+)['"](\.{1,2}/[^'"]+)['"]"""
)
_HTML_SRC = re.compile(r"""<script[^>]*\bsrc\s*=\s*['"]([^'"]+)['"]""", re.I)


@dataclass
class RepoView:
    """The repository as one prompt shows it."""

    map_text: str
    files: dict[str, str] = field(default_factory=dict)  # shown in full: path -> text
    left_out: list[str] = field(default_factory=list)  # what the budget (or size) left out

    @property
    def shown(self) -> set[str]:
        return set(self.files)


def _listing(root: Path) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".cache"))
        for name in sorted(names):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            found.append((path.relative_to(root).as_posix(), path.stat().st_size))
    return found


def _read(root: Path, relative: str) -> str | None:
    """The file's text, or None when it is no text file inside the clone."""
    path = root / relative
    try:
        if path.is_symlink() or not path.resolve().is_relative_to(root.resolve()):
            return None
        raw = path.read_bytes()[: MAX_READ + 1]
    except OSError:
        return None
    if b"\0" in raw[:4096]:
        return None
    return raw.decode("utf-8", "replace")


def definitions(relative: str, text: str) -> list[str]:
    """The top-level names a file defines, as a reader scanning it would list them."""
    suffix = PurePosixPath(relative).suffix
    names: list[str] = []
    if suffix == ".py":
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return ["(does not parse)"]
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.append(f"def {node.name}")
            elif isinstance(node, ast.ClassDef):
                methods = [n.name for n in node.body if isinstance(n, ast.FunctionDef)]
                names.append(
                    f"class {node.name}" + (f"({', '.join(methods[:6])})" if methods else "")
                )
            elif isinstance(node, ast.Assign):
                names += [t.id for t in node.targets if isinstance(t, ast.Name) and t.id.isupper()]
    elif suffix == ".go":
        names = [f"func {m[0]}" if m[0] else f"type {m[1]}" for m in _GO_DEF.findall(text)]
    elif suffix in (".js", ".mjs", ".cjs"):
        names = [next(g for g in m if g) for m in _JS_DEF.findall(text)]
    return names[:MAX_DEFS] + (["…"] if len(names) > MAX_DEFS else [])


def script_sources(page: str) -> list[str]:
    """The local scripts an HTML page loads (`<script src>`, no URL with a scheme)."""
    return [src for src in _HTML_SRC.findall(page) if "://" not in src and not src.startswith("//")]


def _py_module_files(root: Path, spec: PurePosixPath, module: str) -> list[str]:
    parts = module.lstrip(".").split(".")
    bases = [PurePosixPath()]
    if module.startswith(".") or spec.parent != PurePosixPath("."):
        bases.append(spec.parent)
    found = []
    for base in bases:
        for depth in range(len(parts), 0, -1):
            stem = base.joinpath(*parts[:depth])
            for candidate in (f"{stem}.py", f"{stem}/__init__.py"):
                if (root / candidate).is_file():
                    found.append(candidate)
                    break
            else:
                continue
            break
    return found


def imported_files(root: Path, spec_relative: str, spec_text: str) -> list[str]:
    """The repository's own files the spec imports (its language's way), in import order."""
    spec = PurePosixPath(spec_relative)
    found: list[str] = []
    if spec.suffix == ".py":
        for frm, names in _PY_IMPORT.findall(spec_text):
            for module in [frm] if frm else [n.strip() for n in names.split(",")]:
                found += _py_module_files(root, spec, module)
    elif spec.suffix in (".js", ".mjs", ".cjs", ".html", ".htm"):
        html = spec.suffix in (".html", ".htm")
        for given in script_sources(spec_text) if html else _JS_IMPORT.findall(spec_text):
            target = os.path.normpath((spec.parent / given).as_posix())
            for candidate in (target, f"{target}.js", f"{target}/index.js"):
                if not candidate.startswith("..") and (root / candidate).is_file():
                    found.append(candidate)
                    break
    elif spec.suffix == ".go":  # a Go test sees its whole package: the folder's .go files
        folder = root / spec.parent
        found = sorted(
            (spec.parent / p.name).as_posix()
            for p in folder.glob("*.go")
            if not p.name.endswith("_test.go")
        )
    return list(dict.fromkeys(found))


def view_repo(
    root: Path, spec_relative: str, spec_text: str, targets: list[str], budget_tokens: int
) -> RepoView:
    """The map and the files to show in full (the targets, then what the spec imports),
    within `budget_tokens` less the spec's own text, which the prompt always shows; what is
    left out is named."""
    listing = _listing(root)
    sizes = dict(listing)
    wanted = [*targets, *imported_files(root, spec_relative, spec_text)]
    budget = (budget_tokens * CHARS_PER_TOKEN) - len(spec_text)
    view = RepoView("")
    for relative in dict.fromkeys(os.path.normpath(w) for w in wanted):
        if relative == spec_relative or relative not in sizes:
            continue  # a target not made yet: the seat may answer it as a new file
        text = _read(root, relative)
        if text is None or len(text) > MAX_READ:
            view.left_out.append(f"{relative} (binary or over {MAX_READ // 1024} KiB)")
        elif len(text) > budget:
            view.left_out.append(f"{relative} ({sizes[relative]} bytes, over the prompt budget)")
        else:
            view.files[relative] = text
            budget -= len(text)
    lines: list[str] = []
    for relative, size in listing[:MAX_MAP_FILES]:
        text = view.files.get(relative)
        if text is None and budget > 0 and size <= MAX_READ:
            text = _read(root, relative)
        defs = definitions(relative, text) if text is not None else []
        line = f"{relative} ({size} bytes)" + (f": {', '.join(defs)}" if defs else "")
        budget -= len(line) + 1
        if budget < 0 and relative not in view.files:
            view.left_out.append(f"the map's last {len(listing) - len(lines)} files")
            break
        lines.append(line)
    if len(listing) > MAX_MAP_FILES and len(lines) == MAX_MAP_FILES:
        view.left_out.append(f"the map's last {len(listing) - MAX_MAP_FILES} files")
    view.map_text = "\n".join(lines)
    return view
