"""`bullpen trust check`: prove that trust works end to end, or say exactly why not.

Static checks catch the failure modes that look like a dumb model but are
plumbing: a nick trusted but not privileged (its replies are unverified and
ignored — a silent dead end), an orchestrator that does not wake on replies
(every run deadlocks after its first ask), a privileged nick whose secret or
key is missing or loose, a missing relaxed token, a command that names no
program here, and (with a [gateway]) every seat, command or MCP agent that
reaches a model server around the gateway, and a lurker stuck on a post the hub keeps
refusing (agents/runtime/refused.py). Every nick in society.toml, TRUST or PRIVILEGED gets a row, so
a nick that only speaks through `bullpen mcp --as NICK` is checked too. The
live check asks the hub's /health once, then posts a ping ask from the
operator to every lurker and reads back each reply's `to` (must be
@operator) and `verified` (must be true), the host it runs on (the society is
shown per host) and the society.toml it loaded: a lurker started before the
file was edited is flagged "restart needed". The build nicks that answered are then
asked which build root they see (a pre-flight, agents/build/placement.py): one that does
not see @sandbox's is flagged, split across hosts with no shared store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.runtime.ping import config_drift, ping
from room.errors import BullpenError, UsageError
from trust import hubkey
from trust.secretfiles import check_secret_file

if TYPE_CHECKING:
    from agents.config import NickConfig
    from agents.home import Home
    from trust.table import TrustTable

ORCHESTRATOR_HANDLERS = {"agents.foreman:handle"}
HEALTH_TIMEOUT_S = 2.0
NO_LURKER = "no lurker"
HUB_UNREACHABLE = "hub unreachable"
REFUSED = "refused"


@dataclass
class Row:
    nick: str
    privileged: bool
    trusted: bool
    reply_waking: bool
    live: str = "-"
    version: str = "-"  # the bullpen version its pong names (agents/runtime/lurker.py)
    problems: list[str] = field(default_factory=list)
    host: str | None = None  # "name (boot …)", from its pong

    @property
    def ok(self) -> bool:
        return not self.problems


def orchestrator_nicks() -> set[str]:
    """The nicks the pipeline commands ask for a run (`bullpen expedition`, `bullpen backpass`)."""
    from agents.backpass.command import FOREMAN as BACKPASS_FOREMAN
    from agents.build.command import FOREMAN as BUILD_FOREMAN
    from agents.expedition.command import FOREMAN as EXPEDITION_FOREMAN

    return {BACKPASS_FOREMAN, EXPEDITION_FOREMAN, BUILD_FOREMAN}


def is_orchestrator(nick: str, config: NickConfig) -> bool:
    """Runs the foreman's step, or is the nick the pipelines address, whatever runs it."""
    return config.handler in ORCHESTRATOR_HANDLERS or nick in orchestrator_nicks()


def command_problem(nick: str, config: NickConfig) -> str | None:
    """Why a `command` handler cannot start: its program is not here (the lurker's PATH)."""
    if not config.command:
        return None
    program = config.command[0]
    path = config.env.get("PATH", os.environ.get("PATH", os.defpath))
    if shutil.which(program, path=path) is not None:
        return None
    return (
        f"its command's program {program!r} is not found (not an executable file, nor on "
        f"PATH), so every ask fails. Fix: install it, or give its full path as the first "
        f"word of command under [nicks.{nick}] in society.toml"
    )


def handler_problem(nick: str, config: NickConfig) -> str | None:
    """Why a Python `handler` cannot run: its module or function does not load here (as its
    lurker would load it, module and all), so every ask would fail."""
    if not config.handler:
        return None
    from agents.runtime.handlers import PythonStep
    from room.errors import ConfigError

    try:
        PythonStep(config.handler)
    except ConfigError as exc:
        return f"{exc.message}. Fix: handler under [nicks.{nick}] in society.toml"
    except Exception as exc:  # the module itself failed while loading: what it raised
        return (
            f"handler {config.handler!r} cannot be loaded: importing it raised "
            f"{type(exc).__name__}: {exc}. Fix: the module, or handler under [nicks.{nick}]"
        )
    return None


