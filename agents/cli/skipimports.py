"""Optional imports that bullpen never uses, kept out of every bullpen process.

Two libraries bullpen uses import extras whenever they are installed, at start-up,
for features bullpen never calls: structlog imports rich to pretty-print tracebacks
(bullpen renders plain text or JSON lines), and httpx imports its own command-line
client (`httpx._main`: click, pygments and rich). Installed beside bullpen — sigstore
in the test extra brings rich, uvicorn brings click — they cost about 0.3 s of CPU in
each hub, foreman, lurker and command: most of the CPU a short command spends. A
`None` in sys.modules makes their `import` fail at once, and both libraries fall back
by design (structlog formats tracebacks plainly; httpx's `main` says its CLI is not
installed).
"""

from __future__ import annotations

import sys

UNUSED = ("rich", "httpx._main")


def skip_unused_imports() -> None:
    """Mark UNUSED as not importable in this process (a module already imported stays)."""
    for name in UNUSED:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
