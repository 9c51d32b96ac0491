"""The `bullpen` command line: every subcommand, its arguments, and where it runs.

Each subcommand names its function as a `module:function` string that is
imported only when it runs, so a lurker never pays for the hub's imports.
"""

from __future__ import annotations

import argparse
import importlib
import math
from collections.abc import Callable

Command = Callable[[argparse.Namespace], int]


def _home_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home",
        default=argparse.SUPPRESS,
        help="the bullpen home (default: $BULLPEN_HOME or ~/.config/bullpen)",
    )


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--thread", help="only this run's thread")
    parser.add_argument("--to", help="only lines addressed to this nick")
    parser.add_argument("--from", dest="sender", help="only lines from this nick")
    parser.add_argument(
        "--hub", action="store_true", help="read through the hub even if the room file is here"
    )
    parser.add_argument(
        "--relaxed", action="store_true", help="read through the relaxed listener with its token"
    )


def _seconds(text: str) -> float:
    """A timeout: a finite number of seconds above 0 (argparse says which option was wrong)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0, like 30")
    return value


def _count(text: str) -> int:
    """A seq or a number of lines: a whole number, 0 or more."""
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number, 0 or more")
    return int(text)


def _at_least_one(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return value


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return int(text)


def _lazy(target: str) -> Command:
    """Import a command's module only when it runs: a lurker should not pay for the hub."""

    def run(args: argparse.Namespace) -> int:
        module, _, name = target.partition(":")
        func: Command = getattr(importlib.import_module(module), name)
        return func(args)

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bullpen",
        description="A society of small agents working through one append-only room.",
    )
    _home_option(parser)
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="how much the log says (default info)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, target: str, help_text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        _home_option(cmd)
        cmd.set_defaults(func=_lazy(target))
        return cmd

    p = add(
        "init",
        "agents.cli.init:cmd_init",
        "lay down a new home: config, trust table, secrets, room",
    )
    p.add_argument(
        "dir",
        nargs="?",
        help="the folder to create, which must not exist or be empty "
        "(default: --home, $BULLPEN_HOME or ~/.config/bullpen)",
    )
    p.add_argument("--operator", default="operator", help="the operator's nick (default operator)")
    p.add_argument("--strict", default="127.0.0.1:8080", help="strict listener HOST:PORT")
    p.add_argument("--relaxed", default="127.0.0.1:8081", help="relaxed listener HOST:PORT")
    p.add_argument("--demo", action="store_true", help="add the sample knowledge base and memory")

    add("hub", "agents.cli.room:cmd_hub", "run the hub: the room's only writer, on both listeners")

    p = add("say", "agents.cli.room:cmd_say", "post to the room and print the stored line")
    p.add_argument("to", help="the addressee, @nick or nick")
    p.add_argument("body", help="the text of the post")
    p.add_argument("--as", dest="as_nick", help="post as this nick (default: the operator)")
    p.add_argument(
        "--type",
        default="chat",
        choices=["ask", "chat", "ack", "reply", "system"],
        help="the message type (default chat; an ask wakes its addressee)",
    )
    p.add_argument("--data", help="a JSON object to attach")
    p.add_argument("--reply-to", help="the id of the message this answers")
    p.add_argument("--thread", help="the run this post belongs to")
    p.add_argument("--relaxed", action="store_true", help="post through the relaxed listener")

    p = add("read", "agents.cli.room:cmd_read", "print room lines as JSONL")
    p.add_argument("--after", type=_count, default=0, help="only lines after this seq")
    p.add_argument("--last", type=_count, help="only the last N lines")
    p.add_argument("--limit", type=_at_least_one, help="at most this many lines")
    _filters(p)

    p = add("tail", "agents.cli.room:cmd_tail", "follow the room as it grows")
    p.add_argument("--after", type=_count, help="start after this seq (default: the last 10 lines)")
    p.add_argument("--last", type=_count, default=10, help="show this many earlier lines first")
    p.add_argument("--json", action="store_true", help="print JSONL instead of readable lines")
    _filters(p)

    p = add(
        "audit", "agents.cli.room:cmd_audit", "check a room's lines, seqs, chain and signatures"
    )
    p.add_argument("path", nargs="?", help="a room.jsonl (default: this home's room)")
    p.add_argument("--checkpoint", help="a signed checkpoint file to check the room against")
    p.add_argument("--no-signatures", action="store_true", help="do not verify per-nick signatures")

    p = add(
        "export",
        "agents.cli.stream:cmd_export",
        "write this home's JetStream room to a room.jsonl file (exact line bytes)",
    )
    p.add_argument("file", help="the file to write (must not exist)")

    p = add(
        "import",
        "agents.cli.stream:cmd_import",
        "move a room.jsonl into this home's (empty) JetStream stream, checking seq and chain",
    )
    p.add_argument("file", help="the room.jsonl to import")

    p = add("keys", "agents.cli.room:cmd_keys", "make or show a nick's own Ed25519 key")
    p.add_argument("action", choices=["new", "show"])
    p.add_argument("nick")

    p = add(
        "lurk",
        "agents.runtime.lurker:cmd_lurk",
        "run one nick's lurker: wake on what is addressed to it",
    )
    p.add_argument("nick")

    p = add(
        "mcp",
        "agents.mcp.command:cmd_mcp",
        "serve the room as MCP tools (room_say, room_read, room_thread), posting as one nick",
    )
    p.add_argument("--as", dest="as_nick", required=True, help="the nick this server posts as")
    p.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (the agent starts the server; the default) or http (streamable HTTP at /mcp)",
    )
    p.add_argument("--host", default="127.0.0.1", help="http: the address to listen on")
    p.add_argument("--port", type=_port, default=8765, help="http: the port to listen on")
    p.add_argument(
        "--relaxed",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="post through the relaxed listener with its token "
        "(default: the nick's `relaxed` setting in society.toml, else no)",
    )
    p.add_argument(
        "--token-file",
        help="http: the file holding the bearer token clients must send "
        "(default: the home's relaxed token file)",
    )

    p = add(
        "up",
        "agents.runtime.up:cmd_up",
        "start the hub and every lurker of this home, until Ctrl-C",
    )
    p.add_argument("--no-hub", action="store_true", help="start only the lurkers")

    p = add("units", "agents.cli.units:cmd_units", "render the systemd user units for this home")
    p.add_argument("action", choices=["install"])
    p.add_argument(
        "--dir",
        help="where to write them (default $XDG_CONFIG_HOME/systemd/user, "
        "i.e. ~/.config/systemd/user)",
    )
    p.add_argument("--nicks", nargs="+", help="only these nicks (default: all configured)")

    p = add(
        "gateway",
        "agents.gateway.cli:cmd_gateway",
        "the model gateway: serve it (the default), issue caller tokens, read its ledger, "
        "check its backends' chat templates",
    )
    action = p.add_subparsers(dest="action", metavar="ACTION")
    g = action.add_parser("serve", help="serve the gateway until stopped (the default)")
    _home_option(g)
    g = action.add_parser("token", help="issue a nick's caller token (a 0600 file)")
    _home_option(g)
    g.add_argument("nick")
    g = action.add_parser("usage", help="the ledger summed as a table")
    _home_option(g)
    g.add_argument("--since", help="only calls from this UTC date or time on, e.g. 2026-12-01")
    g.add_argument("--by", choices=["caller", "model", "backend"], default="caller")
    g = action.add_parser(
        "check", help="read each backend's chat template and markers (failure mode D)"
    )
    _home_option(g)
    g.add_argument("backend", nargs="?", help="only this [gateway.backends.NAME]")

    p = add("trust", "agents.cli.trustcheck:cmd_trust", "check that trust works end to end")
    p.add_argument("action", choices=["check"])
    p.add_argument("--static", action="store_true", help="skip the live ping round trips")
    p.add_argument("--timeout", type=_seconds, default=15.0, help="seconds to wait for each pong")

    p = add(
        "expedition",
        "agents.expedition.cli:cmd_expedition",
        "run a corpus expedition to its Dig Report",
    )
    p.add_argument("--title", help="the article's working title")
    p.add_argument("--keyword", help="the primary keyword of the pattern")
    p.add_argument("--kb", help="the knowledge-base folder (default: [expedition] kb)")
    p.add_argument("--voice", default="Carbon", choices=["Carbon", "Si-C", "Silicon"])
    p.add_argument("--archetype", help="the primary archetype / category to match")
    p.add_argument("--monomyth", help="the monomyth stage to match")
    p.add_argument("--blaze", help="a blaze file (role: guidance) whose claims seed the search")
    p.add_argument("--yes", action="store_true", help="confirm the Dig Report as it is")
    p.add_argument("--timeout", type=_seconds, default=900.0, help="seconds to wait for each turn")
    turn = p.add_subparsers(dest="action", metavar="ACTION")
    c = turn.add_parser("confirm", help="answer a waiting run's Dig Report")
    _home_option(c)
    c.add_argument("thread", help="the run's thread, as printed with its Dig Report")
    c.add_argument(
        "--drop",
        nargs="+",
        action="extend",
        default=[],
        metavar="ID",
        help="rows to leave out (repeatable: --drop row_2 --drop row_5, or --drop row_2 row_5)",
    )
    c.add_argument("--redirect", help="search again with this added to the pattern")
    c.add_argument("--timeout", type=_seconds, default=900.0, help="seconds to wait for the brief")

    p = add(
        "backpass",
        "agents.backpass.cli:cmd_backpass",
        "run the memory backpass and print its funnel",
    )
    p.add_argument("--public", help="the public memory repository")
    p.add_argument("--private", help="the private memory repository")
    p.add_argument("--traces", help="the folder of session transcripts")
    p.add_argument("--state", help="the state file of `sha256  path` lines")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="analyse and report; memory, ledger and state untouched",
    )
    p.add_argument("--concurrency", type=int, help="analyses in flight at once (default 4)")
    p.add_argument("--timeout", type=_seconds, help="hard limit in seconds on one trace's analysis")
    p.add_argument(
        "--wait-timeout", type=_seconds, default=4 * 3600.0, help="give up waiting after this long"
    )

    p = add(
        "build",
        "agents.build.cli:cmd_build",
        "run a test-first build from a ticket (docs/build.md)",
    )
    p.add_argument("ticket", help="the ticket file (config/build-ticket.md is an example)")
    p.add_argument(
        "--wait-timeout", type=_seconds, default=4 * 3600.0, help="give up waiting after this long"
    )

    p = add(
        "demo",
        "agents.cli.demo:cmd_demo",
        "run the whole society once in a temporary home (or in --home DIR, which is kept)",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary home afterwards")
    return parser