def runner_problem(nick: str, config: NickConfig) -> str | None:
    """Why a build grinder cannot run its language's specs: the runner is not installed."""
    from agents.build.routing import LANGUAGES

    if config.handler != "agents.build.steps:grind_spec":
        return None
    path = config.env.get("PATH", os.environ.get("PATH", os.defpath))
    for language in LANGUAGES:
        program = language.runner[0]
        mine = language.nick == nick and not program.startswith("{")
        if mine and shutil.which(program, path=path) is None:
            return (
                f"the grinder of {language.name} specs needs {program!r}, which is not "
                f"installed (not on PATH): every {' '.join(language.patterns)} grind "
                f"fails. Fix: install it (Debian: apt-get install "
                f"{'golang-go' if program == 'go' else 'nodejs'})"
            )
    return None


def key_problem(trust: TrustTable, nick: str) -> str | None:
    """The problem with a key-privileged nick's private key here, or None."""
    from trust.keys import load_private_key

    try:
        load_private_key(trust.key_file(nick))
    except BullpenError as exc:
        return exc.message
    return None


def _members(home: Home) -> list[str]:
    """The operator, the configured nicks, then every other trusted or privileged nick."""
    trust, society = home.trust, home.society
    first = [society.operator, *[n for n in society.nicks if n != society.operator]]
    rest = sorted((trust.trusted | set(trust.privileged)) - set(first))
    return first + rest


def _operator_problems(row: Row) -> list[str]:
    problems = []
    if not row.privileged:
        problems.append(
            f"the operator is not privileged: its asks are never verified, so no lurker "
            f'acts on them. Fix: add `{row.nick} = "secret"` under [privileged] in trust.toml'
        )
    if not row.trusted:
        problems.append(
            f'the operator is not in TRUST: lurkers ignore its asks. Fix: add "{row.nick}" '
            "to trusted in trust.toml"
        )
    return problems


def _member_problems(row: Row, config: NickConfig | None, verified_required: bool) -> list[str]:
    """What stops a nick's replies from counting; `config` is None for a nick with no lurker."""
    nick = row.nick
    problems = []
    if row.trusted and not row.privileged and verified_required:
        problems.append(
            "trusted but not privileged: replies will be unverified and ignored "
            f'(failure mode C). Fix: add `{nick} = "secret"` under [privileged] in '
            "trust.toml and restart the hub, after the nick can prove itself"
        )
    if config is None:
        return problems  # no lurker: nothing here to wake, start or ping
    if not row.privileged and not row.trusted:
        problems.append(
            "not privileged: its replies are unverified, so the foreman and other "
            f'lurkers ignore them. Fix: add `{nick} = "secret"` under [privileged]'
        )
    if not row.trusted:
        problems.append(
            f'not in TRUST: the foreman ignores its replies. Fix: add "{nick}" to '
            "trusted in trust.toml"
        )
    if is_orchestrator(nick, config) and not row.reply_waking:
        problems.append(
            "an orchestrator that does not wake on replies: every run deadlocks after "
            f"its first ask (failure mode A). Fix: set wake_replies = true under "
            f"[nicks.{nick}] in society.toml"
        )
    for problem in (
        handler_problem(nick, config),
        command_problem(nick, config),
        runner_problem(nick, config),
    ):
        if problem:
            problems.append(problem)
    return problems


