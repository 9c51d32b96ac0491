"""What the `bullpen gateway` subcommands do: serve, issue a token, sum the ledger, post the
daily summary, check.

Serving's exit codes are the hub's (room/service.py): 0 after a clean stop,
1 when it could not start (the port is taken), 70 when the ledger could not
be written, 78 for a configuration error (systemd does not restart on it).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import structlog

from agents.config import parse_address
from agents.gateway.budgets import Budgets
from agents.gateway.check import Verdict, check_backend
from agents.gateway.config import GatewayConfig
from agents.gateway.ledger import Ledger, read_entries
from agents.gateway.runbudgets import RunBudgets
from agents.gateway.server import Gateway
from agents.gateway.tokens import CallerTokens, issue
from agents.gateway.usage import as_json as usage_json
from agents.gateway.usage import summarize, table
from agents.home import Home
from room.errors import ConfigError, UsageError
from room.hub import Serving, bind, serve_asgi
from room.version import __version__

log = structlog.get_logger("agents.gateway")

EXIT_OK, EXIT_START, EXIT_DISK, EXIT_CONFIG = 0, 1, 70, 78


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def checked_file(home: Home) -> Path:
    """The backends `gateway check` has already looked at, so a start checks only new ones."""
    return home.root / "gateway" / "checked.json"


async def check_new_backends(home: Home, config: GatewayConfig) -> None:
    """At start: check each backend never checked before, and log what was found."""
    path = checked_file(home)
    try:
        done = set(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        done = set()
    for name, backend in sorted(config.backends.items()):
        key = f"{name} {backend.base_url}"
        if not backend.check or key in done:
            continue
        verdict = await check_backend(name, backend, config.policy_for(name))
        for level, text in verdict.lines:
            (log.warning if level == "PROBLEM" else log.info)(
                "gateway.check", backend=name, verdict=level, detail=text
            )
        done.add(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sorted(done)) + "\n")


async def run_gateway(home: Home) -> int:
    try:
        config = GatewayConfig.required(home)
        runs = RunBudgets.of(home)
        from agents.telemetry.live import for_home  # no OpenTelemetry unless configured

        telemetry = for_home(home, "gateway")
        tokens = CallerTokens.load(home)
        host, port = parse_address(config.listen, "[gateway] listen")
    except (ConfigError, UsageError, ValueError) as exc:
        _say(f"bullpen gateway: {getattr(exc, 'message', exc)}")
        return EXIT_CONFIG
    if not len(tokens):
        _say(
            "bullpen gateway: warning: no caller tokens yet, so every call is refused; "
            "issue one with `bullpen gateway token NICK`"
        )
    try:
        sock = bind(host, port)
    except OSError as exc:
        _say(
            f"bullpen gateway: cannot listen on {config.listen} ({exc.strerror}); stop what "
            "uses it or choose another [gateway] listen"
        )
        return EXIT_START
    path = config.ledger_path(home)
    budgets = Budgets(config, runs)
    budgets.restore(read_entries(path))
    ledger = Ledger(path)
    try:
        await ledger.open()
    except OSError as exc:
        sock.close()
        _say(f"bullpen gateway: cannot open the ledger {path} ({exc.strerror or exc})")
        return EXIT_DISK
    gateway = Gateway(config, tokens, ledger, budgets, home.screen)
    gateway.telemetry = telemetry
    if config.record:  # answers kept by request digest, for `bullpen replay --offline`
        from agents.gateway.recording import Recorder

        gateway.recorder = Recorder.of(home)
    serving = Serving()

    def ready() -> None:
        log.info(
            "gateway listening",
            version=__version__,
            listen=config.listen,
            backends=sorted(config.backends),
            callers=len(tokens),
            ledger=str(path),
        )

    checking = asyncio.create_task(check_new_backends(home, config))
    try:
        await serve_asgi([(gateway, sock)], ready, serving)
    finally:
        checking.cancel()
        await asyncio.gather(checking, return_exceptions=True)
        await gateway.aclose()
        await ledger.close()
        if gateway.telemetry is not None:  # what is queued goes out before the process ends
            await asyncio.to_thread(gateway.telemetry.close)
    if ledger.failed is not None:
        _say(f"bullpen gateway: {ledger.failed.message}")
        return EXIT_DISK
    log.info("gateway stopped")
    return serving.signals.exit_code(EXIT_OK)


def serve(home: Home) -> int:
    try:
        import uvloop

        return uvloop.run(run_gateway(home))
    except ImportError:  # pragma: no cover - uvloop is a Linux dependency
        return asyncio.run(run_gateway(home))


def token(home: Home, nick: str) -> int:
    """Issue NICK's caller token; print the file (never the token)."""
    if nick not in home.society.nicks and nick != home.society.operator:
        _say(f"note: {nick} is not a nick in {home.society_file}; issuing its token anyway")
    path = issue(home, nick)
    print(path)
    _say("restart the gateway so it knows the new token")
    return 0


def usage(home: Home, since: str | None, by: str, as_json: bool = False) -> int:
    config = GatewayConfig.of(home)
    path = config.ledger_path(home)
    if not path.exists():
        _say(f"no ledger yet at {path}: the gateway has answered no call")
        if as_json:
            print("[]")
        return 0
    rows = summarize(read_entries(path), by, since)
    print(json.dumps(usage_json(rows, by), indent=2) if as_json else table(rows, by))
    return 0


def summary(home: Home, day: str | None, dry_run: bool) -> int:
    """Post (or with --dry-run, only print) one UTC day's usage summary as @gateway."""
    from agents.gateway.summary import check_day, day_summary, post_summary, render

    chosen = check_day(day)
    if dry_run:
        config = GatewayConfig.required(home)
        path = config.ledger_path(home)
        print(render(day_summary(config, read_entries(path) if path.exists() else [], chosen)))
        return 0
    stored = asyncio.run(post_summary(home, chosen))
    print(stored.get("body", ""))
    _say(f"posted as @gateway (seq {stored.get('seq')}, verified {stored.get('verified')})")
    return 0


def check(home: Home, backend: str | None) -> int:
    config = GatewayConfig.required(home)
    names = sorted(config.backends)
    if backend is not None:
        if backend not in config.backends:
            raise UsageError(
                f"there is no [gateway.backends.{backend}]; the backends are {', '.join(names)}"
            )
        names = [backend]

    async def run() -> list[Verdict]:
        return list(
            await asyncio.gather(
                *(check_backend(n, config.backends[n], config.policy_for(n)) for n in names)
            )
        )

    verdicts = asyncio.run(run())
    print("\n".join(v.render() for v in verdicts))
    wrong = [v.backend for v in verdicts if v.wrong]
    if wrong:
        _say(f"gateway check: a problem with {', '.join(wrong)}")
        return 1
    return 0
