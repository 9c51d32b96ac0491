"""Test support: real homes, real hub and lurker processes, cleaned up after each test."""

from __future__ import annotations

import contextlib
import http.cookiejar
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from agents.backpass.pipeline import NICKS as BACKPASS_NICKS
from agents.cli.init import InitOptions, init_home
from agents.expedition.pipeline import DEFAULT_NICKS
from agents.home import Home
from agents.runtime.netports import RANGE_VARIABLE, below_ephemeral, free_ports

REPO = Path(__file__).resolve().parent.parent


def _worker_spans() -> tuple[range, range] | None:
    """This pytest worker's own share of the ports below the ephemeral range: most for the
    listeners tests start, the rest (BULLPEN_PORT_RANGE) for programs that pick their own,
    like `bullpen demo`. Workers never share a port, and no outgoing connection takes one."""
    full = below_ephemeral()
    if full is None:
        return None
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    share = len(full) // workers
    mine = full[index * share : (index + 1) * share]
    split = len(mine) * 9 // 10
    return mine[:split], mine[split:]


_SPANS = _worker_spans()
if _SPANS is not None:
    os.environ[RANGE_VARIABLE] = f"{_SPANS[1].start}-{_SPANS[1].stop - 1}"
_HANDED_OUT: set[int] = set()
# Where this process starts in its span: a random place, so two runs side by side (two
# people's `pytest`, a bench beside a test; each worker has the same span in each run) do not
# walk the same ports in the same order and bind each other's (a bench's hub once found all
# three of its tries taken).
_CURSOR = [random.randrange(len(_SPANS[0])) if _SPANS else 0]


def free_port() -> int:
    """A port nobody listens on, never one this process was handed recently.

    It comes from this worker's own span below the ephemeral range (see `_worker_spans`),
    taken in turn, so neither the other worker nor an outgoing connection can take it
    between this probe and the test's listener binding it.
    """
    if _SPANS is None:
        while True:  # no safe span here: the kernel's choice, never the same port twice
            port = free_ports(1)[0]
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port
    span = _SPANS[0]
    port = free_ports(1, span, start=_CURSOR[0])[0]
    _CURSOR[0] = span.index(port) + 1
    return port


# One client for the suite's plain-HTTP calls to the hubs and servers its tests start.
# httpx.get makes a client per call, and every client builds an SSL context from the
# system's CA bundle (20-40 ms of CPU) that a plain-HTTP call never uses: polled by
# wait_for (a hub's /health), that was over half of the xdist workers' CPU. Each call
# stays on its own as with httpx.get: no keep-alive (each opens its own connection,
# so a hub's connection counts mean what they meant), no cookie kept from one call
# for the next (a web view's session must not follow a test into the next call),
# and no proxy read from the environment.
HTTP = httpx.Client(
    verify=False,
    trust_env=False,
    limits=httpx.Limits(max_keepalive_connections=0),
    cookies=http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[])),
)


def pid_alive(pid: int) -> bool:
    """True while `pid` runs: a zombie, whose parent has not reaped it (or never will), counts
    as gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_for(condition: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll `condition` until it returns something truthy, or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def bullpen_argv(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "agents.cli", "--home", str(home), *args]


def run_cli(
    home: Path,
    *args: str,
    input: str | None = None,
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        bullpen_argv(home, *args),
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


class Proc:
    """A child process whose output goes to a file, stopped and reaped at cleanup."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.log = log
        # Where this process's output starts: a name started again appends to the same log.
        self.start = log.stat().st_size if log.exists() else 0
        self._log_file = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def own_output(self) -> str:
        """What this process wrote, without what an earlier one of the same name left in the
        log: a restart is not ready because the one before it said so."""
        with open(self.log, "rb") as log:
            log.seek(self.start)
            return log.read().decode(errors="replace")

    def signal(self, sig: int) -> None:
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything it left in its process group
        self._log_file.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


LIVE: list[Society] = []  # every Society made, so a test's processes are stopped even if it fails