def static_rows(home: Home) -> tuple[list[Row], list[str]]:
    """One row per nick (the operator first), and problems of the home as a whole."""
    trust, society = home.trust, home.society
    general: list[str] = []
    for problem in (
        hubkey.problem(trust),
        check_secret_file(trust.secret_file, "shared secret file"),
        check_secret_file(trust.relaxed_token_file, "relaxed token file")
        if society.hub.relaxed
        else None,
        # an old home has none until its hub makes it: only a file that is there can be wrong
        check_secret_file(trust.read_token_file, "read token file")
        if os.path.lexists(trust.read_token_file)
        else None,
    ):
        if problem:
            general.append(problem)
    from agents.cli.bypass import bypass_problems

    general += [f"gateway bypass: {problem}" for problem in bypass_problems(home)]
    from agents.mcp.check import mcp_rows
    from agents.runtime.refused import problems as refused_problems

    # MCP-backed nicks: can `bullpen mcp --as NICK` prove itself, is the agent there?
    # (privilege is checked below for every nick, so it is left out here)
    mcp_problems = mcp_rows(home, privilege=False)
    # Every lurker drops what is not verified (wake rule 5), the foreman's runs too:
    # with any lurker here, an unprivileged nick's replies reach nobody who acts on them.
    verified_required = bool(society.nicks)
    rows = []
    operator = society.operator
    for nick in _members(home):
        config = society.nicks.get(nick)
        row = Row(
            nick,
            privileged=trust.is_privileged(nick),
            trusted=trust.is_trusted(nick),
            reply_waking=bool(config and (config.wake_replies or home.wake_replies_flagged(nick))),
        )
        if nick == operator:
            row.problems += _operator_problems(row)
        else:
            row.problems += _member_problems(row, config, verified_required)
            if config is None:
                row.live = NO_LURKER  # it cannot be pinged; that alone is no failure
        if config is not None:  # posts its lurker is stuck on (agents/runtime/refused.py)
            refused = refused_problems(home.state_dirs(nick))
            if refused:
                row.live = REFUSED
                row.problems += refused
        proof = trust.proof_of(nick)
        if nick in mcp_problems:
            # its lurker and `bullpen mcp --as NICK` prove with the same key or secret:
            # mcp_rows tried to load it, which covers the key file check below
            row.problems += mcp_problems[nick]
        elif proof is not None and proof.method == "key":
            problem = key_problem(trust, nick)
            if problem:
                row.problems.append(problem)
        rows.append(row)
    return rows, general


async def hub_problem(home: Home, versions: dict[str, str] | None = None) -> str | None:
    """Why the hub cannot be pinged through, from one short /health; None when it answers
    (and then `versions["hub"]` is the version its /health names).

    Asked once before any ping: a post to a hub that is down retries its connect for
    seconds, and that for every nick would make a dead hub look like a slow check.
    """
    from room.client import RoomClient

    url = home.society.hub.strict_url()
    try:
        async with RoomClient(url, timeout=HEALTH_TIMEOUT_S) as client:
            health = await client.health()
        if versions is not None:
            versions["hub"] = str(health.get("version", "unknown"))
    except (BullpenError, ValueError) as exc:  # ValueError: not a JSON answer, so not a hub
        reason = exc.message if isinstance(exc, BullpenError) else f"{url}/health is not JSON"
        return (
            f"not pinged, the hub is unreachable: {reason}. Fix: start it with `bullpen up` "
            "(the hub and every lurker), `bullpen hub`, or `systemctl --user start bullpen-hub`"
        )
    return None


async def live_check(
    home: Home, rows: list[Row], timeout: float, versions: dict[str, str] | None = None
) -> str | None:
    """Ping every lurker from the operator and check each pong's address and verified flag.

    Returns the one cause that stopped every ping (the hub is unreachable), printed once
    below the table rather than on every row. `versions` gets the hub's and each pong's
    bullpen version, so a society running mixed versions shows it.
    """
    operator = home.society.operator
    lurkers = [row for row in rows if row.nick in home.society.nicks]
    problem = await hub_problem(home, versions)
    if problem:
        for row in lurkers:
            row.live = HUB_UNREACHABLE
            row.problems.append("not pinged (see below)")
        return problem
    async with home.client(operator) as client:
        answered = await ping(client, [row.nick for row in lurkers], timeout, label="trust-check")
    for row in lurkers:
        line = answered.pongs.get(row.nick)
        if line is not None:
            data = line.get("data")
            row.version = (
                str(data.get("version", "unknown")) if isinstance(data, dict) else "unknown"
            )
            if versions is not None:
                versions[row.nick] = row.version
        if row.nick in answered.unsent:
            row.live = "not sent"
            row.problems.append(
                f"the ping could not be posted: {answered.unsent[row.nick].message}"
            )
        elif line is None:
            row.live = "no reply"
            row.problems.append(
                f"no reply within {timeout:g} s: is its lurker running (bullpen up, or "
                f"systemctl --user status bullpen-lurker@{row.nick})?"
            )
        elif line.get("to") != f"@{operator}":
            row.live = "misaddressed"
            row.problems.append(
                f"its reply went to {line.get('to')}, not @{operator}: consumers never see it"
            )
        elif not line.get("verified"):
            row.live = "unverified"
            row.problems.append(
                "its reply was not verified: it cannot prove itself to the hub "
                "(check its proof: the shared secret or its key, and [privileged])"
            )
        else:
            row.live = "pong ✓"
        if line is not None:
            row.host = _host_of(line)
            drift = config_drift(home, row.nick, line)
            if drift is not None:
                row.live = "restart needed"
                row.problems.append(drift)
    return None


