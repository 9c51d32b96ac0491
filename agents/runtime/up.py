"""`bullpen up`: the whole society on one machine, as child processes.

Starts the hub, waits until it answers, then the model gateway when
`[gateway]` is configured (and waits until it answers too), then one lurker
per configured nick, then the web view when `[web]` is configured. The
children's pids are kept in `<home>/state/up.json` (the web view's Society
page reads them to tell a live lurker from a dead one).
A child that crashes is restarted with backoff (a configuration error, exit
78, is not: it would only fail again). Ctrl-C or SIGTERM stops the lurkers,
then the gateway, then the hub, and waits for them; children also get SIGTERM from the kernel
if `up` itself dies, so nothing is left behind. Each child's log goes to
`<home>/logs/<name>.log`, rotated at `[logs] max_bytes` keeping `[logs] keep`
old files (agents/runtime/rotating.py); the terminal shows one status line
per event. The lurkers are forked from one zygote that has imported what they
all import, so those pages are shared (agents/runtime/zygote.py); the hub, the
gateway and the web view are started as programs of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

import httpx

from agents.home import Home
from agents.runtime import handlers
from agents.runtime.child import Child
from agents.runtime.wake import orchestrator_problem, wake_set
from agents.runtime.zygote import Zygote
from agents.wording import counted
from room.chain import GENESIS, line_hash
from room.client import RoomClient
from room.errors import ConfigError, HubUnavailable, PostRejected, UsageError
from room.httpverify import verify_tls
from room.reader import RoomFile, seq_of
from room.stopsignals import StopSignals
from room.version import __version__

EXIT_CONFIG = 78
STOP_GRACE_S = 10.0
HUB_START_S = 40.0  # above the hub's own 30 s wait for NATS (room/jetstream/stream.py)
STABLE_S = 30.0
LURKING = b'"event": "lurking"'  # the log line with which a lurker says it is listening
WEB_LISTENING = b'"event": "web listening"'  # and the web view, once it holds its port
READY_S = 60.0  # how long "lurkers up" waits for every lurker to say so
RESTART_HUB_SIGNAL = signal.SIGUSR1  # `bullpen trust promote` asks for a hub restart with it


def status(text: str) -> None:
    print(f"up: {text}", file=sys.stderr, flush=True)


def ended(code: int) -> str:
    """How a child ended, in words: `exited with status 3`, `was killed by SIGKILL`."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class Supervisor:
    def __init__(
        self,
        home: Home,
        with_hub: bool = True,
        nicks: list[str] | None = None,
        zygote: bool = False,
    ) -> None:
        self.home = home
        base = [sys.executable, "-m", "agents.cli", "--home", str(home.root)]
        logs = home.root / "logs"
        kept = home.society.logs
        self.hub = Child("hub", [*base, "hub"], logs / "hub.log", kept) if with_hub else None
        self.gateway = (
            Child("gateway", [*base, "gateway"], logs / "gateway.log", kept)
            if home.has_gateway
            else None
        )
        self.lurkers = [
            Child(nick, [*base, "lurk", nick], logs / f"{nick}.log", kept, ready_marker=LURKING)
            for nick in home.society.nicks
            if nicks is None or nick in nicks
        ]
        self.web = (
            Child("web", [*base, "web"], logs / "web.log", kept, ready_marker=WEB_LISTENING)
            if home.society.web is not None
            else None
        )
        self.env = {**os.environ, "BULLPEN_HOME": str(home.root), "PYTHONUNBUFFERED": "1"}
        # Forked now, before the event loop and any thread: see agents/runtime/zygote.py.
        self.zygote = Zygote.fork(self.env) if zygote and self.lurkers else None
        for child in self.lurkers:
            child.zygote = self.zygote
        self._stopping = asyncio.Event()
        self.signals = StopSignals()  # SIGTERM (systemd) ends with 0, Ctrl-C with 130
        # Names line up in the status lines however long a nick is.
        self.width = max([len("hub"), 10, *(len(child.name) for child in self.lurkers)])

    def stop(self) -> None:
        self._stopping.set()

    def restart_hub(self) -> None:
        """RESTART_HUB_SIGNAL: stop the hub so that _watch starts it again at once."""
        hub = self.hub
        if hub is None or hub.proc is None or hub.proc.returncode is not None:
            return
        status("restarting the hub, as asked")
        hub.restart_asked = True
        hub.proc.send_signal(signal.SIGTERM)

    async def _stopped_during_start(self) -> int:
        """Ctrl-C (or SIGTERM) before "lurkers up": stop what was started and say so."""
        status("stopping during start-up, as asked: stopping what was started")
        await self._stop_everything()
        status("stopped before everything was up; nothing is left running")
        return 130  # as a shell reports Ctrl-C

    async def _stop_everything(self) -> None:
        for last in ([self.web], self.lurkers, [self.gateway], [self.hub]):  # in this order
            await self._terminate([c for c in last if c is not None])

    async def _hub_ready(self) -> bool:
        assert self.hub is not None and self.hub.proc is not None
        url = self.home.society.hub.strict_url()
        deadline = time.monotonic() + HUB_START_S
        async with RoomClient(url, timeout=2.0) as client:
            while time.monotonic() < deadline and not self._stopping.is_set():
                if self.hub.proc.returncode is not None:
                    return False
                try:
                    await client.health()
                    return True
                except (HubUnavailable, PostRejected):
                    pass
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.hub.proc.wait(), 0.1)
        return False

    async def _gateway_ready(self) -> bool:
        """Whether the gateway answers /health before its deadline (False if it exited)."""
        assert self.gateway is not None and self.gateway.proc is not None
        url = self.home.gateway_url().removesuffix("/v1") + "/health"
        deadline = time.monotonic() + HUB_START_S
        async with httpx.AsyncClient(timeout=2.0, verify=verify_tls(url)) as client:
            while time.monotonic() < deadline:
                if self.gateway.proc.returncode is not None:
                    return False
                try:
                    if (await client.get(url)).status_code == 200:
                        return True
                except httpx.HTTPError:
                    pass
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.gateway.proc.wait(), 0.1)
        return False

    async def _start_gateway(self) -> int | None:
        """Start the gateway and wait for it; an exit code when it did not come up."""
        assert self.gateway is not None
        await self.gateway.start(self.env)
        assert self.gateway.proc is not None
        if not await self._gateway_ready():
            await self._terminate([self.gateway])
            code = self.gateway.proc.returncode
            status(f"the gateway did not start (it {ended(code or 0)}); its log says:")
            print(self.gateway.log_tail(), file=sys.stderr)
            return EXIT_CONFIG if code == EXIT_CONFIG else 1
        listen = self.home.gateway_url()
        status(f"{'gateway':<{self.width}} pid {self.gateway.proc.pid:<7} running  {listen}")
        return None

    async def _start_web(self, web: Child) -> None:
        """Start the web view and wait until it holds its port. One that cannot start (its
        port taken, say) is reported and left stopped: restarting it would only fail again,
        and the society runs without its view."""
        await web.start(self.env)
        assert web.proc is not None
        exited = asyncio.ensure_future(web.proc.wait())
        ready = asyncio.ensure_future(web.ready.wait())
        await asyncio.wait([exited, ready], timeout=HUB_START_S, return_when="FIRST_COMPLETED")
        for waiting in (exited, ready):
            waiting.cancel()
        await asyncio.gather(exited, ready, return_exceptions=True)
        if web.ready.is_set():
            address = self.home.society.web.base_url()  # type: ignore[union-attr]
            status(f"{'web':<{self.width}} pid {web.proc.pid:<7} running  {address}")
            return
        if web.proc.returncode is None:
            await self._terminate([web])
        web.gave_up = True
        status(
            f"the web view did not start (it {ended(web.proc.returncode or 0)}); everything "
            "else runs without it. Its log says:"
        )
        print(web.log_tail(5), file=sys.stderr)

    async def _hub_already_there(self) -> str | None:
        """Why not to start, when a bullpen hub already answers on this home's strict address.

        Checked before starting anything: the new hub would fail to take the
        room or the port, but the readiness check would be answered by the
        hub already there, and every lurker would then run twice (`bullpen up`
        twice, or beside the systemd units). Another program on the port is
        left to the new hub, whose log says it cannot listen.
        """
        address = self.home.society.hub.strict
        async with RoomClient(self.home.society.hub.strict_url(), timeout=2.0) as client:
            try:
                health = await client.health()
            except (HubUnavailable, PostRejected, ValueError):
                return None
        if "listener" not in health:
            return None
        if not self._serves_our_room(health):
            return (
                f"a bullpen hub serving another room already listens on {address}: give this "
                f"home other ports ([hub] strict and relaxed in {self.home.society_file})"
            )
        return (
            f"this society's hub already answers on {address}: it is already up (another "
            "`bullpen up`, or the systemd units). Stop that first, or run `bullpen up "
            "--no-hub` to start only the lurkers beside that hub"
        )

    def _serves_our_room(self, health: dict[str, object]) -> bool:
        """Whether /health's head is this home's room file's head (unknowable on a stream)."""
        room = self.home.room_path
        if self.home.society.room.engine != "jsonl":
            return True
        last = None
        if room.exists():
            with RoomFile(room) as reader:
                last = reader.last_line()
        if last is None:
            return health.get("seq") == 0 and health.get("head") == GENESIS
        return health.get("seq") == seq_of(last[1]) and health.get("head") == line_hash(last[1])

    async def run(self) -> int:
        try:
            return await self._run()
        finally:
            if self.zygote is not None:
                await self.zygote.close()

    async def _run(self) -> int:
        loop = asyncio.get_running_loop()
        self.signals.install(loop, self.stop)
        loop.add_signal_handler(RESTART_HUB_SIGNAL, self.restart_hub)
        status(f"bullpen {__version__} starting")  # each child's first log line says it too
        refusal = await self._hub_already_there() if self.hub is not None else None
        if refusal is not None:
            status(refusal)
            return 1
        if self.hub is not None:
            await self.hub.start(self.env)
            assert self.hub.proc is not None
            if not await self._hub_ready():
                if self._stopping.is_set():
                    return await self._stopped_during_start()
                await self._terminate([self.hub])
                await self.hub.wait()  # its last words are in its log
                code = self.hub.proc.returncode
                status(f"the hub did not start (it {ended(code or 0)}); its log says:")
                print(self.hub.log_tail(), file=sys.stderr)
                return EXIT_CONFIG if code == EXIT_CONFIG else 1  # 78 stops systemd too
            hub = self.home.society.hub
            status(
                f"{'hub':<{self.width}} pid {self.hub.proc.pid:<7} running  strict {hub.strict}"
                + (f", relaxed {hub.relaxed}" if hub.relaxed else "")
            )
        if self.gateway is not None:
            failed = await self._start_gateway()
            if failed is not None:
                if self.hub is not None:
                    await self._terminate([self.hub])
                return failed
        for child in self.lurkers:
            if self._stopping.is_set():
                return await self._stopped_during_start()
            await child.start(self.env)
            assert child.proc is not None
            status(
                f"{child.name:<{self.width}} pid {child.proc.pid:<7} running  log {child.log_path}"
            )
        if self.web is not None:
            await self._start_web(self.web)
        self._write_pids()
        await self._lurkers_listening()
        if self._stopping.is_set():
            return await self._stopped_during_start()
        listening = counted(len(self.lurkers), "lurker")
        status(f"lurkers up: {listening} listening; Ctrl-C stops everything")
        watchers = [asyncio.create_task(self._watch(c)) for c in self._children() if not c.gave_up]
        await self._stopping.wait()
        status("stopping")
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        await self._stop_everything()
        status("stopped")
        return self.signals.exit_code(0)

    async def _lurkers_listening(self) -> None:
        """Wait until every lurker says it is listening, so that "lurkers up" means an ask
        posted now is answered (a lurker that starts after an ask begins past it).

        A lurker still silent after READY_S is named, and `up` goes on: its log says why.
        """

        async def listening(child: Child) -> None:
            assert child.proc is not None
            exited = asyncio.ensure_future(child.proc.wait())
            try:
                await asyncio.wait(
                    [asyncio.ensure_future(child.ready.wait()), exited],
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                exited.cancel()

        everyone: asyncio.Future[Any] = asyncio.ensure_future(
            asyncio.gather(*(listening(c) for c in self.lurkers))
        )
        stopping: asyncio.Future[Any] = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait([everyone, stopping], timeout=READY_S, return_when="FIRST_COMPLETED")
        everyone.cancel()
        stopping.cancel()
        # Collected, so a wait cut short by Ctrl-C is not reported as a lost exception.
        await asyncio.gather(everyone, stopping, return_exceptions=True)
        if self._stopping.is_set():
            return
        for child in self.lurkers:
            if not child.ready.is_set():
                status(
                    f"{child.name:<{self.width}} not listening yet after {READY_S:g} s "
                    f"(log {child.log_path})"
                )

    def _children(self) -> list[Child]:
        return [c for c in (self.hub, self.gateway, self.web) if c is not None] + self.lurkers

    def _write_pids(self) -> None:
        """state/up.json: each running child's pid, rewritten whole on every (re)start."""
        pids = {
            c.name: c.proc.pid
            for c in self._children()
            if c.proc is not None and c.proc.returncode is None
        }
        path = self.home.root / "state" / "up.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(".up.json.tmp")
            tmp.write_text(json.dumps({"pids": pids}) + "\n")
            os.replace(tmp, path)
        except OSError as exc:  # a read-only home: only the Society page loses its pids
            status(f"could not write {path} ({exc.strerror or exc})")

    async def _watch(self, child: Child) -> None:
        while not self._stopping.is_set():
            assert child.proc is not None
            code = await child.wait()
            if self._stopping.is_set():
                return
            if child.restart_asked:  # not a crash: no backoff, and the backoff stays as it was
                child.restart_asked = False
                await child.start(self.env)
                assert child.proc is not None
                status(f"{child.name:<{self.width}} pid {child.proc.pid:<7} restarted, as asked")
                self._write_pids()
                continue
            if code == EXIT_CONFIG:
                child.gave_up = True
                status(
                    f"{child.name} stopped with exit 78 (a configuration error, or a room only "
                    "a person can repair); not restarting it:"
                )
                print(child.log_tail(5), file=sys.stderr)
                if child is self.hub:
                    self.stop()
                return
            if time.monotonic() - child.started_at > STABLE_S:
                child.backoff = 1.0
            status(
                f"{child.name} {ended(code)}; restarting in {child.backoff:g} s "
                f"(log {child.log_path})"
            )
            try:
                await asyncio.wait_for(self._stopping.wait(), child.backoff)
                return
            except TimeoutError:
                pass
            child.backoff = min(child.backoff * 2, 30.0)
            child.restarts += 1
            await child.start(self.env)
            status(
                f"{child.name:<{self.width}} pid {child.proc.pid:<7} restarted ({child.restarts})"
            )
            self._write_pids()

    async def _terminate(self, children: list[Child]) -> None:
        running = [c for c in children if c.proc is not None and c.proc.returncode is None]
        for child in running:
            assert child.proc is not None
            child.proc.send_signal(signal.SIGTERM)
        for child in running:
            assert child.proc is not None
            try:
                await asyncio.wait_for(child.wait(), STOP_GRACE_S)
            except TimeoutError:
                status(f"{child.name} did not stop in {STOP_GRACE_S:g} s; killing it")
                child.proc.kill()
                await child.wait()


def cmd_up(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    home.society  # noqa: B018 - load and validate before starting anything
    home.trust  # noqa: B018
    nicks = chosen_nicks(home, args.nicks)
    for nick, config in home.society.nicks.items():  # an orchestrator that would deadlock
        wake = wake_set(config.wake_replies or home.wake_replies_flagged(nick))
        handler = handlers.load(config, wakes_on_replies="reply" in wake)  # as the lurker does
        problem = orchestrator_problem(nick, handler.needs_replies(), wake)
        if problem is not None:
            raise ConfigError(problem)
    linux = sys.platform.startswith("linux")
    supervisor = Supervisor(home, with_hub=not args.no_hub, nicks=nicks, zygote=linux)
    return asyncio.run(supervisor.run())


def chosen_nicks(home: Home, given: str | None) -> list[str] | None:
    """`--nicks a,b`: only these lurkers (None: every nick); a nick with no [nicks.X] is refused."""
    if given is None:
        return None
    nicks = [nick.strip() for nick in given.split(",") if nick.strip()]
    unknown = [nick for nick in nicks if nick not in home.society.nicks]
    if not nicks or unknown:
        raise UsageError(
            f"--nicks {given!r}: "
            + (f"no [nicks.{unknown[0]}] in society.toml" if unknown else "names no nick")
            + f"; this home's nicks are {', '.join(home.society.nicks)}"
        )
    return nicks