class Society:
    """A home on free ports, with helpers to run its hub and lurkers as a user would."""

    def __init__(self, root: Path, **options: Any) -> None:
        self.strict_port = free_port()
        self.relaxed_port = free_port()
        init_home(
            root,
            InitOptions(
                strict=f"127.0.0.1:{self.strict_port}",
                relaxed=f"127.0.0.1:{self.relaxed_port}",
                **options,
            ),
        )
        self.root = root
        self.procs: list[Proc] = []
        LIVE.append(self)

    @property
    def home(self) -> Home:
        return Home(self.root)  # fresh each time: picks up edited config

    @property
    def strict_url(self) -> str:
        return f"http://127.0.0.1:{self.strict_port}"

    @property
    def relaxed_url(self) -> str:
        return f"http://127.0.0.1:{self.relaxed_port}"

    @property
    def room(self) -> Path:
        return self.home.room_path

    def secret(self) -> bytes:
        return self.home.secret()

    def token(self) -> str:
        return self.home.relaxed_token().decode()

    def read_headers(self) -> dict[str, str]:
        """What a reader of the strict listener's /read sends: the home's read token."""
        return {"authorization": f"Bearer {self.home.read_token().decode()}"}

    def spawn(self, name: str, *args: str, env: dict[str, str] | None = None) -> Proc:
        logs = self.root / "test-logs"
        logs.mkdir(exist_ok=True)
        proc = Proc(bullpen_argv(self.root, *args), logs / f"{name}.log", env)
        self.procs.append(proc)
        return proc

    def healthy(self) -> bool:
        try:
            return HTTP.get(f"{self.strict_url}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def _listening(self, hub: Proc) -> bool:
        """`hub` said it listens and /health answers, or it exited."""
        return (self.healthy() and "hub listening" in hub.own_output()) or not hub.alive()

    def start_hub(self, env: dict[str, str] | None = None, tries: int = 3) -> Proc:
        """The hub, waited on until it listens on this home's own ports.

        On a shared machine another run's program may bind a port picked here before the
        hub does; the hub then says it cannot listen and exits, and it is started again on
        two new ports (at most `tries` starts). Ask for the URLs after this, not before.
        """
        for attempt in range(1, tries + 1):
            hub = self.spawn("hub" if attempt == 1 else f"hub-{attempt}", "hub", env=env)
            # Its own "hub listening" line, not only /health: another run's hub may hold the
            # port picked here and answer /health while this one is unbound.
            wait_for(partial(self._listening, hub), 20, "the hub to listen and answer /health")
            if hub.alive() or "cannot listen on" not in hub.own_output() or attempt == tries:
                break
            self.procs.remove(hub)
            hub.stop()
            self.strict_port, self.relaxed_port = free_port(), free_port()
            set_hub(
                self.root,
                strict=f"127.0.0.1:{self.strict_port}",
                relaxed=f"127.0.0.1:{self.relaxed_port}",
            )
        assert hub.alive(), f"the hub exited:\n{hub.output()}"
        return hub

    def start_lurker(self, nick: str, env: dict[str, str] | None = None) -> Proc:
        proc = self.spawn(f"lurk-{nick}", "lurk", nick, env=env)
        wait_for(
            lambda: "lurking" in proc.own_output() or not proc.alive(),
            20,
            f"lurker {nick} to start",
        )
        assert proc.alive(), f"lurker {nick} exited:\n{proc.output()}"
        return proc

    def lines(self) -> list[dict[str, Any]]:
        import json

        if not self.room.exists():
            return []
        return [json.loads(line) for line in self.room.read_bytes().split(b"\n") if line]

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()


def add_nick(
    root: Path, nick: str, *, privileged: bool = True, trusted: bool = True, **config: Any
) -> None:
    """Configure one more lurker nick in a home's society.toml and trust.toml."""
    import re

    lines = [f"\n[nicks.{nick}]"]
    for key, value in config.items():
        lines.append(f"{key} = {_toml(value)}")
    society = root / "society.toml"
    society.write_text(society.read_text() + "\n".join(lines) + "\n")
    trust = root / "trust.toml"
    text = trust.read_text()
    if trusted:
        text = re.sub(
            r"^trusted = \[(.*)\]$",
            lambda m: f'trusted = [{m.group(1)}, "{nick}"]',
            text,
            flags=re.M,
        )
    if privileged:
        text = text.rstrip("\n") + f'\n{nick} = "secret"\n'
    trust.write_text(text)
    from agents.runtime.cursor import Cursor
    from room.tail import Position

    Cursor(root / "state" / nick / "cursor").save(Position(0, 0))


def _toml(value: Any) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


# A pipeline's tests start only its own lurkers and the foreman (`up --nicks`): the whole
# society is twenty processes, and `bullpen up` of all of them is tests/test_up.py's to prove.
EXPEDITION_LURKERS = ("foreman", *DEFAULT_NICKS.values())
BACKPASS_LURKERS = ("foreman", *BACKPASS_NICKS.values())


def start_up(society: Society, ready: bool = False, nicks: tuple[str, ...] = ()) -> Proc:
    """`bullpen up` for this home (only `nicks`' lurkers when given), waited on until it says
    "lurkers up" (every lurker listening) and, with `ready`, until each log says so too."""
    up = society.spawn("up", "up", *(("--nicks", ",".join(nicks)) if nicks else ()))
    wait_for(
        lambda: "lurkers up" in up.output() or not up.alive(), 90, "bullpen up to start everything"
    )
    assert up.alive(), up.output()
    if ready:
        logs = society.root / "logs"

        def lurking(nick: str) -> bool:
            log = logs / f"{nick}.log"
            return log.exists() and '"lurking"' in log.read_text(errors="replace")

        started = list(nicks or society.home.society.nicks)
        wait_for(lambda: all(lurking(n) for n in started), 60, "every lurker to start lurking")
    return up


def set_seat(root: Path, role: str, table: str) -> None:
    """Replace a role's `[seats.<role>]` table in society.toml with `table` (TOML lines)."""
    import re

    path = root / "society.toml"
    text = path.read_text()
    pattern = re.compile(rf"^\[seats\.{re.escape(role)}\]\n(?:(?!\[).*\n?)*", re.M)
    replacement = f"[seats.{role}]\n{table.strip()}\n\n"
    if pattern.search(text):
        text = pattern.sub(lambda _: replacement, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + replacement
    path.write_text(text)


# --- the room on NATS JetStream (docs/scaling.md) ---------------------------------


class StreamSociety(Society):
    """A Society whose room is a JetStream stream on a test nats-server, not a file.

    `room` exports the stream to a file in the home (exact bytes, as
    `bullpen export` writes them) each time it is read, so every test that
    inspects the room's file checks the stream's lines instead.
    """

    def __init__(self, root: Path, servers: list[str], replicas: int = 1, **options: Any) -> None:
        import uuid

        super().__init__(root, **options)
        self.stream = f"T{uuid.uuid4().hex[:12]}"
        self.servers = list(servers)
        set_room_engine(root, servers, self.stream, replicas)

    @property
    def room(self) -> Path:
        return self.export()

    def export(self) -> Path:
        """The stream's lines, written to `<home>/stream-export.jsonl` now."""
        import asyncio

        from agents.cli.stream import export_stream, stream_settings
        from room.errors import LogError

        dest = self.root / "stream-export.jsonl"
        dest.unlink(missing_ok=True)
        try:
            asyncio.run(export_stream(stream_settings(self.home), dest))
        except LogError as exc:
            if "there is no stream" not in exc.message:
                raise
            dest.write_bytes(b"")  # no hub has created the stream yet: an empty room
        return dest


def set_hub(root: Path, **keys: Any) -> None:
    """Set keys in a home's `[hub]` table of society.toml (the hub's limits, say)."""
    import re

    path = root / "society.toml"
    text = path.read_text()
    for key in keys:  # a key set again replaces the old line
        text = re.sub(rf"^{key} = .*\n", "", text, flags=re.M)
    added = "".join(f"{key} = {_toml(value)}\n" for key, value in keys.items())
    path.write_text(re.sub(r"^\[hub\]\n", lambda m: m.group(0) + added, text, count=1, flags=re.M))


def set_room_engine(root: Path, servers: list[str], stream: str, replicas: int) -> None:
    """Point a home's `[room]` table at a JetStream stream (its subjects named after it)."""
    import json
    import re

    path = root / "society.toml"
    table = (
        "[room]\n"
        'path = "room/room.jsonl"\n'
        'engine = "jetstream"\n'
        f"servers = {json.dumps(servers)}\n"
        f'stream = "{stream}"\n'
        f'subject_prefix = "{stream.lower()}"\n'
        f"replicas = {replicas}\n\n"
    )
    text = path.read_text()
    pattern = re.compile(r"^\[room\]\n(?:(?!\[).*\n?)*", re.M)
    path.write_text(pattern.sub(lambda _: table, text, count=1))


def society_on(engine: str, root: Path, nats: Callable[[], Any]) -> Society:
    """A Society on the given engine; `nats()` gives the running test nats-server when needed."""
    if engine == "jetstream":
        server = nats()
        return StreamSociety(root, server.urls, server.replicas)
    return Society(root)


# --- the session-wide secret scan (tests/reliability/secretscan.py) ----------------
# Additive: run_cli below wraps the one above and returns exactly what it returns;
# it only keeps the output, so the scan at the end of the run can look for secrets.

RECORDED_OUTPUTS: list[tuple[str, str]] = []  # (where, text)


def record_output(where: str, text: str | bytes) -> None:
    """Keep output a test saw (an HTTP body, a message) for the end-of-run secret scan."""
    RECORDED_OUTPUTS.append(
        (where, text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
    )


_run_cli_unrecorded = run_cli


def run_cli(  # the same function as above, recorded for the secret scan
    home: Path,
    *args: str,
    input: str | None = None,
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    done = _run_cli_unrecorded(home, *args, input=input, timeout=timeout, env=env)
    record_output(f"bullpen {' '.join(args)[:200]}", (done.stdout or "") + (done.stderr or ""))
    return done