def _host_of(pong: dict[str, Any]) -> str:
    data = pong.get("data") or {}
    host = str(data.get("host") or "an unnamed host (its bullpen predates host names)")
    boot = data.get("boot_id")
    return f"{host} (boot {str(boot)[:8]})" if boot else host


def hosts(rows: list[Row]) -> str:
    """The society per host, as the pongs told it: which lurker runs where."""
    where: dict[str, list[str]] = {}
    for row in rows:
        if row.host is not None:
            where.setdefault(row.host, []).append(row.nick)
    if not where:
        return ""
    lines = [f"society per host ({len(where)} host{'s' if len(where) != 1 else ''}):"]
    lines += [f"  {host}: {', '.join(nicks)}" for host, nicks in sorted(where.items())]
    return "\n".join(lines)


def versions_line(versions: dict[str, str]) -> str:
    """One line naming the bullpen versions running: the hub's and each pong's. Mixed
    versions are not a failure (an upgrade restarts units one by one), but they are shown."""
    by_version: dict[str, list[str]] = {}
    for who, version in versions.items():
        by_version.setdefault(version, []).append(who)
    if len(by_version) == 1:
        return f"versions: every process runs bullpen {next(iter(by_version))}"
    parts = [f"{version}: {', '.join(who)}" for version, who in sorted(by_version.items())]
    return "versions: MIXED — " + "; ".join(parts)


def table(rows: list[Row]) -> str:
    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    header = ("nick", "privileged", "trusted", "reply-waking", "live", "version", "problem and fix")
    body = [
        (
            r.nick,
            yes(r.privileged),
            yes(r.trusted),
            yes(r.reply_waking),
            r.live,
            r.version,
            "; ".join(r.problems) or "ok",
        )
        for r in rows
    ]
    last = len(header) - 1
    widths = [max(len(str(line[i])) for line in [header, *body]) for i in range(last)]
    out = []
    for line in [header, *body]:
        cells = [str(cell).ljust(widths[i]) for i, cell in enumerate(line[:last])]
        out.append("  ".join([*cells, str(line[last])]))
    return "\n".join(out)


def verdict_json(rows: list[Row], general: list[str]) -> dict[str, object]:
    """`bullpen trust check --json`: {ok, nicks: [{nick, privileged, trusted, reply_waking,
    live, ok, problems}], problems} (docs/operating.md)."""
    return {
        "ok": not general and all(r.ok for r in rows),
        "nicks": [
            {
                "nick": r.nick,
                "privileged": r.privileged,
                "trusted": r.trusted,
                "reply_waking": r.reply_waking,
                "live": r.live,
                "ok": r.ok,
                "problems": r.problems,
            }
            for r in rows
        ],
        "problems": general,
    }


def cmd_trust(args: argparse.Namespace) -> int:
    from agents.home import Home

    if args.nick or args.key:
        raise UsageError("bullpen trust check takes no nick and no --key (promote does)")
    home = Home.at(args.home)
    home.require()
    rows, general = static_rows(home)
    versions: dict[str, str] = {}
    if not args.static and not general:
        cause = asyncio.run(live_check(home, rows, args.timeout, versions))
        if cause is not None:
            general.append(cause)
        else:  # the build nicks' placement: one build root, or files cannot travel
            from agents.build.placement import split_across

            answered = [row.nick for row in rows if row.live == "pong ✓"]
            general += asyncio.run(split_across(home, answered, args.timeout))
    failed = [r for r in rows if not r.ok]
    if getattr(args, "json", False):  # the same verdict and exit code, for a script
        print(json.dumps(verdict_json(rows, general), ensure_ascii=False))
    else:
        print(table(rows))
        placed = hosts(rows)
        if placed:
            print(placed)
        if versions:
            print(versions_line(versions))
        for problem in general:
            print(f"problem: {problem}")
    if failed or general:
        print(
            f"trust check FAILED: {len(failed)} nick(s) and {len(general)} home problem(s)",
            file=sys.stderr,
        )
        return 1
    print("trust check passed", file=sys.stderr)
    return 0
