"""Optional imports that bullpen never uses, kept out of every bullpen process.

Libraries bullpen uses import extras whenever they are installed, at start-up, for
features bullpen never calls: structlog imports rich to pretty-print tracebacks
(bullpen renders plain text or JSON lines), httpx imports its own command-line client
(`httpx._main`: click, pygments and rich), and httpcore imports trio in case it runs
under trio's event loop (bullpen runs asyncio only). Installed beside bullpen —
sigstore in the test extra brings rich, selenium brings trio, uvicorn brings click —
they cost about 0.4 s of CPU in each hub, foreman, lurker and command: most of the
CPU a short command spends. A `None` in sys.modules makes their `import` fail at
once, and each library falls back by design (structlog formats tracebacks plainly;
httpx's `main` says its CLI is not installed; httpcore serves asyncio through anyio).
"""

from __future__ import annotations

import sys

UNUSED = ("rich", "httpx._main", "trio")


def skip_unused_imports() -> None:
    """Mark UNUSED as not importable in this process (a module already imported stays)."""
    for name in UNUSED:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
