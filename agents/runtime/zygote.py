"""The lurkers' common parent under `bullpen up`: one process that has imported what every
lurker imports, forking one child per lurker, so their pages are shared copy-on-write.

A lurker started on its own (a systemd unit, `bullpen lurk`) idles without the
full lurker's imports (agents/runtime/lean.py) but pays for them on its first
wake (pydantic, httpx, structlog, the config and message models: some 30 MB), and
twenty of them pay it twenty times. Under `bullpen up` the zygote pays it once: `up` forks it before its event loop starts, it imports
the lurker's modules, freezes them out of the garbage collector (gc.freeze: a
collection would otherwise write to every object's header and unshare its
page), and from then on forks a lurker on request. The child runs the same
`bullpen lurk NICK` entry point a separate process would (`python -m agents.cli`), so
its behaviour, exit codes and log are the same.

How `up` keeps watching a process it did not spawn (`up` ⇄ zygote over one
SOCK_SEQPACKET socketpair, which no other process can reach; one JSON record per message):

    up → zygote   {"op": "spawn", "id": N, "argv": [MODULE, ARG...]}  + the write end of
                  the child's log pipe (SCM_RIGHTS), which becomes the child's stdout and
                  stderr; the child runs MODULE's main([ARG...]), as `python -m MODULE ARG...`
    zygote → up   {"op": "started", "id": N, "pid": P}  or  {"op": "failed", "id": N, ...}
    up → zygote   {"op": "signal", "pid": P, "sig": S}   the zygote reaps its children,
                  so only it can signal a pid knowing it is still that child
    zygote → up   {"op": "exited", "pid": P, "code": C}  C as Popen's returncode

Dying with `up` (PR_SET_PDEATHSIG) is kept in two steps: the zygote gets SIGKILL
when `up` dies, and each lurker SIGTERM when the zygote dies. The zygote ignores
SIGINT (Ctrl-C reaches the whole process group; `up` stops the lurkers in its own
order). Should the zygote die anyway, `up` sees its socket close, learns each
lurker's end from a pidfd, and starts later lurkers as separate processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import json
import os
import selectors
import signal
import socket
import sys
import traceback
from typing import Any

__all__ = ["Forked", "Zygote", "ZygoteGone"]

PR_SET_PDEATHSIG, PR_SET_NAME = 1, 15  # linux/prctl.h
RECORD = 65536  # the largest record either side sends (an argv, a pid, an exit code)
# What every lurker imports before it reads a line: loaded once, here, and shared (named,
# not imported, by this module: the runtime does not depend on the command line). The
# second row is what its first request and its room follower import on first use (httpx
# loads its transport then; httpcore looks for every async library installed).
PRELOAD = (
    *("agents.cli", "agents.runtime.lurker", "uvloop"),
    *(
        "httpcore",
        "h11",
        "h2",
        "anyio._backends._asyncio",
        "trio",
        "socksio",
        "certifi",
        "asyncinotify",
    ),
)


class ZygoteGone(Exception):
    """The zygote is not there (it died, or never started): start the child on its own."""


def _prctl(option: int, value: int | bytes) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


# -- up's side --------------------------------------------------------------------------


class Forked:
    """A lurker the zygote forked, seen by `up` as asyncio.subprocess.Process is: its pid,
    its returncode once it ended, wait(), send_signal(), kill(), and its output."""

    def __init__(self, zygote: Zygote, pid: int, stdout: asyncio.StreamReader) -> None:
        self.zygote = zygote
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._ended: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        try:  # to learn of its end should the zygote be gone before it reports it
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:  # already ended and reaped: the zygote's report is on its way
            self._pidfd = None

    def _ended_with(self, code: int) -> None:
        if self._ended.done():
            return
        self.returncode = code
        self._ended.set_result(code)
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _orphaned(self) -> None:
        """The zygote died: this child got SIGTERM from the kernel; its end is its pidfd's."""
        if self._pidfd is None:
            self._ended_with(-signal.SIGTERM)
            return
        asyncio.get_running_loop().add_reader(self._pidfd, self._ended_with, -signal.SIGTERM)

    async def wait(self) -> int:
        return await asyncio.shield(self._ended)

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            self.zygote.signal(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """`up`'s handle on its zygote: fork it (before the event loop), then spawn through it."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid
        self.gone = False
        self._next = 0
        self._asked: dict[int, asyncio.Future[int]] = {}
        self._children: dict[int, Forked] = {}
        self._early: dict[int, int] = {}  # exits reported before their Forked was made
        self._attached = False

    @classmethod
    def fork(cls, env: dict[str, str]) -> Zygote | None:
        """Fork the zygote from this (still single-threaded, loop-less) process; None when
        it cannot be (it is an optimisation: `up` then starts each lurker on its own)."""
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError:
            return None
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the zygote; it never returns
            code = 1
            try:
                ours.close()
                code = _serve(theirs, parent, env)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        theirs.close()
        return cls(ours, pid)

    def _attach(self) -> None:
        if not self._attached:
            self._attached = True
            self.sock.setblocking(False)
            asyncio.get_running_loop().add_reader(self.sock.fileno(), self._readable)

    async def spawn(self, argv: list[str]) -> Forked:
        """`python -m ARGV` as a forked child of the zygote, its output on a fresh pipe."""
        if self.gone:
            raise ZygoteGone
        self._attach()
        loop = asyncio.get_running_loop()
        read_end, write_end = os.pipe()
        self._next += 1
        asked: asyncio.Future[int] = loop.create_future()
        self._asked[self._next] = asked
        try:
            record = json.dumps({"op": "spawn", "id": self._next, "argv": argv}).encode()
            socket.send_fds(self.sock, [record], [write_end])
        except OSError:
            os.close(read_end)
            self._lost()
            raise ZygoteGone from None
        finally:
            os.close(write_end)
        try:
            pid = await asked
        except BaseException:
            os.close(read_end)
            raise
        stdout = asyncio.StreamReader(limit=2**20)
        pipe = os.fdopen(read_end, "rb", buffering=0)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdout), pipe)
        child = Forked(self, pid, stdout)
        self._children[pid] = child
        if pid in self._early:
            child._ended_with(self._early.pop(pid))
        return child

    def signal(self, pid: int, sig: int) -> None:
        if self.gone:
            with contextlib.suppress(OSError):  # orphaned: only its pidfd is sure it is ours
                child = self._children.get(pid)
                if child is not None and child._pidfd is not None:
                    signal.pidfd_send_signal(child._pidfd, sig)
            return
        with contextlib.suppress(OSError):
            self.sock.send(json.dumps({"op": "signal", "pid": pid, "sig": int(sig)}).encode())

    def _readable(self) -> None:
        while True:
            try:
                data = self.sock.recv(RECORD)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._lost()
                return
            record = json.loads(data)
            op = record["op"]
            if op == "exited":
                pid, code = int(record["pid"]), int(record["code"])
                child = self._children.pop(pid, None)
                if child is None:
                    self._early[pid] = code
                else:
                    child._ended_with(code)
            elif op in ("started", "failed"):
                asked = self._asked.pop(int(record["id"]), None)
                if asked is None or asked.done():
                    continue
                if op == "started":
                    asked.set_result(int(record["pid"]))
                else:
                    asked.set_exception(ZygoteGone(record.get("error", "fork failed")))

    def _lost(self) -> None:
        if self.gone:
            return
        self.gone = True
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self.sock.fileno())
        for asked in self._asked.values():
            if not asked.done():
                asked.set_exception(ZygoteGone("the zygote ended"))
        self._asked.clear()
        for child in list(self._children.values()):
            child._orphaned()

    async def close(self) -> None:
        """Ask the zygote to end (its socket closes) and reap it."""
        if self._attached and not self.gone:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self.sock.fileno())
        self.gone = True
        self.sock.close()
        await asyncio.to_thread(_reap, self.pid)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


# -- the zygote's side ------------------------------------------------------------------


def _serve(sock: socket.socket, parent: int, env: dict[str, str]) -> int:  # pragma: no cover
    """The zygote: preload, then fork a child per request and report each child's end."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # `up` died before the request took effect
        return 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.clear()
    os.environ.update(env)
    _prctl(PR_SET_NAME, b"bullpen-zygote")
    import importlib

    for module in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    gc.collect()
    gc.freeze()  # what is loaded now is never collected: its pages stay shared
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    live: set[int] = set()

    def send(record: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            sock.send(json.dumps(record).encode())

    while True:
        for key, _ in selector.select():
            if key.fileobj == wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 512)
                for pid, code in _reaped():
                    live.discard(pid)
                    send({"op": "exited", "pid": pid, "code": code})
                continue
            try:
                data, fds, _, _ = socket.recv_fds(sock, RECORD, 4)
            except InterruptedError:
                continue
            if not data:  # `up` closed its end, or died: the lurkers end with us
                return 0
            record = json.loads(data)
            if record["op"] == "signal":
                if record["pid"] in live:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(record["pid"]), int(record["sig"]))
                continue
            if record["op"] != "spawn" or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                send({"op": "failed", "id": record.get("id"), "error": "a bad request"})
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            try:
                pid = os.fork()
            except OSError as exc:
                os.close(fds[0])
                send({"op": "failed", "id": record["id"], "error": str(exc)})
                continue
            if pid == 0:
                selector.close()
                _become(record["argv"], fds[0], sock, (wake_r, wake_w))
            os.close(fds[0])
            live.add(pid)
            send({"op": "started", "id": record["id"], "pid": pid})


def _reaped() -> list[tuple[int, int]]:
    ended = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        ended.append((pid, os.waitstatus_to_exitcode(status)))
    return ended


def _become(argv: list[str], out: int, sock: socket.socket, wake: tuple[int, int]) -> None:
    """In the forked child: the zygote's plumbing off, the log pipe as stdout and stderr,
    then `python -m ARGV` as a separate process would run it."""  # pragma: no cover
    code = 1
    try:
        zygote = os.getppid()
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # as `up`'s other children
        if os.getppid() != zygote:
            os._exit(1)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        sock.close()
        for fd in wake:
            os.close(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(line_buffering=True, write_through=True)  # type: ignore[union-attr]
        module, args = argv[0], argv[1:]
        name = " ".join(args[-2:]) if "lurk" in args else args[-1]
        _prctl(PR_SET_NAME, name.encode()[:15])
        sys.argv = ["bullpen", *args]
        import importlib

        code = importlib.import_module(module).main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
