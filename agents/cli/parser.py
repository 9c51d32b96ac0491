"""The `bullpen` command line: every subcommand, its arguments, and where it runs.

Each subcommand names its function as a `module:function` string that is
imported only when it runs, so a lurker never pays for the hub's imports.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

from agents.cli.argtypes import (
    Formatter,
    _at_least_one,
    _count,
    _filters,
    _home_option,
    _port,
    _seconds,
    _wait_timeout,
)
from agents.cli.runs_parser import add_run_commands
from room.version import __version__

Command = Callable[[argparse.Namespace], int]


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
        epilog="`bullpen COMMAND --help` describes one command; `bullpen docs` lists the docs.",
        formatter_class=Formatter,
    )
    _home_option(parser)
    parser.add_argument(
        "--version",
        action="version",
        version=f"bullpen {__version__}",
        help="print the version and exit (`--version --json`: with Python, platform, extras)",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="how much the log says (default info)",
    )
    parser.add_argument(
        "--log-format",
        default="auto",
        choices=["auto", "console", "json"],
        help="log lines for people (console) or machines (json); auto (the default): console "
        "on a terminal, json otherwise",
    )
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, help="what to do (one of these)"
    )

    def add(name: str, target: str, help_text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text, description=help_text, formatter_class=Formatter)
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

    p = add(
        "upgrade",
        "agents.cli.upgrade:cmd_upgrade",
        "migrate this home's files to this bullpen's formats (`bullpen docs operating`)",
    )
    p.add_argument("--check", action="store_true", help="say what it would do; exit 1 if any")

    add(
        "hub",
        "agents.cli.hubserve:cmd_hub",
        "run the hub: the room's only writer, on both listeners",
    )

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
    p.add_argument("--json", action="store_true", help="print the verdict as one JSON object")

    p = add(
        "verify",
        "agents.cli.verify:cmd_verify",
        "check the hub's signed checkpoint, a line's inclusion, a tree's consistency, or a "
        "proof bundle, with only the hub's verifier key (`bullpen docs audit`)",
    )
    p.add_argument("bundle", nargs="?", help="a proof bundle (from --export) to check")
    p.add_argument("--checkpoint", help="a signed checkpoint note (default: the hub's latest)")
    p.add_argument("--line", help="a file holding one room line: check it is in the tree")
    p.add_argument("--seq", type=_at_least_one, help="check line SEQ is in the tree")
    p.add_argument("--since", help="an older checkpoint note: check the new tree extends it")
    p.add_argument(
        "--export", type=_at_least_one, metavar="SEQ", help="write line SEQ's proof bundle"
    )
    p.add_argument("--out", help="the file --export writes (default: stdout)")
    p.add_argument("--key", help="the hub's verifier key (default: this home's hub)")
    p.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="KEY",
        help="require a valid cosignature of this witness's verifier key (repeatable)",
    )
    p.add_argument("--room", help="take proofs and lines from this room file, not the hub")
    p.add_argument("--json", action="store_true", help="print one JSON object: ok, checks, error")

    p = add(
        "witness",
        "agents.cli.witness:cmd_witness",
        "cosign a hub's checkpoints after checking each extends the last (`bullpen docs audit`)",
    )
    p.add_argument("--hub", help="the hub's strict URL (default: this home's)")
    p.add_argument("--hub-key", help="the hub's verifier key (default: this home's hub)")
    p.add_argument(
        "--read-token-file", help="the file holding the hub's read token (default: this home's)"
    )
    p.add_argument("--name", help="this witness's key name (default: witness/<host>)")
    p.add_argument(
        "--key-file", help="this witness's Ed25519 key, made on first run (default: in the home)"
    )
    p.add_argument("--state", help="the witness's state file (default: in the home)")
    p.add_argument(
        "--interval", type=_seconds, default=10.0, help="seconds between polls of the hub"
    )
    p.add_argument("--once", action="store_true", help="poll once and exit (0: cosigned)")
    p.add_argument(
        "--as", dest="as_nick", default="witness", help="the nick that reports a refused hub"
    )
    p.add_argument("--show-key", action="store_true", help="print this witness's verifier key")

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
    p.add_argument(
        "action", choices=["new", "show"], help="new: make the key; show: print its public half"
    )
    p.add_argument("nick", help="the nick whose key it is")

    p = add(
        "lurk",
        "agents.runtime.lurker:cmd_lurk",
        "run one nick's lurker: wake on what is addressed to it",
    )
    p.add_argument("nick", help="the [nicks.NICK] table of society.toml to run")

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
    p.add_argument("--host", help="http: the address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, help="http: the port to listen on (default 8765)")
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
    p.add_argument(
        "--nicks",
        metavar="A,B",
        help="start only these nicks' lurkers, comma-separated (default: every [nicks.X])",
    )

    p = add("units", "agents.cli.units:cmd_units", "render the systemd user units for this home")
    p.add_argument("action", choices=["install"], help="install: write the units")
    p.add_argument(
        "--dir",
        help="where to write them (default $XDG_CONFIG_HOME/systemd/user, "
        "i.e. ~/.config/systemd/user)",
    )
    p.add_argument("--nicks", nargs="+", help="only these nicks (default: all configured)")
    p.add_argument(
        "--witness",
        action="store_true",
        help="also write bullpen-witness.service (`bullpen docs audit`)",
    )

    p = add(
        "gateway",
        "agents.gateway.cli:cmd_gateway",
        "the model gateway: serve it (the default), issue caller tokens, read its ledger, "
        "check its backends' chat templates",
    )
    action = p.add_subparsers(dest="action", metavar="[ACTION]", help="what to do (default: serve)")

    def gateway_action(name: str, help_text: str) -> argparse.ArgumentParser:
        return action.add_parser(
            name, help=help_text, description=help_text, formatter_class=Formatter
        )

    g = gateway_action("serve", "serve the gateway until stopped (the default)")
    _home_option(g)
    g = gateway_action("token", "issue a nick's caller token (a 0600 file)")
    _home_option(g)
    g.add_argument("nick", help="the nick the token is for (its calls are counted against it)")
    g = gateway_action("usage", "the ledger summed as a table")
    _home_option(g)
    g.add_argument("--since", help="only calls from this UTC date or time on, e.g. 2026-12-01")
    g.add_argument("--json", action="store_true", help="print a JSON array, one object per row")
    g.add_argument(
        "--by",
        choices=["caller", "model", "backend", "thread", "seat", "day"],
        default="caller",
        help="group rows by (caller: the nick; thread: the run)",
    )
    g = gateway_action(
        "summary",
        "post one UTC day's usage (calls, tokens, by caller and backend, budgets) into "
        "the room as @gateway",
    )
    _home_option(g)
    g.add_argument("--day", help="the UTC day to sum, e.g. 2026-12-01 (default: yesterday)")
    g.add_argument("--dry-run", action="store_true", help="print the summary without posting it")
    g = gateway_action("check", "read each backend's chat template and markers (failure mode D)")
    _home_option(g)
    g.add_argument("backend", nargs="?", help="only this [gateway.backends.NAME]")

    p = add(
        "web",
        "agents.cli.web:cmd_web",
        "serve the browser view of the room, runs, the gate and the society (bullpen docs web)",
    )
    action = p.add_subparsers(dest="action", metavar="ACTION", help="serve (the default) or url")
    w = action.add_parser("serve", help="serve it until stopped (the default)")
    _home_option(w)
    w = action.add_parser("url", help="print a one-time login link (good for 10 minutes)")
    _home_option(w)

    p = add(
        "trust",
        "agents.cli.promote:cmd_trust",
        "check that trust works end to end; promote or demote a nick, in the safe order",
    )
    p.add_argument(
        "action",
        choices=["check", "promote", "demote", "verifier-key"],
        help="check: every nick's trust, end to end; promote, demote: change one nick's "
        "privilege; verifier-key: print the key that checks the hub's signed checkpoints",
    )
    p.add_argument("nick", nargs="?", help="promote, demote: the nick")
    p.add_argument(
        "--key",
        action="store_true",
        help="promote: prove with the nick's own key (made when missing), not the shared secret",
    )
    p.add_argument("--static", action="store_true", help="check: skip the live ping round trips")
    p.add_argument("--json", action="store_true", help="check: print the verdict as JSON")
    p.add_argument("--timeout", type=_seconds, default=15.0, help="seconds to wait for each pong")

    p = add("docs", "agents.cli.docs:cmd_docs", "print an operator doc (list them without NAME)")
    p.add_argument("name", nargs="?", help="the doc to print, e.g. gateway, seats, operating")

    p = add(
        "memory",
        "agents.librarian.cli:cmd_memory",
        "shared memory: save, recall, show an entry, list namespaces, rebuild, sync the backpass",
    )
    action = p.add_subparsers(
        dest="action",
        metavar="ACTION",
        help="save, recall, show, namespaces, rebuild or sync",
    )
    m = action.add_parser("save", help="save an entry through the room to @librarian")
    _home_option(m)
    m.add_argument("text", help="what the entry records")
    m.add_argument("--ns", required=True, help="its namespace, e.g. /bullpen/ops (no default)")
    m.add_argument("--source", help="where it comes from: a trace's sha256, a commit, a thread")
    m.add_argument("--supersedes", help="the id of the entry this one corrects, e.g. m41")
    m.add_argument("--tag", action="append", help="a tag (repeatable)")
    m.add_argument("--as", dest="as_nick", help="save as this nick (default: the operator)")
    m = action.add_parser("recall", help="the entries best matching a query (FTS5 syntax)")
    _home_option(m)
    m.add_argument("query", help="words to look for (FTS5 syntax: quotes, OR, NOT, prefix*)")
    m.add_argument("--ns", help="only this namespace and below (default /bullpen)")
    m.add_argument("-k", type=_at_least_one, default=5, help="how many (default 5)")
    m.add_argument("--json", action="store_true", help="print JSON")
    m = action.add_parser("show", help="one entry with the room line it came from")
    _home_option(m)
    m.add_argument("id", help="an entry id, e.g. m41")
    m = action.add_parser("namespaces", help="the declared namespaces with entry counts")
    _home_option(m)
    m.add_argument("--json", action="store_true", help="print JSON")
    for name, text in (
        ("rebuild", "rebuild the index from the room"),
        ("sync", "index the merged memory.md bullets of the backpass repositories"),
    ):
        _home_option(action.add_parser(name, help=text))

    add_run_commands(add)

    p = add(
        "replay",
        "agents.replay.cli:cmd_replay",
        "ask one step of a recorded run again with another seat, or fork the run from it "
        "(bullpen docs replay)",
    )
    p.add_argument("thread", help="the run's thread (exp-…), as its command printed it")
    p.add_argument("--list", action="store_true", help="list the run's replayable steps")
    p.add_argument("--step", metavar="KEY", help="the step to replay, by key (see --list)")
    p.add_argument("--seat", metavar="NAME", help="the seat to ask (default: as configured now)")
    p.add_argument("--fork", action="store_true", help="start a new run from the replayed answer")
    p.add_argument(
        "--all", action="store_true", help="replay every replayable step in order (see --offline)"
    )
    p.add_argument(
        "--offline", action="store_true", help="answer model calls from the gateway's recording"
    )
    _wait_timeout(p, 600.0, "the forked run (with --fork)", old="--wait")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = add(
        "trace",
        "agents.telemetry.command:cmd_trace",
        "a run as a trace: its steps and model calls from the room and the gateway's ledger, "
        "printed or exported over OTLP (bullpen docs telemetry)",
    )
    p.add_argument("thread", help="the run's thread (exp-…), as its command printed it")
    p.add_argument(
        "--otlp",
        nargs="?",
        const="",
        metavar="URL",
        help="export it to this OTLP/HTTP receiver (alone: [telemetry] otlp_endpoint or "
        "OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    p.add_argument("--json", action="store_true", help="print the spans as JSON")

    p = add(
        "eval",
        "agents.evaluate.cli:cmd_eval",
        "run a suite of cases against seat assignments and print a scoreboard "
        "(bullpen docs replay)",
    )
    p.add_argument("suite", help="the suite folder, or the name of a shipped suite (example)")
    p.add_argument(
        "--seat",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="the seats to compare, each put in every model role in turn "
        "(--seat a b, or --seat a --seat b; default: the seats as configured)",
    )
    p.add_argument("--lessons", choices=["on", "off"], default="on", help="lessons on wake")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--keep", action="store_true", help="keep each seat's home, to replay its threads"
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        metavar="N",
        help="run the suite N times (1-5), a backpass over each round's traces between, so "
        "the next round wakes with the lessons it kept",
    )

    p = add(
        "demo",
        "agents.cli.demo:cmd_demo",
        "run the whole society once in a temporary home (or in --home DIR, which is kept)",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary home afterwards")
    p.add_argument(
        "--model",
        metavar="URL",
        help="an OpenAI-compatible server (…/v1) to give the build a code seat (default: none)",
    )
    p.add_argument(
        "--model-name", help="the model to ask there (default: the first the server lists)"
    )
    return parser
