"""`bullpen`: parse the command line, call the command, turn errors into exit codes.

Library errors become CLI errors only here: a BullpenError prints its
message (which says what to do) and exits 1, 2 for an argument the command
cannot use (as argparse does), or 78 for configuration errors so that systemd
units stop restarting on them. The parser is agents/cli/parser.py; each group
of subcommands has its own module beside it.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from agents.cli.skipimports import skip_unused_imports
from room.errors import BullpenError, ConfigError, UsageError

__all__ = ["build_parser", "entry", "main"]


def __getattr__(name: str) -> Any:
    """`build_parser`, imported when asked for: a lone lurker does not load the parser."""
    if name == "build_parser":
        from agents.cli.parser import build_parser

        return build_parser
    raise AttributeError(name)


PRIVATE_UMASK = 0o077


def entry() -> int:
    """The process's entry: the `bullpen` script and `python -m agents.cli`.

    It keeps the imports bullpen never uses out of the process (agents/cli/skipimports.py)
    before anything is loaded; `main` leaves sys.modules alone, for a program that calls
    it in its own process.
    """
    skip_unused_imports()
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    # Everything bullpen creates in a home (room, memory, runs, logs, state, briefs,
    # and whatever a child process makes) is its user's alone: 0700 folders, 0600
    # files. One umask here covers every mkdir and open, and every child inherits it.
    os.umask(PRIVATE_UMASK)
    warnings.showwarning = _show_warning
    from agents.runtime import lean

    lone = lean.lone_args(sys.argv[1:] if argv is None else argv)
    try:
        if lone is not None:  # one lurker, started alone: idle on the stdlib (lean.py)
            return lean.run(*lone)
        return _command(argv)
    except (ConfigError, UsageError) as exc:
        print(f"bullpen: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except BullpenError as exc:
        print(f"bullpen: {exc.message}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `bullpen read | head`: the reader left, which is fine
        _silence_stdout()
        return 0
    except OSError as exc:  # a path that is a folder, unreadable, on a full disk …
        where = f": {exc.filename}" if exc.filename else ""
        print(f"bullpen: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _command(argv: Sequence[str] | None) -> int:
    from agents.cli import version

    asked = version.version_request(list(sys.argv[1:] if argv is None else argv))
    if asked is not None:
        return version.print_version(as_json=asked)
    from agents.cli.parser import Command, build_parser
    from room import logs

    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "home"):
        args.home = None
    logs.configure(level=args.log_level)
    func: Command = args.func
    return func(args)


def _show_warning(message: Warning | str, *_: Any, **__: Any) -> None:
    """A warning is a sentence for the person at the terminal (or the journal), not a
    source line of ours."""
    print(f"bullpen: warning: {message}", file=sys.stderr, flush=True)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so Python's exit-time flush does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
